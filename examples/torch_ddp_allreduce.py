"""A small PyTorch distributed job: every rank all-reduces its rank + 1 and checks the sum.

Launched by torchrun (see examples/launch-torchrun.yaml); uses the NCCL backend when CUDA is
available and gloo otherwise, so it also runs on CPU-only machines. With ``--out DIR`` each rank
writes ``DIR/rank-<rank>.json``; with ``--steps N`` it also trains a tiny DDP model N steps.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path

import torch
import torch.distributed as dist


def main(argv: list[str] | None = None) -> int:
    """Join the process group, all-reduce, report; exit 0 when the sum is right."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", default=None, help="nccl or gloo (default: nccl with CUDA, else gloo)")
    parser.add_argument("--out", default=None, help="directory for one JSON file per rank")
    parser.add_argument("--steps", type=int, default=0, help="DDP training steps on a tiny model")
    args = parser.parse_args(argv)

    use_cuda = torch.cuda.is_available() and args.backend != "gloo"
    backend = args.backend or ("nccl" if use_cuda else "gloo")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(backend=backend)
    rank, world = dist.get_rank(), dist.get_world_size()

    value = torch.tensor([float(rank + 1)], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    expected = world * (world + 1) / 2

    loss = None
    if args.steps:
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 1).to(device)
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if use_cuda else None)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        for _ in range(args.steps):
            x = torch.randn(32, 8, device=device)
            out = ddp(x).pow(2).mean()
            opt.zero_grad()
            out.backward()
            opt.step()
            loss = float(out.detach())

    report = {
        "rank": rank, "world_size": world, "local_rank": local_rank, "backend": backend,
        "host": socket.gethostname(), "allreduce": float(value.item()), "expected": expected, "loss": loss,
        "job_id": os.environ.get("HPCJOBS_JOB_ID"), "node_rank": os.environ.get("GROUP_RANK"),
    }
    print(json.dumps(report), flush=True)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / f"rank-{rank}.json").write_text(json.dumps(report) + "\n")
    dist.barrier()
    dist.destroy_process_group()
    return 0 if value.item() == expected else 1


if __name__ == "__main__":
    sys.exit(main())
