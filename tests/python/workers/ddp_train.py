"""DistributedDataParallel training of the example's CNN on the digits with a given
torch.distributed backend: the same seeds, data and steps whichever the backend.
argv: backend rank world_size init_file steps out.npz [device]. Saves the final parameters.
device (default cpu): where the model and the batches are (cuda:0 for test_cuda.py, every rank
on the one GPU)."""

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

from reference import leave_after_baseline, report  # noqa: E402


def main():
    backend, rank, world, init_file, steps, out = sys.argv[1:7]
    rank, world, steps = int(rank), int(world), int(steps)
    device = torch.device(sys.argv[7] if len(sys.argv) > 7 else "cpu")
    if device.type == "cuda":
        # Comparable with the same job on the CPU: full float32 (no TF32), deterministic convs.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    if backend == "tributary":
        import tributary.torch  # noqa: F401  (registers the backend)
    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    train, _ = digits.load()
    net = models.make("cnn", seed=7).to(device)
    images, labels = train.images.to(device), train.labels.to(device)
    # Small buckets: several all-reduces per step, as a larger model would have.
    ddp = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=0.05)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    shard = digits.shard(len(train), world, rank, seed=3)
    spe = digits.steps_per_epoch(len(train), world, 16)
    for step in range(steps):
        idx = digits.batch_indices(shard, step // spe, step % spe, 16, 3, rank)
        optimizer.zero_grad()
        F.cross_entropy(ddp(images[idx]), labels[idx]).backward()
        optimizer.step()
    numpy.savez(out, *[p.detach().cpu().numpy() for p in net.parameters()])
    dist.destroy_process_group()
    report({"out": out})
    leave_after_baseline(backend)


if __name__ == "__main__":
    sys.exit(main())
