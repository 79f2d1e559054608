"""PyTorch step time, "tributary" vs "gloo": DistributedDataParallel and fully_shard (FSDP2)
in the same processes, 2 and 4 ranks, two model sizes.

    bench/pytorch/sharded_bench.py                      # 3 rounds of N = 2, 4 x small, large
    bench/pytorch/sharded_bench.py --np 2 --rounds 1    # a quick look

Each launch runs N processes of sharded_worker.py: the four configurations (DDP and FSDP over
each backend) train copies of one model side by side, one step each per iteration, in an
order that rotates every iteration, so they see the same machine at the same moments. Rounds
are interleaved: round 1 launches every (N, model), then round 2 does, ... so a change in the
machine's load between rounds hits every configuration alike.

Step time of a configuration: per timed iteration the slowest rank's time for it, median over
the iterations of a launch, then the median over rounds (the rounds' range in brackets). The
ratio is tributary / gloo paired by iteration (median over the iteration's ratios) per round,
then the median over rounds and the rounds' range.

Writes bench/results/pytorch_sharded_<date>.md (or --out). Needs the build (the package in
build/release/python) and .venv's python (scripts/python_env.sh)."""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
WORKER = os.path.join(HERE, "sharded_worker.py")
ITERATIONS = {"small": (3, 30), "large": (2, 12)}  # warm-up, timed
PAIRS = (("DDP", "ddp_gloo", "ddp_tributary"), ("FSDP2", "fsdp_gloo", "fsdp_tributary"))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--np", type=int, nargs="+", default=[2, 4])
    p.add_argument("--models", nargs="+", default=["small", "large"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--timeout-s", type=float, default=600.0, help="per launch")
    p.add_argument("--out", default=os.path.join(
        REPO, "bench", "results", f"pytorch_sharded_{datetime.date.today().isoformat()}.md"))
    return p.parse_args()


def launch(n, model, args, workdir):
    warmup, iterations = ITERATIONS[model]
    init = os.path.join(workdir, f"init-{n}-{model}-{time.monotonic_ns()}")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"),
                                                      os.path.join(REPO, "build", "release",
                                                                   "python")) if p))
    env.pop("TRIBUTARY_COORDINATOR", None)
    procs = [subprocess.Popen([sys.executable, WORKER, str(r), str(n), init, model, str(warmup),
                               str(iterations)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) for r in range(n)]
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=args.timeout_s)
        line = [l for l in out.splitlines() if l.startswith("RESULT ")]
        if p.returncode != 0 or not line:
            raise RuntimeError(f"a rank of N={n} {model} failed (exit {p.returncode})")
        results.append(json.loads(line[-1][len("RESULT "):]))
    return results


def slowest(results, config):
    return [max(r[config][i] for r in results) for i in range(len(results[0][config]))]


def summarize(rounds):
    """Per configuration: the medians of each round; per pair: the paired ratio of each round."""
    out = {"step": {}, "ratio": {}}
    for name, gloo, trib in PAIRS:
        for config in (gloo, trib):
            out["step"][config] = [statistics.median(slowest(r, config)) for r in rounds]
        out["ratio"][name] = [statistics.median(t / g for g, t in zip(slowest(r, gloo),
                                                                        slowest(r, trib)))
                              for r in rounds]
    return out


def fmt(values, scale=1000.0, digits=1):
    med = statistics.median(values) * scale
    return f"{med:.{digits}f} ({min(values) * scale:.{digits}f}-{max(values) * scale:.{digits}f})"


def main():
    args = parse_args()
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_before = os.getloadavg()
    measured = {(n, m): [] for n in args.np for m in args.models}
    with tempfile.TemporaryDirectory() as workdir:
        for r in range(args.rounds):
            for n in args.np:
                for m in args.models:
                    t0 = time.monotonic()
                    measured[(n, m)].append(launch(n, m, args, workdir))
                    print(f"round {r + 1}: N={n} {m} in {time.monotonic() - t0:.0f} s", flush=True)
    load_after = os.getloadavg()
    lines = [
        "# PyTorch DDP and FSDP2 step time: tributary vs gloo",
        "",
        f"Run {started} on this machine (2 cores), `{' '.join(['bench/pytorch/sharded_bench.py'] + sys.argv[1:])}`,",
        f"torch {__import__('torch').__version__}, {args.rounds} interleaved rounds, load average "
        f"{load_before[0]:.1f} before and {load_after[0]:.1f} after (1-minute).",
        "Models: small = 4 x 256-wide MLP (0.27 M parameters, 1.1 MB of gradients), large = 8 x "
        "1024-wide (8.4 M, 33.6 MB); batch 8 per rank, one compute thread per process; the four "
        "configurations train side by side in the same processes (sharded_worker.py).",
        "Step: the slowest rank's step per iteration, median over a round's iterations, median "
        "over rounds (range over rounds), ms. Ratio: tributary / gloo paired by iteration, median "
        "per round, median over rounds (range).",
        "",
        "| model | N | DDP gloo | DDP tributary | DDP ratio | FSDP2 gloo | FSDP2 tributary | FSDP2 ratio |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for m in args.models:
        for n in args.np:
            s = summarize(measured[(n, m)])
            lines.append(
                f"| {m} | {n} | {fmt(s['step']['ddp_gloo'])} | {fmt(s['step']['ddp_tributary'])} | "
                f"{fmt(s['ratio']['DDP'], 1.0, 2)} | {fmt(s['step']['fsdp_gloo'])} | "
                f"{fmt(s['step']['fsdp_tributary'])} | {fmt(s['ratio']['FSDP2'], 1.0, 2)} |")
    text = "\n".join(lines) + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
