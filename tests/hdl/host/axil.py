"""An AXI4-Lite master for the Amaranth simulator (testbench side of ``AxiLiteSignature`` ports)."""


async def write(ctx, bus, addr: int, value: int, strobe: int = 0xF) -> int:
    """One write; returns BRESP."""
    ctx.set(bus.awaddr, addr)
    ctx.set(bus.wdata, value)
    ctx.set(bus.wstrb, strobe)
    ctx.set(bus.awvalid, 1)
    ctx.set(bus.wvalid, 1)
    ctx.set(bus.bready, 1)
    aw = w = False
    while not (aw and w):
        _, _, awready, wready = await ctx.tick().sample(bus.awready, bus.wready)
        if awready:
            aw = True
            ctx.set(bus.awvalid, 0)
        if wready:
            w = True
            ctx.set(bus.wvalid, 0)
    while True:
        _, _, bvalid, bresp = await ctx.tick().sample(bus.bvalid, bus.bresp)
        if bvalid:
            ctx.set(bus.bready, 0)
            return bresp


async def read(ctx, bus, addr: int) -> tuple:
    """One read; returns (RDATA, RRESP)."""
    ctx.set(bus.araddr, addr)
    ctx.set(bus.arvalid, 1)
    ctx.set(bus.rready, 1)
    while True:
        _, _, arready = await ctx.tick().sample(bus.arready)
        if arready:
            ctx.set(bus.arvalid, 0)
            break
    while True:
        _, _, rvalid, rdata, rresp = await ctx.tick().sample(bus.rvalid, bus.rdata, bus.rresp)
        if rvalid:
            ctx.set(bus.rready, 0)
            return rdata, rresp
