"""The fabric service: one process that holds a process group's simulated NICs and runs its collectives.

Group rank 0 starts it (``python -m host_driver.distributed.fabric``, :func:`spawn`); it listens on a TCP port, which
rank 0 publishes in the group's c10d store; every rank connects, says ``hello`` and then sends each
collective's tensor (:mod:`host_driver.distributed.wire`). When all ranks' requests for collective ``seq`` are in,
the service checks they agree (the same collective, reduction, dtype and size, else every rank gets an error
naming the ranks that differ), runs it on the :class:`~host_driver.sim.cluster.Cluster` of the group's
options (the golden model, or the RTL on Verilator or Icarus) and sends each rank its own rank's result.

What goes through the NICs: ``all_reduce`` and ``reduce_scatter`` with SUM or AVG of fp32 (fp16 and bf16 are
converted to fp32 by the rank) with the group's codec and algorithm, and of int32 (uncompressed; the NIC's
sum saturates once where torch's wraps); ``all_gather``, ``broadcast`` and ``barrier`` of any dtype, as
32-bit words through the ring's all-gather, uncompressed (bit for bit). Everything else — MIN, MAX, PRODUCT
and the bitwise reductions, and SUM of other dtypes — is reduced here on the host (``path`` "host" in the
result), exactly, in rank order.

Failure: a collective whose ranks have not all arrived ``timeout`` seconds after the first ends on every
waiting rank with an error naming the missing ranks and the collective; a rank whose connection closes (it
exited or was killed) ends every pending and later collective at once, naming it; after either the group is
broken and says so to every later request. The service exits when every rank has said ``bye`` or gone, or when
its standard input closes (the rank that started it has exited or died); it is a session leader and takes
whatever it started (simulator processes) with it.

This module imports numpy and the harness only: the service runs without torch.
"""

import argparse
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, fields

import numpy as np

from contract import collective
from contract.limits import MAX_CLUSTER_NODES
from host_driver.distributed import wire

SIMS = ("model", "verilator", "icarus")
#: numpy types of the dtypes a rank may send (torch's names without "torch.")
NUMPY_DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "int64": np.int64,
                "int32": np.int32, "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}
HOST_REDUCE = {"sum": np.sum, "avg": np.sum, "product": np.prod, "min": np.min, "max": np.max,
               "band": np.bitwise_and.reduce, "bor": np.bitwise_or.reduce, "bxor": np.bitwise_xor.reduce}
#: the environment variables a group without pg_options takes its options from
ENV = {"codec": "AINIC_CODEC", "algorithm": "AINIC_ALGORITHM", "sim": "AINIC_SIM", "width": "AINIC_WIDTH",
       "packet": "AINIC_PACKET", "link_gbps": "AINIC_LINK_GBPS", "clock_mhz": "AINIC_CLOCK_MHZ",
       "bench_nodes": "AINIC_BENCH_NODES"}


