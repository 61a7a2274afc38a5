"""The switch client alone (hdl/engine/switch_client.py), its network and host sides played by the test: it
sends its packets in order as their slots free up, writes each result where it belongs, and drops a copy of a
result (docs/in_network.md, "The worker": a result is taken only if it answers the packet in flight in its
slot), even when the copy comes right behind the original and the slot's next packet launched meanwhile; and
sends again what the switch asks for, by an agg_nack or by a gap in the numbers of its frames (docs/in_network.md,
"Losses"); and sends a packet again on its timer only once a later packet's result has come or its results
have paused."""

from amaranth import Elaboratable, Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from contract.enums import Codec, Dtype, FrameFlag, FrameOpcode
from contract.in_network import PAUSE_SHIFT
from hdl.codec.compressor import Compressor
from hdl.codec.decompressor import Decompressor
from hdl.engine.switch_client import SwitchClient
from hdl.packet.rx_parser import RxMeta

W = 512                 # a packet of 16 fp32 is one beat: results can come back to back
P, JOB, DST = 16, 7, 0x10000


class Harness(Elaboratable):
    """The client with the codecs it shares in the NIC (here its own)."""

    def __init__(self):
        self.client = SwitchClient(W)

    def elaborate(self, platform):
        m = Module()
        m.submodules.client = c = self.client
        m.submodules.comp, m.submodules.dec = comp, dec = Compressor(W), Decompressor(W)
        wiring.connect(m, comp, c.comp)
        wiring.connect(m, dec, c.dec)
        return m


