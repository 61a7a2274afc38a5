"""Throughput and latency measurement inside a cocotb test; figures go to a JSON file for `make bench`."""

import json
import os
import time

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from host_driver.sim.testbench import stream_bus


class StreamMeter:
    """Counts, per rising edge, the beats handed over on an input and an output port (valid & ready; an
    AXI-Stream port or a record stream)."""

    def __init__(self, dut, inp: str, out: str):
        self.clk = dut.clk
        bus = {p: stream_bus(dut, p) for p in (inp, out)}
        self.inp = (bus[inp].tvalid, bus[inp].tready)
        self.out = (bus[out].tvalid, bus[out].tready)
        self.cycle = 0
        self.in_cycles = []
        self.out_cycles = []
        self._task = cocotb.start_soon(self._run())
        self.wall_start = time.perf_counter()

    async def _run(self):
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            self.cycle += 1
            if self.inp[0].value == 1 and self.inp[1].value == 1:
                self.in_cycles.append(self.cycle)
            if self.out[0].value == 1 and self.out[1].value == 1:
                self.out_cycles.append(self.cycle)

    def stop(self):
        self._task.cancel()
        self.wall = time.perf_counter() - self.wall_start

    def figures(self):
        ins, outs = self.in_cycles, self.out_cycles
        return {
            "in_beats": len(ins),
            "out_beats": len(outs),
            "in_beats_per_cycle": round((len(ins) - 1) / max(ins[-1] - ins[0], 1), 4) if len(ins) > 1 else None,
            "out_beats_per_cycle": round((len(outs) - 1) / max(outs[-1] - outs[0], 1), 4) if len(outs) > 1 else None,
            "latency_cycles": (outs[0] - ins[0]) if ins and outs else None,
            "sim_cycles_per_second": round(self.cycle / self.wall, 1),
        }


def record(key: str, figures: dict):
    """Append figures for ``key`` to the JSON file named by AINIC_BENCH_OUT (one file per simulator run)."""
    path = os.environ.get("AINIC_BENCH_OUT")
    if not path:
        return
    data = {}
    if os.path.exists(path):
        with open(path) as fh:
            data = json.load(fh)
    data[key] = figures
    with open(path, "w") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)


def enabled() -> bool:
    return os.environ.get("AINIC_BENCH") == "1"
