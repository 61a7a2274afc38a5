"""The host memory model's configuration, backdoor and statistics ports (``ainic_host_memory.v``), name ->
bits: the benches expose them at their top level (``host_bench.memory_members``) and the cocotb side
(``host_driver.sim.rtl_backend.HostMemory``) drives and reads them. Imports nothing, so that a simulator's
Python starts without Amaranth."""

MEMORY_CONFIG = {"cfg_latency": 16, "cfg_rate": 16, "cfg_stall": 8, "cfg_seed": 32, "cfg_err_lo": 64,
                 "cfg_err_hi": 64, "cfg_err_resp": 2, "bd_load": 1, "bd_dump": 1, "bd_lo": 32, "bd_hi": 32}
MEMORY_STATS = {"stat_cycle": 64, "stat_rd_beats": 32, "stat_wr_beats": 32, "stat_rd_first": 64,
                "stat_rd_last": 64, "stat_wr_first": 64, "stat_wr_last": 64, "stat_violations": 32}
