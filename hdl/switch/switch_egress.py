"""One port's way out of the aggregation switch: results become frames to the worker behind the port, and
take turns with the frames forwarded to it."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from contract.enums import FrameFlag, FrameOpcode
from contract.in_network import SWITCH_RANK
from contract.protocol import MAX_P, UDP_PORT, VERSION
from hdl.packet.tx_builder import TxBuilder, TxMeta
from hdl.stream.axis import AxiStreamSignature
from hdl.stream.register_slice import skid_buffer
from hdl.stream.sync_fifo import SyncFifo
from hdl.switch.aggregation_engine import result_layout
from hdl.switch.switch_ingress import NackRecord
from hdl.switch.job_table import JobEntry, pick, worker_of_port


class SwitchEgress(wiring.Component):
    """Results for port ``port`` (``s_meta`` / ``s_axis``: the result record and its encoded payload) are
    queued, built into ``aggregated`` frames to the address behind the port (``cfg_port_mac``,
    ``cfg_port_ip``; docs/in_network.md, "The wire": ``worker`` and ``dst_rank`` are the index of the
    job's worker behind this port) and sent on ``m_axis``, a frame at a time, taking turns with the frames
    forwarded to this port (``s_fwd``, with their ``tuser``). A record marked ``up`` (a leaf's partial)
    becomes an ``aggregate`` frame to the spine: job ``up_job``, worker and ``src_rank`` ``up_worker``.

    * ``s_nack``: contributions lost on this port's link (from its ingress): each becomes an ``agg_nack``
      frame to the worker (header only; docs/in_network.md, "Losses"), ahead of results waiting.
    * The frames to the port, results and ``agg_nack`` alike, are numbered (``chunk``: 0, 1, ... modulo
      2**16) and each names the psn of the one before it (``reserved``), so that the worker sees a lost one
      at the next (and sends that psn's contribution again: the answer to a lost result and to a lost
      ``agg_nack`` alike).
    * Queues: 4 results, and two of the largest results' payload beats.
    * One beat a cycle; round-robin between results and forwarded frames, a frame at a time.
    * ``port``: which port this is (an input, constant in the switch, as the ingress's).
    """

    def __init__(self, width: int, ports: int, max_jobs: int = 4):
        self.width, self.ports, self.max_jobs = width, ports, max_jobs
        self.result = result_layout(ports)
        super().__init__({
            "port": In(range(ports)),
            "s_meta": In(stream.Signature(self.result)),
            "s_axis": In(AxiStreamSignature(width)),
            "s_nack": In(stream.Signature(NackRecord)),
            "s_fwd": In(AxiStreamSignature(width, 1)),
            "m_axis": Out(AxiStreamSignature(width, 1)),
            "cfg_mac": In(48),
            "cfg_ip": In(32),
            "cfg_udp_port": In(16, init=UDP_PORT),
            "cfg_port_mac": In(48),
            "cfg_port_ip": In(32),
            "jobs": In(data.ArrayLayout(JobEntry, max_jobs)),
        })

    def elaborate(self, platform):
        m = Module()
        W, B = self.width, self.width // 8
        beats = -(-4 * MAX_P // B) + 1
        m.submodules.mq = mq = SyncFifo(width=self.result.size, depth=4)
        m.submodules.pq = pq = SyncFifo(width=W + B + 1, depth=1 << (2 * beats - 1).bit_length())
        m.d.comb += [mq.w_data.eq(self.s_meta.payload), mq.w_en.eq(self.s_meta.valid),
                     self.s_meta.ready.eq(mq.w_rdy),
                     pq.w_data.eq(Cat(self.s_axis.tdata, self.s_axis.tkeep, self.s_axis.tlast)),
                     pq.w_en.eq(self.s_axis.tvalid), self.s_axis.tready.eq(pq.w_rdy)]

        # -- results into frames -------------------------------------------------------------------------
        m.submodules.build = tx = TxBuilder(W)
        r = data.View(self.result, mq.r_data)
        jobs = [self.jobs[i] for i in range(self.max_jobs)]
        entry = pick(jobs, r.job)
        # a result goes to the job's worker behind this port; a leaf's partial goes up as the leaf's worker
        # index in the spine's job, a contribution to the spine's job (docs/in_network.md, "Two levels")
        w = Mux(r.up, entry.up_worker, worker_of_port(m, entry, self.port, "worker"))
        tx_seq, tx_prev = Signal(16), Signal(32)        # the next frame's number; the last frame's psn
        meta = Signal(TxMeta)
        a = meta.ainic
        m.d.comb += [
            a.version.eq(VERSION), a.opcode.eq(Mux(r.up, FrameOpcode.aggregate, FrameOpcode.aggregated)),
            a.codec.eq(r.codec), a.dtype.eq(r.dtype),
            a.flags.eq(Mux(r.set, FrameFlag.shadow, 0) | Mux(r.retransmit, FrameFlag.retransmit, 0)),
            a.job.eq(Mux(r.up, entry.up_job, r.job_id)), a.collective.eq(r.collective),
            a.src_rank.eq(Mux(r.up, w, SWITCH_RANK)), a.dst_rank.eq(Mux(r.up, SWITCH_RANK, w)),
            a.chunk.eq(tx_seq), a.worker.eq(w), a.slot.eq(r.slot), a.count.eq(r.count), a.offset.eq(r.offset),
            a.psn.eq(r.psn), a.reserved.eq(tx_prev),
            meta.dst_mac.eq(self.cfg_port_mac), meta.dst_ip.eq(self.cfg_port_ip),
            tx.cfg_mac.eq(self.cfg_mac), tx.cfg_ip.eq(self.cfg_ip), tx.cfg_udp_port.eq(self.cfg_udp_port),
        ]
        # a lost contribution's agg_nack: its slot and set from the job's window
        k = self.s_nack.payload
        window_log2 = pick(jobs, k.job).window_log2
        nack = Signal(TxMeta)
        n = nack.ainic
        m.d.comb += [
            n.version.eq(VERSION), n.opcode.eq(FrameOpcode.agg_nack), n.codec.eq(k.codec), n.dtype.eq(k.dtype),
            n.flags.eq(Mux(k.psn.bit_select(window_log2, 1), FrameFlag.shadow, 0)),
            n.job.eq(k.job_id), n.src_rank.eq(SWITCH_RANK), n.dst_rank.eq(k.worker), n.worker.eq(k.worker),
            n.slot.eq(k.psn & ((1 << window_log2) - 1)), n.psn.eq(k.psn), n.chunk.eq(tx_seq), n.reserved.eq(tx_prev),
            nack.dst_mac.eq(self.cfg_port_mac), nack.dst_ip.eq(self.cfg_port_ip),
        ]
        # the builder takes an agg_nack first, else the next result; a record offered and not taken stays
        # offered (``held``) until it is
        held, held_nack = Signal(), Signal()
        use_nack = Mux(held, held_nack, self.s_nack.valid)
        m.d.comb += [tx.s_meta.payload.eq(Mux(use_nack, nack.as_value(), meta.as_value())),
                     tx.s_meta.valid.eq(Mux(use_nack, self.s_nack.valid, mq.r_rdy)),
                     self.s_nack.ready.eq(use_nack & tx.s_meta.ready), mq.r_en.eq(~use_nack & tx.s_meta.ready)]
        m.d.sync += [held.eq(tx.s_meta.valid & ~tx.s_meta.ready), held_nack.eq(use_nack)]
        with m.If(mq.r_en & mq.r_rdy):
            m.d.sync += [tx_seq.eq(tx_seq + 1), tx_prev.eq(r.psn)]
        with m.If(self.s_nack.valid & self.s_nack.ready):
            m.d.sync += [tx_seq.eq(tx_seq + 1), tx_prev.eq(k.psn)]
        # the payload reaches the builder through a register slice: its handshake stops there, not in the
        # payload queue's level logic
        skid_buffer(m, "payload", pq.r_rdy, pq.r_en, tx.s_axis.tvalid, tx.s_axis.tready,
                    [(pq.r_data[:W], tx.s_axis.tdata), (pq.r_data[W:W + B], tx.s_axis.tkeep),
                     (pq.r_data[W + B], tx.s_axis.tlast)])

        # -- results and forwarded frames take turns, a frame at a time -----------------------------------
        built, fwd, o = tx.m_axis, self.s_fwd, self.m_axis
        busy = Signal()
        owner = Signal()                        # 0: a result frame, 1: a forwarded frame
        last = Signal()
        pick_fwd = Mux(built.tvalid & fwd.tvalid, ~last, fwd.tvalid)
        sel = Mux(busy, owner, pick_fwd)
        m.d.comb += [
            o.tdata.eq(Mux(sel, fwd.tdata, built.tdata)), o.tkeep.eq(Mux(sel, fwd.tkeep, built.tkeep)),
            o.tlast.eq(Mux(sel, fwd.tlast, built.tlast)), o.tuser.eq(sel & fwd.tuser),
            o.tvalid.eq(Mux(sel, fwd.tvalid, built.tvalid)),
            fwd.tready.eq(sel & o.tready), built.tready.eq(~sel & o.tready),
        ]
        with m.If(o.tvalid & o.tready):
            m.d.sync += [busy.eq(~o.tlast), owner.eq(sel)]
            with m.If(o.tlast):
                m.d.sync += last.eq(sel)
        return m
