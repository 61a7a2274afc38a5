"""The Verilog export cache is keyed on every source file the elaboration imports: a contract value the RTL
reads rebuilds the export, a file it does not read does not."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hdl.flow import deps, tops

ROOT = Path(__file__).resolve().parents[2]


def test_the_key_covers_what_the_nic_reads():
    files = {str(p.relative_to(ROOT)) for p in deps.source_files(tops.get("nic").module)}
    # the stale-Verilog bug: the NIC reads the credit rules, so they must be part of its key
    assert {"contract/credits.py", "contract/regmap.py", "contract/enums.py", "contract/protocol.py",
            "hdl/link/send_credits.py", "hdl/nic/nic.py", "hdl/stream/axis.py"} <= files
    assert not any(f.startswith(("host_driver/", "hdl/sim/", "hdl/flow/")) for f in files), files


def test_function_local_imports_are_followed():
    # host_driver.sim.cluster imports the simulation runner inside the method that runs the RTL
    files = {str(p.relative_to(ROOT)) for p in deps.source_files("host_driver.sim.cluster")}
    assert "host_driver/sim/runner.py" in files and "hdl/flow/tops.py" in files


EXPORT = "from hdl.flow.tops import export; print(export('tx_builder', 64))"


def _export(root: Path) -> tuple:
    env = {**os.environ, "PYTHONPATH": str(root), "AINIC_BUILD_DIR": str(root / "build")}
    res = subprocess.run([sys.executable, "-c", EXPORT], cwd=root, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    path = Path(res.stdout.strip())
    assert path.is_relative_to(root / "build")
    return path.read_text(), path.stat().st_mtime_ns, path.with_name(path.name + ".digest").read_text()


def test_export_is_rebuilt_when_a_contract_value_changes(tmp_path):
    for name in ("contract", "hdl"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    text, mtime, digest = _export(tmp_path)
    assert "8'h11" in text                                  # IPv4 protocol UDP, in the header it builds

    # a file the tx_builder does not import: nothing is rebuilt
    sim = tmp_path / "hdl" / "sim" / "link_model.py"
    sim.write_text(sim.read_text() + "\n# an edit elsewhere\n")
    assert _export(tmp_path) == (text, mtime, digest)

    # a contract value it reads: rebuilt, with the new value
    proto = tmp_path / "contract" / "protocol.py"
    proto.write_text(proto.read_text().replace("IP_PROTOCOL_UDP = 17", "IP_PROTOCOL_UDP = 18"))
    text2, _, digest2 = _export(tmp_path)
    assert digest2 != digest and text2 != text and "8'h12" in text2


def test_the_fast_memory_init_writes_what_amaranth_writes():
    """hdl.flow.export replaces Amaranth 0.5's bit-at-a-time writer of memory contents: the RTLIL must be the
    same text, for memories of odd widths, signed and unsigned rows, non-zero contents, and a real block's
    buffers (the link sender's retransmission memory), and the Verilog of a whole export the same."""
    from amaranth import Elaboratable, Module, Signal, signed, unsigned
    from amaranth.back import rtlil
    from amaranth.lib import memory

    from hdl.flow import export as ex
    from hdl.link.link_sender import LinkSender
    from hdl.memory import NO_INIT
    from hdl.packet.rx_parser import RxParser

    kinds = [(unsigned(1), 3, [1, 0, 1]), (unsigned(37), 5, [2**36 + 5, 0, 7]), (signed(9), 4, [-1, -256, 255, 3]),
             (unsigned(512), 2, [])]

    class Mems(Elaboratable):
        def __init__(self):
            self.ports = [Signal(range(depth), name=f"a{i}") for i, (_, depth, _) in enumerate(kinds)]

        def elaborate(self, platform):
            m = Module()
            for i, ((shape, depth, init), a) in enumerate(zip(kinds, self.ports)):
                m.submodules[f"m{i}"] = mem = memory.Memory(shape=shape, depth=depth, init=init)
                rd = mem.read_port()
                wr = mem.write_port()
                d = Signal(shape, name=f"d{i}")
                m.d.comb += [rd.addr.eq(a), wr.addr.eq(a), wr.data.eq(d), wr.en.eq(a == 0)]
                m.d.sync += d.eq(rd.data + 1)
            return m

    def convert(design):
        return rtlil.convert(design, name="top", emit_src=False,
                             **({"ports": design.ports} if isinstance(design, Mems) else {}))

    fast = rtlil.ModuleEmitter.emit_memory
    assert rtlil.ModuleEmitter._ainic_fast_meminit

    def amaranths(self, cell_idx, cell):     # Amaranth's own writer, for every memory that has contents
        if not cell.attributes.get(NO_INIT):
            rtlil.ModuleEmitter._ainic_slow_meminit(self, cell_idx, cell)
    designs = [Mems, lambda: LinkSender(64), lambda: RxParser(64)]
    try:
        texts = []
        assert ex.rtlil is rtlil         # the export converts through the patched back end
        for emitter in (fast, amaranths):
            rtlil.ModuleEmitter.emit_memory = emitter
            texts.append([convert(make()) for make in designs])
    finally:
        rtlil.ModuleEmitter.emit_memory = fast
    assert texts[0] == texts[1]
    # Mems' four and the link sender's records have contents; its payloads and the parser's buffer none
    assert [t.count("$meminit_v2") for t in texts[0]] == [4, 1, 0]


def test_a_scratch_memory_has_no_initial_contents():
    """hdl.memory.scratch_memory: the Verilog declares the memory with no initial block (a plain memory keeps
    its zeros), and it is the same memory otherwise (the same rows, ports and attribute)."""
    from amaranth import Elaboratable, Module, Signal
    from amaranth.back import verilog
    from amaranth.lib.memory import Memory

    from hdl.flow import export as ex
    from hdl.memory import NO_INIT, scratch_memory

    class Two(Elaboratable):
        def __init__(self, scratch):
            self.scratch, self.a, self.d = scratch, Signal(range(300)), Signal(40)

        def elaborate(self, platform):
            m = Module()
            make = scratch_memory if self.scratch else (lambda **kw: Memory(init=[], **kw))
            m.submodules.mem = mem = make(shape=40, depth=300)
            rd, wr = mem.read_port(), mem.write_port()
            m.d.comb += [rd.addr.eq(self.a), wr.addr.eq(self.a), wr.data.eq(self.a), wr.en.eq(1)]
            m.d.sync += self.d.eq(rd.data)
            return m

    assert ex.verilog is verilog
    plain, scratch = (verilog.convert(t, name="top", emit_src=False, ports=[t.a, t.d]) for t in (Two(False), Two(True)))
    assert "reg [39:0] mem [299:0];" in plain and "reg [39:0] mem [299:0];" in scratch
    assert plain.count("mem[") >= 300 and "initial" in plain        # 300 rows of zeros, one a line
    assert "mem[2" not in scratch and f"(* {NO_INIT} = 32'd1 *)" in scratch


def test_a_process_older_than_a_source_refuses_to_export(tmp_path, monkeypatch):
    """A long-running process (make report) holds the code it imported: with a source newer than the process,
    an export that would elaborate refuses (it would stamp the new digest on the old hardware); a current
    cached file is still served."""
    from hdl.flow import export as ex
    monkeypatch.setenv("AINIC_BUILD_DIR", str(tmp_path))  # an empty cache
    monkeypatch.setattr(ex, "_STARTED", 0.0)              # every source is newer than this "process"
    with pytest.raises(RuntimeError, match="changed after this process started"):
        tops.export("tx_builder", 64)
    monkeypatch.setattr(ex, "_STARTED", time.time())
    path = tops.export("tx_builder", 64)                  # a process started after the sources: exports
    monkeypatch.setattr(ex, "_STARTED", 0.0)
    assert tops.export("tx_builder", 64) == path          # current: served, nothing elaborated


def test_the_fast_cycle_check_finds_what_amaranths_finds():
    """hdl.flow.export replaces Amaranth 0.5's check for combinational cycles with a walk that finishes an
    arithmetic cell once: it must raise where Amaranth's raises, with the same message (a cycle through an
    adder, through a comparison and a mux, through a memory's asynchronous read), and pass what Amaranth's
    passes (bits of one signal feeding its other bits through an adder is no cycle; a real block)."""
    from amaranth import Elaboratable, Module, Signal
    from amaranth.back import rtlil
    from amaranth.hdl import CombinationalCycle, _nir
    from amaranth.lib import memory

    from hdl.link.link_sender import LinkSender

    class Loop(Elaboratable):
        def __init__(self, kind):
            self.kind, self.x, self.y = kind, Signal(8), Signal(8)

        def elaborate(self, platform):
            m = Module()
            x, y = self.x, self.y
            if self.kind == "adder":
                m.d.comb += [y.eq(x + 1), x.eq(y)]
            elif self.kind == "compare":
                m.d.comb += x.eq(y)
                with m.If(x[:4] > 3):
                    m.d.comb += y[2].eq(1)
            elif self.kind == "memory":
                m.submodules.mem = mem = memory.Memory(shape=8, depth=16, init=[])
                rd = mem.read_port(domain="comb")
                m.d.comb += [rd.addr.eq(x), x.eq(rd.data)]
            elif self.kind == "halves":                      # x[4:] from x[:4]: no cycle, bit by bit
                m.d.comb += [y.eq(x[:4] + 3), x[4:].eq(y)]
            m.d.sync += self.y.eq(self.y) if self.kind == "memory" else []
            return m

    fast = _nir.Netlist.check_comb_cycles
    assert _nir.Netlist._ainic_fast_comb_check

    def outcome(make):
        try:
            design = make()
            rtlil.convert(design, name="top", emit_src=False,
                          **({"ports": [design.x, design.y]} if isinstance(design, Loop) else {}))
            return None
        except CombinationalCycle as e:
            return str(e)

    designs = [*(lambda k=k: Loop(k) for k in ("adder", "compare", "memory", "halves")), lambda: LinkSender(64)]
    got = []
    try:
        for check in (fast, _nir.Netlist._ainic_slow_comb_check):
            _nir.Netlist.check_comb_cycles = check
            got.append([outcome(make) for make in designs])
    finally:
        _nir.Netlist.check_comb_cycles = fast
    assert got[0] == got[1]
    assert [g is not None for g in got[0]] == [True, True, True, False, False], got[0]
    assert all("Combinational cycle detected, path:" in g for g in got[0][:3])
