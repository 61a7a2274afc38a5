"""The DDP compression hook: each rank's gradient through the codec's golden model, the residual carried to
the next step with error feedback, on gloo and on an ainic group."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is the optional extra ainic[torch] (make setup installs it)")

from host_driver.distributed import launch  # noqa: E402
from host_driver.distributed.fabric import Options  # noqa: E402
from host_driver.distributed.hook import CompressionState, compress  # noqa: E402
from host_driver.models import allreduce as ar  # noqa: E402
from host_driver.models import numerics as nm  # noqa: E402
from tests.distributed import ranks  # noqa: E402


def q(x, codec):
    return nm.roundtrip(np.asarray(x, np.float32), codec)


def bits(a):
    return np.asarray(a, np.float32).view(np.uint32).tolist()


@pytest.mark.parametrize("codec", ["fp16", "bf16", "bfp8", "bfp4"])
def test_compress_is_the_codec_s_golden_model(codec, rng):
    g = torch.from_numpy(rng.standard_normal(1000).astype(np.float32) * 1e-3)
    assert bits(compress(g, codec)) == bits(q(g.numpy(), codec))
    assert compress(g.to(torch.bfloat16), codec).dtype == torch.bfloat16


def test_an_unknown_codec_is_refused():
    with pytest.raises(ValueError, match="unknown codec 'bfp2'"):
        CompressionState("bfp2")


def reversed_layout(v):
    """A gradient in parameter order laid out as DDP's rebuilt bucket holds it: the parameters reversed (the
    order their gradients became ready in the first backward pass)."""
    parts = np.split(v, np.cumsum([p.numel() for p in ranks.mlp().parameters()])[:-1])
    return np.concatenate(parts[::-1])


def parameter_order(v):
    sizes = [p.numel() for p in ranks.mlp().parameters()][::-1]
    return np.concatenate(np.split(v, np.cumsum(sizes)[:-1])[::-1])


@pytest.mark.parametrize("error_feedback", [True, False])
def test_error_feedback_adds_last_step_s_residual(error_feedback):
    """Step 1's bucket holds the parameters in order; DDP then rebuilds it in reverse: each parameter's
    residual follows it."""
    codec = "bfp4"
    out = launch.run(ranks.hook_steps, 2, codec, error_feedback, timeout=120)
    own1 = [out[r][0][1] for r in range(2)]
    own2 = [out[r][1][1] for r in range(2)]
    residual = [g - q(g, codec) for g in own1] if error_feedback else [np.zeros_like(g) for g in own1]
    want1 = (q(own1[0], codec) + q(own1[1], codec)) / np.float32(2)
    sent2 = [parameter_order(q(reversed_layout(g + r), codec)) for g, r in zip(own2, residual)]
    want2 = (sent2[0] + sent2[1]) / np.float32(2)
    for r in range(2):
        assert bits(out[r][0][0]) == bits(want1)
        assert bits(out[r][1][0]) == bits(want2)
    # the residual matters: with it, the second step's gradient is not what the codec alone gives
    plain2 = sum(parameter_order(q(reversed_layout(g), codec)) for g in own2) / np.float32(2)
    assert (bits(want2) != bits(plain2)) == error_feedback


def test_the_hook_on_an_ainic_group_compresses_before_the_nics():
    out = launch.run(ranks.ddp_grads, 2, [Options(codec="bfp8")], "bfp8", timeout=120)
    own = [out[r][0][1] for r in range(2)]
    golden = ar.allreduce([q(g, "bfp8") for g in own], "bfp8")[0] / np.float32(2)
    assert bits(out[0][0][0]) == bits(golden) == bits(out[1][0][0])
