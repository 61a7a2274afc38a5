"""What each rank runs in the torch tests (host_driver.distributed.launch spawns them: module-level functions)."""

import copy
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from host_driver.distributed.fabric import Options
from host_driver.distributed.hook import CompressionState, compression_hook


def mlp(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(20, 24), torch.nn.Tanh(), torch.nn.Linear(24, 5))


def batch(rank, n=8):
    g = torch.Generator().manual_seed(100 + rank)
    return torch.randn(n, 20, generator=g), torch.randint(0, 5, (n,), generator=g)


def flat_grads(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy().copy()


def ddp_grads(rank, size, configs, hook=None):
    """For each Options: one DDP backward on a group of those options; (DDP's gradient, this rank's own)."""
    dist.init_process_group("ainic", timeout=timedelta(seconds=60))
    out = []
    for opts in configs:
        group = dist.new_group(backend="ainic", pg_options=opts)
        model = mlp()
        replica = copy.deepcopy(model)
        ddp = DDP(model, process_group=group)
        if hook:
            ddp.register_comm_hook(CompressionState(hook, group), compression_hook)
        x, y = batch(rank)
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        torch.nn.functional.cross_entropy(replica(x), y).backward()
        out.append((flat_grads(model), flat_grads(replica), dict(group.counts)))
        dist.destroy_process_group(group)
    dist.destroy_process_group()
    return out


def _error(fn):
    try:
        fn()
    except Exception as exc:            # noqa: BLE001 -- the test compares type and message
        return type(exc).__name__, str(exc)
    return None


def every_collective(rank, size):
    """Every collective the backend has, once, on 3 ranks (the test knows each answer)."""
    dist.init_process_group("ainic", timeout=timedelta(seconds=60))
    got = {}
    t = torch.arange(7, dtype=torch.float32) * (rank + 1)
    dist.all_reduce(t)
    got["sum_fp32"] = t.tolist()
    t = torch.tensor([2**20, -2], dtype=torch.int32)
    dist.all_reduce(t)
    got["sum_int32"] = t.tolist()
    t = torch.full((5,), float(rank + 1), dtype=torch.bfloat16)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    got["avg_bf16"], got["avg_dtype"] = t.tolist(), str(t.dtype)
    t = torch.tensor([2.0, 0.5], dtype=torch.float16)
    dist.all_reduce(t)
    got["sum_fp16"] = t.tolist()
    t = torch.tensor([rank, (1 << 40) if rank == 1 else 0], dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    got["max_int64"] = t.tolist()
    t = torch.tensor([float(rank), -float(rank)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    got["min_fp64"] = t.tolist()
    outs = [torch.zeros(3, dtype=torch.int64) for _ in range(size)]
    dist.all_gather(outs, torch.full((3,), rank, dtype=torch.int64))
    got["gather_int64"] = [o.tolist() for o in outs]
    o = torch.zeros(2 * size)
    dist.all_gather_into_tensor(o, torch.full((2,), float(rank)))
    got["gather_tensor"] = o.tolist()
    b = torch.full((4,), float(rank))
    dist.broadcast(b, src=2)
    got["broadcast"] = b.tolist()
    b = torch.tensor([True, False, True]) if rank == 0 else torch.zeros(3, dtype=torch.bool)
    dist.broadcast(b, src=0)
    got["broadcast_bool"] = b.tolist()
    out = torch.zeros(2)
    dist.reduce_scatter_tensor(out, torch.arange(2 * size, dtype=torch.float32))
    parts = [torch.zeros(2) for _ in range(size)]
    dist.all_gather(parts, out)
    got["reduce_scatter_tensor"] = [p.tolist() for p in parts]
    nan = torch.tensor([0x7FC00001 if rank == 1 else 0], dtype=torch.int32).view(torch.float32)
    parts = [torch.zeros(1) for _ in range(size)]
    dist.all_gather(parts, nan)
    got["nan_payload"] = int(parts[1].view(torch.int32).item()) & 0xFFFFFFFF
    dist.barrier()
    got["counts"] = dict(dist.group.WORLD.counts)
    dist.destroy_process_group()
    return got


def reduce_scatter_list(rank, size):
    dist.init_process_group("ainic", timeout=timedelta(seconds=60))
    out = torch.zeros(3)
    dist.reduce_scatter(out, [torch.full((3,), float(10 * rank + i)) for i in range(size)])
    dist.barrier()
    dist.destroy_process_group()
    return out.tolist()


def one_rank_dies(rank, size, victim, pid_file):
    dist.init_process_group("ainic", timeout=timedelta(seconds=60))
    if rank == 0:
        with open(pid_file, "w") as f:
            f.write(str(dist.group.WORLD._service.pid))
    dist.all_reduce(torch.ones(100))
    if rank == victim:
        os.kill(os.getpid(), 9)
    time.sleep(0.5)
    try:
        dist.all_reduce(torch.ones(100))
    finally:
        time.sleep(2)       # rank 0 (and its service) still there when the other survivor asks


def one_rank_late(rank, size, late):
    dist.init_process_group("ainic", timeout=timedelta(seconds=60))
    group = dist.new_group(backend="ainic", timeout=timedelta(seconds=3))
    if rank == late:
        time.sleep(5)
        dist.all_reduce(torch.ones(100), group=group)
    try:
        dist.all_reduce(torch.ones(100), group=group)
    finally:
        time.sleep(4)           # rank 0 (and its service) still there when the late rank arrives


def mismatches(rank, size):
    dist.init_process_group("ainic", timeout=timedelta(seconds=60))
    size_err = _error(lambda: dist.all_reduce(torch.ones(10 + rank)))
    dtype_err = _error(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32 if rank else torch.float32)))
    after = torch.ones(2)
    dist.all_reduce(after)
    dist.destroy_process_group()
    return size_err, dtype_err, after.tolist()


def service_killed(rank, size):
    dist.init_process_group("ainic", timeout=timedelta(seconds=60))
    dist.all_reduce(torch.ones(3))
    if rank == 0:
        dist.group.WORLD._service.kill()
    dist.barrier()


def bad_arguments(rank, size):
    dist.init_process_group("ainic", timeout=timedelta(seconds=60))
    got = {}
    for name, fn in (("avg_int", lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32), op=dist.ReduceOp.AVG)),
                     ("uint16", lambda: dist.all_reduce(torch.ones(3, dtype=torch.uint16))),
                     ("options", lambda: dist.new_group(backend="ainic", pg_options=Options(codec="bfp3"))),
                     ("gather_list", lambda: dist.all_gather([torch.zeros(2)] * 3, torch.ones(2)))):
        err = _error(fn)
        got[name] = err and f"{err[0]}: {err[1]}"
    dist.barrier()
    dist.destroy_process_group()
    return got


def hook_steps(rank, size, codec, error_feedback):
    """Two backward passes (no optimizer step: the same weights) through DDP with the compression hook on a
    gloo group; per pass, DDP's gradient and this rank's own."""
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    model = mlp()
    replica = copy.deepcopy(model)
    ddp = DDP(model)
    ddp.register_comm_hook(CompressionState(codec, error_feedback=error_feedback), compression_hook)
    out = []
    for step in range(2):
        x, y = batch(10 * step + rank)
        for m in (model, replica):
            m.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        torch.nn.functional.cross_entropy(replica(x), y).backward()
        out.append((flat_grads(model), flat_grads(replica)))
    dist.destroy_process_group()
    return out
