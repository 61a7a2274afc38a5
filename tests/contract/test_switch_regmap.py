"""The aggregation switch's register map: offsets that do not depend on the build, values packed as the RTL
job entry unpacks them (tests/hdl/switch/test_switch_top.py), and a C header that agrees."""

import pytest

from contract.enums import AggDrop, Codec, Dtype
from contract.in_network import MAX_SWITCH_JOBS, MAX_SWITCH_PORTS
from contract.switch_regmap import (
    JOB_CONFIG_FIELDS,
    SWITCH,
    job_config_value,
    job_ports_values,
    switch_regmap,
)
from tests.contract.c_header import compile_and_run


def test_offsets_do_not_depend_on_the_build():
    small = switch_regmap(2, 1)
    for r in small.registers:
        assert SWITCH.by_name[r.name].offset == r.offset, r.name
    assert small.by_name["PORT_IP"].count == 2 and SWITCH.by_name["PORT_IP"].count == MAX_SWITCH_PORTS
    assert SWITCH.by_name["JOB_DROP_DUPLICATE"].count == MAX_SWITCH_JOBS
    assert all(f"DROP_{r.name.upper()}" in SWITCH.by_name for r in AggDrop)
    with pytest.raises(IndexError):
        small.offset("PORT_IP", 2)


def test_job_values():
    v = job_config_value(True, 3, 32, "int32", "bfp8", 256)
    fields = {name: (v >> lsb) & ((1 << width) - 1) for name, lsb, width, _ in JOB_CONFIG_FIELDS}
    assert fields == {"enable": 1, "workers": 3, "window_log2": 5, "dtype": Dtype.int32, "codec": Codec.bfp8,
                      "packet": 256}
    assert job_ports_values(range(10)) == (0x76543210, 0x98)
    with pytest.raises(ValueError, match="packet"):
        job_config_value(True, 3, 32, "fp32", "none", 4096)
    with pytest.raises(ValueError, match="dtype"):
        job_config_value(True, 3, 32, "fp64", "none", 256)


def test_c_header_compiles_and_agrees(tmp_path):
    checks = [f"if (AINIC_SWITCH_{r.name} != {r.offset}u) return 1;" for r in SWITCH.registers]
    checks += [f'if (AINIC_SWITCH_PORT_IP_AT(5) != {SWITCH.offset("PORT_IP", 5)}u) return 2;',
               "if (AINIC_SWITCH_JOB_CONFIG_CODEC_MASK != 0xe000u) return 3;"]
    assert compile_and_run(tmp_path, "ainic_switch_regs.h", SWITCH.render_c_header(), checks) == 0
