"""A DDP communication hook that puts ainic's wire codec on the gradients, with error feedback.

``ddp.register_comm_hook(CompressionState("bfp8"), compression_hook)`` on any process group (gloo, NCCL or
``ainic``): each bucket's gradient ``g`` (plus, with error feedback, the residual this bucket kept from the
last step) is rounded through the codec's golden model (:func:`host_driver.models.numerics.roundtrip`:
exactly what a NIC's compressor and a receiver's decompressor make of it), the residual keeps what the
rounding lost, and the rounded gradient is all-reduced (SUM) and divided by the group's size. The residual is
kept per parameter (PowerSGD's hook keeps it per bucket): DDP rebuilds its buckets after the first step, in
the order the gradients became ready, and a residual kept per bucket would then land on other parameters.

On a plain group the hook is the whole compression: one rounding per contribution, which is what in-network
aggregation does to each worker's packets. On an ``ainic`` group with the same codec the NICs compress
again — the ring also rounds each partial sum on every hop — and the hook's error feedback corrects the first
rounding, of the rank's own gradient, only.
"""

from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from host_driver.models import numerics as nm


@dataclass
class CompressionState:
    """The hook's settings and memory: the ``codec``, the group (None: the default group), whether to keep
    and add back the residual (``error_feedback``), and the residual of each parameter (by its id)."""
    codec: str
    process_group: object = None
    error_feedback: bool = True
    residuals: dict = field(default_factory=dict)

    def residual(self, bucket) -> torch.Tensor:
        """The residual of the bucket's parameters laid out as its buffer (zeros for a parameter without)."""
        return torch.cat([self.residuals.get(id(p), torch.zeros(p.numel(), dtype=g.dtype)).reshape(-1)
                          for p, g in zip(bucket.parameters(), bucket.gradients())])

    def keep(self, bucket, residual: torch.Tensor) -> None:
        offset = 0
        for p in bucket.parameters():
            self.residuals[id(p)] = residual[offset:offset + p.numel()].clone()
            offset += p.numel()

    def __post_init__(self):
        nm.codec_bytes(self.codec, 0)          # ValueError naming the codecs, for an unknown one


def compress(g: torch.Tensor, codec: str) -> torch.Tensor:
    """``g`` as a receiver would see it through the codec (fp32 golden model; other float dtypes via fp32)."""
    if codec == "none":
        return g.clone()
    flat = g.detach().reshape(-1).to(torch.float32).numpy()
    return torch.from_numpy(nm.roundtrip(flat, codec)).to(g.dtype).reshape(g.shape)


def compression_hook(state: CompressionState, bucket) -> torch.futures.Future[torch.Tensor]:
    """DDP comm hook: compress (with error feedback), all-reduce, average."""
    group = state.process_group if state.process_group is not None else dist.group.WORLD
    size = dist.get_world_size(group)
    g = bucket.buffer()
    if state.error_feedback:
        g = g + state.residual(bucket)
    q = compress(g, state.codec)
    if state.error_feedback:
        state.keep(bucket, g - q)
    fut = dist.all_reduce(q, group=group, async_op=True).get_future()

    def average(f):
        return f.value()[0].div_(size)

    return fut.then(average)
