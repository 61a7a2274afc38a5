"""``ainic train``: what ainic's wire codecs do to a real training run, and what the NIC would save per step.

A small network (64 → 128 → 10, ReLU: 9,610 parameters) learns scikit-learn's handwritten digits
(``load_digits``: 1,797 8×8 images that ship inside the package; 1,347 to train, 450 held out, split once,
stratified) with data-parallel SGD on N ranks (processes, :mod:`host_driver.distributed.launch`), unchanged
``DistributedDataParallel``, under each configuration:

* ``gloo fp32``: PyTorch's own CPU backend, the baseline;
* ``<algorithm> <codec>``: the ``ainic`` backend, that codec on the wire and that all-reduce (ring, or switch:
  in-network aggregation), golden model or RTL;
* ``<algorithm> <codec> +EF``: the same with :func:`~host_driver.distributed.hook.compression_hook`'s error
  feedback (lossy codecs only).

Every configuration runs the same seeds (the same initial weights, the same shards and batch order); each
records the training loss, the held-out loss and accuracy after every epoch. :func:`step_time` turns the
measured compute time of a step into the step time with each all-reduce (the calibrated collective model,
:mod:`host_driver.perf.training_model`), for this network and for one LIBRA workload; :func:`rtl_check` runs
a few steps on the RTL and on the golden model and compares the weights bit for bit.
"""

import time
from dataclasses import asdict, dataclass, replace
from datetime import timedelta

import numpy as np

from host_driver.distributed import launch
from host_driver.distributed.fabric import Options

CODECS = ("none", "fp16", "bf16", "bfp8", "bfp4")
ALGORITHMS = ("ring", "switch")
HIDDEN = 128
BASELINE = "gloo fp32"


@dataclass(frozen=True)
class Config:
    """One training setup: ``backend`` "gloo" or "ainic" (with ``options``), and the hook's error feedback."""
    backend: str = "gloo"
    options: Options = None
    error_feedback: bool = False

    @property
    def name(self) -> str:
        if self.backend == "gloo":
            return BASELINE
        return f"{self.options.algorithm} {self.options.codec}" + (" +EF" if self.error_feedback else "")


def configs(codecs=CODECS, algorithms=ALGORITHMS, sim="model", **options) -> list:
    """The baseline, then every algorithm × codec, without and (lossy codecs) with error feedback."""
    out = [Config()]
    for a in algorithms:
        for c in codecs:
            o = Options(codec=c, algorithm=a, sim=sim, **options)
            out.append(Config("ainic", o))
            if c != "none":
                out.append(Config("ainic", o, True))
    return out


@dataclass(frozen=True)
class Schedule:
    """How long and how: ``epochs`` over the training set, ``batch`` samples a rank a step, SGD with
    ``lr`` and ``momentum``; ``steps`` > 0 stops after that many steps (the RTL check)."""
    epochs: int = 20
    batch: int = 16
    lr: float = 0.05
    momentum: float = 0.9
    steps: int = 0


