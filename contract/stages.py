"""The collective engine's stages as its debug port ``dbg_stages`` reports them, cycle by cycle.

Each stage is 5 bits of ``dbg_stages``, stage i at bits 5i .. 5i+4: its :class:`~contract.enums.StageState`
in the low 2 bits, the :class:`~contract.enums.PhaseKind` of the item it holds in the high 3 (0 while idle).
The ring engine drives it; while the switch client runs a collective, or none runs, every stage is idle.
docs/collective_engine.md ("Where the cycles go") says how to read it; ``host_driver/sim/stage_trace.py``
summarises a recorded trace.
"""

#: (name, what the stage moves, what "starved" and "blocked" mean there), in bit order
STAGES = (
    ("sequencer", "items into the stages' queues", "no item left", "a stage's queue is full"),
    ("read", "own packets from the DMA reader to the compressor or the reduction unit",
     "host memory has not answered", "the compressor or the reduction unit is not ready"),
    ("receive", "received payloads to the receive decompressor or fork 2",
     "the previous rank's packet has not arrived", "the decompressor or fork 2 is not ready"),
    ("compress", "own data or the reduction unit's sums into the compressor",
     "own data or a sum not there yet", "the compressor is not ready"),
    ("fork1", "the compressor's output to transmit and the host decompressor",
     "the compressor has no output yet", "transmit or the host branch's FIFO is full"),
    ("transmit", "payloads to the link sender",
     "the payload's next beat is not there", "the link sender (credits, acks, the builder) did not take it"),
    ("host_out", "results into the host decompressor", "the result's next beat is not there",
     "the decompressor is not ready"),
    ("write", "decoded results to the DMA writer", "the decompressor has no output yet",
     "the DMA writer or host memory is not ready"),
)

NAMES = tuple(s[0] for s in STAGES)
BITS = 5        # per stage: state (2) | kind << 2 (3)
WIDTH = BITS * len(STAGES)


def unpack(value: int) -> list:
    """[(state, kind)] per stage (ints) from one value of ``dbg_stages``."""
    return [((value >> (BITS * i)) & 3, (value >> (BITS * i + 2)) & 7) for i in range(len(STAGES))]


__all__ = ["BITS", "NAMES", "STAGES", "WIDTH", "unpack"]
