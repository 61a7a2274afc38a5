"""The RTL backend: the host interface in a cocotb simulation (top ``ainic_host_bench_w<W>``).

Registers go through a small AXI4-Lite driver (:class:`AxiLiteDriver`); host memory is the HDL model
``hdl/sim/ainic_host_memory.v``, loaded in bulk through its ``$fread`` and unloaded through its ``$fwrite``
backdoor (no Python per beat). Import this module only inside a cocotb test.
"""

import os
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, First, Lock, ReadOnly, RisingEdge, Timer

from hdl.sim.memory_ports import MEMORY_CONFIG, MEMORY_STATS

CLOCK_NS = 4            # 250 MHz
_CLOCKS = {}


def start_clock(dut) -> None:
    """The 250 MHz clock, once per test (cocotb ends every task, clocks included, with the test)."""
    clock = _CLOCKS.get(id(dut))
    if clock is None or clock.done():
        _CLOCKS[id(dut)] = cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())


async def reset_pulse(dut) -> None:
    dut.rst.value = 1
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)


class HostMemory:
    """Bulk access to the HDL host memory of one bench (``prefix`` selects the ports, e.g. ``mem_``)."""

    def __init__(self, dut, width: int, addr_bits: int, prefix: str = "mem_", workdir: Path = None,
                 load_file: str = "hostmem_load.bin", dump_file: str = "hostmem_dump.bin"):
        self.dut, self.prefix = dut, prefix
        self.B = width // 8
        self.size = 1 << addr_bits
        workdir = Path(workdir or os.getcwd())
        self.load_path, self.dump_path = workdir / load_file, workdir / dump_file

    def _port(self, name):
        return getattr(self.dut, self.prefix + name)

    def configure(self, latency=0, rate=0.0, stall=0.0, seed=1, err_lo=0, err_hi=0, err_resp=0):
        """Timing and faults: ``latency`` cycles AR->R and W->B; ``rate`` bytes/cycle (0 = unlimited);
        ``stall`` probability per cycle and channel; error region [err_lo, err_hi) answering err_resp."""
        values = {"cfg_latency": latency, "cfg_rate": round(rate * 256), "cfg_stall": round(stall * 256),
                  "cfg_seed": seed, "cfg_err_lo": err_lo, "cfg_err_hi": err_hi, "cfg_err_resp": err_resp}
        for k, v in values.items():
            if not 0 <= v < 1 << MEMORY_CONFIG[k]:
                raise ValueError(f"{k}={v} out of range for {MEMORY_CONFIG[k]} bits")
            self._port(k).value = v

    async def _pulse(self, name):
        """``name`` high for one cycle, set and cleared at falling edges (see :class:`AxiLiteDriver`)."""
        clk = self.dut.clk
        await FallingEdge(clk)
        self._port(name).value = 1
        await FallingEdge(clk)
        self._port(name).value = 0
        await ClockCycles(clk, 2)

    async def _dump_words(self, first: int, last: int) -> np.ndarray:
        self._port("bd_lo").value = first
        self._port("bd_hi").value = last
        await self._pulse("bd_dump")
        raw = np.fromfile(self.dump_path, np.uint8).reshape(-1, self.B)      # address order (the model's doc)
        if raw.shape[0] != last - first + 1:
            raise RuntimeError(f"memory dump of words {first}..{last} gave {raw.shape[0]} words")
        return raw

    async def write(self, addr: int, data: bytes) -> None:
        if not data:
            return
        B = self.B
        end = addr + len(data)
        first, last = addr // B, (end - 1) // B
        img = np.zeros((last - first + 1) * B, np.uint8)
        if addr % B:
            img[:B] = (await self._dump_words(first, first)).ravel()
        if end % B:
            img[-B:] = (await self._dump_words(last, last)).ravel()
        img[addr - first * B:end - first * B] = np.frombuffer(data, np.uint8)
        self.load_path.write_bytes(img.reshape(-1, B)[:, ::-1].tobytes())     # $fread: MSB first per word
        self._port("bd_lo").value = first
        await self._pulse("bd_load")

    async def read(self, addr: int, n: int) -> bytes:
        if n <= 0:
            return b""
        B = self.B
        first, last = addr // B, (addr + n - 1) // B
        raw = (await self._dump_words(first, last)).ravel()
        return raw[addr - first * B:addr - first * B + n].tobytes()

    def stats(self) -> dict:
        return {k: int(self._port(k).value) for k in MEMORY_STATS}