def dataset():
    """(x_train, y_train, x_test, y_test): the digits scaled to [0, 1], split 75 / 25 once (stratified)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(x, d.target.astype(np.int64), test_size=0.25, random_state=0,
                                                        stratify=d.target)
    return x_train, y_train, x_test, y_test


def network(seed: int):
    import torch
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 10))


def shard(n_train: int, rank: int, size: int, seed: int, epoch: int) -> np.ndarray:
    """Rank ``rank``'s samples of this epoch: a seeded permutation, every size-th, all ranks the same count."""
    perm = np.random.default_rng([seed, epoch]).permutation(n_train)
    return perm[rank::size][:n_train // size]


def _train_one(rank, size, config, seed, schedule, data, group):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from host_driver.distributed.hook import CompressionState, compression_hook
    x_train, y_train, x_test, y_test = (torch.from_numpy(a) for a in data)
    model = network(seed)
    ddp = DistributedDataParallel(model, process_group=group)
    if config.error_feedback:
        ddp.register_comm_hook(CompressionState(config.options.codec, group), compression_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=schedule.lr, momentum=schedule.momentum)
    loss_fn = torch.nn.functional.cross_entropy
    curve = {"train_loss": [], "test_loss": [], "test_accuracy": []}
    steps, t0 = 0, time.perf_counter()
    for epoch in range(schedule.epochs):
        mine = shard(len(x_train), rank, size, seed, epoch)
        losses = []
        for i in range(0, len(mine) - schedule.batch + 1, schedule.batch):
            idx = torch.from_numpy(mine[i:i + schedule.batch])
            loss = loss_fn(ddp(x_train[idx]), y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            steps += 1
            if schedule.steps and steps >= schedule.steps:
                break
        with torch.no_grad():
            logits = model(x_test)
            curve["train_loss"].append(float(np.mean(losses)))
            curve["test_loss"].append(loss_fn(logits, y_test).item())
            curve["test_accuracy"].append((logits.argmax(1) == y_test).float().mean().item())
        if schedule.steps and steps >= schedule.steps:
            break
    seconds = time.perf_counter() - t0
    weights = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy().copy()
    # every rank ends with the same weights (each applied the same all-reduced gradient)
    gathered = [torch.zeros_like(torch.from_numpy(weights)) for _ in range(size)]
    dist.all_gather(gathered, torch.from_numpy(weights), group=group)
    same = all(torch.equal(gathered[0], g) for g in gathered)
    return dict(curve, seed=seed, steps=steps, seconds=seconds, ranks_agree=same,
                weights=weights if schedule.steps else None)


def train_rank(rank: int, size: int, plan: list, seeds: list, schedule: Schedule) -> list:
    """Run every Config of ``plan`` for every seed on this rank; rank 0 returns the records."""
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    data = dataset()
    out = []
    for config in plan:
        if config.backend == "gloo":
            group = dist.new_group(backend="gloo")
        else:
            group = dist.new_group(backend="ainic", pg_options=config.options, timeout=timedelta(seconds=300))
        for seed in seeds:
            record = _train_one(rank, size, config, seed, schedule, data, group)
            record.update(name=config.name, counts=dict(getattr(group, "counts", {})),
                          cycles=list(getattr(group, "cycles", [])))
            out.append(record)
        dist.destroy_process_group(group)
    dist.destroy_process_group()
    return out if rank == 0 else None


def compute_seconds(batch: int, repeats: int = 300) -> dict:
    """This machine's time for one step's forward and backward pass of the network on ``batch`` samples, one
    thread (the median of ``repeats``), and its split over the layers by their multiply-adds."""
    import torch
    torch.set_num_threads(1)
    model = network(0)
    x = torch.rand(batch, 64)
    y = torch.randint(0, 10, (batch,))
    times = []
    for _ in range(repeats + 20):
        t = time.perf_counter()
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        times.append(time.perf_counter() - t)
    return {"step_s": float(np.median(times[20:])), "batch": batch, "threads": 1}


def digits_layers(step_s: float, batch: int) -> list:
    """The network as :class:`training_model.Layer` s: the measured step split over the two layers by their
    multiply-adds, a third each to the forward pass, the input gradient and the weight gradient."""
    from host_driver.perf import training_model as tm
    shapes = [(64, HIDDEN), (HIDDEN, 10)]
    macs = [i * o for i, o in shapes]
    out = []
    for k, ((i, o), m) in enumerate(zip(shapes, macs)):
        t = step_s * 1e9 * m / sum(macs) / 3
        out.append(tm.Layer(f"fc{k}", t, t, t, 4 * (i * o + o)))
    return out


def step_time(compute: dict, nodes: int = 4, link_gbps: float = 40.0, codecs=CODECS, workload: str = "ResNet_50"):
    """Per step, for this network (its measured compute) and LIBRA's ``workload``: each all-reduce's step time
    and speedup over the hosts' ring at the same link rate (:func:`training_model.speedup_table`)."""
    from host_driver.perf import libra_inputs as li
    from host_driver.perf import training_model as tm
    host = tm.HostRing(link_gbps)
    backends = tm.ainic_backends(codecs, link_gbps=link_gbps)
    out = {"nodes": nodes, "link_gbps": link_gbps, "host": asdict(host)}
    for name, layers in (("digits", digits_layers(compute["step_s"], compute["batch"])),
                         (workload, tm.from_libra(li.read_workload(li.SHIPPED / "workload" / f"{workload}.txt")))):
        table = tm.speedup_table(layers, [nodes], host, backends)
        out[name] = {"compute_source": "measured here" if name == "digits" else "LIBRA's workload file",
                     "compute_ms": sum(la.forward_ns + la.input_grad_ns + la.weight_grad_ns for la in layers) / 1e6,
                     "gradient_bytes": sum(la.grad_bytes for la in layers),
                     "overlap": {ov: {b: {"step_ms": r["iteration_ms"][0], "speedup": r["speedup"][0]}
                                      for b, r in rows.items()} for ov, rows in table.items()}}
    return out


def summarise(records: list) -> dict:
    """Per configuration: final test accuracy and loss over the seeds (mean, min, max), the mean curves, and
    the gap to the baseline's mean final accuracy in points."""
    by = {}
    for r in records:
        by.setdefault(r["name"], []).append(r)
    out = {}
    for name, rs in by.items():
        acc = [r["test_accuracy"][-1] for r in rs]
        loss = [r["test_loss"][-1] for r in rs]
        out[name] = {"seeds": [r["seed"] for r in rs], "final_accuracy": acc, "final_test_loss": loss,
                     "accuracy_mean": float(np.mean(acc)), "accuracy_min": min(acc), "accuracy_max": max(acc),
                     "test_loss_mean": float(np.mean(loss)),
                     "curves": {k: np.mean([r[k] for r in rs], axis=0).tolist()
                                for k in ("train_loss", "test_loss", "test_accuracy")},
                     "seconds_mean": float(np.mean([r["seconds"] for r in rs])),
                     "ranks_agree": all(r["ranks_agree"] for r in rs),
                     "collectives": rs[0]["counts"]}
    base = out.get(BASELINE, {}).get("accuracy_mean")
    for v in out.values():
        v["points_below_baseline"] = None if base is None else 100 * (base - v["accuracy_mean"])
    return out


def run(nodes: int = 4, seeds=(0, 1, 2), schedule: Schedule = Schedule(), codecs=CODECS, algorithms=ALGORITHMS,
        link_gbps: float = 40.0, timeout: float = 7200.0) -> dict:
    """The whole comparison on the golden model: records, summary, step time."""
    plan = configs(codecs, algorithms)
    t = time.time()
    records = launch.run(train_rank, nodes, plan, list(seeds), schedule, timeout=timeout)[0]
    summary = summarise(records)
    return {"meta": {"nodes": nodes, "seeds": list(seeds), "schedule": asdict(schedule), "hidden": HIDDEN,
                     "parameters": 64 * HIDDEN + HIDDEN + HIDDEN * 10 + 10, "data": "sklearn load_digits, 1,347 "
                     "train / 450 test (stratified, random_state 0)", "backend": "golden model",
                     "wall_seconds": time.time() - t},
            "summary": summary,
            "step_time": step_time(compute_seconds(schedule.batch), nodes, link_gbps, codecs),
            "records": [{k: v for k, v in r.items() if k != "weights"} for r in records]}


def rtl_check(sim: str = "verilator", nodes: int = 4, steps: int = 3, codecs=("bfp8",), algorithms=ALGORITHMS,
              seed: int = 0, timeout: float = 3600.0, **options) -> list:
    """``steps`` steps of the network on the RTL (``sim``) and on the golden model, for each codec and
    algorithm: whether the final weights are identical bit for bit, and the RTL's cycles per collective."""
    schedule = Schedule(epochs=1, steps=steps)
    out = []
    for a in algorithms:
        for c in codecs:
            o = Options(codec=c, algorithm=a, sim=sim, **options)
            rtl = launch.run(train_rank, nodes, [Config("ainic", o)], [seed], schedule, timeout=timeout)[0][0]
            ref = launch.run(train_rank, nodes, [Config("ainic", replace(o, sim="model", bench_nodes=0))], [seed],
                             schedule, timeout=timeout)[0][0]
            out.append({"algorithm": a, "codec": c, "sim": sim, "nodes": nodes, "steps": rtl["steps"],
                        "identical": bool(np.array_equal(rtl["weights"].view(np.uint32),
                                                         ref["weights"].view(np.uint32))),
                        "collectives": rtl["counts"], "cycles": rtl["cycles"], "seconds": rtl["seconds"]})
    return out
