import time, cocotb
from cocotb.triggers import Timer
from host_driver.rtl import start_clock, reset_pulse

@cocotb.test()
async def idle(dut):
    start_clock(dut)
    await reset_pulse(dut)
    t = time.time()
    await Timer(4 * 20000, unit="ns")
    dut._log.info(f"IDLE 20000 cycles in {time.time() - t:.2f} s")
