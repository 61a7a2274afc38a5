"""Design-space sweeps: many collectives, each one point of a grid over ``ainic demo``'s parameters, run on a
Dask cluster (this machine's cores by default, or a scheduler a user started), their results appended to a
journal as they come, so that an interrupted sweep resumes where it stopped (docs/sweeps.md).

* :mod:`host_driver.sweep.grid`: the parameters, a grid of them and its points;
* :mod:`host_driver.sweep.point`: one point run (through the RTL cluster or the model), checked bit for bit;
* :mod:`host_driver.sweep.engine`: points on Dask, the journal, progress;
* :mod:`host_driver.sweep.table`: the journal as a table (CSV) and a plot.
"""
