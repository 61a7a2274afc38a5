"""Register slices: a stream crosses them at one beat a cycle, and every signal that leaves one comes out of a
flip-flop (a skid buffer: the output register, and a second one that catches the beat in flight when the
output stalls)."""

from amaranth import ClockDomain, ClockSignal, DomainRenamer, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.stream.axis import AxiStreamSignature


def skid_buffer(m, name, src_valid, src_ready, dst_valid, dst_ready, fields, refuse_in_reset=False):
    """``src`` → ``dst`` (``fields``: [(source value, destination signal)]; the destination signals and
    ``dst_valid``/``src_ready`` are driven here from registers). One beat a cycle, one cycle of latency; no
    combinational path from any input to any output.

    With ``refuse_in_reset``, ``src_ready`` is low while the domain is in reset, so that a source that is not
    reset with it (or leaves reset earlier) does not lose a beat to it; without, a beat offered in reset is
    taken and forgotten (a network port: a MAC cannot wait)."""
    out_valid, skid_valid = Signal(name=f"{name}_out_valid"), Signal(name=f"{name}_skid_valid")
    skid = [Signal.like(dst, name=f"{name}_skid_{i}") for i, (_, dst) in enumerate(fields)]
    ready = ~skid_valid & ~ResetSignal() if refuse_in_reset else ~skid_valid
    m.d.comb += [dst_valid.eq(out_valid), src_ready.eq(ready)]
    with m.If(dst_ready | ~out_valid):              # the output register moves on
        with m.If(skid_valid):
            m.d.sync += [out_valid.eq(1), skid_valid.eq(0)] + [dst.eq(k) for (_, dst), k in zip(fields, skid)]
        with m.Else():
            m.d.sync += [out_valid.eq(src_valid)] + [dst.eq(src) for src, dst in fields]
    with m.Elif(src_valid & ~skid_valid):           # it holds: catch the beat that was accepted
        m.d.sync += [skid_valid.eq(1)] + [k.eq(src) for (src, _), k in zip(fields, skid)]


class StreamSlice(wiring.Component):
    """``s_axis`` → ``m_axis`` through a :func:`skid_buffer` (AXI4-Stream, ``tuser`` of ``user_width``)."""

    def __init__(self, width: int, user_width: int = 0):
        self.user_width = user_width
        sig = AxiStreamSignature(width, user_width)
        super().__init__({"s_axis": In(sig), "m_axis": Out(sig)})

    def elaborate(self, platform):
        m = Module()
        s, o = self.s_axis, self.m_axis
        names = ["tdata", "tkeep", "tlast"] + (["tuser"] if self.user_width else [])
        skid_buffer(m, "beat", s.tvalid, s.tready, o.tvalid, o.tready, [(getattr(s, n), getattr(o, n)) for n in names])
        return m


class AxiSlice(wiring.Component):
    """An AXI4 or AXI4-Lite port (``signature`` as the master sees it: ``AxiSignature``, ``AxiLiteSignature``):
    ``s`` (from the master) → ``m`` (to the slave), each of the five channels through a :func:`skid_buffer`,
    so the channels keep one transfer a cycle and nothing crosses without a flip-flop. No channel is ready
    while the slice is in reset: AXI lets the master drive a valid at the first clock edge after reset, and
    a NIC's reset passes a flip-flop (:func:`registered_reset`), so its slices leave reset a cycle after
    its pin does."""

    def __init__(self, signature: wiring.Signature):
        self.port_signature = signature
        super().__init__({"s": In(signature), "m": Out(signature)})

    def elaborate(self, platform):
        m = Module()
        members = self.port_signature.members
        for ch in ("aw", "w", "b", "ar", "r"):
            valid, ready = f"{ch}valid", f"{ch}ready"
            names = [n for n in members if n.startswith(ch) and n not in (valid, ready)]
            src, dst = (self.s, self.m) if members[valid].flow == Out else (self.m, self.s)
            skid_buffer(m, ch, getattr(src, valid), getattr(src, ready), getattr(dst, valid), getattr(dst, ready),
                        [(getattr(src, n), getattr(dst, n)) for n in names], refuse_in_reset=True)
        return m


class PortSlice(wiring.Component):
    """A block's ports through register slices: ``front`` looks like the block (``signature``, flows as the
    block sees them) to the blocks that use it, ``back`` connects to the block itself. Every stream of the
    signature (a ``valid``/``ready`` or ``tvalid``/``tready`` pair and the payload beside it), in whichever
    direction it flows, crosses a :func:`skid_buffer`: one beat a cycle, a cycle of latency, and no
    combinational path from one side to the other. Other signals (configuration, status) pass as wires.
    Between blocks placed apart on a chip, it keeps each block's paths inside the block."""

    def __init__(self, signature: wiring.Signature):
        self.port_signature = signature
        super().__init__({"front": Out(signature), "back": In(signature)})

    def elaborate(self, platform):
        m = Module()
        streams = {}                    # the path of a stream -> its members
        for path, member, value in self.port_signature.flatten(self.front):
            streams.setdefault(path[:-1], {})[path[-1]] = member.flow
        for prefix, members in streams.items():
            handshake = next(((v, r) for v, r in (("valid", "ready"), ("tvalid", "tready")) if v in members), None)
            front, back = _at(self.front, prefix), _at(self.back, prefix)
            if handshake is None:       # plain signals: wires
                for name, flow in members.items():
                    f, b = getattr(front, name), getattr(back, name)
                    m.d.comb += b.eq(f) if flow == In else f.eq(b)
                continue
            v, r = handshake
            # into the block (the users drive valid) or out of it
            src, dst = (front, back) if members[v] == In else (back, front)
            skid_buffer(m, "_".join(map(str, prefix)) or "port", getattr(src, v), getattr(src, r),
                        getattr(dst, v), getattr(dst, r),
                        [(getattr(src, n), getattr(dst, n)) for n in members if n not in (v, r)])
        return m


def _at(iface, path):
    for name in path:
        iface = iface[name] if isinstance(name, int) else getattr(iface, name)
    return iface


def registered_reset(m: Module) -> Module:
    """``m`` (domain ``sync``) with its reset through a flip-flop: a module whose ``rst`` is a port otherwise has
    every flip-flop's next-state logic depend on that input (a simulator evaluates all of it whenever the
    inputs change). Returns the module to use instead; the reset takes effect one cycle later."""
    top = Module()
    top.domains.core = core = ClockDomain("core", local=True)
    rst = Signal(reset_less=True)      # (a register with a reset would be held at 0 by it)
    top.d.sync += rst.eq(ResetSignal("sync"))
    top.d.comb += [core.clk.eq(ClockSignal("sync")), core.rst.eq(rst)]
    top.submodules.core = DomainRenamer("core")(m)
    return top


__all__ = ["AxiSlice", "PortSlice", "StreamSlice", "registered_reset", "skid_buffer"]
