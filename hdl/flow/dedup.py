"""Merge the modules of an exported Verilog file that are the same hardware under different names.

Amaranth writes one module per instance: an 8-port switch's eight engines are eight modules whose bodies
differ only in the names Amaranth and Yosys number globally (``\\port$42846$0`` in one, ``\\port$47283$0``
in the next). A simulator compiles every one of them. :func:`dedup` keeps the first of each set of such
modules and points every instantiation of the others at it, renaming the port connections to match; the
result is the same netlist, and Verilator's model of an 8-NIC switch bench is several times smaller.

Two modules are the same when their texts are equal after (1) their children have been merged this way and
(2) every escaped identifier that contains ``$`` (the numbered ones) is renamed, in order of first
appearance, to a canonical one. That renaming is a bijection inside a module, so equal canonical texts are
the same hardware; the names a parent sees (ports) are mapped through it. Only the file's top module keeps
names that a testbench can see, and it is never merged (nothing instantiates it).

The input is the Verilog of Yosys' ``write_verilog`` as Amaranth emits it: ``module ...;`` to
``endmodule`` at the start of a line, instantiations as ``  <module> <instance> (`` followed by one
``    .<port>(<expr>)`` per line and ``  );``.
"""

import hashlib
import re

_MODULE = re.compile(r"^module (\\\S+ |[A-Za-z_][A-Za-z0-9_$]*)", re.M)
_ESCAPED_NUMBERED = re.compile(r"\\[^\s]*\$[^\s]* ")
_INSTANCE = re.compile(r"^  (\\\S+ |[A-Za-z_][A-Za-z0-9_$]*) +(\\\S+ |[A-Za-z_][A-Za-z0-9_$]*) *\($")
_CONNECTION = re.compile(r"^    \.(\\\S+ |[A-Za-z_][A-Za-z0-9_$]*)\(")


def _split(text: str):
    """(preamble, [(name, module text)], trailer): every module from ``module`` to ``endmodule\\n``."""
    starts = [m.start() for m in _MODULE.finditer(text)]
    if not starts:
        return text, [], ""
    modules = []
    for i, start in enumerate(starts):
        end = text.index("\nendmodule", start) + len("\nendmodule\n")
        # the attributes just before a module (``(* top = 1 *)``) belong to it
        attr_start = start
        while True:
            prev = text.rfind("\n", 0, attr_start - 1) + 1
            if attr_start > 0 and text[prev:attr_start].startswith("(*"):
                attr_start = prev
            else:
                break
        name = _MODULE.match(text, start).group(1).strip()
        modules.append((name, attr_start, end))
    preamble = text[:modules[0][1]]
    trailer = text[modules[-1][2]:]
    pieces = [(name, text[s:e]) for name, s, e in modules]
    return preamble, pieces, trailer


def _children(pieces) -> dict:
    """module -> the modules it instantiates, once per instantiation (only modules of the file)."""
    names = {name for name, _ in pieces}
    out = {}
    for name, body in pieces:
        out[name] = [m.group(1).strip() for m in map(_INSTANCE.match, body.splitlines())
                     if m and m.group(1).strip() in names]
    return out


def _canonical(body: str):
    """The body with every numbered escaped identifier renamed in order of appearance, and that order."""
    order = {}

    def rename(m):
        ident = m.group(0)
        if ident not in order:
            order[ident] = len(order)
        return f"\\$dedup{order[ident]} "
    return _ESCAPED_NUMBERED.sub(rename, body), list(order)


def dedup(text: str) -> tuple[str, int]:
    """Return ``(text without duplicate modules, number of modules removed)``."""
    preamble, pieces, trailer = _split(text)
    bodies = dict(pieces)
    children = _children(pieces)

    rep = {}            # module -> (the module kept in its place, its identifier -> the kept one's)
    kept = {}           # canonical digest -> (module, its identifiers in canonical order)
    rewritten = {}
    done = set()

    def visit(name):
        if name in done:
            return
        done.add(name)
        for child in children[name]:
            visit(child)
        body = _rewrite_instances(bodies[name], rep)
        rewritten[name] = body
        header_end = body.index("(", body.index("module "))
        canon, idents = _canonical(body[header_end:])
        digest = hashlib.sha256(canon.encode()).hexdigest()
        if digest in kept:
            first, first_idents = kept[digest]
            rep[name] = (first, dict(zip(idents, first_idents)))
        else:
            kept[digest] = (name, idents)

    for name, _ in pieces:
        visit(name)
    out = [preamble] + [rewritten[name] for name, _ in pieces if name not in rep] + [trailer]
    return "".join(out), len(rep)


def repeated_modules(text: str, min_chars: int = 131_072) -> list:
    """The modules of ``text`` whose inlining at every instance would add at least ``min_chars`` of Verilog
    (their own, with everything they instantiate, times the instances beyond the first): after
    :func:`dedup`, the blocks a simulator should compile once rather than inline (Verilator's
    ``no_inline``); a small block used twice stays inlined, where it simulates fastest."""
    _, pieces, _ = _split(text)
    bodies = dict(pieces)
    children = _children(pieces)
    uses = {}
    for kids in children.values():
        for child in kids:
            uses[child] = uses.get(child, 0) + 1
    size = {}

    def total(name):
        if name not in size:
            size[name] = len(bodies[name]) + sum(total(c) for c in children[name])
        return size[name]
    return [name for name in bodies if (uses.get(name, 0) - 1) * total(name) >= min_chars]


def _rewrite_instances(body: str, rep: dict) -> str:
    """Point instantiations of merged modules at the kept module, with its port names."""
    if not rep:
        return body
    lines = body.split("\n")
    ports = None
    for i, line in enumerate(lines):
        m = _INSTANCE.match(line)
        if m:
            child = m.group(1).strip()
            if child in rep:
                kept, ports = rep[child]
                lines[i] = line.replace(m.group(1), _ident(kept), 1)
            else:
                ports = None
            continue
        if ports is not None:
            c = _CONNECTION.match(line)
            if c:
                port = c.group(1)
                new = ports.get(port)
                if new is not None:
                    lines[i] = line.replace(port, new, 1)
            elif line.startswith("  );"):
                ports = None
    return "\n".join(lines)


def _ident(name: str) -> str:
    """A module name as it is written where it is instantiated."""
    return name + " " if name.startswith("\\") else name


__all__ = ["dedup", "repeated_modules"]
