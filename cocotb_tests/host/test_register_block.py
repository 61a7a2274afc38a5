"""AXI4-Lite register block against the register map (contract/regmap.py), through cocotbext-axi."""

import cocotb
import pytest
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiLiteBus, AxiLiteMaster
from cocotbext.axi.constants import AxiResp

from contract import regmap as rm
from hdl.host.register_block import RO, RW
from host_driver.sim.testbench import SIM_WIDTHS, TB, rng, width


async def start(dut):
    tb = TB(dut)                          # clock; the AXI4-Lite master is the only endpoint
    master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil", bus_separator="__"), dut.clk, dut.rst)
    dut.stat.value = 0
    dut.set.value = 0
    await tb.reset()
    return master


async def read(master, addr):
    return int.from_bytes((await master.read(addr, 4)).data, "little")


@cocotb.test()
async def identity_resets_and_read_write(dut):
    master = await start(dut)
    assert await read(master, rm.offset("ID")) == rm.ID_VALUE
    assert await read(master, rm.offset("VERSION")) == rm.VERSION_VALUE
    assert await read(master, rm.offset("CAPS")) == rm.caps_value(width())
    r = rng(70)
    written = {}
    for reg in RW:
        for i in {0, reg.count - 1}:
            addr = reg.offset + 4 * i
            assert await read(master, addr) == reg.reset, f"{reg.name}[{i}] reset"
            if reg.name == "CONTROL":
                continue
            v = int(r.integers(0, 2**32)) | 1 << 31         # above any narrow register's bits
            await master.write(addr, v.to_bytes(4, "little"))
            written[addr] = v & reg.mask                  # a narrow register keeps its documented bits only
    for addr, v in written.items():
        assert await read(master, addr) == v, f"{addr:#x}: {v:#x}"
    # byte strobes: only byte 2 of LOCAL_IP changes
    a = rm.offset("LOCAL_IP")
    await master.write(a + 2, b"\xab")
    assert await read(master, a) == (written[a] & ~0x00FF0000) | 0x00AB0000
    # a write to a read-only register is answered OKAY and changes nothing
    res = await master.write(rm.offset("VERSION"), (0).to_bytes(4, "little"))
    assert res.resp == AxiResp.OKAY and await read(master, rm.offset("VERSION")) == rm.VERSION_VALUE


@cocotb.test()
async def status_w1c_doorbell_irq_and_errors(dut):
    master = await start(dut)
    # a status input reads back
    ro = RO[0]
    dut.stat.value = 0x1234_5678          # the first ro register occupies the low 32 bits of `stat`
    assert await read(master, ro.offset) == 0x1234_5678
    # w1c: the NIC sets, the host clears with ones; irq follows IRQ_STATUS & IRQ_ENABLE
    irq_status = rm.offset("IRQ_STATUS")
    dut.set.value = 0b01                  # IRQ_STATUS is the first w1c register: completion
    await ClockCycles(dut.clk, 1)
    dut.set.value = 0
    assert await read(master, irq_status) == 1
    assert dut.irq.value == 0
    await master.write(rm.offset("IRQ_ENABLE"), (1).to_bytes(4, "little"))
    await ClockCycles(dut.clk, 2)
    assert dut.irq.value == 1
    await master.write(irq_status, (1).to_bytes(4, "little"))
    await ClockCycles(dut.clk, 2)
    assert await read(master, irq_status) == 0 and dut.irq.value == 0
    # doorbell: a one-cycle strobe with the value
    seen = []

    async def watch():
        while True:
            await ClockCycles(dut.clk, 1)
            if dut.strobe.value == 1:
                seen.append(int(dut.strobe_data.value))
    task = cocotb.start_soon(watch())
    await master.write(rm.offset("SQ_DOORBELL"), (77).to_bytes(4, "little"))
    await ClockCycles(dut.clk, 4)
    task.cancel()
    assert seen == [77]
    assert await read(master, rm.offset("SQ_DOORBELL")) == 0
    # outside the map: SLVERR, and nothing changes
    res = await master.write(rm.SPAN + 0x40 if rm.SPAN + 0x40 < 1 << len(dut.s_axil__awaddr) else 0xFFFC,
                             b"\x01\x02\x03\x04")
    assert res.resp == AxiResp.SLVERR
    rres = await master.read(0xFFFC & ((1 << len(dut.s_axil__araddr)) - 4), 4)
    assert rres.resp == AxiResp.SLVERR


@pytest.mark.parametrize("width", SIM_WIDTHS)
def test_register_block(sim, width):
    from host_driver.sim.runner import run
    run(sim, "register_block", width, __name__)
