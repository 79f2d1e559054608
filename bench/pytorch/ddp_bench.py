"""PyTorch step time: DistributedDataParallel over "gloo" vs over "tributary", and how much
of the communication tributary's ElasticTrainer hides behind backward.

    bench/pytorch/ddp_bench.py                       # N = 2 and 4, buckets of 25 and 4 MiB
    bench/pytorch/ddp_bench.py --np 2 --rounds 1     # a quick look

The model (ddp_worker.py) is an 8 x 1024-wide MLP: 8.4 M parameters, 33.6 MB of float32
gradients per step, batch 8 per rank, one compute thread per process. The three
configurations run in the same N processes, one step each per iteration, in an order that
rotates every iteration (ddp_worker.py): on a machine other work shares, that is what makes
them comparable. A round is one launch of N processes.

Step time of a configuration: per timed iteration the slowest rank's time for it, median
over the iterations; per round, and the median over rounds. The paired ratio is the median
over iterations of tributary's time over gloo's in the same iteration.

Overlap, two ways. Hidden time: per step, the seconds the trainer's bucket all-reduces ran
while backward was still running over the seconds they ran in all (tributary/torch/
buckets.py; a bucket waiting for a slower member counts as communication), median over ranks
and steps. Saved cost: (step without communication + all-reduces alone - trainer's step) /
all-reduces alone, from the medians of the same iterations: the share of the communication's
cost the step does not pay.

Writes bench/results/pytorch_ddp_<date>.md (or --out). Needs the build (the package in
build/release/python, build/release/cli/tributary) and .venv's python (scripts/python_env.sh).
"""

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
PACKAGE = os.path.join(REPO, "build", "release", "python")
CONFIGS = ("gloo", "tributary", "elastic", "compute", "comm")
LABELS = {"gloo": "DDP, backend gloo", "tributary": "DDP, backend tributary",
          "elastic": "tributary ElasticTrainer", "compute": "the step without communication",
          "comm": "the trainer's bucket all-reduces alone"}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--np", type=int, nargs="+", default=[2, 4])
    p.add_argument("--rounds", type=int, default=2, help="launches per N")
    p.add_argument("--warmup", type=int, default=3, help="iterations not timed")
    p.add_argument("--iterations", type=int, default=24, help="timed iterations")
    p.add_argument("--bucket-cap-mb", type=float, nargs="+", default=[25.0, 4.0],
                   help="bucket sizes, DDP's and the trainer's alike (default: DDP's 25, and 4)")
    p.add_argument("--timeout-s", type=float, default=900.0, help="per launch")
    p.add_argument("--out", default=os.path.join(
        REPO, "bench", "results", f"pytorch_ddp_{datetime.date.today().isoformat()}.md"))
    return p.parse_args()


