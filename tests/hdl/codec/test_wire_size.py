"""Payload bytes per packet in RTL (``payload_bytes``) equal ``contract.protocol.codec_bytes`` for every
codec and every count a header can carry; an unknown codec gives 0."""

from amaranth import Module, Signal
from amaranth.sim import Simulator

from contract.enums import Codec
from contract.protocol import codec_bytes
from hdl.codec.wire_size import payload_bytes


def test_payload_bytes_equal_the_contract():
    m = Module()
    codec, count = Signal(4), Signal(16)
    need = payload_bytes(m, codec, count)

    async def bench(ctx):
        for c in range(8):
            ctx.set(codec, c)
            for n in [*range(0, 70), 255, 256, 257, 1023, 1024, 1025, 65535]:
                ctx.set(count, n)
                want = codec_bytes(Codec(c), n) if c in Codec._value2member_map_ else 0
                assert ctx.get(need) == want, (c, n)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
