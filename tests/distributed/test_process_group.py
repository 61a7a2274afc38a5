"""The ``ainic`` torch.distributed backend, each rank a process as torchrun runs them: DDP's gradients are the
golden model's all-reduce of every rank's own gradient, bit for bit, for every codec and both algorithms at
2 and 4 ranks; the collectives DDP does not use; what a rank gets when another dies, never arrives or asks
for something else; and nothing left running afterwards."""

import time

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is the optional extra ainic[torch] (make setup installs it)")

from host_driver.distributed import launch  # noqa: E402
from host_driver.distributed.fabric import Options  # noqa: E402
from host_driver.models import allreduce as ar  # noqa: E402
from host_driver.models import in_network as inn  # noqa: E402
from tests.distributed import ranks  # noqa: E402

CODECS = ("none", "fp16", "bf16", "bfp8", "bfp4")
CONFIGS = [Options(codec=c, algorithm=a) for a in ("ring", "switch") for c in CODECS]


def bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


@pytest.mark.heavy(40)
@pytest.mark.parametrize("size", [2, 4])
def test_ddp_gradients_are_the_golden_all_reduce(size):
    out = launch.run(ranks.ddp_grads, size, CONFIGS, timeout=300)
    for i, opts in enumerate(CONFIGS):
        own = [out[r][i][1] for r in range(size)]
        model = ar.allreduce if opts.algorithm == "ring" else inn.allreduce
        # DDP's bucket: the parameters in order, each rank's gradient divided by the size before the all-reduce
        golden = model([o / np.float32(size) for o in own], opts.codec)[0]
        for r in range(size):
            assert bits(out[r][i][0]).tolist() == bits(golden).tolist(), (opts, r)
        # compression changed something (else this test could not tell the codecs apart)
        plain = model([o / np.float32(size) for o in own], "none")[0]
        assert (opts.codec == "none") == np.array_equal(golden, plain), opts
        assert out[0][i][2]["nic"] >= 2 and out[0][i][2]["host"] == 0, out[0][i][2]


@pytest.mark.heavy(20)
def test_every_collective_against_its_definition():
    out = launch.run(ranks.every_collective, 3, timeout=120)
    for r, got in enumerate(out):
        assert got == out[0], r
    got = out[0]
    # ints, fp16 and bf16 with codec none are exact; bf16 AVG rounds as torch does (to bf16)
    assert got["sum_fp32"] == [float(6 * i) for i in range(7)]
    assert got["sum_int32"] == [3 * 2**20, -6]
    assert got["avg_bf16"] == [2.0] * 5 and got["avg_dtype"] == "torch.bfloat16"
    assert got["sum_fp16"] == [6.0, 0.5 * 3]
    assert got["max_int64"] == [2, 1 << 40] and got["min_fp64"] == [0.0, -2.0]
    assert got["gather_int64"] == [[0, 0, 0], [1, 1, 1], [2, 2, 2]]
    assert got["gather_tensor"] == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]
    assert got["broadcast"] == [2.0] * 4 and got["broadcast_bool"] == [True, False, True]
    assert got["reduce_scatter_tensor"] == [[0.0, 3.0], [6.0, 9.0], [12.0, 15.0]]
    assert got["counts"] == {"nic": 12, "host": 2, "local": 0}
    assert got["nan_payload"] == 0x7FC00001             # an all-gather moves bits, NaN payloads included


def test_reduce_scatter_lists_and_barrier():
    out = launch.run(ranks.reduce_scatter_list, 2, timeout=120)
    assert out == [[10.0, 10.0, 10.0], [12.0, 12.0, 12.0]]        # rank r: sum over ranks of their input r


@pytest.mark.heavy(20)
@pytest.mark.parametrize("victim", [1, 0])
def test_a_killed_rank_ends_the_others_with_an_error_naming_it(victim, tmp_path):
    pid_file = tmp_path / "service.pid"
    with pytest.raises(launch.RankFailed) as info:
        launch.run(ranks.one_rank_dies, 3, victim, str(pid_file), timeout=120, wait_all=True)
    o = info.value.outcomes
    assert o[victim][0] == "died"
    for r in {0, 1, 2} - {victim}:
        if victim == 1:
            assert o[r][:2] == ("error", "FabricTimeout"), o[r]
            assert "all_reduce #" in o[r][2] and "rank 1 left: its connection closed without a goodbye" in o[r][2], o[r]
        else:       # the service's starter: the collective ends at once, or finds the service gone
            assert o[r][1] in ("FabricTimeout", "FabricGone"), o[r]
            assert "group rank 0" in o[r][2] and "all_reduce #" in o[r][2], o[r]
    pid = int(pid_file.read_text())
    for _ in range(100):            # rank 0 ended (or was killed), and its service with it
        if not alive(pid):
            break
        time.sleep(0.1)
    assert not alive(pid)


def test_a_rank_that_never_arrives_times_out_naming_it_and_the_collective():
    with pytest.raises(launch.RankFailed) as info:
        launch.run(ranks.one_rank_late, 3, 2, timeout=120, wait_all=True)
    o = info.value.outcomes
    for r in (0, 1):
        assert o[r][:2] == ("error", "FabricTimeout"), o[r]
        assert "rank 2 did not arrive at all_reduce #" in o[r][2] and "within 3 s" in o[r][2], o[r]
    assert o[2][:2] == ("error", "FabricTimeout") and "the group is broken" in o[2][2]


def test_mismatched_sizes_and_dtypes_are_errors_on_every_rank():
    out = launch.run(ranks.mismatches, 2, timeout=120)
    for r in range(2):
        size_err, dtype_err, after = out[r]
        assert size_err == ("CollectiveMismatch", "ainic: all_reduce #0: the ranks disagree on the collective "
                                                  "(rank 0: all_reduce float32[10] sum; rank 1: all_reduce float32[11] sum)")
        assert dtype_err[0] == "CollectiveMismatch" and "int32[4]" in dtype_err[1] and "float32[4]" in dtype_err[1]
        assert after == [2.0, 2.0]                  # a mismatch breaks one call, not the group


def test_the_service_going_away_is_detected():
    with pytest.raises(launch.RankFailed) as info:
        launch.run(ranks.service_killed, 2, timeout=120, wait_all=True)
    o = info.value.outcomes
    assert o[1][:2] == ("error", "FabricGone") and "closed the connection" in o[1][2], o[1]


def test_bad_arguments_raise_precise_errors():
    out = launch.run(ranks.bad_arguments, 2, timeout=120)
    assert out[0] == {
        "avg_int": "ValueError: ainic: AVG of torch.int32 tensors is not defined (use SUM and divide)",
        "uint16": "TypeError: ainic: cannot reduce torch.uint16 tensors (float32/int32 go through the NICs, "
                   "float16 and bfloat16 as float32; float32, float64, float16, int64, int32, int16, int8, uint8, "
                   "bool on the fabric service's host)",
        "options": "ValueError: codec must be one of none, fp16, bf16, bfp8, bfp4, got 'bfp3'",
        "gather_list": "ValueError: ainic: all_gather: 3 tensors in the list, the group has 2 ranks",
    }


def alive(pid):
    """Whether process ``pid`` runs (a zombie waiting for a reaper does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