def run(n, cap, args, workdir):
    """One launch of n processes: every rank's RESULT."""
    sys.path.insert(0, PACKAGE)
    from tributary.local_coordinator import LocalCoordinator
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(p for p in (PACKAGE, os.environ.get("PYTHONPATH")) if p))
    binary = os.environ.get("TRIBUTARY_BIN",
                            os.path.join(REPO, "build", "release", "cli", "tributary"))
    trainer_dir = os.path.join(workdir, "trainer")
    os.makedirs(trainer_dir, exist_ok=True)
    # A coordinator for the trainer's Workers; the torch.distributed group (a subgroup of the
    # gloo world) starts its own.
    with LocalCoordinator(n, workdir=trainer_dir, binary=binary) as trainer:
        env["TRIBUTARY_SECRET"] = trainer.secret
        init = os.path.join(workdir, f"rendezvous-{n}-{time.monotonic_ns()}")
        procs = [subprocess.Popen(
            [sys.executable, "-B", os.path.join(HERE, "ddp_worker.py"), str(r), str(n), init,
             trainer.endpoint, str(args.warmup), str(args.iterations), str(cap)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for r in range(n)]
        deadline = time.monotonic() + args.timeout_s
        results = []
        try:
            for p in procs:
                out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
                line = next((x for x in out.splitlines() if x.startswith("RESULT ")), None)
                if p.returncode != 0 or line is None:
                    raise RuntimeError(f"N={n}: a rank failed ({p.returncode}):\n{err[-3000:]}")
                results.append(json.loads(line[len("RESULT "):]))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    return results


def slowest(results, config):
    """Per iteration, the slowest rank's time of `config`."""
    return [max(step) for step in zip(*(r[config] for r in results))]


def summarize(results):
    m = {c: statistics.median(slowest(results, c)) for c in CONFIGS}
    m["ratio"] = statistics.median(t / g for t, g in zip(slowest(results, "tributary"),
                                                         slowest(results, "gloo")))
    m["hidden"] = statistics.median(h / c for r in results for c, h in r["overlap"] if c > 0)
    m["saved"] = (m["compute"] + m["comm"] - m["elastic"]) / m["comm"]
    return m


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def ms(seconds):
    return f"{1000 * seconds:.1f}"


def write(args, measured, started, load_before):
    import torch
    lines = [
        "# PyTorch DDP step time: gloo vs tributary, and the elastic trainer's overlap", "",
        "Model: 8 x Linear(1024, 1024) + ReLU, then Linear(1024, 10): 8.4 M parameters, 33.6 MB "
        "of float32 gradients per step; batch 8 per rank (little compute per byte of gradient, "
        "so that communication shows); SGD; one compute thread per process; "
        "gradient buckets of the size in the tables' first column, for DDP and the trainer alike "
        "(25 MiB is DDP's default). "
        "The three configurations train side by side in the same processes, one step each per "
        "iteration, in an order rotating every iteration. Step time = per iteration the slowest "
        "rank, median over the iterations; the paired ratio = median over iterations of "
        "tributary's time / gloo's in the same iteration.", "",
        "## Run", "",
        f"- command: bench/pytorch/ddp_bench.py {' '.join(sys.argv[1:])}".rstrip(),
        f"- rounds (launches) per N: {args.rounds}; warm-up iterations: {args.warmup}; timed "
        f"iterations: {args.iterations}",
        f"- host: {os.cpu_count()} cores; torch {torch.__version__} (Debian); started {started}",
        f"- load average before: {load_before}; after: {load()}", "",
        "## Step time", "",
        "| bucket MiB | N | configuration | step time (ms), median over rounds | per round (ms) |",
        "|---:|---:|---|---:|---|"]
    for (cap, n), rounds in measured.items():
        for c in CONFIGS:
            per_round = [m[c] for m in rounds]
            lines.append(f"| {cap:g} | {n} | {LABELS[c]} | {ms(statistics.median(per_round))} | "
                         + ", ".join(map(ms, per_round)) + " |")
    lines += ["", "| bucket MiB | N | tributary / gloo, paired by iteration (median over rounds) "
              "| per round |", "|---:|---:|---:|---|"]
    for (cap, n), rounds in measured.items():
        ratios = [m["ratio"] for m in rounds]
        lines.append(f"| {cap:g} | {n} | {statistics.median(ratios):.2f} | "
                     + ", ".join(f"{r:.2f}" for r in ratios) + " |")
    lines += ["", "## Communication hidden behind backward (ElasticTrainer)", "",
              "| bucket MiB | N | all-reduces alone (ms) | hidden time, median | per round | "
              "saved cost, median | per round |", "|---:|---:|---:|---:|---|---:|---|"]
    for (cap, n), rounds in measured.items():
        median = lambda key: statistics.median(m[key] for m in rounds)  # noqa: E731
        per = lambda key: ", ".join(f"{100 * m[key]:.0f}%" for m in rounds)  # noqa: E731
        lines.append(f"| {cap:g} | {n} | {ms(median('comm'))} | {100 * median('hidden'):.0f}% | "
                     f"{per('hidden')} | {100 * median('saved'):.0f}% | {per('saved')} |")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    args = parse_args()
    started = datetime.datetime.now().isoformat(timespec="seconds")
    load_before = load()
    measured = {}
    with tempfile.TemporaryDirectory(prefix="ddp-bench-") as workdir:
        for cap in args.bucket_cap_mb:
            for n in args.np:
                measured[(cap, n)] = []
        for r in range(args.rounds):
            for cap in args.bucket_cap_mb:
                for n in args.np:
                    m = summarize(run(n, cap, args, workdir))
                    measured[(cap, n)].append(m)
                    print(f"round {r + 1} cap {cap:g} MiB N={n}: "
                          + ", ".join(f"{c} {ms(m[c])} ms" for c in CONFIGS)
                          + f"; tributary/gloo {m['ratio']:.2f}; hidden "
                          f"{100 * m['hidden']:.0f}%, saved {100 * m['saved']:.0f}%", flush=True)
    write(args, measured, started, load_before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