@dataclass(frozen=True)
class Options:
    """A process group's NICs: the wire ``codec`` of its fp32 reductions, the ``algorithm`` of its
    all-reduce (ring, or switch: in-network aggregation), the simulator (``sim``: the golden ``model``,
    ``verilator`` or ``icarus``), the datapath ``width``, elements per ``packet``, and the link rate and
    clock (which the RTL's timing and the stats use). ``bench_nodes``: on the RTL, run on a bench of that
    many NICs (0: the group's size), so that a small group can share a larger bench's build."""
    codec: str = "none"
    algorithm: str = "ring"
    sim: str = "model"
    width: int = 512
    packet: int = 256
    link_gbps: float = 80.0
    clock_mhz: float = 250.0
    bench_nodes: int = 0

    def check(self, nodes: int) -> "Options":
        """Raise ``ValueError`` naming the first option that a group of ``nodes`` ranks cannot run."""
        if self.sim not in SIMS:
            raise ValueError(f"sim must be one of {', '.join(SIMS)}, got {self.sim!r}")
        if self.sim != "model" and nodes > MAX_CLUSTER_NODES:
            raise ValueError(f"the simulated RTL cluster holds at most {MAX_CLUSTER_NODES} NICs, got a group "
                             f"of {nodes} ranks (sim 'model' has no such limit)")
        if self.sim != "model" and self.bench_nodes and not nodes <= self.bench_nodes <= MAX_CLUSTER_NODES:
            raise ValueError(f"bench_nodes must be 0 (the group's size) or in {nodes} .. {MAX_CLUSTER_NODES}, got "
                             f"{self.bench_nodes!r}")
        collective.check(nodes, codec=self.codec, algorithm=self.algorithm, packet=self.packet, width=self.width,
                         link_gbps=self.link_gbps, clock_mhz=self.clock_mhz)
        return self

    @classmethod
    def from_env(cls, env=None) -> "Options":
        """The options the ``AINIC_*`` environment variables give (:data:`ENV`), defaults for the rest."""
        env = os.environ if env is None else env
        kw = {}
        for f in fields(cls):
            text = env.get(ENV[f.name])
            if text is None or text == "":
                continue
            try:
                kw[f.name] = type(f.default)(text)
            except ValueError:
                raise ValueError(f"{ENV[f.name]}={text!r}: expected {type(f.default).__name__}") from None
        return cls(**kw)


