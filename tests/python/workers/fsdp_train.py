"""A few steps of sharded data-parallel training of a small MLP with a given backend: torch's
FullyShardedDataParallel ("fsdp1"), fully_shard over a 1-D mesh ("fsdp2"), or over a 2-D
(replicate, shard) mesh ("hsdp": its replicate and shard dimensions are subgroups). Env://
rendezvous. argv: backend kind out (a path with {rank}). Saves the full parameters after the steps."""

import sys

import numpy
import torch
import torch.distributed as dist

from reference import leave_after_baseline, report

STEPS = 5


def main():
    backend, kind, out = sys.argv[1:4]
    if backend == "tributary":
        import tributary.torch  # noqa: F401  (registers the backend)
    torch.set_num_threads(1)
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(24, 64), torch.nn.ReLU(), torch.nn.Linear(64, 33),
                                torch.nn.ReLU(), torch.nn.Linear(33, 5))
    if kind == "fsdp1":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        sharded = FSDP(model, use_orig_params=True, device_id=torch.device("cpu"))
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = (init_device_mesh("cpu", (world,)) if kind == "fsdp2" else
                init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("replicate", "shard")))
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        sharded = fully_shard(model, mesh=mesh)
    optimizer = torch.optim.Adam(sharded.parameters(), lr=0.01)
    for step in range(STEPS):
        g = torch.Generator().manual_seed(1000 * step + rank)
        x, y = torch.randn(16, 24, generator=g), torch.randint(0, 5, (16,), generator=g)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(sharded(x), y).backward()
        optimizer.step()
    if kind == "fsdp1":
        with FSDP.summon_full_params(sharded):
            params = [p.detach().clone().numpy() for p in sharded.parameters()]
    else:
        params = [p.full_tensor().detach().numpy() for p in sharded.parameters()]
    out = out.format(rank=rank)
    numpy.savez(out, *params)
    dist.destroy_process_group()
    report({"out": out})
    leave_after_baseline(backend)


if __name__ == "__main__":
    sys.exit(main())
