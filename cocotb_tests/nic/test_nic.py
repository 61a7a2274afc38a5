"""The host interface (registers, command processor, DMA engine, codec loop) with the HDL host memory,
driven by the host driver: the same scenarios as the software model, compared with it record for record."""

import os
from types import SimpleNamespace

import cocotb
import numpy as np
import pytest

from cocotb_tests import bench
from cocotb_tests.nic import scenarios as nic_scenarios
from contract import regmap as rm
from contract.limits import WIDE_WIDTH
from hdl.host.axi import RESP_OKAY, RESP_SLVERR, AxiSignature
from host_driver.driver.nic import Nic
from host_driver.models.nic_model import ModelBackend
from host_driver.sim.rtl_backend import RtlBackend
from host_driver.sim.testbench import SIM_WIDTHS, rng, width

ADDR_BITS = 24
MEMORY_MODES = {   # name -> HostMemory.configure arguments
    "ideal": lambda w: {},
    # long latency, every AXI channel stalling at random 30 % of cycles
    "slow": lambda w: {"latency": 40, "stall": 0.3, "seed": 7},
    # the reference testbench's 102.4 Gb/s per direction at 250 MHz (51.2 B/cycle; 80 % of the bus at W = 512)
    "throttled": lambda w: {"latency": 8, "rate": 0.8 * w / 8, "stall": 0.05, "seed": 3},
}


async def rtl_nic(dut, mode="ideal", **kw):
    backend = RtlBackend(dut, width(), ADDR_BITS)
    await backend.reset(**MEMORY_MODES[mode](width()))
    return Nic(backend, **kw)


def model_nic(**kw):
    return Nic(ModelBackend(width(), ADDR_BITS), **kw)


async def same_on_model(scenario, salt, rtl_transcript, build=None, **kw):
    """Run the scenario on the software model (of ``build``, contract/build.py; default the full NIC) with the
    same seed: the transcripts must be equal."""
    model = Nic(ModelBackend(width(), ADDR_BITS, **({"build": build} if build else {})), **kw)
    got = await scenario(model, rng(salt))
    assert got == rtl_transcript, "RTL and model transcripts differ"


@cocotb.test()
async def smoke_copy(dut):
    nic = await rtl_nic(dut)
    await nic.start()
    x = np.arange(100, dtype=np.uint32) * 0x01010101
    src, dst = nic.alloc(400), nic.alloc(400)
    await nic.write(src, x)
    c = await nic.run("copy", src=src, dst=dst, count=100)
    assert np.array_equal(await nic.read(dst, 100, np.uint32), x)
    dut._log.info(f"completion {c}")
    assert nic.backend.memory.stats()["stat_violations"] == 0


