"""One rank of bench/pytorch/sharded_bench.py. In one process, four copies of the benchmark
model train side by side, one step each per iteration, in an order that rotates every
iteration, so that all see the same machine at the same moments:
  ddp_gloo        DistributedDataParallel over "gloo" (the default group)
  ddp_tributary   DistributedDataParallel over "tributary" (a group of every rank)
  fsdp_gloo       fully_shard over a 1-D mesh of the gloo group
  fsdp_tributary  fully_shard over a 1-D mesh of the tributary group
The tributary group starts its own coordinator (torchrun's way: nothing else to start).

argv: rank world init_file model warmup iterations
  model: small (4 x 256-wide MLP, 0.27 M parameters, 1.1 MB of float32 gradients) or
         large (8 x 1024-wide, 8.4 M parameters, 33.6 MB)
Prints RESULT {config: [seconds per timed iteration]}."""

import json
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard

import tributary.torch  # noqa: F401  (registers the backend)

SHAPES = {"small": (256, 4), "large": (1024, 8)}
BATCH = 8
CONFIGS = ("ddp_gloo", "ddp_tributary", "fsdp_gloo", "fsdp_tributary")


def make_model(width, layers):
    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*mods, nn.Linear(width, 10))


def sharded(model, group):
    mesh = DeviceMesh.from_group(group, "cpu")
    for m in model:
        if isinstance(m, nn.Linear):
            fully_shard(m, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def main():
    rank, world, init_file, model, warmup, iterations = sys.argv[1:7]
    rank, world, warmup, iterations = int(rank), int(world), int(warmup), int(iterations)
    width, layers = SHAPES[model]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    tributary_group = dist.new_group(backend="tributary")
    gloo_group = dist.group.WORLD
    models = {
        "ddp_gloo": nn.parallel.DistributedDataParallel(make_model(width, layers)),
        "ddp_tributary": nn.parallel.DistributedDataParallel(make_model(width, layers),
                                                             process_group=tributary_group),
        "fsdp_gloo": sharded(make_model(width, layers), gloo_group),
        "fsdp_tributary": sharded(make_model(width, layers), tributary_group),
    }
    optimizers = {k: torch.optim.SGD(m.parameters(), lr=0.01) for k, m in models.items()}
    times = {k: [] for k in CONFIGS}
    for i in range(warmup + iterations):
        g = torch.Generator().manual_seed(rank * 100003 + i)
        x, y = torch.randn(BATCH, width, generator=g), torch.randint(0, 10, (BATCH,), generator=g)
        k = i % len(CONFIGS)
        for name in CONFIGS[k:] + CONFIGS[:k]:
            start = time.perf_counter()
            optimizers[name].zero_grad()
            F.cross_entropy(models[name](x), y).backward()
            optimizers[name].step()
            times[name].append(time.perf_counter() - start)
    dist.barrier()
    dist.destroy_process_group()
    print("RESULT " + json.dumps({k: v[warmup:] for k, v in times.items()}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
