"""The DMA reader: every command's bytes come out packed from byte 0, bit-exact with host memory, for
aligned and misaligned addresses, across pages and bursts, under random stalls on AR, R and the output;
an erroring read still delivers every beat and flags the command on ``tuser``; at most ``max_outstanding``
bursts in flight; one beat per cycle when nothing stalls."""

import numpy as np
import pytest

from contract.enums import AxiResp
from hdl.host.dma_reader import DmaReader
from tests.hdl.host.axi_memory import AxiMemory
from tests.hdl.streams import simulate

MEM_BYTES = 1 << 16
OUTSTANDING = 4
#: beats that answer SLVERR, and commands that meet them: in the last burst of a command, and in its first
#: (a later burst's OKAY must not hide it)
ERROR_RANGES = ((0x3000, 0x3004), (0x6000, 0x6004))
ERROR_COMMANDS = [(0x6000 - 64, 128), (0x3000, 0x1100)]


def commands(rng, B):
    """(addr, length): aligned and misaligned (by 4), short, page-crossing, and longer than one burst."""
    fixed = [(0, 4), (4, 4), (B - 4, 8), (4096 - B, 2 * B), (4096 - 12, 40), (8, 256 * B + 12), (B, 8 * B)]
    rand = [(4 * int(rng.integers(0, MEM_BYTES // 8)), 4 * int(rng.integers(1, 200))) for _ in range(12)]
    return fixed + rand


def run(width, cmds, mem, stall=0.0, backpressure=0.0, seed=0):
    """Drive ``cmds`` into a DmaReader over ``mem`` until every packet is out and ``busy`` has fallen;
    returns the packets [(bytes, tkeeps, tuser)] and the cycles of output beats."""
    B = width // 8
    dut = DmaReader(width, max_outstanding=OUTSTANDING)
    r = np.random.default_rng(seed)
    packets, out_cycles = [], []
    pending = list(cmds)
    part = {"data": b"", "keeps": []}

    def cycle(ctx, n):
        ctx.set(dut.m_axis.tready, not (backpressure and r.random() < backpressure))
        mem.set_read(ctx, dut.m_axi)
        mem.offer_command(ctx, dut.cmd, pending)
        o = dut.m_axis
        if ctx.get(o.tvalid) and ctx.get(o.tready):
            out_cycles.append(n)
            keep = ctx.get(o.tkeep)
            part["keeps"].append(keep)
            part["data"] += ctx.get(o.tdata).to_bytes(B, "little")[:bin(keep).count("1")]
            if ctx.get(o.tlast):
                packets.append((part["data"], part["keeps"], ctx.get(o.tuser)))
                part.update(data=b"", keeps=[])
        mem.step_read(ctx, dut.m_axi)
        return len(packets) == len(cmds) and not ctx.get(dut.busy)      # every command out, then idle

    simulate(dut, cycle)
    return packets, out_cycles


def touched(addr, length, B):
    """The bus-aligned memory beats a command reads."""
    return range(addr // B * B, -(-(addr + length) // B) * B, B)


@pytest.mark.parametrize("width", [64, 512, 1024])
@pytest.mark.parametrize("traffic", ["steady", "stalls", "errors"])
def test_dma_reader_streams_host_memory(rng, width, traffic):
    B = width // 8
    init = bytearray(rng.integers(0, 256, MEM_BYTES, dtype=np.uint8).tobytes())
    error = ERROR_RANGES if traffic == "errors" else ()
    mem = AxiMemory(width, bytearray(init), rng, stall=0.3 if traffic == "stalls" else 0.0, error=error)
    cmds = commands(rng, B) + (ERROR_COMMANDS if traffic == "errors" else [])
    packets, _ = run(width, cmds, mem, backpressure=0.3 if traffic == "stalls" else 0.0)
    for (addr, length), (data, keeps, user) in zip(cmds, packets, strict=True):
        assert data == init[addr:addr + length], f"command {addr:#x}+{length}"
        beats = -(-length // B)
        assert len(keeps) == beats
        assert all(k == (1 << B) - 1 for k in keeps[:-1]), "tkeep partial before the last beat"
        failed = any(mem._resp(a) != AxiResp.okay for a in touched(addr, length, B))
        assert user == (AxiResp.slverr if failed else AxiResp.okay), f"command {addr:#x}+{length}: tuser {user}"
    if traffic == "errors":
        assert any(p[2] for p in packets) and not all(p[2] for p in packets)
    if traffic == "stalls":
        assert mem.max_outstanding_seen == OUTSTANDING, "the outstanding-burst limit is reached and kept"


@pytest.mark.parametrize("width", [64, 512, 1024])
def test_dma_reader_one_beat_per_cycle(rng, width):
    """Nothing stalls: an aligned command streams one beat per cycle; a misaligned one costs at most two
    cycles more (docs: one at its start, one at its end)."""
    B = width // 8
    mem = AxiMemory(width, bytearray(MEM_BYTES), rng)
    n = 8192 // B
    for addr, slack in ((0, 0), (12, 2)):
        _, cycles = run(width, [(addr, 8192)], mem)
        assert len(cycles) == n and cycles[-1] - cycles[0] <= n - 1 + slack, (addr, cycles[-1] - cycles[0], n)