class Fabric:
    """The collectives of one group of ``size`` ranks on ``options``' clusters (no sockets: :func:`serve`
    feeds it). :meth:`run` takes every rank's (header, payload) for one collective and returns each rank's
    reply (header, payload)."""

    def __init__(self, size: int, options: Options):
        self.size, self.options = size, options.check(size)
        self._clusters = {}
        self.counts = {"nic": 0, "host": 0}

    def cluster(self, codec: str, dtype: str, algorithm: str):
        from host_driver.sim.cluster import Cluster
        key = (codec, dtype, algorithm)
        if key not in self._clusters:
            o = self.options
            # on the RTL, the switch group's ring collectives run on the same switch fabric (one build)
            fabric = "switch" if o.sim != "model" and o.algorithm == "switch" else None
            self._clusters[key] = Cluster(self.size, backend=o.sim, width=o.width, codec=codec, dtype=dtype,
                                          packet=o.packet, link_gbps=o.link_gbps, clock_mhz=o.clock_mhz,
                                          algorithm=algorithm, fabric=fabric,
                                          bench_nodes=(o.bench_nodes or None) if o.sim != "model" else None)
        return self._clusters[key]

    @staticmethod
    def disagreement(headers: list) -> str:
        """'' when every rank asked for the same collective, else what differs, rank by rank."""
        keys = ("what", "reduce", "dtype", "numel", "root")
        seen = {}
        for r, h in enumerate(headers):
            seen.setdefault(tuple(h.get(k) for k in keys), []).append(r)
        if len(seen) == 1:
            return ""
        parts = []
        for sig, ranks in seen.items():
            what, reduce, dtype, numel, root = sig
            desc = f"{what} {dtype}[{numel:,}]" + (f" {reduce}" if reduce else "") + \
                (f" root {root}" if what == "broadcast" else "")
            parts.append(f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}: {desc}")
        return "; ".join(parts)

    def run(self, requests: list) -> list:
        """Every rank's reply to one collective (``requests[r]`` = rank r's (header, payload))."""
        headers = [h for h, _ in requests]
        h0 = headers[0]
        name = f"{h0['what']} #{h0['seq']}"
        differ = self.disagreement(headers)
        if differ:
            return [({"type": "error", "seq": h0["seq"], "kind": "mismatch",
                      "message": f"{name}: the ranks disagree on the collective ({differ})"}, b"")] * self.size
        what, dtype, numel = h0["what"], h0["dtype"], h0["numel"]
        if dtype not in NUMPY_DTYPES:
            raise ValueError(f"{name}: dtype {dtype!r} is not one the fabric carries ({', '.join(NUMPY_DTYPES)})")
        parts = [np.frombuffer(p, NUMPY_DTYPES[dtype]) for _, p in requests]
        want = numel * (self.size if what == "reduce_scatter" else 1)
        for r, a in enumerate(parts):
            if a.size != want:
                raise ValueError(f"{name}: rank {r} sent {a.size:,} {dtype} elements, its header says {want:,}")
        stats = {}
        if what == "barrier":           # a word from every rank through the ring: all have arrived
            self._words([bytes(4)] * self.size, stats)
            out, path = [b""] * self.size, "nic"
        elif what in ("all_gather", "broadcast"):
            out, path = self._words([a.tobytes() for a in parts], stats), "nic"
            if what == "broadcast":
                out = [o[h0["root"]] for o in out]
            else:
                out = [b"".join(o) for o in out]
        elif h0["reduce"] in ("sum", "avg") and dtype in ("float32", "int32"):
            out, path = self._reduce(what, parts, dtype, stats), "nic"
        else:
            out, path = self._host_reduce(what, parts, h0["reduce"]), "host"
        self.counts[path] += 1
        return [({"type": "result", "seq": h0["seq"], "ok": True, "path": path, "stats": stats}, o) for o in out]

    def _reduce(self, what, parts, dtype, stats):
        """SUM of fp32 (the group's codec and algorithm) or int32 through the NICs."""
        o = self.options
        codec = o.codec if dtype == "float32" else "none"
        nic_dtype = "fp32" if dtype == "float32" else "int32"
        n, m = self.size, parts[0].size // (self.size if what == "reduce_scatter" else 1)
        if m == 0:
            return [b""] * n
        if what == "all_reduce":
            results, st = self.cluster(codec, nic_dtype, o.algorithm).allreduce(list(parts))
            self._stats(stats, st)
            return [results[r].tobytes() for r in range(n)]
        # reduce_scatter: rank r's input i sits in chunk (i + 1) mod N, padded to whole packets, so that the
        # NIC's rank r, which keeps chunk (r + 1) mod N, keeps the sum of every rank's input r
        k = -(-m // o.packet) * o.packet
        arrays = np.zeros((n, n * k), parts[0].dtype)
        for r, a in enumerate(parts):
            for i in range(n):
                c = (i + 1) % n
                arrays[r, c * k:c * k + m] = a[i * m:(i + 1) * m]
        results, st = self.cluster(codec, nic_dtype, "ring").reduce_scatter(list(arrays))
        self._stats(stats, st)
        return [results[r, ((r + 1) % n) * k:((r + 1) % n) * k + m].tobytes() for r in range(n)]

    def _words(self, blobs, stats):
        """Every rank's bytes to every rank through the ring's all-gather, as uncompressed 32-bit words:
        ``out[q][r]`` is rank r's bytes as NIC q delivered them."""
        n, nbytes = self.size, len(blobs[0])
        if nbytes == 0:
            return [[b""] * n for _ in range(n)]
        words = -(-nbytes // 4)
        k = -(-words // self.options.packet) * self.options.packet
        arrays = np.zeros((n, n * k), np.int32)
        for r, b in enumerate(blobs):
            c = (r + 1) % n
            arrays[r, c * k:c * k + words] = np.frombuffer(b + bytes(4 * words - nbytes), np.int32)
        results, st = self.cluster("none", "int32", "ring").allgather(list(arrays))
        self._stats(stats, st)
        return [[results[q, ((r + 1) % n) * k:][:words].tobytes()[:nbytes] for r in range(n)] for q in range(n)]

    def _host_reduce(self, what, parts, reduce):
        n = self.size
        stack = np.stack(parts)
        if stack.dtype == np.bool_ and reduce in ("sum", "avg", "product"):     # torch: SUM is OR, PRODUCT AND
            reduce = "bor" if reduce != "product" else "band"
        total = HOST_REDUCE[reduce](stack, axis=0).astype(stack.dtype)
        if what == "all_reduce":
            return [total.tobytes()] * n
        m = total.size // n
        return [total[r * m:(r + 1) * m].tobytes() for r in range(n)]

    @staticmethod
    def _stats(stats, st):
        stats.update(cycles=st.cycles, frame_bytes=int(sum(st.frame_bytes_per_link)), elements=st.elements,
                     op=st.op, algorithm=st.algorithm, codec=st.codec, backend=st.backend)


class _Conn:
    """One rank's connection: a reader thread that queues what arrives, a lock for what is sent."""

    def __init__(self, sock, events):
        self.sock, self.lock, self.rank = sock, threading.Lock(), None
        threading.Thread(target=self._read, args=(events,), daemon=True).start()

    def _read(self, events):
        try:
            while True:
                events.put(("message", self, wire.receive(self.sock)))
        except (wire.ConnectionClosed, OSError, ValueError) as exc:
            events.put(("closed", self, str(exc)))

    def send(self, header, payload=b""):
        with self.lock:
            try:
                wire.send(self.sock, header, payload)
            except OSError:
                pass            # it is gone: its reader reports that


def serve(listener: socket.socket, size: int, options: Options, timeout_s: float, group: str = "") -> dict:
    """Run the service on ``listener`` until every rank has left or standard input closes; returns what
    happened (counts of collectives by path, why it stopped)."""
    fabric = Fabric(size, options)
    events = queue.Queue()
    conns, pending, arrived_at = {}, {}, {}        # rank -> conn; seq -> {rank: msg}; seq -> time
    left, broken, said_bye = {}, None, set()       # rank -> why it left; why the group broke
    label = f"group {group!r} ({size} ranks)" if group else f"the group ({size} ranks)"

    def accept():
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            _Conn(sock, events)

    def stdin_watch():
        try:
            while os.read(0, 4096):         # the raw descriptor: no buffered reader's lock at exit
                pass
        except OSError:
            pass
        events.put(("stdin", None, None))

    def heartbeat():
        while True:
            time.sleep(wire.HEARTBEAT_S)
            try:
                current = list(conns.values())
            except RuntimeError:        # the main loop changed the table meanwhile: the next beat
                continue
            for c in current:
                c.send({"type": "alive"})

    for target in (accept, stdin_watch, heartbeat):
        threading.Thread(target=target, daemon=True).start()

    def fail(seq, kind, message):
        for r in pending.pop(seq, {}):
            if r in conns:
                conns[r].send({"type": "error", "seq": seq, "kind": kind, "message": message})
        arrived_at.pop(seq, None)

    def break_group(kind, why):
        nonlocal broken
        broken = broken or (kind, why)
        for seq in list(pending):
            fail(seq, kind, f"{pending_name(seq)} of {label}: {why}")

    def pending_name(seq):
        h = next(iter(pending[seq].values()))[0]
        return f"{h['what']} #{seq}"

    stop = None
    while stop is None:
        wait = None
        if arrived_at:
            wait = max(0.0, min(arrived_at.values()) + timeout_s - time.monotonic())
        try:
            kind, conn, data = events.get(timeout=wait)
        except queue.Empty:
            kind = None
        if kind == "stdin":
            break_group("left", "the rank that started the fabric service (group rank 0) exited or died")
            stop = "its starter's standard input closed"
        elif kind == "closed":
            r = conn.rank
            if r is not None and conns.get(r) is conn:
                del conns[r]
                if r not in said_bye:
                    left[r] = data
                    break_group("left", f"rank {r} left: its connection closed without a goodbye (the process "
                                        f"exited or was killed)")
            if len(said_bye | set(left)) == size and not conns:
                stop = "every rank has left"
        elif kind == "message":
            header, payload = data
            t = header.get("type")
            if t == "hello":
                r, opts = header.get("rank"), header.get("options")
                problem = None
                if not isinstance(r, int) or not 0 <= r < size or r in conns:
                    problem = f"rank {r!r} is not a free rank of {label}"
                elif header.get("size") != size:
                    problem = f"rank {r} believes the group has {header.get('size')} ranks; it has {size}"
                elif opts != asdict(options):
                    diff = {k: v for k, v in (opts or {}).items() if asdict(options).get(k) != v}
                    problem = (f"rank {r} asked for options {diff}, group rank 0 for "
                               f"{ {k: asdict(options)[k] for k in diff} }: every rank of a group must pass the "
                               "same (pg_options or the AINIC_* environment)")
                if problem:
                    conn.send({"type": "error", "seq": None, "kind": "hello", "message": problem})
                    continue
                conn.rank = r
                conns[r] = conn
                conn.send({"type": "welcome", "options": asdict(options)})
            elif t == "collective" and conn.rank is not None:
                seq, r = header["seq"], conn.rank
                if broken:
                    conn.send({"type": "error", "seq": seq, "kind": broken[0],
                               "message": f"{header['what']} #{seq} of {label}: the group is broken: {broken[1]}"})
                    continue
                pending.setdefault(seq, {})[r] = (header, payload)
                arrived_at.setdefault(seq, time.monotonic())
                if len(pending[seq]) == size:
                    msgs = pending.pop(seq)
                    arrived_at.pop(seq)
                    try:
                        replies = fabric.run([msgs[q] for q in range(size)])
                    except Exception as exc:         # a failed run ends this collective, not the service
                        replies = [({"type": "error", "seq": seq, "kind": "failed",
                                     "message": f"{header['what']} #{seq}: {type(exc).__name__}: {exc}"}, b"")] * size
                    for q, (h, p) in enumerate(replies):
                        if q in conns:
                            conns[q].send(h, p)
            elif t == "bye" and conn.rank is not None:
                said_bye.add(conn.rank)
        # collectives whose ranks did not all arrive in time
        now = time.monotonic()
        for seq in [s for s, t0 in arrived_at.items() if now - t0 >= timeout_s]:
            missing = sorted(set(range(size)) - set(pending[seq]))
            why = (f"rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} did not arrive at "
                   f"{pending_name(seq)} within {timeout_s:g} s (rank{'s' if len(pending[seq]) > 1 else ''} "
                   f"{', '.join(map(str, sorted(pending[seq])))} did)")
            broken = broken or ("timeout", why)
            fail(seq, "timeout", f"{pending_name(seq)} of {label}: {why}")
    for c in list(conns.values()):
        try:
            c.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    return {"counts": fabric.counts, "stopped": stop}


def spawn(size: int, options: Options, timeout_s: float, group: str = "", host: str = None):
    """Start the service as a child process; returns (process, "host:port"). The child's standard input is
    the parent's pipe: when the parent goes, so does the service."""
    host = host or os.environ.get("AINIC_FABRIC_HOST", "127.0.0.1")
    cmd = [sys.executable, "-m", "host_driver.distributed.fabric", "--size", str(size), "--timeout", str(timeout_s),
           "--options", json.dumps(asdict(options)), "--host", host, "--group", group]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
    line = proc.stdout.readline().decode()
    proc.stdout.close()                 # it prints nothing else
    if not line.startswith("ainic-fabric "):
        proc.kill()
        raise RuntimeError(f"the fabric service did not start (it printed {line!r}; exit status {proc.wait()})")
    return proc, line.split()[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m host_driver.distributed.fabric", description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--timeout", type=float, required=True, help="seconds a collective waits for every rank")
    p.add_argument("--options", required=True, help="the group's Options as JSON")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--group", default="")
    args = p.parse_args(argv)
    options = Options(**json.loads(args.options))
    listener = socket.create_server((args.host, 0))
    print(f"ainic-fabric {args.host}:{listener.getsockname()[1]}", flush=True)
    try:
        serve(listener, args.size, options, args.timeout, args.group)
    finally:
        # whatever this session started (an RTL simulator mid-run) goes with it
        if os.getpgrp() == os.getpid():        # a session of its own (spawn), not a shell's job
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            try:
                os.killpg(0, signal.SIGTERM)
            except OSError:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
