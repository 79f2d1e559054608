"""init_process_group("tributary") twice in one process on one store, as a script may do
under torchrun (whose agent's store outlives the group): the second group must form its own
cluster, not dial the first group's coordinator (gone with it). Env:// rendezvous; argv: none.
Prints RESULT with both sums."""

import os
import sys

import torch
import torch.distributed as dist

import tributary.torch  # noqa: F401  (registers the backend)
from reference import report


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    # One store for both groups, as torchrun's agent store is.
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                          is_master=rank == 0)
    sums = []
    for attempt in range(2):
        dist.init_process_group("tributary", store=store, rank=rank, world_size=world)
        x = torch.tensor([float(rank + attempt)])
        dist.all_reduce(x)
        sums.append(float(x))
        dist.destroy_process_group()
    report({"sums": sums})


if __name__ == "__main__":
    sys.exit(main())
