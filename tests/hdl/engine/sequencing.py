"""Drive a block from a RingSequencer's items in the Amaranth simulator (header generation and checks)."""




def sequencer_driving(block):
    """A module with a RingSequencer feeding ``block.items``; returns (module, sequencer)."""
    from amaranth import Module
    from amaranth.lib import wiring

    from hdl.engine.ring_sequencer import RingSequencer
    m = Module()
    m.submodules.seq = seq = RingSequencer()
    m.submodules.block = block
    wiring.connect(m, seq.items, block.items)
    return m, seq


async def start_sequence(ctx, seq, block, plan, rank, lag, cfg):
    """Load the plan and the block's configuration, then pulse ``start`` on both."""
    from hdl.engine.ring_sequencer import plan_fields
    for name, v in plan_fields(plan, rank, lag).items():
        ctx.set(getattr(seq.plan, name), v)
    for name, v in cfg.items():
        ctx.set(getattr(block.cfg, name), v)
    ctx.set(seq.start, 1)
    ctx.set(block.start, 1)
    await ctx.tick()
    ctx.set(seq.start, 0)
    ctx.set(block.start, 0)
