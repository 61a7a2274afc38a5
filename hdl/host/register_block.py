"""AXI4-Lite register block, generated from the register map in ``contract/regmap.py``."""

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from contract import regmap as rm
from contract.build import FULL, NicBuild
from hdl.host.axi import RESP_OKAY, RESP_SLVERR, AxiLiteSignature
from hdl.stream.axis import check_width


def _layout(regs):
    return data.StructLayout({r.name.lower(): 32 if r.count == 1 else data.ArrayLayout(32, r.count) for r in regs})


def TableReadSignature(depth: int, bits: int):
    """A table register's read port, seen from the register block: the reader drives ``addr`` (an entry),
    ``data`` is that entry one cycle later."""
    return wiring.Signature({"addr": In(range(depth)), "data": Out(bits)})


#: the NIC's registers by access (``ro``: the constants left out)
RW, RO, W1C, WO = (rm.NIC.of(access) for access in ("rw", "ro", "w1c", "wo"))


#: words a bank holds in a banked read (``RegisterBlock(banked_read=True)``)
BANK_WORDS = 16


class RegisterBlock(wiring.Component):
    """A register map's registers on ``s_axil`` (AXI4-Lite, 32-bit data): the NIC's (``contract.regmap.NIC``)
    unless ``regmap`` names another, whose constant registers read ``constants`` (name: value).

    * ``cfg``: every ``rw`` register (reset values from the map) but the tables; ``tables``: a read port per
      table register (``addr`` in, ``data`` a cycle later; the entries live in a RAM, reset to 0: the host
      writes them before use; the NIC's hold ``build.max_ranks`` entries, contract/build.py, and the
      addresses above those answer SLVERR); ``stat``: every ``ro`` status input;
      ``set``: per ``w1c`` register, bits to set (the host clears them by writing ones); ``strobe`` /
      ``strobe_data``: a one-cycle pulse and the written value per ``wo`` register (doorbells).
    * ``irq`` = ``(IRQ_STATUS & IRQ_ENABLE) != 0`` and ``CONTROL.reset_stats`` clears itself after a
      cycle, in a map that has them.
    * Writes honour ``wstrb``. An address outside the map answers SLVERR (writes are ignored, reads give 0).
    * One read and one write in flight; a write takes the cycle after AW and W are both valid; a read answers
      two cycles after AR (the address is decoded, then the value chosen: a table entry is a RAM read). With
      ``banked_read`` (the NIC's and the switch's: each step a few logic levels), three: the words are chosen
      in banks of :data:`BANK_WORDS` into registers, then the bank.
    """

    def __init__(self, width: int = 512, regmap: rm.RegisterMap = None, constants: dict = None,
                 build: NicBuild = FULL, banked_read: bool = False):
        self.width = check_width(width, self)
        self.banked_read = banked_read
        self.map = regmap or rm.NIC
        if constants is None:
            if regmap is not None:
                raise ValueError("a register map other than the NIC's needs its constants")
            constants = {"ID": rm.ID_VALUE, "VERSION": rm.VERSION_VALUE, "CAPS": rm.caps_value(width, build)}
        # the NIC's tables (the peer table) hold the build's max_ranks entries; the addresses above answer SLVERR
        self.depth = {r.name: build.max_ranks if regmap is None else r.count for r in self.map.registers if r.table}
        if set(constants) != set(self.map.constants):
            raise ValueError(f"constants must give {sorted(self.map.constants)}, got {sorted(constants)}")
        self.constants = dict(constants)
        self.addr_width = (self.map.span - 1).bit_length()
        self.rw, self.ro, self.w1c, self.wo = (self.map.of(a) for a in ("rw", "ro", "w1c", "wo"))
        self.table_regs = [r for r in self.rw if r.table]
        super().__init__({
            "s_axil": In(AxiLiteSignature(self.addr_width)),
            "cfg": Out(_layout([r for r in self.rw if not r.table])),
            "tables": Out(wiring.Signature({r.name.lower(): Out(TableReadSignature(self.depth[r.name], r.bits))
                                            for r in self.table_regs})),
            "stat": In(_layout(self.ro)),
            "set": In(_layout(self.w1c)),
            "strobe": Out(len(self.wo)),
            "strobe_data": Out(data.ArrayLayout(32, len(self.wo))),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        bus = self.s_axil
        w1c = {r.name: Signal(32, name=f"w1c_{r.name.lower()}") for r in self.w1c}

        # storage for rw registers, with their reset values
        regs = {}
        for r in self.rw:
            if r.table:
                continue
            for i in range(r.count):
                s = Signal(r.bits, init=r.reset, name=f"r_{r.name.lower()}_{i}")
                regs[(r.name, i)] = s
                port = getattr(self.cfg, r.name.lower())
                m.d.comb += (port if r.count == 1 else port[i]).eq(s)

        # table registers: a RAM each, one write port (byte enables) and two read ports (the NIC's, the host's)
        table_write, table_read = {}, {}
        for r in self.table_regs:
            m.submodules[f"t_{r.name.lower()}"] = mem = Memory(shape=r.bits, depth=self.depth[r.name], init=[])
            wp = mem.write_port(granularity=8)
            port = getattr(self.tables, r.name.lower())
            hw = mem.read_port()
            m.d.comb += [hw.addr.eq(port.addr), port.data.eq(hw.data)]
            table_write[r.name], table_read[r.name] = wp, mem.read_port()

        # -- writes --------------------------------------------------------------------------------------
        w_go = Signal()
        b_valid = Signal()
        b_resp = Signal(2)
        m.d.comb += [
            w_go.eq(bus.awvalid & bus.wvalid & ~b_valid),
            bus.awready.eq(w_go), bus.wready.eq(w_go),
            bus.bvalid.eq(b_valid), bus.bresp.eq(b_resp),
        ]
        with m.If(b_valid & bus.bready):
            m.d.sync += b_valid.eq(0)
        mask = Cat(*[b.replicate(8) for b in bus.wstrb])
        waddr = bus.awaddr & ~3
        m.d.sync += self.strobe.eq(0)
        hit = Signal()
        for r in self.table_regs:
            wp = table_write[r.name]
            index = (waddr - r.offset) >> 2
            inside = (waddr >= r.offset) & (waddr < r.offset + 4 * self.depth[r.name])
            with m.If(w_go & inside):
                m.d.comb += [hit.eq(1), wp.addr.eq(index[:len(wp.addr)]), wp.data.eq(bus.wdata[:r.bits]),
                             wp.en.eq(bus.wstrb[:r.bits // 8])]
        for r in self.map.registers:
            if r.table:
                continue
            for i in range(r.count):
                addr = r.offset + 4 * i
                with m.If(w_go & (waddr == addr)):
                    m.d.comb += hit.eq(1)
                    if r.access == "rw":
                        s = regs[(r.name, i)]
                        m.d.sync += s.eq(((s & ~mask) | (bus.wdata & mask))[:r.bits])
                    elif r.access == "w1c":
                        pass                                    # handled with the set inputs below
                    elif r.access == "wo":
                        k = self.wo.index(r)
                        m.d.sync += [self.strobe[k].eq(1), self.strobe_data[k].eq(bus.wdata)]
        with m.If(w_go):
            m.d.sync += [b_valid.eq(1), b_resp.eq(Mux(hit, RESP_OKAY, RESP_SLVERR))]
        for r in self.w1c:
            clear = Mux(w_go & (waddr == r.offset), bus.wdata & mask, 0)
            m.d.sync += w1c[r.name].eq((w1c[r.name] & ~clear) | getattr(self.set, r.name.lower()))
        reset_stats = self.map.field_masks("CONTROL").get("reset_stats") if "CONTROL" in self.map.by_name else None
        if reset_stats:
            ctrl = regs[("CONTROL", 0)]
            bit = reset_stats.bit_length() - 1
            with m.If(ctrl[bit] & ~(w_go & (waddr == self.map.offset("CONTROL")))):
                m.d.sync += ctrl[bit].eq(0)

        # -- reads: AR taken (address registered), then the value chosen and answered ---------------------------
        r_pend = Signal()
        r_addr = Signal.like(bus.araddr)
        r_valid = Signal()
        r_data = Signal(32)
        r_resp = Signal(2)
        r_pend2 = Signal()                      # (banked: the bank being chosen)
        r_go = bus.arvalid & ~r_pend & ~r_pend2 & ~r_valid
        m.d.comb += [bus.arready.eq(r_go), bus.rvalid.eq(r_valid), bus.rdata.eq(r_data), bus.rresp.eq(r_resp)]
        with m.If(r_valid & bus.rready):
            m.d.sync += r_valid.eq(0)
        m.d.sync += r_pend.eq(r_go)
        with m.If(r_go):
            m.d.sync += r_addr.eq(bus.araddr & ~3)
        for r in self.table_regs:                   # the RAMs read the entry as AR is taken
            rp = table_read[r.name]
            m.d.comb += rp.addr.eq(((bus.araddr - r.offset) >> 2)[:len(rp.addr)])
        words = {}                              # word index: its value (SLVERR where there is none)
        for r in self.map.registers:
            if r.table:
                for w in range(r.offset // 4, r.offset // 4 + self.depth[r.name]):
                    words[w] = table_read[r.name].data
                continue
            for i in range(r.count):
                if r.name in self.constants:
                    value = C(self.constants[r.name], 32)
                elif r.access == "rw":
                    value = regs[(r.name, i)]
                elif r.access == "ro":
                    port = getattr(self.stat, r.name.lower())
                    value = port if r.count == 1 else port[i]
                elif r.access == "w1c":
                    value = w1c[r.name]
                else:
                    value = C(0, 32)
                words[r.offset // 4 + i] = value
        if not self.banked_read:
            with m.If(r_pend):                  # one case per word: a balanced multiplexer, not a chain
                m.d.sync += r_valid.eq(1)
                self._choose(m, r_addr[2:], words, r_data, r_resp)
        else:                                   # each bank's word into a register, then the bank
            bits = BANK_WORDS.bit_length() - 1
            banks = sorted({w >> bits for w in words})
            b_data = {b: Signal(32, name=f"bank{b}_data") for b in banks}
            b_resp = {b: Signal(2, name=f"bank{b}_resp") for b in banks}
            r_bank = Signal(len(r_addr) - 2 - bits)
            m.d.sync += r_pend2.eq(r_pend)
            with m.If(r_pend):
                m.d.sync += r_bank.eq(r_addr[2 + bits:])
                for b in banks:
                    self._choose(m, r_addr[2:2 + bits], {w & (BANK_WORDS - 1): v for w, v in words.items()
                                                         if w >> bits == b}, b_data[b], b_resp[b])
            with m.If(r_pend2):
                m.d.sync += r_valid.eq(1)
                with m.Switch(r_bank):
                    for b in banks:
                        with m.Case(b):
                            m.d.sync += [r_data.eq(b_data[b]), r_resp.eq(b_resp[b])]
                    with m.Default():
                        m.d.sync += [r_data.eq(0), r_resp.eq(RESP_SLVERR)]

        if "IRQ_STATUS" in w1c and ("IRQ_ENABLE", 0) in regs:
            m.d.comb += self.irq.eq((w1c["IRQ_STATUS"] & regs[("IRQ_ENABLE", 0)]) != 0)
        return m

    @staticmethod
    def _choose(m, index, words: dict, data, resp):
        """``data``/``resp`` (sync) from the word ``index`` selects among ``words``; SLVERR where none is."""
        with m.Switch(index):
            for w, value in sorted(words.items()):
                with m.Case(w):
                    m.d.sync += [data.eq(value), resp.eq(RESP_OKAY)]
            with m.Default():
                m.d.sync += [data.eq(0), resp.eq(RESP_SLVERR)]
