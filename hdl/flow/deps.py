"""What an elaboration reads: the source files a module imports, followed through ``contract``, ``hdl`` and
``host_driver``, function-local imports included. Build caches are keyed on these files' contents, so a
change anywhere the RTL reads (a contract value, a shared layout) rebuilds what depends on it, and a change
elsewhere rebuilds nothing.

The graph is read from the files (``ast``), not from ``sys.modules``: one process may have imported far
more than the top being exported.
"""

import ast
import hashlib
import importlib.util
from functools import cache
from pathlib import Path

#: the packages of this project; imports of anything else (the standard library, Amaranth) are not followed
PACKAGES = ("contract", "hdl", "host_driver")


@cache
def _package_root(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    return Path(next(iter(spec.submodule_search_locations))).parent


def module_file(name: str):
    """The source file of module ``name`` of one of :data:`PACKAGES` (None if there is none)."""
    if name.split(".")[0] not in PACKAGES:
        return None
    base = _package_root(name.split(".")[0]).joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(name: str, path: Path):
    """Every module name an import statement in ``path`` (module ``name``) may refer to."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                base = node.module
            yield base
            yield from (f"{base}.{a.name}" for a in node.names)     # `from pkg import module`


def source_files(*modules: str) -> list:
    """The files of ``modules`` and of everything they import from :data:`PACKAGES`, transitively
    (parent packages' ``__init__.py`` included: importing a module runs them)."""
    seen, todo = {}, list(modules)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = module_file(name)
        if path is None:
            continue
        seen[name] = path
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += [m for m in _imports(name, path) if m.split(".")[0] in PACKAGES]
    return sorted(set(seen.values()))


def digest(files, *extra: str) -> str:
    """A digest of the files' names and contents, and of ``extra`` strings (parameters, tool versions)."""
    h = hashlib.sha256()
    for path in files:
        path = Path(path)
        h.update(f"{path.parent.name}/{path.name}\0".encode())
        h.update(path.read_bytes())
    for e in extra:
        h.update(f"\0{e}".encode())
    return h.hexdigest()[:16]


#: what decides a collective's cycles in the cluster harness: the NIC, the aggregation switch and the bench
#: around them (links, fault injection, host memory)
TIMING_MODULES = ("hdl.nic.nic", "hdl.sim.cluster_bench")


def timing_digest() -> str:
    """The digest of every source file that elaborates the NIC and its cluster bench (:data:`TIMING_MODULES`):
    what the collective model's calibration was measured on (``host_driver/perf/calibration.json``,
    ``meta.rtl_digest``). Amaranth's version is left out: it changes how the Verilog looks, not its cycles."""
    return digest(source_files(*TIMING_MODULES))
