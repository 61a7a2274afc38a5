#!/usr/bin/env python3
"""A plain PyTorch DDP training script — nothing in it knows ainic but the backend's name.

    torchrun --nproc-per-node 4 scripts/ddp_digits.py --backend ainic     # through the simulated NICs
    torchrun --nproc-per-node 4 scripts/ddp_digits.py --backend gloo      # PyTorch's own CPU backend

The ``ainic`` backend takes its options from the environment (``AINIC_CODEC=bfp8``, ``AINIC_ALGORITHM=switch``,
``AINIC_SIM=verilator``, ...: docs/training.md). Rank 0 prints the held-out accuracy after each epoch.
"""

import argparse
import os

import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="ainic")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=16, help="images per rank per step")
    ap.add_argument("--lr", type=float, default=0.05)
    args = ap.parse_args()

    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        torch.tensor(digits.data / 16.0, dtype=torch.float32), torch.tensor(digits.target), test_size=0.25,
        random_state=0, stratify=digits.target)
    train = TensorDataset(x_train, y_train)
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(train, batch_size=args.batch, sampler=sampler, drop_last=True)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()
        with torch.no_grad():
            accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
        if rank == 0:
            print(f"epoch {epoch + 1}: held-out accuracy {100 * accuracy:.2f} % ({args.backend}, {world} ranks"
                  + (f", codec {os.environ.get('AINIC_CODEC', 'none')}" if args.backend == "ainic" else "") + ")",
                  flush=True)
    # every rank holds the same weights: DDP applied the same all-reduced gradients everywhere
    weights = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = [torch.empty_like(weights) for _ in range(world)]
    dist.all_gather(everyone, weights)
    if rank == 0:
        print("weights identical on every rank:", all(torch.equal(everyone[0], w) for w in everyone))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
