"""docs/integration.md's bring-up sequence is what the driver does: the register accesses of ``Nic.start`` and of
one descriptor, recorded on the model backend, are the document's list, in its order (an integrator without the
driver follows the document; when the two part, this fails)."""

import asyncio
import re
from pathlib import Path

import numpy as np

from contract import regmap as rm
from host_driver.driver.nic import Nic
from host_driver.models.nic_model import ModelBackend

DOC = Path(__file__).resolve().parents[2] / "docs" / "integration.md"


def documented(world_size: int) -> list:
    """The document's accesses as (read|write, register name), the per-rank group expanded."""
    text = DOC.read_text()
    block = text[text.index("<!-- bring-up:"):]
    block = block[block.index("```text") + len("```text"):]
    block = block[:block.index("```")]
    out, group = [], []
    for line in block.strip().splitlines():
        m = re.match(r"(read|write)\s+([A-Z_0-9]+)( \+)?\s", line + " ")
        assert m, line
        access = (m.group(1), m.group(2))
        if m.group(3):
            group.append(access)
            continue
        if group:
            out += [(op, f"{name}[{i}]") for i in range(world_size) for op, name in group]
            group = []
        out.append(access)
    return out


class Recording(ModelBackend):
    """The model backend, recording every register access by name; after a doorbell, CQ_TAIL first reads
    as before, so that the driver takes the interrupt path as it does on hardware, where a descriptor
    takes time."""

    def __init__(self, width=512):
        super().__init__(width)
        self.log, self.hold = [], None

    @staticmethod
    def name(offset):
        for r in rm.REGISTERS:
            if r.offset <= offset < r.offset + 4 * r.count:
                return r.name if r.count == 1 else f"{r.name}[{(offset - r.offset) // 4}]"

    async def read_reg(self, offset):
        self.log.append(("read", self.name(offset)))
        value = await super().read_reg(offset)
        if offset == rm.offset("CQ_TAIL") and self.hold is not None:
            value, self.hold = self.hold, None
        return value

    async def write_reg(self, offset, value):
        self.log.append(("write", self.name(offset)))
        if offset == rm.offset("SQ_DOORBELL"):
            self.hold = self.cq_tail            # the completion is not there yet at the first look
        await super().write_reg(offset, value)


def test_the_driver_does_what_the_document_says():
    backend = Recording()
    nic = Nic(backend, sq_entries=8, cq_entries=8)
    peers = [(0x020000000001 + i, 0x0A000001 + i) for i in range(3)]

    async def scenario():
        await nic.start(rank=1, world_size=3, peers=peers, local_mac=peers[1][0], local_ip=peers[1][1])
        src, dst = nic.alloc(4096), nic.alloc(4096)
        await nic.write(src, np.arange(1024, dtype=np.float32))
        await nic.run("copy", src=src, dst=dst, count=1024)
        return await nic.read(dst, 1024)

    out = asyncio.run(scenario())
    assert np.array_equal(out, np.arange(1024, dtype=np.float32))
    assert backend.log == documented(3)


def test_the_check_sees_a_missing_step():
    want = documented(3)
    assert ("write", "CONTROL") in want and want.count(("write", "PEER_IP[2]")) == 1
    assert want[:1] == [("read", "ID")] and want[-1] == ("write", "CQ_HEAD")
    assert [a for a in want if a != ("write", "LAG")] != want