class AxiLiteDriver:
    """A minimal AXI4-Lite master that runs Python only while a transaction is in flight.

    cocotbext-axi's AxiLiteMaster keeps a coroutine per channel awake on every clock edge, idle or not:
    with several NICs in one simulation that is Python per cycle and costs two orders of magnitude of
    simulation speed. Register traffic is rare; this driver wakes up only for it.
    """

    def __init__(self, dut, prefix: str):
        self.clk = dut.clk
        self.p = {name: getattr(dut, f"{prefix}__{name}") for name in (
            "awaddr", "awprot", "awvalid", "awready", "wdata", "wstrb", "wvalid", "wready", "bresp", "bvalid",
            "bready", "araddr", "arprot", "arvalid", "arready", "rdata", "rresp", "rvalid", "rready")}
        for name in ("awvalid", "wvalid", "bready", "arvalid", "rready", "awprot", "arprot"):
            self.p[name].value = 0
        self.lock = Lock()

    # Inputs change only at the falling edge, and what the rising edge will see is read in the settled
    # (read-only) phase before it: a simulator may run the rising edge's processes before or after a
    # write made in the same time step (Icarus does either, depending on the design), so a valid held
    # for one cycle from a rising edge can be lost.

    async def write(self, addr: int, value: int) -> int:
        """One write; returns BRESP."""
        p = self.p
        async with self.lock:
            await FallingEdge(self.clk)
            p["awaddr"].value, p["awvalid"].value = addr, 1
            p["wdata"].value, p["wstrb"].value, p["wvalid"].value = value, 0xF, 1
            p["bready"].value = 1
            aw = w = False
            while True:
                await ReadOnly()                # the handshakes of the coming rising edge
                take_aw = not aw and bool(p["awready"].value)
                take_w = not w and bool(p["wready"].value)
                got_b = aw and w and bool(p["bvalid"].value)
                resp = int(p["bresp"].value) if got_b else None
                await FallingEdge(self.clk)
                if take_aw:
                    aw, p["awvalid"].value = True, 0
                if take_w:
                    w, p["wvalid"].value = True, 0
                if got_b:
                    break
            p["bready"].value = 0
            return resp

    async def read(self, addr: int) -> int:
        p = self.p
        async with self.lock:
            await FallingEdge(self.clk)
            p["araddr"].value, p["arvalid"].value, p["rready"].value = addr, 1, 1
            ar = False
            while True:
                await ReadOnly()
                take_ar = not ar and bool(p["arready"].value)
                got_r = ar and bool(p["rvalid"].value)
                data = int(p["rdata"].value) if got_r else None
                await FallingEdge(self.clk)
                if take_ar:
                    ar, p["arvalid"].value = True, 0
                if got_r:
                    break
            p["rready"].value = 0
            return data


class RtlBackend:
    """Registers through AXI4-Lite, host memory through the backdoor, the interrupt from ``irq``.

    ``prefix`` selects one NIC of a bench with several (``n2_`` for node 2 of a cluster bench: ports
    ``n2_s_axil__*``, ``n2_irq``, ``n2_mem_*``, backdoor files ``hostmem2_load.bin``, ``hostmem2_dump.bin``)."""

    def __init__(self, dut, width: int, addr_bits: int = 24, prefix: str = "", files: str = "hostmem"):
        self.dut = dut
        self.width = width
        self.memory = HostMemory(dut, width, addr_bits, prefix=f"{prefix}mem_", load_file=f"{files}_load.bin",
                                 dump_file=f"{files}_dump.bin")
        self.mem_size = self.memory.size
        self.irq = getattr(dut, f"{prefix}irq")
        self.axil = AxiLiteDriver(dut, f"{prefix}s_axil")

    async def reset(self, pulse: bool = True, **memory_config) -> None:
        """Configure the memory model; start the clock (once per test) and, with ``pulse``, reset the bench."""
        start_clock(self.dut)
        self.memory.configure(**memory_config)
        for name in ("bd_load", "bd_dump", "bd_lo", "bd_hi"):
            self.memory._port(name).value = 0
        if pulse:
            await reset_pulse(self.dut)

    async def read_reg(self, offset: int) -> int:
        return await self.axil.read(offset)

    async def write_reg(self, offset: int, value: int) -> None:
        await self.axil.write(offset, int(value))

    async def mem_write(self, addr: int, data: bytes) -> None:
        await self.memory.write(addr, data)

    async def mem_read(self, addr: int, n: int) -> bytes:
        return await self.memory.read(addr, n)

    async def wait_irq(self, timeout_cycles: int) -> None:
        if self.irq.value == 1:
            return
        # a Timer is one simulator callback; ClockCycles would run Python on every clock edge
        timeout = Timer(timeout_cycles * CLOCK_NS, unit="ns")
        if await First(RisingEdge(self.irq), timeout) is timeout:
            raise TimeoutError(f"no interrupt in {timeout_cycles} cycles")

    def cycle(self) -> int:
        return int(self.memory._port("stat_cycle").value)
