"""A torch.distributed job as users write it for torchrun, unchanged but for the import that
registers the backend: init_process_group("tributary") with nothing else configured, a
collective, a subgroup per node, a point-to-point ring, a few DistributedDataParallel steps.
argv: out_dir. Writes out_dir/rank<RANK>.json with what it saw."""

import json
import os
import sys

import torch
import torch.distributed as dist

import tributary.torch  # noqa: F401  (registers "tributary")


def main():
    out_dir = sys.argv[1]
    dist.init_process_group("tributary")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ["LOCAL_WORLD_SIZE"])
    seen = {"rank": rank, "world": world, "restarts": int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0))}
    x = torch.tensor([float(rank)])
    dist.all_reduce(x)
    seen["sum_of_ranks"] = float(x)
    node_groups, _ = dist.new_subgroups(group_size=local)
    y = torch.tensor([float(rank)])
    dist.all_reduce(y, group=node_groups)
    seen["node_sum"] = float(y)
    got = torch.zeros(1)
    reqs = [dist.irecv(got, src=(rank - 1) % world), dist.isend(torch.tensor([float(rank)]),
                                                               dst=(rank + 1) % world)]
    for r in reqs:
        r.wait()
    seen["ring_from"] = float(got)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        torch.manual_seed(100 * step + rank)
        opt.zero_grad()
        model(torch.randn(4, 8)).square().sum().backward()
        opt.step()
    seen["weights"] = [round(float(v), 6) for v in model.module.weight.detach().reshape(-1)]
    dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(seen, f)


if __name__ == "__main__":
    sys.exit(main())
