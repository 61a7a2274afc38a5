"""A synchronous FIFO whose handshake outputs are flip-flops (Amaranth's ``SyncFIFOBuffered``, cycle for cycle)."""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.memory import scratch_memory


def check_depth(component, depth: int) -> None:
    """A FIFO of this kind (a memory, then the output register) needs a depth of 2 or more: refused with the
    component's name before it is built."""
    if depth < 2:
        component._MustUse__silence = True
        raise ValueError(f"{type(component).__name__} depth must be at least 2 (a memory and the output "
                         f"register), got {depth}")


class SyncFifo(wiring.Component):
    """``depth`` entries of ``width`` bits: a memory of ``depth`` − 1 and an output register, with the ports
    and the timing of Amaranth's ``SyncFIFOBuffered`` (the same ``w_rdy``, ``r_rdy`` and ``level`` on every
    cycle, tested side by side).

    * ``w_rdy`` (room in the memory) and ``r_rdy`` are flip-flops, and so are "the memory holds an entry"
      and "it is full": each is found for the next cycle as entries come and go, so that no compare of a
      level lies between ``r_en`` or ``w_en`` and what they move (in ``SyncFIFOBuffered`` the read enable
      passes compares of the level on its way to the pointers).
    * A write while ``w_rdy`` is low is ignored; ``r_data`` is valid while ``r_rdy``.
    """

    def __init__(self, *, width: int, depth: int):
        check_depth(self, depth)
        self.width, self.depth = width, depth
        super().__init__({"w_data": In(width), "w_en": In(1), "w_rdy": Out(1), "r_data": Out(width),
                          "r_en": In(1), "r_rdy": Out(1), "level": Out(range(depth + 1))})

    def elaborate(self, platform):
        m = Module()
        inner = self.depth - 1
        m.submodules.storage = storage = scratch_memory(shape=self.width, depth=inner)
        w_port, r_port = storage.write_port(), storage.read_port()
        produce, consume = Signal(range(inner)), Signal(range(inner))
        count = Signal(range(inner + 1))
        room, stored = Signal(init=1), Signal()      # count != inner, count != 0
        out_valid = Signal()

        def step(ptr):
            return Mux(ptr == inner - 1, 0, ptr + 1)
        write = self.w_en & room
        read = stored & (~out_valid | self.r_en)
        m.d.comb += [self.w_rdy.eq(room), self.r_rdy.eq(out_valid), self.r_data.eq(r_port.data),
                     self.level.eq(count + out_valid),
                     w_port.addr.eq(produce), w_port.data.eq(self.w_data), w_port.en.eq(write),
                     r_port.addr.eq(consume), r_port.en.eq(read)]
        with m.If(write):
            m.d.sync += produce.eq(step(produce))
        with m.If(read):
            m.d.sync += [consume.eq(step(consume)), out_valid.eq(1)]
        with m.Elif(self.r_en):
            m.d.sync += out_valid.eq(0)
        with m.If(write & ~read):
            m.d.sync += [count.eq(count + 1), room.eq(count != inner - 1), stored.eq(1)]
        with m.Elif(read & ~write):
            m.d.sync += [count.eq(count - 1), room.eq(1), stored.eq(count != 1)]
        return m
