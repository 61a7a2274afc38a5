"""AXI4-Stream as an Amaranth signature, and the byte-order conventions every block shares.

Ports that leave a block use AXI names so that the exported Verilog reads ``s_axis__tdata`` etc. and binds
to cocotbext-axi and vendor IP without glue. The handshake follows ``amaranth.lib.stream`` rules: a source
never lets ``tvalid`` wait on ``tready``; a sink may let ``tready`` depend on ``tvalid``.

Byte order: byte ``i`` of a beat is ``tdata[8*i : 8*i+8]`` (AXI: byte 0 in the low bits), so a little-endian
array of elements maps onto a beat with element ``j`` of width ``w`` at ``tdata[w*j : w*(j+1)]``.
``tkeep`` is contiguous from byte 0; only the beat with ``tlast`` may be partial.
"""

from amaranth import Cat, Const, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from contract.limits import NIC_WIDTHS

__all__ = ["AxiStreamSignature", "keep_bits", "keep_mask", "keep_count", "check_width"]


def check_width(width: int, owner=None, name: str = "width") -> int:
    """``width`` if it is a supported data width, else ValueError (``owner``: the component being built,
    so that Amaranth does not also warn that it was created and never used)."""
    if width not in NIC_WIDTHS:
        if owner is not None:
            owner._MustUse__silence = True
        raise ValueError(f"{name} must be one of {tuple(sorted(NIC_WIDTHS))} bits, got {width!r}")
    return width


class AxiStreamSignature(wiring.Signature):
    """``tdata`` (data_width), ``tkeep`` (data_width/8), ``tlast``, optional ``tuser``, ``tvalid``/``tready``."""

    def __init__(self, data_width: int, user_width: int = 0):
        if data_width <= 0 or data_width % 8:
            raise ValueError(f"AXI-Stream data width must be a positive multiple of 8, got {data_width!r}")
        self.data_width = data_width
        self.user_width = user_width
        members = {
            "tdata": Out(data_width),
            "tkeep": Out(data_width // 8),
            "tlast": Out(1),
            "tvalid": Out(1),
            "tready": In(1),
        }
        if user_width:
            members["tuser"] = Out(user_width)
        super().__init__(members)

    def __eq__(self, other):
        return (isinstance(other, AxiStreamSignature) and other.data_width == self.data_width
                and other.user_width == self.user_width)

    def __repr__(self):
        return f"AxiStreamSignature({self.data_width}, user_width={self.user_width})"


def keep_mask(count, nbytes: int):
    """A tkeep value with the low ``count`` bits set (count is a Value in 0..nbytes): bit i is ``count > i``,
    a comparison with a constant each (no carry chain); 0 where ``count`` cannot reach past i."""
    return Cat(*keep_bits(count, nbytes))


def keep_bits(count, nbytes: int) -> list:
    """The bits of :func:`keep_mask` as a list: build a wider mask from these, not from slices of the
    ``Cat`` (each slice of an expression re-emits the whole expression: nbytes**2 comparators)."""
    count = Value.cast(count)
    top = (1 << len(count)) - 1 if not count.shape().signed else (1 << (len(count) - 1)) - 1
    return [count > i if i < top else Const(0, 1) for i in range(nbytes)]


def keep_count(m, keep, name="keep_count"):
    """Number of bytes kept by a contiguous-from-zero ``tkeep``: read as a thermometer code (``count > i`` is
    ``keep[i]``), bit b of the count is set where the count lies in one of the intervals
    [k 2^(b+1) + 2^b, (k + 1) 2^(b+1)), each one AND of two keep bits, so every bit is an OR of about n/2^(b+1)
    pairs: a tree of depth log n (4 LUT levels at 128 bytes), where a priority encode is a chain of n
    multiplexers. A ``tkeep`` with holes (no AXI source sends one) gives some count of 0 .. n, not a
    defined one."""
    n = len(keep)
    count = Signal(range(n + 1), name=name)
    bits = []
    for b in range(len(count)):
        terms = []
        for start in range(1 << b, n + 1, 1 << (b + 1)):          # count in [start, start + 2^b)
            end = start + (1 << b)
            terms.append(keep[start - 1] & ~keep[end - 1] if end - 1 < n else keep[start - 1])
        bits.append(Cat(*terms).any() if terms else Const(0, 1))
    m.d.comb += count.eq(Cat(*bits))
    return count
