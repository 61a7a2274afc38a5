"""The ``ainic`` backend of ``torch.distributed``: a process group whose collectives run on simulated ainic NICs.

``torch.distributed.init_process_group("ainic")`` finds it through the package's ``torch.distributed.backends``
entry point (:func:`register`), so an unchanged DDP script only names the backend. Each group's options
(:class:`~host_driver.distributed.fabric.Options`: codec, algorithm, simulator, width, packet) come from
``pg_options=Options(...)`` or, without it, from the ``AINIC_*`` environment variables.

How a collective travels: group rank 0 starts the group's fabric service (:mod:`host_driver.distributed.fabric`) and
publishes its address in the group's c10d store; every rank connects to it over TCP. A collective sends the
rank's tensor, blocks until the service answers with this rank's result (or an error) and returns a completed
``Work``. Errors are raised at the call: :class:`FabricTimeout` (a rank did not arrive in time, or left),
:class:`CollectiveMismatch` (the ranks asked for different collectives or sizes), :class:`FabricGone` (the
service closed the connection or stopped sending heartbeats), ``TypeError``/``ValueError`` for what the
backend cannot do (a complex tensor, AVG of integers, PREMUL_SUM).

A group of one rank has no fabric: every collective returns its input.
"""

import atexit
from dataclasses import asdict
import socket
import threading
import weakref
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ReduceOp, _create_work_from_future
from torch.futures import Future

from host_driver.distributed import fabric, wire
from host_driver.distributed.fabric import NUMPY_DTYPES, Options

BACKEND = "ainic"
#: torch's float types whose SUM/AVG the NICs carry as fp32 (converted on the rank)
TO_FP32 = (torch.float16, torch.bfloat16)
REDUCE_NAMES = ((ReduceOp.SUM, "sum"), (ReduceOp.AVG, "avg"), (ReduceOp.PRODUCT, "product"), (ReduceOp.MIN, "min"),
                (ReduceOp.MAX, "max"), (ReduceOp.BAND, "band"), (ReduceOp.BOR, "bor"), (ReduceOp.BXOR, "bxor"))


class FabricTimeout(TimeoutError):
    """A collective could not complete: a rank did not arrive in time, or left (the message names it)."""


class CollectiveMismatch(ValueError):
    """The ranks of a group asked for different collectives, dtypes or sizes at the same call."""


class FabricGone(ConnectionError):
    """The fabric service closed the connection or stopped answering."""


GONE_WHY = "it stops when group rank 0, which started it, exits or dies"
ERRORS = {"timeout": FabricTimeout, "left": FabricTimeout, "mismatch": CollectiveMismatch, "hello": ValueError}


