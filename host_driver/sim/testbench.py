"""Testbench pieces shared by the cocotb tests: clock/reset, stream endpoints, idle and backpressure."""

import itertools
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

CLOCK_NS = 4            # 250 MHz, the clock the performance figures are stated at
#: the widths a block's regression runs at: the narrowest and the widest (contract.limits.WIDTHS has all four;
#: the packet loopback runs at every one of them)
SIM_WIDTHS = (64, 512)


def seed():
    return cocotb.RANDOM_SEED


def rng(salt: int = 0) -> np.random.Generator:
    """The test's NumPy generator, derived from COCOTB_RANDOM_SEED (printed by cocotb at start)."""
    return np.random.default_rng([seed(), salt])


def width() -> int:
    return int(os.environ["AINIC_WIDTH"])


def random_pauses(rnd: random.Random, p_pause: float):
    """A pause generator for cocotbext-axi: pause with probability p_pause each cycle."""
    while True:
        yield rnd.random() < p_pause


class RecordBus(AxiStreamBus):
    """An ``amaranth.lib.stream`` port (``payload``, ``valid``, ``ready``) seen as an AXI-Stream without
    ``tkeep``/``tlast``: cocotbext-axi then moves one record per frame, the payload's bytes little-endian."""
    _signals = {"tdata": "payload"}
    _optional_signals = {"tvalid": "valid", "tready": "ready"}


def stream_bus(dut, prefix: str) -> AxiStreamBus:
    """The bus of port ``prefix``: AXI-Stream (``prefix__tdata``, ...) or a record stream (``prefix__payload``)."""
    cls = RecordBus if hasattr(dut, f"{prefix}__payload") else AxiStreamBus
    return cls.from_prefix(dut, prefix, bus_separator="__")


class TB:
    """Clock, reset, and stream sources/sinks bound by prefix (Amaranth names ports ``prefix__tdata``, or
    ``prefix__payload`` for a record stream: one record per frame)."""

    def __init__(self, dut, sources=(), sinks=()):
        self.dut = dut
        self.rnd = random.Random(seed())
        cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
        self.source = {p: AxiStreamSource(stream_bus(dut, p), dut.clk, dut.rst) for p in sources}
        self.sink = {p: AxiStreamSink(stream_bus(dut, p), dut.clk, dut.rst) for p in sinks}
        for ep in itertools.chain(self.source.values(), self.sink.values()):
            ep.log.setLevel("WARNING")

    def set_traffic(self, idle: float = 0.0, backpressure: float = 0.0):
        """Random idle cycles on every source, random backpressure on every sink."""
        for eps, p in ((self.source.values(), idle), (self.sink.values(), backpressure)):
            for ep in eps:
                ep.set_pause_generator(random_pauses(self.rnd, p) if p else None)
                if not p:
                    ep.pause = False        # cocotbext-axi leaves a killed generator's last pause in place

    async def reset(self):
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 4)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    async def cycles(self, n=1):
        await ClockCycles(self.dut.clk, n)


#: the (idle, backpressure) modes every stream test runs; ``AINIC_TRAFFIC=stress``: the last alone, idle and
#: backpressure together (the gate-level runs, cocotb_tests/gate_level.py, where a cycle costs a hundred times more)
TRAFFIC = [(0.0, 0.0), (0.3, 0.0), (0.0, 0.5), (0.4, 0.4)]
if os.environ.get("AINIC_TRAFFIC", "all") not in ("all", "stress"):
    raise ValueError(f"AINIC_TRAFFIC must be all or stress, got {os.environ['AINIC_TRAFFIC']!r}")
if os.environ.get("AINIC_TRAFFIC") == "stress":
    TRAFFIC = TRAFFIC[-1:]


def frame(data: bytes, **kw) -> AxiStreamFrame:
    return AxiStreamFrame(data, **kw)
