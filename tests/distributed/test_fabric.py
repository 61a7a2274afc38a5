"""The fabric service without torch: each collective's result against the golden model, bit for bit; the
ranks' disagreements, a rank that never arrives, one that leaves and a starter that dies, each a clear error
on every waiting rank; the service process gone afterwards."""

import socket
import threading
import time

import numpy as np
import pytest

from host_driver.distributed import fabric, wire
from host_driver.distributed.fabric import Fabric, Options
from host_driver.models import allreduce as ar
from host_driver.models import in_network as inn


def request(seq, what, data, reduce=None, root=None, numel=None, dtype=None):
    data = np.asarray(data)
    return ({"type": "collective", "seq": seq, "what": what, "reduce": reduce, "root": root,
             "dtype": dtype or data.dtype.name, "numel": data.size if numel is None else numel}, data.tobytes())


def payloads(replies, dtype):
    assert all(h["type"] == "result" and h["ok"] for h, _ in replies), replies[0][0]
    return [np.frombuffer(p, dtype) for _, p in replies]


@pytest.mark.parametrize("algorithm", ["ring", "switch"])
@pytest.mark.parametrize("codec", ["none", "fp16", "bf16", "bfp8", "bfp4"])
def test_all_reduce_is_the_golden_models(codec, algorithm, rng):
    n, L = 4, 1000
    x = [rng.standard_normal(L).astype(np.float32) for _ in range(n)]
    replies = Fabric(n, Options(codec=codec, algorithm=algorithm)).run([request(7, "all_reduce", a, "sum") for a in x])
    golden = ar.allreduce(x, codec) if algorithm == "ring" else inn.allreduce(x, codec)
    for r, got in enumerate(payloads(replies, np.float32)):
        assert got.view(np.uint32).tolist() == golden[r].view(np.uint32).tolist()
    assert replies[0][0]["path"] == "nic" and replies[0][0]["seq"] == 7
    assert replies[0][0]["stats"]["codec"] == codec and replies[0][0]["stats"]["algorithm"] == algorithm


def test_int32_sum_saturates_once_as_the_nic_does():
    big = np.array([2**31 - 10, 5, -7], np.int32)
    replies = Fabric(2, Options(codec="bfp8")).run([request(0, "all_reduce", big, "sum")] * 2)
    assert payloads(replies, np.int32)[0].tolist() == [2**31 - 1, 10, -14]      # codec none for int32


def test_reduce_scatter_gives_rank_r_the_sum_of_every_rank_s_input_r(rng):
    n, m = 3, 70                                  # m not a multiple of the packet: padded chunks
    x = [rng.standard_normal(n * m).astype(np.float32) for _ in range(n)]
    replies = Fabric(n, Options(codec="bfp8", packet=64)).run(
        [request(0, "reduce_scatter", a, "sum", numel=m) for a in x])
    got = payloads(replies, np.float32)
    k = 128                                       # m = 70 elements padded to whole packets of 64
    layout = np.zeros((n, n * k), np.float32)     # rank r's input i in chunk (i + 1) mod N
    for r, a in enumerate(x):
        for i in range(n):
            layout[r, (i + 1) % n * k:][:m] = a[i * m:(i + 1) * m]
    golden = ar.reduce_scatter(list(layout), "bfp8", packet=64)     # the NIC's rank r keeps chunk (r + 1) mod N
    for r in range(n):
        assert got[r].view(np.uint32).tolist() == golden[r, (r + 1) % n * k:][:m].view(np.uint32).tolist()
        want = sum(a[r * m:(r + 1) * m].astype(np.float64) for a in x)
        # and it is the sum of input r, within bfp8's error: each of the n inputs and the sum are quantised
        # to 2**-6 of their 16-element block's largest magnitude (blocks start at the chunk's first element)
        scale = sum(np.repeat(np.abs(np.pad(a[r * m:(r + 1) * m], (0, -m % 16))).reshape(-1, 16).max(axis=1), 16)[:m]
                    for a in x)
        assert np.all(np.abs(got[r] - want) <= (n + 1) * 2.0 ** -6 * scale)


def test_all_gather_and_broadcast_move_bytes_bit_for_bit(rng):
    n = 3
    blobs = [rng.integers(0, 256, 4 * 37 + 3, dtype=np.uint8) for _ in range(n)]     # not whole words
    blobs[1][:4] = np.frombuffer(np.array([0x7FC00001], np.uint32).tobytes(), np.uint8)   # a NaN payload
    f = Fabric(n, Options(codec="bfp4", algorithm="switch"))      # the codec never touches these
    got = payloads(f.run([request(0, "all_gather", b) for b in blobs]), np.uint8)
    assert all(g.tobytes() == b"".join(b.tobytes() for b in blobs) for g in got)
    got = payloads(f.run([request(1, "broadcast", b, root=2) for b in blobs]), np.uint8)
    assert all(g.tobytes() == blobs[2].tobytes() for g in got)
    assert f.counts == {"nic": 2, "host": 0}


@pytest.mark.parametrize("reduce,dtype,want", [("max", "int64", [3, 1 << 40]), ("min", "float64", [-1.5, 0.0]),
                                                ("product", "int32", [-3, 0]), ("sum", "int64", [2, 1 + (1 << 40)])])
def test_other_reductions_run_on_the_host(reduce, dtype, want):
    x = [np.array([3, 1], dtype), np.array([-1.5 if dtype == "float64" else -1, 1 << 40 if dtype == "int64" else 0],
                                           dtype)]
    replies = Fabric(2, Options()).run([request(0, "all_reduce", a, reduce) for a in x])
    assert payloads(replies, dtype)[1].tolist() == want and replies[0][0]["path"] == "host"


