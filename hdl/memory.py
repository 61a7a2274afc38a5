"""Memories that are written before they are read: no power-up contents in the exported Verilog.

Amaranth gives every memory initial contents (zeros when ``init=[]``), and its Verilog spells them out a row
at a time: 8,192 lines for each engine's accumulator pool of the switch in a test bench, so that writing
and compiling those zeros took most of exporting and building a tree of switches. A memory made with
:func:`scratch_memory` carries the :data:`NO_INIT` attribute instead, and :mod:`hdl.flow.export` writes it
with none (``reg [W-1:0] mem [D-1:0];`` and no ``initial`` block): what an FPGA's block RAM or a simulator
holds at power-up is never read. The blocks that use it read only rows they wrote (a FIFO's, a frame
store's, a link's queue) or rows whose state says what they hold (an aggregation engine's pool, emptied by
its slot states after reset). Amaranth's own simulator still starts them at zero.
"""

from amaranth.lib.memory import Memory

#: the attribute of a memory whose power-up contents nothing reads (in the Verilog: ``(* ainic_no_init = 32'd1 *)``)
NO_INIT = "ainic_no_init"


def scratch_memory(*, shape, depth: int) -> Memory:
    """A :class:`~amaranth.lib.memory.Memory` of ``depth`` rows of ``shape`` exported with no initial contents."""
    return Memory(shape=shape, depth=depth, init=[], attrs={NO_INIT: 1})
