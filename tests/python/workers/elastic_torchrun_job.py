"""An ElasticTrainer job for torchrun, given no coordinator: the trainer finds the run's
through torchrun's agent store (tributary/torch/torchrun.py). On the first attempt rank 1
SIGKILLs itself at step 10; torchrun restarts the workers, which train to the end.
argv: out_dir. Writes out_dir/rank<RANK>.json."""

import json
import os
import signal
import sys
import time

import torch
import torch.nn.functional as F

from tributary.torch import ElasticTrainer

STEPS = 120


def main():
    out_dir = sys.argv[1]
    rank, attempt = int(os.environ["RANK"]), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    trainer = ElasticTrainer(model, optimizer, bucket_cap_mb=0.001)

    def step(ctx):
        if ctx.step >= STEPS:
            return "finished"
        if attempt == 0 and rank == 1 and ctx.step == 10:
            os.kill(os.getpid(), signal.SIGKILL)
        g = torch.Generator().manual_seed(ctx.step * 1000 + ctx.rank)
        x, y = torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)
        ctx.backward(F.cross_entropy(model(x), y))
        optimizer.step()
        time.sleep(0.01)  # a step of some length, so the first attempt cannot finish at once
        return "continue"

    report = trainer.run(step)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"attempt": attempt, "steps": trainer.step, "sha256": trainer.parameters_sha256(),
                   "drained": report.drained}, f)


if __name__ == "__main__":
    sys.exit(main())
