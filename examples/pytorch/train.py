"""One worker of elastic data-parallel training of a small CNN on the digits, with
tributary.torch.ElasticTrainer. Start several against one coordinator (launch.py does, with
the demo's fault flags); each prints its final parameters' SHA-256, which every surviving
worker must share, and its test accuracy.

    TRIBUTARY_SECRET=... python3 train.py --coordinator tcp://127.0.0.1:7070

The data is sharded by the world at each step boundary (IID, fixed seed), so a joiner or a
departure re-shards from the next step on; the position in the data (pass, batch) is part of
the state a joiner receives.
"""

import argparse
import json
import math
import os
import signal
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import digits  # noqa: E402
import model as models  # noqa: E402
from tributary.torch import ElasticTrainer  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--coordinator", default=os.environ.get("TRIBUTARY_COORDINATOR"))
    p.add_argument("--epochs", type=int, default=10, help="passes over the training data")
    p.add_argument("--batch", type=int, default=16, help="minibatch per worker")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--model", default="cnn", choices=["cnn", "mlp"])
    p.add_argument("--codec", default="float32", help="float32, or a codec spec (qint8, ...)")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0)
    p.add_argument("--print-every", type=int, default=25, help="steps between progress lines")
    p.add_argument("--step-delay-ms", type=int, default=0, help="extra compute time per step")
    p.add_argument("--kill-at", type=int, default=-1,
                   help="SIGKILL this process in the middle of this global step's backward")
    p.add_argument("--stop-at", type=int, default=-1,
                   help="SIGSTOP this process at this global step (someone must SIGCONT it)")
    p.add_argument("--slow-ms", type=int, default=0,
                   help="make this worker a straggler: extra compute time per step")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--data", default=digits.DEFAULT_PATH)
    p.add_argument("--join-when", default=None,
                   help="join only once this file exists (launch.py's --join-at), at most 600 s")
    return p.parse_args(argv)


def kill_during_backward(net):
    """SIGKILL once the first layer's gradient is computed: the last of backward, when the
    buckets of the later layers are already on their way."""
    first = next(net.parameters())
    first.register_hook(lambda grad: os.kill(os.getpid(), signal.SIGKILL))


def wait_for(path, timeout_s):
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            sys.exit(f"train.py: {path} did not appear within {timeout_s:.0f} s")
        time.sleep(0.02)


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    train, test = digits.load(args.data)
    net = models.make(args.model, args.seed)
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=args.momentum)
    if args.join_when:
        wait_for(args.join_when, 600.0)
    trainer = ElasticTrainer(net, optimizer, coordinator=args.coordinator, codec=args.codec,
                             bucket_cap_mb=args.bucket_cap_mb)
    started = time.monotonic()
    shown = {"header": False, "world": None}
    faults = {"stopped": False}

    def step(ctx):
        spe = digits.steps_per_epoch(len(train), ctx.world_size, args.batch)
        if ctx.batch >= spe:
            ctx.batch, ctx.data_epoch = 0, ctx.data_epoch + 1
        if ctx.data_epoch >= args.epochs:
            return "finished"
        if ctx.step == args.kill_at:
            kill_during_backward(net)
        if ctx.step == args.stop_at and not faults["stopped"]:
            faults["stopped"] = True  # once: after SIGCONT it is evicted and rejoins
            os.kill(os.getpid(), signal.SIGSTOP)
        # Cosine learning rate over the passes: a settled end makes runs comparable.
        progress = (ctx.data_epoch + ctx.batch / spe) / args.epochs
        for group in optimizer.param_groups:
            group["lr"] = args.lr * 0.5 * (1 + math.cos(math.pi * progress))
        shard = digits.shard(len(train), ctx.world_size, ctx.rank, args.seed)
        idx = digits.batch_indices(shard, ctx.data_epoch, ctx.batch, args.batch, args.seed,
                                   ctx.rank)
        if args.step_delay_ms + args.slow_ms:
            time.sleep((args.step_delay_ms + args.slow_ms) / 1000)  # simulated compute
        loss = F.cross_entropy(net(train.images[idx]), train.labels[idx])
        outcomes = ctx.backward(loss)
        optimizer.step()
        ctx.batch += 1
        if ctx.rank == 0:
            if not shown["header"]:
                print(f"training {args.model} on {len(train)} digits, {ctx.world_size} workers, "
                      f"batch {args.batch} each, {spe} steps/epoch, "
                      f"{len(trainer.buckets.buckets)} gradient buckets", flush=True)
                print(f"{'step':>6} {'epoch':>5} {'loss':>9} {'test_acc':>9} {'world':>6} "
                      f"{'view':>6}", flush=True)
                shown["header"] = True
            elif shown["world"] != ctx.world_size:
                print(f"-- world is now {ctx.world_size} workers (view {ctx.epoch}), "
                      f"{spe} steps/epoch", flush=True)
            shown["world"] = ctx.world_size
            if (ctx.step + 1) % args.print_every == 0:
                print(f"{ctx.step + 1:>6} {ctx.data_epoch:>5} {float(loss):>9.4f} "
                      f"{100 * models.accuracy(net, test):>8.2f}% "
                      f"{min(o.contributors for o in outcomes):>6} {ctx.epoch:>6}", flush=True)
        return "continue"

    report = trainer.run(step)
    history = list(trainer.history)
    result = {
        "sha256": trainer.parameters_sha256(),
        "accuracy": models.accuracy(net, test),
        "steps": trainer.step,
        "drained": report.drained,
        "joins": report.joins,
        "world_size": report.world_size,
        "rank": report.rank,
        "seconds": time.monotonic() - started,
        # Steps a view change went through: a bucket re-run, or buckets with different
        # contributors (some committed before a member died, the rest re-run without it).
        "recovered_steps": [h for h in history if h["attempts"] > 1 or
                            len(set(h["contributors"])) > 1],
        "contributors_seen": sorted({c for h in history for c in h["contributors"]}),
    }
    status = "drained" if report.drained else f"{100 * result['accuracy']:.2f}% test accuracy"
    print(f"final: params sha256 {result['sha256']} after {result['steps']} steps, {status}",
          flush=True)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
