"""Verilog export, cached on what the elaboration reads (:mod:`hdl.flow.deps`), and where build outputs go.

Build outputs (exported Verilog, simulator builds, synthesis reports, job files) go to :func:`build_dir`:
``$AINIC_BUILD_DIR`` if set; else ``build/`` of the checkout when running from one; else
``$XDG_CACHE_HOME/ainic`` (``~/.cache/ainic``) for an installed package.
"""

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path

from amaranth.back import rtlil, verilog

from hdl.flow import deps
from hdl.flow.dedup import dedup
from hdl.memory import NO_INIT

_CHECKOUT = Path(__file__).resolve().parents[2]
#: when this process loaded the export: a source changed after it may be older in memory than on disk
_STARTED = time.time()


def _fast_meminit():
    """Amaranth 0.5's RTLIL back end writes a memory's initial contents one bit at a time, a netlist value of
    every bit built and read back (``ModuleEmitter.emit_memory``): 60 % of exporting the 8-port switch's
    cluster bench (26 memories, 12.8 Mbit of zeros), minutes of the regression. This writes the same
    ``$meminit_v2`` cell from the rows directly; tests/flow/test_export.py checks that the RTLIL is the same
    text as Amaranth's own. A memory with the :data:`hdl.memory.NO_INIT` attribute gets no ``$meminit_v2``:
    nothing reads its power-up contents. Applied to the 0.5 series only (a later Amaranth keeps its own)."""
    import amaranth
    from amaranth.back import rtlil as back
    from amaranth.hdl import _nir
    if not amaranth.__version__.startswith("0.5.") or getattr(back.ModuleEmitter, "_ainic_fast_meminit", False):
        return
    slow = back.ModuleEmitter.emit_memory

    def emit_memory(self, cell_idx, cell):
        if cell.attributes.get(NO_INIT):
            return
        if not cell.width or not cell.init:
            return slow(self, cell_idx, cell)
        mask = (1 << cell.width) - 1
        data = f"{cell.width * len(cell.init)}'" + "".join(format(row & mask, f"0{cell.width}b")
                                                           for row in reversed(cell.init))
        self.builder.cell("$meminit_v2", ports={
            "ADDR": self.sigspec(),
            "DATA": data,
            "EN": self.sigspec(_nir.Value.ones(cell.width)),
        }, parameters={
            "MEMID": self.memories[cell_idx].memid,
            "ABITS": 0,
            "WIDTH": cell.width,
            "WORDS": cell.depth,
            "PRIORITY": 0,
        }, src_loc=cell.src_loc)

    back.ModuleEmitter.emit_memory = emit_memory
    back.ModuleEmitter._ainic_fast_meminit = True
    back.ModuleEmitter._ainic_slow_meminit = slow


_fast_meminit()


def _fast_comb_check():
    """Amaranth 0.5 checks a netlist for combinational cycles (``Netlist.check_comb_cycles``) by a recursive
    walk of every bit, and an arithmetic cell's every output bit leads to every bit of its inputs: a 337-bit
    adder's 337 bits walk its 674 input bits 337 times. That was 36 % of exporting the switch at W = 512 (65
    of 179 s). This is the same walk, without recursion, and it finishes such a cell (every output bit with
    the same inputs: an arithmetic or comparison operator, a part select, a case match, a memory's
    asynchronous read) once one of its bits is finished. It raises Amaranth's ``CombinationalCycle`` with
    Amaranth's message (tests/flow/test_export.py has a cycle through an adder). Applied to the 0.5 series only."""
    import amaranth
    from amaranth.hdl import _nir
    if not amaranth.__version__.startswith("0.5.") or getattr(_nir.Netlist, "_ainic_fast_comb_check", False):
        return

    def same_inputs(cell) -> bool:
        """Does every output bit of ``cell`` depend on the same nets (its ``comb_edges_to`` is the same for
        every bit)?"""
        if isinstance(cell, _nir.Operator):
            n = len(cell.inputs)
            return (n == 1 and cell.operator != "~") or (n == 2 and cell.operator not in ("&", "|", "^"))
        return isinstance(cell, (_nir.Part, _nir.Matches, _nir.AsyncReadPort))

    def check_comb_cycles(self):
        cells, connections = self.cells, self.connections
        same = {i for i, c in enumerate(cells) if same_inputs(c)}
        checked, done = set(), set()          # nets with no cycle behind them; cells of `same` all of whose are

        def edges(net):
            if net < 0:                        # a late net: the signal's driver
                return iter(((connections[net], None),))
            if net < 2:                        # a constant
                return iter(())
            return iter(cells[net >> 16].comb_edges_to(net & 0xffff))

        def cycle(stack, start):
            msg = ["Combinational cycle detected, path:\n"]
            for net, _, src_loc in stack[next(i for i, f in enumerate(stack) if f[0] == start):]:
                if net < 0:
                    sig, bit = self.late_to_signal[net]
                    obj, src_loc = f"signal {sig.name}", sig.src_loc
                else:
                    cell, bit = cells[net >> 16], net & 0xffff
                    obj = (f"operator {cell.operator}" if isinstance(cell, _nir.Operator)
                           else f"cell {cell.__class__.__qualname__}")
                src_loc = "<unknown>:0" if src_loc is None else f"{src_loc[0]}:{src_loc[1]}"
                msg.append(f"  {src_loc}: {obj} bit {bit}\n")
            return _nir.CombinationalCycle("".join(msg))

        def visit(root):
            if root in checked or (root >= 2 and root >> 16 in done):
                return
            busy, stack = {root}, [[root, edges(root), None]]
            while stack:
                frame = stack[-1]
                for src, src_loc in frame[1]:
                    if src in checked or (src >= 2 and src >> 16 in done):
                        continue
                    frame[2] = src_loc
                    if src in busy:
                        raise cycle(stack, src)
                    busy.add(src)
                    stack.append([src, edges(src), None])
                    break
                else:
                    stack.pop()
                    net = frame[0]
                    busy.discard(net)
                    checked.add(net)
                    if net >= 2 and net >> 16 in same:
                        done.add(net >> 16)

        for cell_idx, cell in enumerate(cells):
            for net in cell.output_nets(cell_idx):
                visit(net)
        for value in self.signals.values():
            for net in value:
                visit(net)

    _nir.Netlist._ainic_slow_comb_check = _nir.Netlist.check_comb_cycles
    _nir.Netlist.check_comb_cycles = check_comb_cycles
    _nir.Netlist._ainic_fast_comb_check = True