def test_ranks_that_disagree_get_an_error_naming_them():
    x = np.zeros(10, np.float32)
    reqs = [request(3, "all_reduce", x, "sum"), request(3, "all_reduce", x, "sum"),
            request(3, "all_reduce", np.zeros(12, np.float32), "sum")]
    replies = Fabric(3, Options()).run(reqs)
    assert all(h["type"] == "error" and h["kind"] == "mismatch" for h, _ in replies)
    assert replies[0][0]["message"] == ("all_reduce #3: the ranks disagree on the collective (ranks 0, 1: "
                                        "all_reduce float32[10] sum; rank 2: all_reduce float32[12] sum)")


def test_options_are_checked_against_the_group():
    with pytest.raises(ValueError, match="codec must be one of"):
        Options(codec="bfp2").check(4)
    with pytest.raises(ValueError, match="packet must be a multiple of 32"):
        Options(algorithm="switch", width=1024, packet=48).check(4)
    with pytest.raises(ValueError, match="holds at most 16 NICs"):
        Options(sim="verilator").check(17)
    assert Options.from_env({"AINIC_CODEC": "bfp8", "AINIC_WIDTH": "1024"}) == Options(codec="bfp8", width=1024)
    with pytest.raises(ValueError, match="AINIC_PACKET='x': expected int"):
        Options.from_env({"AINIC_PACKET": "x"})


# -- the service over its sockets ---------------------------------------------------------------------------
class Rank:
    opened = []

    def __init__(self, address, rank, size, options=Options()):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=20)
        Rank.opened.append(self.sock)
        wire.send(self.sock, {"type": "hello", "rank": rank, "size": size, "options": fabric.asdict(options)})
        self.welcome = self.answer()

    def answer(self):
        while True:
            h, p = wire.receive(self.sock)
            if h["type"] != "alive":
                return h, p

    def ask(self, *req, **kw):
        wire.send(self.sock, *request(*req, **kw))
        return self.answer()


@pytest.fixture
def service():
    started = []

    def start(size, timeout_s=2.0, options=Options()):
        proc, address = fabric.spawn(size, options, timeout_s, group="t")
        started.append(proc)
        return proc, address
    yield start
    for p in started:
        p.kill()
        p.wait()
        p.stdin.close()
    while Rank.opened:
        Rank.opened.pop().close()


def test_the_service_times_out_names_the_missing_rank_and_the_collective(service):
    proc, address = service(3, timeout_s=1.0)
    ranks = [Rank(address, r, 3) for r in range(3)]
    x = np.ones(5, np.float32)
    out = {}

    def ask(r):
        out[r] = ranks[r].ask(0, "all_reduce", x, "sum")[0]
    threads = [threading.Thread(target=ask, args=(r,)) for r in (0, 2)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert 0.9 < time.monotonic() - t0 < 5
    for r in (0, 2):
        assert out[r]["kind"] == "timeout"
        assert out[r]["message"] == ("all_reduce #0 of group 't' (3 ranks): rank 1 did not arrive at all_reduce #0 "
                                     "within 1 s (ranks 0, 2 did)")
    # the group is broken: the late rank, and any later collective, hear why at once
    late = ranks[1].ask(0, "all_reduce", x, "sum")[0]
    assert late["kind"] == "timeout" and "the group is broken: rank 1 did not arrive" in late["message"]


def test_a_rank_that_leaves_ends_the_others_collective_at_once(service):
    proc, address = service(3, timeout_s=60)
    ranks = [Rank(address, r, 3) for r in range(3)]
    out = {}

    def ask(r):
        out[r] = ranks[r].ask(4, "broadcast", np.ones(8, np.uint8), root=0)[0]
    threads = [threading.Thread(target=ask, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    ranks[2].sock.close()                   # as a killed process's socket closes
    for t in threads:
        t.join(10)
    for r in (0, 1):
        assert out[r]["kind"] == "left"
        assert out[r]["message"] == ("broadcast #4 of group 't' (3 ranks): rank 2 left: its connection closed "
                                     "without a goodbye (the process exited or was killed)")


def test_the_service_stops_with_its_starter_and_every_rank_hears_it(service):
    proc, address = service(2, timeout_s=60)
    r0, r1 = Rank(address, 0, 2), Rank(address, 1, 2)
    got = {}
    t = threading.Thread(target=lambda: got.update(a=r1.ask(0, "barrier", np.zeros(0, np.uint8))[0]))
    t.start()
    time.sleep(0.3)
    proc.stdin.close()                      # what the starter's death does to the pipe
    t.join(10)
    assert got["a"]["kind"] == "left" and "group rank 0) exited or died" in got["a"]["message"]
    assert proc.wait(timeout=10) == 0
    with pytest.raises(wire.ConnectionClosed):
        r0.answer()


def test_hello_with_other_options_or_a_taken_rank_is_refused(service):
    proc, address = service(2, options=Options(codec="bfp8"))
    bad = Rank(address, 1, 2, Options(codec="bfp4"))
    assert bad.welcome[0]["type"] == "error"
    assert "rank 1 asked for options {'codec': 'bfp4'}, group rank 0 for {'codec': 'bfp8'}" in bad.welcome[0]["message"]
    ok = Rank(address, 0, 2, Options(codec="bfp8"))
    assert ok.welcome[0]["type"] == "welcome"
    assert Rank(address, 0, 2, Options(codec="bfp8")).welcome[0]["message"] == "rank 0 is not a free rank of group 't' (2 ranks)"


@pytest.mark.parametrize("raw", [b"\x00\x00\x00\x05nope!", b"\x00\x00\x00\x02[]", b"\x7f\x00\x00\x00"])
def test_a_malformed_message_is_a_value_error(raw):
    a, b = socket.socketpair()
    with a, b:
        a.sendall(raw)
        with pytest.raises(ValueError):
            wire.receive(b)
