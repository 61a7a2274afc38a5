"""A register slice for an AXI4-Lite port: every signal that crosses it comes out of a flip-flop."""

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.host.axi import AxiLiteSignature

#: channel -> (payload members, direction); "m2s" channels go from the master to the slave
CHANNELS = {
    "aw": (("awaddr", "awprot"), "m2s"),
    "w": (("wdata", "wstrb"), "m2s"),
    "ar": (("araddr", "arprot"), "m2s"),
    "b": (("bresp",), "s2m"),
    "r": (("rdata", "rresp"), "s2m"),
}


class AxiLiteSlice(wiring.Component):
    """``s`` (slave side, from the master) → one-entry buffer per channel → ``m`` (to the slave).

    Each of the five channels holds one transfer: its ``valid`` and payload on the far side and its
    ``ready`` on the near side are registers, so no combinational path crosses the slice. A channel
    carries a transfer every second cycle at most, which is plenty for register traffic. Simulation
    benches put it between their top-level ports and a NIC so that Verilator does not evaluate the
    register block's decode on every input change; it also suits an FPGA top whose AXI4-Lite
    comes from a distant bridge.
    """

    def __init__(self, addr_width: int):
        self.addr_width = addr_width
        sig = AxiLiteSignature(addr_width)
        super().__init__({"s": In(sig), "m": Out(sig)})

    def elaborate(self, platform):
        m = Module()
        for ch, (fields, direction) in CHANNELS.items():
            src, dst = (self.s, self.m) if direction == "m2s" else (self.m, self.s)
            valid_in, ready_out = getattr(src, f"{ch}valid"), getattr(src, f"{ch}ready")
            valid_out, ready_in = getattr(dst, f"{ch}valid"), getattr(dst, f"{ch}ready")
            full = Signal(name=f"{ch}_full")
            m.d.comb += [ready_out.eq(~full), valid_out.eq(full)]
            with m.If(~full & valid_in):
                m.d.sync += full.eq(1)
                m.d.sync += [getattr(dst, f).eq(getattr(src, f)) for f in fields]
            with m.Elif(full & ready_in):
                m.d.sync += full.eq(0)
        return m