class CompletionWatch:
    """Watches the NIC's AXI writes to the completion ring as a host polling memory would: memory changes
    at each W handshake; when a slot's phase byte (byte 2) changes, the record there is what a poller reads.
    Checks that every other byte of the record was written since the slot's previous phase change (so the
    phase arrives last, never before the rest) and keeps each such record."""

    PHASE = 2

    def __init__(self, dut, nic):
        from cocotb.triggers import ReadOnly, RisingEdge
        self.base, self.size = nic.cq_base, nic.cq_entries * 64
        self.mem = bytearray(self.size)                 # the ring as zeroed by Nic.start
        self.fresh = [set() for _ in range(nic.cq_entries)]     # bytes written since the slot's phase last changed
        self.records, self.torn = [], []
        a = axi_probes(dut)
        B = width() // 8

        async def run():
            bursts = []                                 # [next address, beats left] of accepted AWs
            while True:
                await RisingEdge(dut.clk)
                await ReadOnly()
                if a.awvalid.value == 1 and a.awready.value == 1:
                    bursts.append([int(a.awaddr.value), int(a.awlen.value) + 1])
                if a.wvalid.value == 1 and a.wready.value == 1:
                    burst = bursts[0]
                    addr, data, strb = burst[0], int(a.wdata.value).to_bytes(B, "little"), int(a.wstrb.value)
                    burst[0] += B
                    burst[1] -= 1
                    if burst[1] == 0:
                        bursts.pop(0)
                    self._beat(addr, data, strb, B)
        self.task = cocotb.start_soon(run())

    def _beat(self, addr, data, strb, B):
        """Apply one W beat; then, if it changed a slot's phase byte, check and keep that record."""
        same_beat = set(range(min(B, 64)))              # offsets written with the phase byte, in one beat
        changed = []
        for i in range(B):
            at = addr + i - self.base
            if not (strb >> i) & 1 or not 0 <= at < self.size:
                continue
            slot, off = divmod(at, 64)
            if off == self.PHASE and self.mem[at] != data[i]:
                changed.append(slot)
            self.mem[at] = data[i]
            self.fresh[slot].add(off)
        for slot in changed:
            missing = set(range(64)) - self.fresh[slot] - same_beat
            if missing:
                self.torn.append((slot, sorted(missing)))
            self.records.append(bytes(self.mem[slot * 64:(slot + 1) * 64]))
            self.fresh[slot] = set()


@cocotb.test()
async def completion_phase_arrives_last(dut):
    """docs/host_interface.md: a host may poll the phase byte in memory. At every width the rest of the
    record is in memory before the phase changes, so a record read on its phase byte is never torn."""
    from contract import descriptors as ds
    nic = await rtl_nic(dut, sq_entries=4, cq_entries=4)
    await nic.start()
    watch = CompletionWatch(dut, nic)
    n = 37
    x = rng(3).integers(0, 2**32, n, dtype=np.uint32)
    src, dst = nic.alloc(4 * n), nic.alloc(4 * n)
    await nic.write(src, x)
    got = [await nic.run("copy", src=src, dst=dst, count=n, tag=1000 + i) for i in range(10)]
    bad = await nic.wait(await nic.submit_raw(opcode=0x55, count=n, src=src, dst=dst, tag=77))
    watch.task.cancel()
    assert not watch.torn, f"records whose phase changed before these bytes were written: {watch.torn}"
    polled = [ds.Completion.from_bytes(r) for r in watch.records]
    want = [*got, bad]
    assert len(polled) == len(want), f"{len(polled)} phase changes for {len(want)} completions"
    for p, w in zip(polled, want):
        assert p == w, f"a record read on its phase byte differs from the completion:\n{p}\n{w}"


@cocotb.test()
async def scenarios_against_model(dut):
    mode = os.environ.get("AINIC_MEMORY_MODE", "ideal")
    nic = await rtl_nic(dut, mode, sq_entries=8, cq_entries=8)
    transcript = await nic_scenarios.all_scenarios(nic, rng(1))
    assert nic.backend.memory.stats()["stat_violations"] == 0
    await same_on_model(nic_scenarios.all_scenarios, 1, transcript, sq_entries=8, cq_entries=8)


@cocotb.test(skip=os.environ.get("AINIC_NIC_BUILD") != "small")
async def small_build(dut):
    """The small build (host_bench_small): CAPS, its codecs, what it refuses (scenarios.build_features), the
    copies and bad descriptors of every build, the peer-table entries above its 8 answering SLVERR, all as
    the model of the same build does."""
    nic = await rtl_nic(dut, sq_entries=8, cq_entries=8)

    async def body(nic, r):
        await nic.start(packet_elems=64)
        assert nic.build.name == "small", nic.build
        return {"bad": await nic_scenarios.bad_descriptors(nic, r), "build": await nic_scenarios.build_features(nic, r)}
    transcript = await body(nic, rng(3))
    depth = nic.build.max_ranks
    axil = nic.backend.axil
    assert await axil.write(rm.offset("PEER_IP", depth - 1), 0x0A000001) == RESP_OKAY
    assert await axil.write(rm.offset("PEER_IP", depth), 0x0A000002) == RESP_SLVERR
    assert await nic.read_reg("PEER_IP", depth - 1) == 0x0A000001
    await same_on_model(body, 3, transcript, build=nic.build, sq_entries=8, cq_entries=8)