def _dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _to_bytes(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _from_bytes(payload: bytes, like: torch.Tensor) -> torch.Tensor:
    if not payload:
        return torch.empty_like(like)
    return torch.frombuffer(bytearray(payload), dtype=torch.uint8).view(like.dtype).reshape(like.shape)


def _done(result) -> "dist.Work":
    fut = Future()
    fut.set_result(result)
    return _create_work_from_future(fut)


class AinicProcessGroup(dist.ProcessGroup):
    """One rank's end of an ``ainic`` group (see the module docstring)."""

    def __init__(self, store, rank: int, size: int, timeout: timedelta, options: Options, group: str = ""):
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        self.options = options.check(size) if size > 1 else options
        self.group = group
        self.timeout_s = timeout.total_seconds()
        self.counts = {"nic": 0, "host": 0, "local": 0}     # collectives by where they ran
        self.cycles = []            # the RTL's cycles of each NIC collective (sim verilator / icarus)
        self._seq, self._lock, self._sock, self._service = 0, threading.Lock(), None, None
        if size == 1:
            return
        # one service per initialisation of the group: the n-th init of a name uses the n-th address
        generation = (store.add(f"ainic/{group}/joins", 1) - 1) // size
        key = f"ainic/{group}/{generation}/address"
        if rank == 0:
            self._service, address = fabric.spawn(size, self.options, self.timeout_s, group)
            store.set(key, address)
        address = store.get(key).decode()
        host, port = address.rsplit(":", 1)
        self._sock = socket.create_connection((host, int(port)), timeout=self.timeout_s)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        wire.send(self._sock, {"type": "hello", "rank": rank, "size": size,
                               "options": asdict(self.options)})
        header = self._answer(f"joining group {group!r}", None)
        if header["type"] != "welcome":
            raise RuntimeError(f"unexpected answer to hello: {header!r:.200}")
        self._finalizer = weakref.finalize(self, _close, self._sock, self._service)
        atexit.register(self._finalizer)

    # -- the wire ------------------------------------------------------------------------------------------
    def _answer(self, name: str, seq):
        """The service's answer to collective ``seq`` (heartbeats skipped); raises what an error says."""
        self._sock.settimeout(wire.HEARTBEAT_S * wire.HEARTBEAT_MISSED)
        while True:
            try:
                header, payload = wire.receive(self._sock)
            except socket.timeout:
                raise FabricGone(f"ainic: {name}: the fabric service of group {self.group!r} stopped answering "
                                 f"(no heartbeat for {wire.HEARTBEAT_S * wire.HEARTBEAT_MISSED:g} s)") from None
            except (wire.ConnectionClosed, OSError) as exc:
                raise FabricGone(f"ainic: {name}: the fabric service of group {self.group!r} closed the "
                                 f"connection ({exc}); {GONE_WHY}") from None
            if header["type"] == "alive":
                continue
            if header["type"] == "error":
                raise ERRORS.get(header["kind"], RuntimeError)(f"ainic: {header['message']}")
            if seq is None or header.get("seq") == seq:
                return header if seq is None else (header, payload)

    def _collective(self, what: str, payload: bytes, dtype: str, numel: int, reduce: str = None,
                    root: int = None) -> bytes:
        with self._lock:
            seq = self._seq
            self._seq += 1
            if self._sock is None:
                raise FabricGone(f"ainic: {what} #{seq}: group {self.group!r} was shut down")
            try:
                wire.send(self._sock, {"type": "collective", "seq": seq, "what": what, "reduce": reduce,
                                       "dtype": dtype, "numel": numel, "root": root}, payload)
            except OSError as exc:
                raise FabricGone(f"ainic: {what} #{seq} of rank {self._rank}: cannot reach the fabric service of "
                                 f"group {self.group!r} ({exc}); {GONE_WHY}") from None
            header, out = self._answer(f"{what} #{seq} of rank {self._rank}", seq)
        self.counts[header["path"]] += 1
        if header["stats"].get("cycles") is not None:
            self.cycles.append(header["stats"]["cycles"])
        return out

    # -- collectives ---------------------------------------------------------------------------------------
    def _reduce_kind(self, t: torch.Tensor, op) -> tuple:
        """(reduce name, the tensor as sent): fp16/bf16 SUM/AVG as fp32 (the NICs' path), bf16 as fp32 always
        (numpy has no bf16)."""
        reduce = next((name for k, name in REDUCE_NAMES if op == k), None)
        if reduce is None:
            raise ValueError(f"ainic: reduce op {getattr(op, 'op', op)} is not supported (SUM and AVG go through "
                             "the NICs; PRODUCT, MIN, MAX and the bitwise ops are reduced by the fabric service)")
        if t.is_complex() or (_dtype_name(t) not in NUMPY_DTYPES and t.dtype not in TO_FP32):
            raise TypeError(f"ainic: cannot reduce {t.dtype} tensors (float32/int32 go through the NICs, float16 and "
                            f"bfloat16 as float32; {', '.join(NUMPY_DTYPES)} on the fabric service's host)")
        if reduce == "avg" and not t.is_floating_point():
            raise ValueError(f"ainic: AVG of {t.dtype} tensors is not defined (use SUM and divide)")
        if t.dtype == torch.bfloat16 or (t.dtype == torch.float16 and reduce in ("sum", "avg")):
            return reduce, t.float()
        return reduce, t

    def _reduce(self, what: str, out: torch.Tensor, inp: torch.Tensor, op) -> None:
        reduce, sent = self._reduce_kind(inp, op)
        if self._size == 1:
            result = sent.clone()
            self.counts["local"] += 1
        else:
            numel = sent.numel() // (self._size if what == "reduce_scatter" else 1)
            like = sent.reshape(-1)[:numel]
            result = _from_bytes(self._collective(what, _to_bytes(sent), _dtype_name(sent), numel, reduce), like)
        if reduce == "avg":
            result = result / self._size
        out.copy_(result.reshape(out.shape).to(out.dtype))

    def allreduce(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else ReduceOp.SUM
        for t in tensors:
            self._reduce("all_reduce", t, t, op)
        return _done(tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        return self.allreduce(tensors, opts)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        op = opts.reduceOp if opts is not None else ReduceOp.SUM
        for out, inputs in zip(output_tensors, input_tensors, strict=True):
            self._check_parts(inputs, out, "reduce_scatter")
            self._reduce("reduce_scatter", out, torch.cat([i.reshape(-1) for i in inputs]), op)
        return _done(output_tensors)

    def reduce_scatter_single(self, output, input, opts=None):
        if input.numel() != output.numel() * self._size:
            raise ValueError(f"ainic: reduce_scatter_tensor: the input has {input.numel():,} elements, "
                             f"{self._size} x the output's {output.numel():,} expected")
        op = opts.reduceOp if opts is not None else ReduceOp.SUM
        self._reduce("reduce_scatter", output, input.reshape(-1), op)
        return _done([output])

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        for out, inp in zip(outputs, inputs, strict=True):
            self.reduce_scatter_single(out, inp, opts)
        return _done(outputs)

    def _check_parts(self, parts, like, what):
        if len(parts) != self._size:
            raise ValueError(f"ainic: {what}: {len(parts)} tensors in the list, the group has {self._size} ranks")
        for i, p in enumerate(parts):
            if p.numel() != like.numel() or p.dtype != like.dtype:
                raise ValueError(f"ainic: {what}: tensor {i} of the list is {p.dtype}[{p.numel():,}], "
                                 f"expected {like.dtype}[{like.numel():,}]")

    def _gather_bytes(self, t: torch.Tensor) -> bytes:
        data = _to_bytes(t)
        if self._size == 1:
            self.counts["local"] += 1
            return data
        return self._collective("all_gather", data, "uint8", len(data))

    @staticmethod
    def _split(data: bytes, like: torch.Tensor, outs) -> None:
        """Every rank's part of an all-gather's bytes into ``outs``, rank by rank."""
        k = like.numel() * like.element_size()
        for r, out in enumerate(outs):
            out.copy_(_from_bytes(data[r * k:(r + 1) * k], like).reshape(out.shape))

    def allgather(self, output_tensors, input_tensors, opts=None):
        for outs, inp in zip(output_tensors, input_tensors, strict=True):
            self._check_parts(outs, inp, "all_gather")
            self._split(self._gather_bytes(inp), inp, outs)
        return _done(output_tensors)

    def all_gather_single(self, output, input, opts=None):
        if output.numel() != input.numel() * self._size or output.dtype != input.dtype:
            raise ValueError(f"ainic: all_gather_into_tensor: the output is {output.dtype}[{output.numel():,}], "
                             f"{input.dtype}[{self._size} x {input.numel():,}] expected")
        output.copy_(_from_bytes(self._gather_bytes(input), output.reshape(-1)).reshape(output.shape))
        return _done([output])

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        for out, inp in zip(outputs, inputs, strict=True):
            self.all_gather_single(out, inp, opts)
        return _done(outputs)

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        return self.allgather(output_lists, input_list, opts)

    def _broadcast(self, t: torch.Tensor, root: int) -> None:
        if self._size == 1:
            self.counts["local"] += 1
            return
        data = _to_bytes(t)
        t.copy_(_from_bytes(self._collective("broadcast", data, "uint8", len(data), root=root), t))

    def broadcast(self, tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        for t in tensors:
            self._broadcast(t, root)
        return _done(tensors)

    def reduce(self, tensors, opts=None):
        """As all_reduce: every rank ends with the result (torch leaves the non-roots' tensors unspecified)."""
        return self.allreduce(tensors, opts)

    def gather(self, output_tensors, input_tensors, opts=None):
        """An all-gather whose result only the root keeps."""
        root = opts.rootRank if opts is not None else 0
        for i, inp in enumerate(input_tensors):
            data = self._gather_bytes(inp)
            if self._rank == root:
                self._check_parts(output_tensors[i], inp, "gather")
                self._split(data, inp, output_tensors[i])
        return _done(output_tensors)

    def scatter(self, output_tensors, input_tensors, opts=None):
        """The root's list broadcast, each rank keeping its part."""
        root = opts.rootRank if opts is not None else 0
        for i, out in enumerate(output_tensors):
            whole = torch.empty(self._size * out.numel(), dtype=out.dtype)
            if self._rank == root:
                self._check_parts(input_tensors[i], out, "scatter")
                whole.copy_(torch.cat([t.reshape(-1) for t in input_tensors[i]]))
            self._broadcast(whole, root)
            out.copy_(whole[self._rank * out.numel():(self._rank + 1) * out.numel()].reshape(out.shape))
        return _done(output_tensors)

    def barrier(self, opts=None):
        if self._size == 1:
            self.counts["local"] += 1
        else:
            self._collective("barrier", b"", "uint8", 0)
        return _done([])

    # -- the rest of a ProcessGroup --------------------------------------------------------------------------
    def size(self):
        return self._size

    def rank(self):
        return self._rank

    def getBackendName(self):
        return BACKEND

    @property
    def group_name(self):
        """The name torch gave the group (destroy_process_group looks it up by it)."""
        return self.group

    def shutdown(self):
        """Say goodbye to the service; group rank 0 then waits for it to stop."""
        with self._lock:
            if self._sock is not None:
                self._finalizer()
                self._sock = None

    abort = shutdown

    def __repr__(self):
        return f"AinicProcessGroup(rank {self._rank} of {self._size}, {self.options})"


def _close(sock, service):
    try:
        wire.send(sock, {"type": "bye"})
        sock.close()
    except OSError:
        pass
    if service is not None:
        try:
            service.stdin.close()
            service.wait(timeout=10)
        except Exception:         # noqa: BLE001 -- it is going away either way
            service.kill()


def _create(dist_opts, backend_options):
    options = backend_options if isinstance(backend_options, Options) else Options.from_env()
    pg = AinicProcessGroup(dist_opts.store, dist_opts.group_rank, dist_opts.group_size, dist_opts.timeout,
                           options, str(dist_opts.group_id))
    return pg


def register() -> None:
    """Register the ``ainic`` backend with ``torch.distributed`` (idempotent; the entry point calls it)."""
    if BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu"])
