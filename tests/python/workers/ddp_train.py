"""DistributedDataParallel training of the example's CNN on the digits with a given
torch.distributed backend: the same seeds, data and steps whichever the backend.
argv: backend rank world_size init_file steps out.npz. Saves the final parameters."""

import os
import sys

import numpy
import torch
import torch.distributed as dist
import torch.nn.functional as F

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "examples", "pytorch"))
import digits  # noqa: E402
import model as models  # noqa: E402

from reference import report  # noqa: E402


def main():
    backend, rank, world, init_file, steps, out = sys.argv[1:7]
    rank, world, steps = int(rank), int(world), int(steps)
    if backend == "tributary":
        import tributary.torch  # noqa: F401  (registers the backend)
    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    train, _ = digits.load()
    net = models.make("cnn", seed=7)
    # Small buckets: several all-reduces per step, as a larger model would have.
    ddp = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=0.05)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    shard = digits.shard(len(train), world, rank, seed=3)
    spe = digits.steps_per_epoch(len(train), world, 16)
    for step in range(steps):
        idx = digits.batch_indices(shard, step // spe, step % spe, 16, 3, rank)
        optimizer.zero_grad()
        F.cross_entropy(ddp(train.images[idx]), train.labels[idx]).backward()
        optimizer.step()
    numpy.savez(out, *[p.detach().numpy() for p in net.parameters()])
    dist.destroy_process_group()
    report({"out": out})


if __name__ == "__main__":
    sys.exit(main())