_fast_comb_check()


def build_dir() -> Path:
    """Where build outputs go (see the module docstring)."""
    if os.environ.get("AINIC_BUILD_DIR"):
        return Path(os.environ["AINIC_BUILD_DIR"]).expanduser().resolve()
    if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "hdl").is_dir():
        return _CHECKOUT / "build"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "ainic"


def verilog_dir() -> Path:
    return build_dir() / "verilog"


@contextmanager
def file_lock(name: str):
    """An exclusive lock shared by every process on this machine (pytest-xdist workers, make -j)."""
    lock_dir = build_dir() / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def inputs_digest(module: str, params: str = "") -> str:
    """The cache key of an elaboration rooted at Python module ``module``: every source file it imports
    (transitively, within this project), the Amaranth version and ``params``."""
    from importlib.metadata import version
    # the export's own code (this file, the module merge) is part of the key: a change to it re-exports
    return deps.digest(deps.source_files(module, __name__), version("amaranth"), params)


#: output format -> (file suffix, converter)
FORMATS = {"verilog": (".v", verilog.convert), "rtlil": (".il", rtlil.convert)}


def export(name: str, factory, width: int, module: str, out_dir: Path = None, fmt: str = "verilog") -> Path:
    """Write ``<out_dir>/<name>.v`` (or ``.il``, Yosys' RTLIL, with ``fmt="rtlil"``) from ``factory(width)``
    unless it is current; return its path. The Verilog has each set of modules that are the same hardware
    (the switch's per-port blocks, a bench's links) written once (:func:`hdl.flow.dedup.dedup`).

    ``module`` is the Python module the factory lives in: the file is current when the digest of the files
    that module imports (:func:`inputs_digest`) is the one stored beside it (``<name>.v.digest``). An
    ``out_dir`` other than :func:`verilog_dir` gets a copy of the cached file there (exported first if need be):
    ``ainic verilog --out DIR`` costs a copy when the build cache is current.
    """
    suffix, convert = FORMATS[fmt]
    if out_dir is not None and Path(out_dir).resolve() != verilog_dir().resolve():
        cached = export(name, factory, width, module, None, fmt)
        path = Path(out_dir) / cached.name
        path.parent.mkdir(parents=True, exist_ok=True)
        for src, dst in ((cached, path), (cached.with_name(cached.name + ".digest"), path.with_name(path.name + ".digest"))):
            if not dst.exists() or dst.read_bytes() != src.read_bytes():
                tmp = dst.with_name(f".{dst.name}.{os.getpid()}")
                tmp.write_bytes(src.read_bytes())
                os.replace(tmp, dst)
        return path
    path = Path(out_dir or verilog_dir()) / f"{name}{suffix}"
    stamp = path.with_name(path.name + ".digest")
    digest = inputs_digest(module, f"{name}:{width}")
    with file_lock(name):
        if path.exists() and stamp.exists() and stamp.read_text() == digest:
            return path
        # a long-running process (make report, a pytest worker) elaborates the code it imported: a source
        # edited since would be stamped with its new digest over the old hardware
        changed = [f for f in deps.source_files(module, __name__) if Path(f).stat().st_mtime > _STARTED]
        if changed:
            raise RuntimeError(f"cannot export {name}: {', '.join(str(f) for f in changed[:3])} changed after this "
                               "process started, so the code it holds may be older than the file; run it again")
        text = convert(factory(width), name=name, emit_src=False)
        if fmt == "verilog":
            text, _ = dedup(text)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:     # keep mtimes for the simulators' caches
            path.write_text(text)
        stamp.write_text(digest)
    return path
