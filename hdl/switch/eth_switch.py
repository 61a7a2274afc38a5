"""An Ethernet switch: static MAC-to-port table, per-port output queues (the cluster harness's fabric,
and the forwarding path of the aggregation switch)."""

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.axis import AxiStreamSignature, check_width
from hdl.stream.register_slice import skid_buffer
from hdl.stream.round_robin import round_robin
from hdl.stream.sync_fifo import SyncFifo


def _dst_mac(tdata):
    """The destination MAC of a frame's first beat as the 48-bit integer ``contract.addresses.mac_int`` gives."""
    return Cat(*[tdata[8 * i:8 * i + 8] for i in reversed(range(6))])


class EthernetSwitch(wiring.Component):
    """``ports`` ports; a frame entering ``s_axis_<i>`` leaves ``m_axis_<j>`` for the j with
    ``cfg_mac[j]`` equal to its destination MAC.

    * Forwarding is decided on the frame's first beat (the destination MAC is bytes 0..5), then the frame
      is held to its port until ``tlast``. Frames for an unknown MAC (broadcast included) are dropped
      whole and counted in ``stat_unknown``.
    * Each output has a queue of ``queue_depth`` beats; an output takes one frame at a time, choosing
      round-robin among the inputs whose head frame is for it, without a cycle of arbitration, so
      back-to-back frames from one input pass at one beat per cycle. An input waiting for a busy output
      waits (backpressure), so nothing is lost.
    * With ``user_width``, ``tuser`` travels with every beat (a MAC error marked on a frame stays on it).
    * With ``registered``, every input passes a register slice that carries the beat's output port beside it
      (a cycle of latency), and an output registers its round-robin pick before the frame's first beat moves
      (a cycle a frame): the inputs' ready comes from flip-flops, not from the MAC compares and the arbiters
      (the aggregation switch's forwarding path, whose frames then wait for a link slower than the switch;
      the cluster harness's fabric stays a wire).
    * ``stat_unknown`` counts a cycle after the frame's last beat.
    """

    def __init__(self, ports: int, width: int = 512, queue_depth: int = 64, user_width: int = 0,
                 registered: bool = False):
        if not 2 <= ports <= 32:
            self._MustUse__silence = True
            raise ValueError(f"ports must be in 2 .. 32, got {ports}")
        self.ports = ports
        self.width = check_width(width, self)
        self.queue_depth = queue_depth
        self.user_width = user_width
        self.registered = registered
        members = {"cfg_mac": In(data.ArrayLayout(48, ports)), "stat_unknown": Out(32)}
        for i in range(ports):
            members[f"s_axis_{i}"] = In(AxiStreamSignature(width, user_width))
            members[f"m_axis_{i}"] = Out(AxiStreamSignature(width, user_width))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        N, W, B = self.ports, self.width, self.width // 8
        ports_in = [getattr(self, f"s_axis_{i}") for i in range(N)]
        outs = [getattr(self, f"m_axis_{j}") for j in range(N)]
        fields = ["tdata", "tkeep", "tlast"] + (["tuser"] if self.user_width else [])

        # -- input side: where each input's current frame goes -------------------------------------------
        ins, route = [], [Signal(N, name=f"route_{i}") for i in range(N)]
        for i, s in enumerate(ports_in):
            in_frame = Signal(name=f"in_frame_{i}")                     # past the first beat
            held = Signal(N, name=f"held_route_{i}")                     # one-hot, latched at the first beat
            mac = _dst_mac(s.tdata)
            match = Cat(*[mac == self.cfg_mac[j] for j in range(N)])
            beat_route = Mux(in_frame, held, match)
            with m.If(s.tvalid & s.tready):
                m.d.sync += in_frame.eq(~s.tlast)
                with m.If(~in_frame):
                    m.d.sync += held.eq(match)
            if self.registered:                 # the beat and its route through a register slice
                r = AxiStreamSignature(W, self.user_width).flip().create(path=(f"in_{i}",))
                skid_buffer(m, f"in_{i}", s.tvalid, s.tready, r.tvalid, r.tready,
                            [(getattr(s, f), getattr(r, f)) for f in fields] + [(beat_route, route[i])])
                ins.append(r)
            else:
                m.d.comb += route[i].eq(beat_route)
                ins.append(s)

        # frames dropped (several inputs may finish one in the same cycle), counted a cycle later
        dropped = Signal(N)
        for i, s in enumerate(ins):
            m.d.sync += dropped[i].eq(s.tvalid & s.tready & s.tlast & (route[i] == 0))
        m.d.sync += self.stat_unknown.eq(self.stat_unknown + sum(dropped[i] for i in range(N)))

        # -- output side: round-robin frame arbitration into the output queue ----------------------------
        grant_ready = [[Signal(name=f"ready_{i}_to_{j}") for j in range(N)] for i in range(N)]
        for j, o in enumerate(outs):
            layout = data.StructLayout({"tdata": W, "tkeep": B, "tlast": 1, "tuser": max(self.user_width, 1)})
            q = SyncFifo(width=layout.size, depth=self.queue_depth)
            m.submodules[f"queue_{j}"] = q
            busy = Signal(name=f"out_busy_{j}")
            owner = Signal(range(N), name=f"out_owner_{j}")
            last = Signal(range(N), name=f"out_last_{j}")
            want = Cat(*[ins[i].tvalid & route[i][j] for i in range(N)])
            pick, any_want = round_robin(m, want, last, N, f"out_{j}")
            sel = Signal(range(N), name=f"out_sel_{j}")
            active = Signal(name=f"out_active_{j}")
            if self.registered:     # the pick is registered first (a cycle a frame): beats go from the owner only
                m.d.comb += [sel.eq(owner), active.eq(busy)]
                with m.If(~busy & any_want):
                    m.d.sync += [busy.eq(1), owner.eq(pick)]
            else:
                m.d.comb += [sel.eq(Mux(busy, owner, pick)), active.eq(busy | any_want)]
            src = Array(ins)[sel]
            entry = Signal(layout, name=f"out_entry_{j}")
            m.d.comb += [entry.tdata.eq(src.tdata), entry.tkeep.eq(src.tkeep), entry.tlast.eq(src.tlast),
                         q.w_data.eq(entry)]
            if self.user_width:
                m.d.comb += entry.tuser.eq(src.tuser)
            go = Signal(name=f"out_go_{j}")
            m.d.comb += [go.eq(active & src.tvalid & q.w_rdy), q.w_en.eq(go)]
            for i in range(N):
                m.d.comb += grant_ready[i][j].eq(active & (sel == i) & q.w_rdy)
            with m.If(go):
                m.d.sync += [busy.eq(~src.tlast), owner.eq(sel)]
                with m.If(src.tlast):
                    m.d.sync += last.eq(sel)
            head = Signal(layout, name=f"out_head_{j}")
            m.d.comb += [head.eq(q.r_data), o.tdata.eq(head.tdata), o.tkeep.eq(head.tkeep),
                         o.tlast.eq(head.tlast), o.tvalid.eq(q.r_rdy), q.r_en.eq(o.tvalid & o.tready)]
            if self.user_width:
                m.d.comb += o.tuser.eq(head.tuser)

        for i, s in enumerate(ins):
            granted = Cat(*[grant_ready[i][j] & route[i][j] for j in range(N)]).any()
            m.d.comb += s.tready.eq(granted | (route[i] == 0))           # unknown destination: drop
        return m

