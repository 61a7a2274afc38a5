"""The DMA writer: each command's bytes land at its address and nothing else changes (``wstrb`` exact), for
aligned and misaligned addresses, across pages and bursts, under random stalls on AW, W, B and the input;
one status per command, in order, with the worst response; ``poison`` writes nothing; one beat per cycle
when nothing stalls."""

import numpy as np
import pytest

from contract.enums import AxiResp
from hdl.host.dma_writer import DmaWriter
from tests.hdl.host.axi_memory import AxiMemory
from tests.hdl.host.test_dma_reader import ERROR_COMMANDS, ERROR_RANGES, MEM_BYTES, commands, touched
from tests.hdl.streams import simulate


def run(width, cmds, payloads, mem, idle=0.0, poison=False, seed=0):
    """Drive ``cmds`` and their ``payloads`` into a DmaWriter over ``mem`` until every status is in and
    ``busy`` has fallen; returns the statuses and the cycles of W beats."""
    B = width // 8
    dut = DmaWriter(width)
    r = np.random.default_rng(seed)
    statuses, w_cycles = [], []
    beats = [[(int.from_bytes(p[k:k + B].ljust(B, b"\0"), "little"), k + B >= len(p)) for k in range(0, len(p), B)]
             for p in payloads]
    stream = [b for packet in beats for b in packet]

    pending, at = list(cmds), [0]

    def cycle(ctx, n):
        ctx.set(dut.poison, poison)
        ctx.set(dut.status.ready, 1)
        s = dut.s_axis
        offer = at[0] < len(stream) and not (idle and r.random() < idle)
        ctx.set(s.tvalid, offer)
        if offer:
            ctx.set(s.tdata, stream[at[0]][0])
            ctx.set(s.tlast, stream[at[0]][1])
            ctx.set(s.tkeep, (1 << B) - 1)
        mem.set_write(ctx, dut.m_axi)
        mem.offer_command(ctx, dut.cmd, pending)
        if offer and ctx.get(s.tready):
            at[0] += 1
        if ctx.get(dut.status.valid):
            statuses.append(ctx.get(dut.status.payload))
        if ctx.get(dut.m_axi.wvalid) and ctx.get(dut.m_axi.wready):
            w_cycles.append(n)
        mem.step_write(ctx, dut.m_axi)
        return len(statuses) == len(cmds) and not ctx.get(dut.busy)

    simulate(dut, cycle)
    return statuses, w_cycles


def disjoint(cmds):
    """Commands whose bytes do not overlap (so the final memory has one answer)."""
    used, out = set(), []
    for addr, length in cmds:
        span = set(range(addr // 4, (addr + length) // 4))
        if not span & used:
            out.append((addr, length))
            used |= span
    return out


@pytest.mark.parametrize("width", [64, 512, 1024])
@pytest.mark.parametrize("traffic", ["steady", "stalls", "errors", "poison"])
def test_dma_writer_lands_exactly_the_command_bytes(rng, width, traffic):
    B = width // 8
    init = bytes(rng.integers(0, 256, MEM_BYTES, dtype=np.uint8))
    error = ERROR_RANGES if traffic == "errors" else ()
    mem = AxiMemory(width, bytearray(init), rng, stall=0.3 if traffic == "stalls" else 0.0, error=error)
    cmds = disjoint((ERROR_COMMANDS if traffic == "errors" else []) + commands(rng, B))
    payloads = [bytes(rng.integers(0, 256, n, dtype=np.uint8)) for _, n in cmds]
    statuses, _ = run(width, cmds, payloads, mem, idle=0.3 if traffic == "stalls" else 0.0,
                      poison=traffic == "poison")
    want = bytearray(init)
    for (addr, length), p, status in zip(cmds, payloads, statuses, strict=True):
        failed = any(mem._resp(a) != AxiResp.okay for a in touched(addr, length, B))
        assert status == (AxiResp.slverr if failed else AxiResp.okay), f"command {addr:#x}+{length}"
        if traffic != "poison":
            for i in range(length):
                if mem._resp((addr + i) // B * B) == AxiResp.okay:      # an erroring beat writes nothing
                    want[addr + i] = p[i]
    assert mem.mem == want, "memory differs from the commands' bytes (or a byte outside them changed)"
    if traffic == "errors":
        assert any(statuses) and not all(statuses)


@pytest.mark.parametrize("width", [64, 512, 1024])
def test_dma_writer_one_beat_per_cycle(rng, width):
    """Nothing stalls: an aligned command's W beats go out on consecutive cycles; a misaligned one needs
    one more memory beat (the tail), still back to back."""
    B = width // 8
    n = 8192 // B
    for addr, extra in ((0, 0), (12, 1)):
        mem = AxiMemory(width, bytearray(MEM_BYTES), rng)
        _, cycles = run(width, [(addr, 8192)], [bytes(8192)], mem)
        assert len(cycles) == n + extra and cycles[-1] - cycles[0] == n + extra - 1, (addr, cycles[-1] - cycles[0])
