"""The switch client alone (hdl/engine/switch_client.py), its network and host sides played by the test: it
sends its packets in order as their slots free up, writes each result where it belongs, and drops a copy of a
result (docs/in_network.md, "The worker": a result is taken only if it answers the packet in flight in its
slot), even when the copy comes right behind the original and the slot's next packet launched meanwhile."""

from amaranth import Elaboratable, Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from contract.enums import Codec, Dtype, FrameFlag, FrameOpcode
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


def result(psn, window, copies=1):
    """The switch's result for packet ``psn`` (offset psn * P), ``copies`` times, back to back."""
    header = dict(version=1, opcode=FrameOpcode.aggregated, codec=Codec.none, dtype=Dtype.fp32, job=JOB,
                  slot=psn % window, flags=FrameFlag.shadow if (psn // window) % 2 else 0, count=P,
                  offset=psn * P, psn=psn, chunk=psn, reserved=0)
    return [header] * copies


def run(elements, window, answer, cycles=3000):
    """Run one collective of ``elements`` with a window of ``window`` slots. ``answer(psn)``, called as each
    contribution leaves, gives the records to send back for it (a list of headers; each result carries
    P elements of value psn + 1). Returns (psns sent, write commands (addr, length) in order, the
    duplicates counted, the status' timeout bit, whether busy fell)."""
    h = Harness()
    dut = h.client
    sent, writes, state = [], [], {}

    async def bench(ctx):
        cfg = dut.cfg
        for name, v in dict(src=0, dst=DST, count=elements, packet=P, codec=Codec.none, dtype=Dtype.fp32, job=JOB,
                            worker=0, collective=1, window_log2=window.bit_length() - 1, timeout=100_000,
                            backoff_max=0, deadline=1_000_000).items():
            ctx.set(getattr(cfg, name), v)
        for port in (dut.rd_cmd, dut.wr_cmd, dut.tx_meta):
            ctx.set(port.ready, 1)
        for port in (dut.wr_data, dut.tx_payload):
            ctx.set(port.tready, 1)
        await ctx.tick()
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        reads, records, payloads, statuses = [], [], [], 0
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
            if records:
                ctx.set(dut.rx_meta.payload, RxMeta.const({"ainic": records[0], "src_ip": 0}))
            ctx.set(dut.rx_meta.valid, bool(records))
            if payloads:
                v = payloads[0]
                ctx.set(dut.rx_payload.tdata, sum(v << (32 * k) for k in range(P)))
                ctx.set(dut.rx_payload.tkeep, (1 << (4 * P)) - 1)
                ctx.set(dut.rx_payload.tlast, 1)
            ctx.set(dut.rx_payload.tvalid, bool(payloads))
            (_, _, rd_go, rd_ready, wr_go, wr_cmd, wd_go, wd_last, tx_go, tx_psn, rx_go, rp_go, busy) = \
                await ctx.tick().sample(
                    dut.rd_cmd.valid, dut.rd_data.tready, dut.wr_cmd.valid, dut.wr_cmd.payload, dut.wr_data.tvalid,
                    dut.wr_data.tlast, dut.tx_meta.valid, dut.tx_meta.payload.ainic.psn, dut.rx_meta.ready,
                    dut.rx_payload.tready, dut.busy)
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
            if records and rx_go:
                records.pop(0)
            if payloads and rp_go:
                payloads.pop(0)
            if tx_go:
                sent.append(tx_psn)
                for header in answer(tx_psn):
                    records.append(header)
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
