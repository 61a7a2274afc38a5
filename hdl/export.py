"""Verilog export of the tops, cached on the content of ``hdl/`` so tests never export twice."""

import fcntl
import hashlib
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
VERILOG_DIR = BUILD / "verilog"


@contextmanager
def file_lock(name: str):
    """An exclusive lock shared by every process on this machine (pytest-xdist workers, make -j)."""
    lock_dir = BUILD / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def hdl_digest() -> str:
    h = hashlib.sha256()
    # the RTL reads these host_driver modules (definitions shared with the driver); nothing else there
    shared = [ROOT / "host_driver" / f"{name}.py" for name in ("numerics", "protocol", "regmap", "descriptors")]
    for path in sorted((ROOT / "hdl").glob("*.py")) + shared:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def export(top: str, width: int, out_dir: Path = VERILOG_DIR) -> Path:
    """Write ``<out_dir>/<module>.v`` for one top at one width (only when ``hdl/`` changed); return its path."""
    from amaranth.back import verilog

    from .tops import SIM_TOPS, TOPS, module_name

    factory = TOPS.get(top) or SIM_TOPS.get(top)
    if factory is None:
        raise ValueError(f"unknown top {top!r}; known: {', '.join([*TOPS, *SIM_TOPS])}")
    name = module_name(top, width)
    path = Path(out_dir) / f"{name}.v"
    stamp = path.with_suffix(".digest")
    digest = hdl_digest()
    with file_lock(name):
        if path.exists() and stamp.exists() and stamp.read_text() == digest:
            return path
        text = verilog.convert(factory(width), name=name, emit_src=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:     # keep mtimes for the simulators' caches
            path.write_text(text)
        stamp.write_text(digest)
    return path
