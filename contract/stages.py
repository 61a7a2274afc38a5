"""The stages of the engine running a collective as the NIC's debug port ``dbg_stages`` reports them, cycle
by cycle.

Each stage is 5 bits of ``dbg_stages``, stage i at bits 5i .. 5i+4: its :class:`~contract.enums.StageState`
in the low 2 bits, the kind of the item it holds in the high 3 (0 while idle). While a ring collective runs
(or none), the ring engine drives it: the stages of :data:`STAGES`, kinds :class:`~contract.enums.PhaseKind`.
While a switch collective runs, the switch client drives it: the stages of :data:`SWITCH_STAGES`, kinds
:data:`SWITCH_KINDS` (the bits above them are 0). docs/collective_engine.md ("Where the cycles go") and
docs/in_network.md say how to read them; ``host_driver/sim/stage_trace.py`` summarises a recorded trace.
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

#: the switch client's stages (hdl/engine/switch_client.py), in bit order, as :data:`STAGES`
SWITCH_STAGES = (
    ("issue", "contributions due into DMA read commands", "no contribution is due (the window waits for results)",
     "the DMA reader or the header queue did not take the command"),
    ("read", "contributions from the DMA reader to the compressor", "host memory has not answered",
     "the compressor is not ready"),
    ("transmit", "encoded payloads to the TX builder", "the compressor has no output yet",
     "the TX builder (its header, the link) did not take the beat"),
    ("header", "frame headers to the TX builder", "(never: a header is offered as soon as it is queued)",
     "the TX builder is still sending the frame before"),
    ("receive", "result records: checked against their slot, then taken or dropped", "no result has arrived",
     "its checks (three cycles for a result that comes alone), the payload before it or the DMA writer's command"),
    ("result", "result payloads into the decompressor", "the result's next beat is not there",
     "the decompressor is not ready"),
    ("write", "decoded results to the DMA writer", "the decompressor has no output yet",
     "the DMA writer or host memory is not ready"),
)
SWITCH_NAMES = tuple(s[0] for s in SWITCH_STAGES)
#: the switch client's item kinds: a first send or a result for the slot's packet in flight (0), a resend or
#: a received frame that is dropped (1)
SWITCH_KINDS = ("new", "again")
assert len(SWITCH_STAGES) <= len(STAGES)


def unpack(value: int) -> list:
    """[(state, kind)] per stage (ints) from one value of ``dbg_stages``."""
    return [((value >> (BITS * i)) & 3, (value >> (BITS * i + 2)) & 7) for i in range(len(STAGES))]


__all__ = ["BITS", "NAMES", "STAGES", "SWITCH_KINDS", "SWITCH_NAMES", "SWITCH_STAGES", "WIDTH", "unpack"]
