"""One rank of bench/pytorch/ddp_bench.py: timed training steps of the benchmark model with
DistributedDataParallel over "gloo" or "tributary", or with tributary's ElasticTrainer.

argv: mode(gloo|tributary|elastic) rank world init_file warmup steps bucket_cap_mb
Prints RESULT {"step_s": [...timed steps...], "overlap": [[comm_s, hidden_s], ...]}."""

import json
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

WIDTH, LAYERS, BATCH = 1024, 8, 32


def make_model():
    """8 x (1024 x 1024 + ReLU) + a 10-way head: 8.4 M parameters, 33.6 MB of float32
    gradients, in 17 parameter tensors of 4 MB and less."""
    torch.manual_seed(0)
    layers = []
    for _ in range(LAYERS):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(WIDTH, 10))


def batch(rank, step):
    g = torch.Generator().manual_seed(rank * 100003 + step)
    return torch.randn(BATCH, WIDTH, generator=g), torch.randint(0, 10, (BATCH,), generator=g)


def run_ddp(backend, rank, world, init_file, warmup, steps, cap):
    if backend == "tributary":
        import tributary.torch  # noqa: F401  (registers the backend)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    model = torch.nn.parallel.DistributedDataParallel(make_model(), bucket_cap_mb=cap)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    times = []
    for step in range(warmup + steps):
        x, y = batch(rank, step)
        start = time.perf_counter()
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    dist.barrier()
    dist.destroy_process_group()
    return {"step_s": times[warmup:], "overlap": []}


def run_elastic(rank_hint, warmup, steps, cap):
    from tributary.torch import ElasticTrainer
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    trainer = ElasticTrainer(model, optimizer, bucket_cap_mb=cap)
    times = []

    def step(ctx):
        if ctx.step >= warmup + steps:
            return "finished"
        x, y = batch(ctx.rank, ctx.step)
        start = time.perf_counter()
        ctx.backward(F.cross_entropy(model(x), y))
        optimizer.step()
        times.append(time.perf_counter() - start)
        return "continue"

    trainer.run(step)
    history = list(trainer.history)[warmup:]
    return {"step_s": times[warmup:], "overlap": [[h["comm_s"], h["hidden_s"]] for h in history]}


def main():
    mode, rank, world, init_file, warmup, steps, cap = sys.argv[1:8]
    rank, world, warmup, steps, cap = int(rank), int(world), int(warmup), int(steps), float(cap)
    torch.set_num_threads(1)
    if mode == "elastic":
        result = run_elastic(rank, warmup, steps, cap)
    else:
        result = run_ddp(mode, rank, world, init_file, warmup, steps, cap)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