def test_small_build(sim):
    """The small build's NIC at W = 64 (Verilator only: the build is the full NIC's blocks, fewer of them)."""
    if sim == "icarus":
        pytest.skip("the small build on Verilator only: its blocks are the full NIC's, simulated on both")
    from host_driver.sim.runner import run
    run(sim, "host_bench_small", 64, __name__, tag="small",
        env={"AINIC_NIC_BUILD": "small", "COCOTB_TEST_FILTER": r"\.small_build$"})


# heavy: the first mode of a wide build (it builds the bench); the other modes find it built and are short.
# Every mode of a width on one worker (`make test` runs --dist loadgroup), one after the other: they do not
# start at once on the other worker only to wait for the same build
@pytest.mark.parametrize("width,mode", [
    pytest.param(w, mode, marks=[pytest.mark.xdist_group(f"host_bench_w{w}")]
                 + ([pytest.mark.heavy(180)] if w >= 512 and mode == list(MEMORY_MODES)[0] else []))
    for w in (*SIM_WIDTHS, WIDE_WIDTH) for mode in MEMORY_MODES])
def test_host_interface(sim, width, mode):
    if sim == "icarus" and width >= 512:
        pytest.skip("W = 512 and 1024 on Verilator only (Icarus runs W = 64): minutes of test time for no new check")
    from host_driver.sim.runner import run
    run(sim, "host_bench", width, __name__, tag=mode,
        env={"AINIC_MEMORY_MODE": mode, "COCOTB_TEST_FILTER": "" if mode == "ideal" else r"\.scenarios_"})


async def timed_copy(nic, nbytes, aligned=True):
    """One copy of nbytes, checked; returns its completion."""
    B = nic.backend.width // 8
    n = nbytes // 4
    x = rng(5).integers(0, 2**32, n, dtype=np.uint32)
    src = nic.alloc(nbytes + B, align=4096) + (0 if aligned else 4)
    dst = nic.alloc(nbytes + B, align=4096) + (0 if aligned else 8)
    await nic.write(src, x)
    c = await nic.run("copy", src=src, dst=dst, count=n)
    assert np.array_equal(await nic.read(dst, n, np.uint32), x)
    nic.free_all()
    return c


def axi_probes(dut) -> SimpleNamespace:
    """The NIC's AXI4 port as the host bench brings it out (``probe_m_axi__<signal>``), by signal name."""
    return SimpleNamespace(**{name: getattr(dut, f"probe_m_axi__{name}") for name in AxiSignature(width()).members})


class AxiMonitor:
    """Per cycle: which AXI data beats moved between the NIC and the memory, the doorbell write (the W
    handshake of an AXI-Lite write to SQ_DOORBELL) and irq."""

    def __init__(self, dut):
        from cocotb.triggers import ReadOnly, RisingEdge
        self.dut = dut
        self.events = {"r": [], "w": [], "doorbell": [], "irq": []}
        a = axi_probes(dut)
        self.probes = {"r": (a.rvalid, a.rready), "w": (a.wvalid, a.wready),
                       "irq": (dut.irq,)}
        doorbell = rm.offset("SQ_DOORBELL")

        async def run():
            cycle = 0
            aw = []                                     # addresses of AXI-Lite writes awaiting their data
            while True:
                await RisingEdge(dut.clk)
                await ReadOnly()
                cycle += 1
                for k, sigs in self.probes.items():
                    if all(sig.value == 1 for sig in sigs):
                        self.events[k].append(cycle)
                if dut.s_axil__awvalid.value == 1 and dut.s_axil__awready.value == 1:
                    aw.append(int(dut.s_axil__awaddr.value))
                if dut.s_axil__wvalid.value == 1 and dut.s_axil__wready.value == 1 and aw:
                    if aw.pop(0) == doorbell:
                        self.events["doorbell"].append(cycle)
        self.task = cocotb.start_soon(run())

    def clear(self):
        for v in self.events.values():
            v.clear()


