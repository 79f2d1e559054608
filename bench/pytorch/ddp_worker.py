"""One rank of bench/pytorch/ddp_bench.py. In one process, copies of the benchmark model
train side by side, one step each per iteration, in an order that rotates every iteration:
  gloo       DistributedDataParallel over "gloo" (the default group)
  tributary  DistributedDataParallel over "tributary" (dist.new_group(backend="tributary"),
             which starts a coordinator of its own)
  elastic    tributary's ElasticTrainer (on the coordinator in argv)
  compute    the same step without communication (a local model)
  comm       the trainer's bucket all-reduces alone, without compute
So all of them see the same machine at the same moments, which on a shared machine matters
more than anything else; compute and comm give the overlap's baseline.

argv: rank world init_file trainer_coordinator warmup iterations bucket_cap_mb
Prints RESULT {config: [seconds per timed iteration], "overlap": [[comm_s, hidden_s], ...]}."""

import json
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import tributary.torch  # registers the backend
from tributary.torch import ElasticTrainer

WIDTH, LAYERS, BATCH = 1024, 8, 8
CONFIGS = ("gloo", "tributary", "elastic", "compute", "comm")


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


def main():
    rank, world, init_file, trainer_coordinator, warmup, iterations, cap = sys.argv[1:8]
    rank, world, warmup, iterations, cap = (int(rank), int(world), int(warmup), int(iterations),
                                            float(cap))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    tributary_group = dist.new_group(backend="tributary")
    models = {
        "gloo": nn.parallel.DistributedDataParallel(make_model(), bucket_cap_mb=cap),
        "tributary": nn.parallel.DistributedDataParallel(make_model(), bucket_cap_mb=cap,
                                                         process_group=tributary_group),
    }
    models["compute"] = make_model()
    optimizers = {k: torch.optim.SGD(m.parameters(), lr=0.01) for k, m in models.items()}
    elastic_model = make_model()
    optimizers["elastic"] = torch.optim.SGD(elastic_model.parameters(), lr=0.01)
    trainer = ElasticTrainer(elastic_model, optimizers["elastic"], coordinator=trainer_coordinator,
                             bucket_cap_mb=cap)
    times = {k: [] for k in CONFIGS}

    def local_step(name, x, y):
        optimizers[name].zero_grad()
        F.cross_entropy(models[name](x), y).backward()
        optimizers[name].step()

    def communicate(worker):
        buckets = trainer.buckets.buckets
        works = [worker.all_reduce(b.flats[0], op="avg", out=b.flats[1], async_op=True)
                 for b in buckets]
        for w in works:
            w.wait()

    def step(ctx):
        i = ctx.step
        if i >= warmup + iterations:
            return "finished"
        x, y = batch(rank, i)
        k = i % len(CONFIGS)
        for name in CONFIGS[k:] + CONFIGS[:k]:
            start = time.perf_counter()
            if name == "elastic":
                ctx.backward(F.cross_entropy(elastic_model(x), y))
                optimizers["elastic"].step()
            elif name == "comm":
                communicate(ctx.worker)
            else:
                local_step(name, x, y)
            times[name].append(time.perf_counter() - start)
        return "continue"

    trainer.run(step)
    dist.barrier()
    dist.destroy_process_group()
    history = list(trainer.history)[warmup:]
    result = {k: v[warmup:] for k, v in times.items()}
    result["overlap"] = [[h["comm_s"], h["hidden_s"]] for h in history]
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
