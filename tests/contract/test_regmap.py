"""The register map: consistent, documented from the single definition, and the C header agrees with it."""

import subprocess
import sys
from pathlib import Path

import pytest

from contract import regmap as rm
from contract.enums import DropReason, Status
from tests.contract.c_header import compile_and_run


def test_docs_are_generated_from_the_map():
    root = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, str(root / "scripts" / "gen_regs.py"), "--check"], capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stderr


def test_layout_rules():
    seen = set()
    for r in rm.REGISTERS:
        for i in range(r.count):
            addr = r.offset + 4 * i
            assert addr % 4 == 0 and addr not in seen, r.name
            seen.add(addr)
    assert rm.offset("PEER_IP", 63) == rm.BY_NAME["PEER_IP"].offset + 252
    assert all(f"RX_DROP_{reason.upper()}" in rm.BY_NAME for reason in (r.name for r in DropReason))
    with pytest.raises(IndexError, match="out of range"):
        rm.offset("PEER_IP", 64)
    with pytest.raises(KeyError, match="no register"):
        rm.offset("NOPE")
    with pytest.raises(ValueError, match="aligned"):
        rm.Register("X", 2, "rw", 0, "misaligned")
    with pytest.raises(ValueError, match="access"):
        rm.Register("X", 0, "rx", 0, "bad access")


def test_c_header_compiles_and_agrees(tmp_path):
    from contract import descriptors as ds
    checks = [f'if (AINIC_{r.name} != {r.offset}u) return 1;' for r in rm.REGISTERS]
    checks += [f'if (AINIC_PEER_IP_AT(5) != {rm.offset("PEER_IP", 5)}u) return 2;',
               'if (AINIC_IRQ_STATUS_ERROR_MASK != 0x2u) return 3;',
               'if (AINIC_DESC_SRC_BYTE != 16u || AINIC_CPL_HOST_BYTES_BYTE != 56u) return 4;',
               f'if (AINIC_STATUS_BAD_RANGE != {Status.bad_range.value}u || AINIC_OP_COPY != 1u) return 5;']
    assert compile_and_run(tmp_path, "ainic_regs.h", rm.render_c_header(ds.render_c_defines()), checks) == 0