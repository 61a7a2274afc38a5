"""Logic levels of a mapped Xilinx netlist: the most combinational cells on any path from a flip-flop, a memory
or a port to another (LUTs, wide multiplexers, LUT-RAM reads, carry chains), a carry chain counting once: entering
it is a level, its carry running from one block to the next (CI, a few tens of picoseconds) is not. Vivado
counts each carry block as a level; a path of theirs reads longer there, not slower."""

#: cells a path passes through, each a logic level (an INV is absorbed into the LUT it drives: no level)
COMBINATIONAL = {f"LUT{k}": 1 for k in range(1, 7)} | {"CARRY4": 1, "CARRY8": 1, "MUXF7": 1, "MUXF8": 1, "MUXF9": 1,
                                                        "INV": 0}
#: LUT-RAMs read combinationally: from these inputs (their read addresses) to their data out
LUTRAM_READ = ("ADDR", "A", "DPRA", "RADR")
CARRY = ("CARRY4", "CARRY8")


def _comb_inputs(cell: dict) -> list:
    """The input ports of ``cell`` that reach its outputs in the same cycle (none for a register)."""
    kind, dirs = cell["type"], cell.get("port_directions", {})
    ins = [p for p, d in dirs.items() if d == "input"]
    if kind in COMBINATIONAL:
        return ins
    if kind.startswith("RAM") and not kind.startswith("RAMB"):
        return [p for p in ins if p.startswith(LUTRAM_READ) and not p.startswith("ADDRH")]
    return []


def logic_levels(module: dict) -> dict:
    """The deepest register-to-register path of one flattened module of a Yosys JSON netlist (``write_json``):
    ``levels`` (cells on it, :data:`COMBINATIONAL` weights; a LUT-RAM read is one) and the cell it ends at."""
    found = critical_path(module)
    return {"levels": found["levels"], "end": found["end"]}


def critical_path(module: dict) -> dict:
    """:func:`logic_levels`, with the path itself: ``path``, its cells from the first to the last as
    (cell type, the name of what it drives), and ``start``, the name of what drives its first cell (a
    register, a memory or a port): where to cut it."""
    cells = module["cells"]
    driver = {}                                       # net bit -> the cell that drives it
    for name, cell in cells.items():
        for port, bits in cell["connections"].items():
            if cell.get("port_directions", {}).get(port) == "output":
                for b in bits:
                    driver[b] = name
    weight = {name: (COMBINATIONAL.get(c["type"], 1)) for name, c in cells.items() if _comb_inputs(c)}
    fan_in = {}                                      # cell: {driver: the level the edge from it adds}
    for name in weight:
        cell = cells[name]
        edges = {}
        for p in _comb_inputs(cell):
            for b in cell["connections"].get(p, []):
                d = driver.get(b)
                if d in weight:
                    chained = p == "CI" and cell["type"] in CARRY and cells[d]["type"] in CARRY
                    edges[d] = max(edges.get(d, 0), 0 if chained else weight[name])
        fan_in[name] = edges
    depth, came, open_ = {}, {}, set()
    for root in weight:                              # depth-first, without recursion (long carry chains)
        stack = [root]
        while stack:
            name = stack[-1]
            if name in depth:
                stack.pop()
                continue
            todo = [d for d in fan_in[name] if d not in depth]
            if todo and name not in open_:
                open_.add(name)
                for d in todo:
                    if d in open_:
                        raise ValueError(f"combinational loop through {name} and {d}")
                stack.extend(todo)
                continue
            best = max(fan_in[name].items(), key=lambda e: depth[e[0]] + e[1], default=None)
            if best is not None and depth[best[0]] + best[1] > weight[name]:
                depth[name], came[name] = depth[best[0]] + best[1], best[0]
            else:
                depth[name] = weight[name]
            open_.discard(name)
            stack.pop()
    if not depth:
        return {"levels": 0, "end": None, "start": None, "path": []}
    end = max(depth, key=depth.get)
    path = [end]
    while path[-1] in came:
        path.append(came[path[-1]])
    path.reverse()
    first = cells[path[0]]
    feeds = [b for p in _comb_inputs(first) for b in first["connections"].get(p, []) if isinstance(b, int)]
    sources = [driver[b] for b in feeds if b in driver and driver[b] not in weight]
    start = _net_name(module, cells[sources[0]]) if sources else _bits_name(module, feeds)
    return {"levels": depth[end], "end": _net_name(module, cells[end]), "start": start,
            "path": [(cells[c]["type"], _net_name(module, cells[c])) for c in path]}


def _net_name(module: dict, cell: dict) -> str:
    """A readable name of what ``cell`` drives: the shortest public net name holding one of its output bits."""
    return _bits_name(module, [b for p, bits in cell["connections"].items()
                               if cell["port_directions"].get(p) == "output" for b in bits])


def _bits_name(module: dict, bits) -> str:
    """The shortest public net name holding one of ``bits`` (None if none has one)."""
    bits = set(bits)
    names = [n for n, net in module.get("netnames", {}).items() if bits & set(net["bits"]) and not n.startswith("$")]
    return min(names, key=len) if names else None