@cocotb.test(skip=not bench.enabled())
async def dma_throughput(dut):
    """`make bench`: 64 KiB copies (DMA read and write at once), the descriptor-to-interrupt latency of a
    4-byte copy, and the host-memory backdoor's speed for 4 MiB."""
    import time
    W = width()
    B = W // 8
    beats = 65536 // B
    figures = {}
    # latency40: 40 cycles from AR to data (and W to B), no stalls: only several bursts in flight keep up
    BENCH_MODES = {**MEMORY_MODES, "latency40": lambda w: {"latency": 40}}
    for mode in ("ideal", "latency40", "throttled"):
        backend = RtlBackend(dut, W, ADDR_BITS)
        await backend.reset(**BENCH_MODES[mode](W))
        nic = Nic(backend)
        await nic.start()
        mon = AxiMonitor(dut)
        for aligned in (True, False):
            mon.clear()
            c = await timed_copy(nic, 64 * 1024, aligned)
            key = f"dma_copy_{mode}_{'aligned' if aligned else 'misaligned'}"
            # end to end: descriptor fetched .. last write response, 64 KiB read and 64 KiB written
            figures[f"{key}_cycles"] = c.cycles
            figures[f"{key}_efficiency"] = round(beats / c.cycles, 4)
            r = mon.events["r"][-beats:]              # the data beats (the descriptor's came first)
            w = mon.events["w"][:beats]               # the data beats (the completion's come after)
            if aligned:
                figures[f"dma_read_{mode}_sustained_efficiency"] = round(beats / (r[-1] - r[0] + 1), 4)
            if mode == "ideal" and aligned:
                # sustained channel throughput over the transfer, as a fraction of W/8 bytes per cycle
                figures["dma_read_efficiency"] = round(beats / (r[-1] - r[0] + 1), 4)
                figures["dma_write_efficiency"] = round(beats / (w[-1] - w[0] + 1), 4)
                # and from the doorbell to the last data beat of each channel
                figures["dma_read_doorbell_to_last_beat_cycles"] = r[-1] - mon.events["doorbell"][-1]
                figures["dma_write_doorbell_to_last_beat_cycles"] = w[-1] - mon.events["doorbell"][-1]
        mon.task.cancel()
    # latency of a minimal descriptor: doorbell strobe -> irq, ideal memory
    nic = await rtl_nic(dut, "ideal")
    await nic.start()
    mon = AxiMonitor(dut)
    src, dst = nic.alloc(64), nic.alloc(64)
    c = await nic.run("copy", src=src, dst=dst, count=1)
    figures["dma_desc_latency_cycles"] = mon.events["irq"][0] - mon.events["doorbell"][0]
    figures["dma_desc_completion_cycles"] = c.cycles
    mon.task.cancel()
    # backdoor: 4 MiB in and out
    big = np.random.default_rng(1).integers(0, 2**32, 1 << 20, dtype=np.uint32)
    t0 = time.perf_counter()
    await nic.write(1 << 22, big)
    t1 = time.perf_counter()
    back = await nic.read(1 << 22, 1 << 20, np.uint32)
    t2 = time.perf_counter()
    assert np.array_equal(back, big)
    figures["hostmem_load_4mib_seconds"] = round(t1 - t0, 3)
    figures["hostmem_unload_4mib_seconds"] = round(t2 - t1, 3)
    for k, v in figures.items():
        dut._log.info(f"{k} = {v}")
    bench.record(f"host_interface_w{W}", figures)