def result(psn, window, copies=1, chunk=None, reserved=0, opcode=FrameOpcode.aggregated):
    """The switch's result for packet ``psn`` (offset psn * P), ``copies`` times, back to back, numbered
    ``chunk`` (psn by default) and naming ``reserved``; or its agg_nack (header only)."""
    nack = opcode == FrameOpcode.agg_nack
    header = dict(version=1, opcode=opcode, codec=Codec.none, dtype=Dtype.fp32, job=JOB,
                  slot=psn % window, flags=FrameFlag.shadow if (psn // window) % 2 else 0, count=0 if nack else P,
                  offset=0 if nack else psn * P, psn=psn, chunk=psn if chunk is None else chunk, reserved=reserved)
    return [header] * copies


def run(elements, window, answer, cycles=3000, timeout=100_000, when=None):
    """Run one collective of ``elements`` with a window of ``window`` slots and a retransmission timer of
    ``timeout`` cycles (no back-off). ``answer(psn)``, called as each
    contribution leaves, gives the records to send back for it (a list of headers; each result carries
    P elements of value psn + 1; a header with ``delay`` is offered no sooner than that many cycles later, one
    with ``at`` no sooner than that cycle of the run).
    ``when``, a list: the cycle each psn was sent at is appended to it.
    Returns (psns sent, write commands (addr, length) in order, the duplicates counted, the status' timeout
    bit, whether busy fell)."""
    h = Harness()
    dut = h.client
    sent, writes, state = [], [], {}

    async def bench(ctx):
        cfg = dut.cfg
        for name, v in dict(src=0, dst=DST, count=elements, packet=P, codec=Codec.none, dtype=Dtype.fp32, job=JOB,
                            worker=0, collective=1, window_log2=window.bit_length() - 1, timeout=timeout,
                            backoff_max=0, deadline=1_000_000).items():
            ctx.set(getattr(cfg, name), v)
        for port in (dut.rd_cmd, dut.wr_cmd):
            ctx.set(port.ready, 1)
        for port in (dut.wr_data, dut.tx_payload):
            ctx.set(port.tready, 1)
        await ctx.tick()
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        reads, records, payloads, statuses = [], [], [], 0
        cycle = 0
        frames_out = 0                  # headers taken whose payload has not ended: as a TxBuilder, the next
        #                                 header is taken only once the frame before it has left
        beat = None
        for _ in range(cycles):
            # inputs for this cycle: DMA read data, a write response, a received record and its payload
            if beat is None and reads:
                n = reads.pop(0)
                beat = n
            ctx.set(dut.rd_data.tvalid, beat is not None)
            ctx.set(dut.rd_data.tdata, 0)
            ctx.set(dut.rd_data.tkeep, (1 << (4 * P)) - 1)
            ctx.set(dut.rd_data.tlast, 1)
            ctx.set(dut.wr_status.valid, statuses > 0)
            cycle += 1
            offered = bool(records) and records[0][0] <= cycle
            if offered:
                ctx.set(dut.rx_meta.payload, RxMeta.const({"ainic": records[0][1], "src_ip": 0}))
            ctx.set(dut.rx_meta.valid, offered)
            if payloads:
                v = payloads[0]
                ctx.set(dut.rx_payload.tdata, sum(v << (32 * k) for k in range(P)))
                ctx.set(dut.rx_payload.tkeep, (1 << (4 * P)) - 1)
                ctx.set(dut.rx_payload.tlast, 1)
            ctx.set(dut.rx_payload.tvalid, bool(payloads))
            ctx.set(dut.tx_meta.ready, frames_out == 0)
            (_, _, rd_go, rd_ready, wr_go, wr_cmd, wd_go, wd_last, tx_go, tx_psn, rx_go, rp_go, busy, tp_go,
             tp_last) = \
                await ctx.tick().sample(
                    dut.rd_cmd.valid, dut.rd_data.tready, dut.wr_cmd.valid, dut.wr_cmd.payload, dut.wr_data.tvalid,
                    dut.wr_data.tlast, dut.tx_meta.valid, dut.tx_meta.payload.ainic.psn, dut.rx_meta.ready,
                    dut.rx_payload.tready, dut.busy, dut.tx_payload.tvalid, dut.tx_payload.tlast)
            tx_go = tx_go and frames_out == 0
            frames_out += tx_go - (tp_go and tp_last)
            if rd_go:
                reads.append(1)
            if beat is not None and rd_ready:
                beat = None
            if statuses:
                statuses -= 1
            if wr_go:
                writes.append((wr_cmd.addr, wr_cmd.length))
            if wd_go and wd_last:
                statuses += 1
            if offered and rx_go:
                records.pop(0)
            if payloads and rp_go:
                payloads.pop(0)
            if tx_go:
                sent.append(tx_psn)
                if when is not None:
                    when.append(cycle)
                for header in answer(tx_psn):
                    header = dict(header)
                    records.append((max(cycle + header.pop("delay", 0), header.pop("at", 0)), header))
                    if header["opcode"] == FrameOpcode.aggregated:
                        payloads.append(header["psn"] + 1)
            if not busy and sent:
                state["done"] = True
                break
        state.update(dups=ctx.get(dut.dup_results), timeout=ctx.get(dut.status.timeout))

    sim = Simulator(h)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return sent, writes, state["dups"], state["timeout"], state.get("done", False)


def test_packets_in_order_and_results_written_where_they_belong():
    sent, writes, dups, timeout, done = run(6 * P, 2, lambda psn: result(psn, 2))
    assert sent == list(range(6)) and done and not timeout and dups == 0
    assert writes == [(DST + 4 * P * j, 4 * P) for j in range(6)]


def test_a_copy_right_behind_its_result_is_dropped():
    """Each result comes twice, back to back (a link that duplicates): the copy arrives as the slot's next
    packet launches and must be dropped, not taken as that packet's result (it was: the next packet never
    left, and a switch would have waited for it forever)."""
    sent, writes, dups, timeout, done = run(6 * P, 2, lambda psn: result(psn, 2, copies=2))
    assert sent == list(range(6)), sent
    assert done and not timeout and dups == 6
    assert writes == [(DST + 4 * P * j, 4 * P) for j in range(6)]


def test_what_the_switch_asks_for_is_sent_again():
    """The switch's frames to the worker (results and agg_nacks) are numbered, each naming the psn of the one
    before: an agg_nack sends its packet again, and a frame whose number shows the one before it lost sends
    the psn that it names again (a lost result's, or a lost agg_nack's), after a gap of two as after one; an
    agg_nack that shows a loss asks for both, its own first. No timer runs out here (100,000 cycles)."""
    window = 2
    N = FrameOpcode.agg_nack
    # (psn, how many times it has been sent before) -> what the switch sends back, numbered as it would:
    # chunk 1 (psn 1's result) is lost; the agg_nack for psn 2 (chunk 2) shows it; psn 1's result comes
    # 100 cycles after its resend (chunk 3 names the agg_nack's psn, whose packet is in flight again: no gap,
    # so not asked for) and psn 2's 200 cycles after that; chunk 5 (psn 3's agg_nack) and chunk 6 (psn 3's
    # result) are lost, and the result of psn 4 (chunk 7) names psn 3
    script = {(0, 0): [result(0, window, chunk=0)],
              (1, 0): [],
              (2, 0): [result(2, window, chunk=2, reserved=1, opcode=N)],
              (2, 1): [],
              (1, 1): [[dict(result(1, window, chunk=3, reserved=2)[0], delay=100)]],
              (3, 0): [[dict(result(2, window, chunk=4, reserved=1)[0], delay=200)]],
              (4, 0): [result(4, window, chunk=7, reserved=3)],
              (3, 1): [result(3, window, chunk=8, reserved=4)],
              (5, 0): [result(5, window, chunk=9, reserved=3)]}
    times = {}

    def answer(psn):
        k = (psn, times.get(psn, 0))
        times[psn] = k[1] + 1
        return [h for r in script[k] for h in r]

    sent, writes, dups, timeout, done = run(6 * P, window, answer)
    assert sent == [0, 1, 2, 2, 1, 3, 4, 3, 5], sent
    assert done and not timeout and dups == 0
    assert sorted(writes) == [(DST + 4 * P * j, 4 * P) for j in range(6)]


def test_a_timer_runs_out_only_once_the_results_stop():
    """Results that come late but keep coming (one every 20 cycles from cycle 100: from the seventh on, each
    more than the timer's 200 cycles after its packet left; a timer runs out only after a pause of 200 >>
    PAUSE_SHIFT = 25 in the results) send nothing again: a packet whose result is late behind the others' is
    not resent (each such copy drew a stored result through the switch and made the next results later: a
    storm at N = 8, bfp8, 1 % loss). Once they stop (the last packet's first contribution answered by
    nothing), its timer sends it again, 25 cycles after the last result."""
    assert 200 >> PAUSE_SHIFT == 25
    window, packets = 16, 32
    times = {}

    def answer(psn):
        k = (psn, times.get(psn, 0))
        times[psn] = k[1] + 1
        if k == (packets - 1, 1):
            return [dict(result(psn, window)[0], delay=10)]
        return [dict(result(psn, window)[0], at=100 + 20 * psn)] if k[0] < packets - 1 and k[1] == 0 else []

    sent, writes, dups, timeout, done = run(packets * P, window, answer, timeout=200)
    assert sent == list(range(packets)) + [packets - 1], sent
    assert done and not timeout and dups == 0
    assert sorted(writes) == [(DST + 4 * P * j, 4 * P) for j in range(packets)]


def test_a_packet_overtaken_goes_at_its_timer():
    """Packet 0's contribution is lost and nothing reveals it; the results of packets 1 to 15 come one every
    20 cycles from cycle 120 to 400 (no pause). A later packet's result has come, so packet 0 goes again as
    its 200-cycle timer runs out (a late result would come in order, before the later ones), not once the
    results pause."""
    window, packets = 16, 17
    times, when = {}, []

    def answer(psn):
        k = (psn, times.get(psn, 0))
        times[psn] = k[1] + 1
        if k == (0, 0):
            return []
        return [dict(result(psn, window)[0], delay=10 if k[1] else 0, at=100 + 20 * psn if psn < window else 0)]

    sent, writes, dups, timeout, done = run(packets * P, window, answer, timeout=200, when=when)
    assert sent == list(range(window)) + [0, window], sent
    assert 200 < when[window] < 300, when
    assert done and not timeout and dups == 0
    assert sorted(writes) == [(DST + 4 * P * j, 4 * P) for j in range(packets)]
