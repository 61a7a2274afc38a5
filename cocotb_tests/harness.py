"""Build-and-run plumbing for the RTL tests: see host_driver/sim_runner.py (the CLI uses it too)."""

from host_driver.sim_runner import ROOT, build, run, selected_sims  # noqa: F401
