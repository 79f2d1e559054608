"""PyTorch step time: DistributedDataParallel over "gloo" vs over "tributary", and how much
of the communication tributary's ElasticTrainer hides behind backward.

    bench/pytorch/ddp_bench.py                       # N = 2 and 4, 3 rounds
    bench/pytorch/ddp_bench.py --np 2 --rounds 1     # a quick look

The model (ddp_worker.py) is an 8 x 1024-wide MLP: 8.4 M parameters, 33.6 MB of float32
gradients per step, batch 32 per rank, one compute thread per process. Each round runs
every configuration once, in an order that rotates from round to round (gloo, tributary,
elastic; then tributary, elastic, gloo; ...), so the machine's load falls on all of them.

Step time of a run: per timed step the slowest rank's time, median over the steps. Reported:
the median over rounds, and the rounds' range. Overlap of a run: per step, the seconds the
gradient buckets' all-reduces ran while backward was still running, over the seconds they
ran in all (buckets.py); reported as the median over ranks and steps, then over rounds.

Writes bench/results/pytorch_ddp_<date>.md (or --out). Needs the build (the package in
build/release/python, build/release/cli/tributary) and Debian's python3-torch.
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
MODES = ("gloo", "tributary", "elastic")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--np", type=int, nargs="+", default=[2, 4])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP's and the trainer's")
    p.add_argument("--timeout-s", type=float, default=300.0, help="per run")
    p.add_argument("--out", default=os.path.join(
        REPO, "bench", "results", f"pytorch_ddp_{datetime.date.today().isoformat()}.md"))
    return p.parse_args()


def run(mode, n, args, workdir):
    """One configuration at world size n: every rank's RESULT."""
    sys.path.insert(0, PACKAGE)
    from tributary.local_coordinator import LocalCoordinator
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(p for p in (PACKAGE, os.environ.get("PYTHONPATH")) if p))
    coordinator = None
    if mode != "gloo":
        coordinator = LocalCoordinator(n, workdir=workdir, binary=os.environ.get(
            "TRIBUTARY_BIN", os.path.join(REPO, "build", "release", "cli", "tributary")))
        env.update(coordinator.environment())
    init = os.path.join(workdir, f"rendezvous-{mode}-{n}-{time.monotonic_ns()}")
    procs = [subprocess.Popen(
        [sys.executable, "-B", os.path.join(HERE, "ddp_worker.py"), mode, str(r), str(n), init,
         str(args.warmup), str(args.steps), str(args.bucket_cap_mb)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(n)]
    deadline = time.monotonic() + args.timeout_s
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            line = next((l for l in out.splitlines() if l.startswith("RESULT ")), None)
            if p.returncode != 0 or line is None:
                raise RuntimeError(f"{mode} N={n}: a rank failed ({p.returncode}):\n{err[-2000:]}")
            results.append(json.loads(line[len("RESULT "):]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if coordinator:
            coordinator.stop()
    return results


def step_time(results):
    """Median over timed steps of the slowest rank's time."""
    return statistics.median(max(steps) for steps in zip(*(r["step_s"] for r in results)))


def overlap(results):
    fractions = [hidden / comm for r in results for comm, hidden in r["overlap"] if comm > 0]
    comm = [c for r in results for c, _ in r["overlap"]]
    return statistics.median(fractions), statistics.median(comm)


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def write(args, measured, started, load_before):
    import torch
    lines = ["# PyTorch DDP step time: gloo vs tributary, and the elastic trainer's overlap", ""]
    lines += [
        "Model: 8 x Linear(1024, 1024) + ReLU, then Linear(1024, 10): 8.4 M parameters, "
        "33.6 MB of float32 gradients per step; batch 32 per rank; SGD; one compute thread per "
        f"process; buckets of {args.bucket_cap_mb:g} MiB (DDP's default) for DDP and the elastic "
        "trainer alike. Step time = per timed step the slowest rank, median over steps; "
        "the table gives the median over rounds and the rounds' range.", "",
        "## Run", "",
        f"- command: bench/pytorch/ddp_bench.py {' '.join(sys.argv[1:])}".rstrip(),
        f"- rounds: {args.rounds}, warm-up steps: {args.warmup}, timed steps: {args.steps}; "
        "configurations interleaved, their order rotating per round",
        f"- host: {os.cpu_count()} cores; torch {torch.__version__} (Debian); "
        f"started {started}",
        f"- load average before: {load_before}; after: {load()}", ""]
    lines += ["## Step time", "",
              "| N | configuration | step time (ms) | range over rounds (ms) | per round (ms) |",
              "|---:|---|---:|---|---|"]
    for n in args.np:
        for mode in MODES:
            per_round = [m["step"] for m in measured[(mode, n)]]
            label = {"gloo": "DDP, backend gloo", "tributary": "DDP, backend tributary",
                     "elastic": "tributary ElasticTrainer"}[mode]
            lines.append(f"| {n} | {label} | {1000 * statistics.median(per_round):.1f} | "
                         f"{1000 * min(per_round):.1f}–{1000 * max(per_round):.1f} | "
                         + ", ".join(f"{1000 * t:.1f}" for t in per_round) + " |")
    lines += ["", "| N | tributary / gloo (DDP step time, medians) |", "|---:|---:|"]
    for n in args.np:
        g = statistics.median(m["step"] for m in measured[("gloo", n)])
        t = statistics.median(m["step"] for m in measured[("tributary", n)])
        lines.append(f"| {n} | {t / g:.2f} |")
    lines += ["", "## Communication hidden behind backward (ElasticTrainer)", "",
              "| N | all-reduce time per step (ms) | hidden behind backward | per round |",
              "|---:|---:|---:|---|"]
    for n in args.np:
        rounds = measured[("elastic", n)]
        lines.append(f"| {n} | {1000 * statistics.median(m['comm'] for m in rounds):.1f} | "
                     f"{100 * statistics.median(m['hidden'] for m in rounds):.0f}% | "
                     + ", ".join(f"{100 * m['hidden']:.0f}%" for m in rounds) + " |")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    args = parse_args()
    started = datetime.datetime.now().isoformat(timespec="seconds")
    load_before = load()
    measured = {}
    with tempfile.TemporaryDirectory(prefix="ddp-bench-") as workdir:
        for r in range(args.rounds):
            for n in args.np:
                order = MODES[r % 3:] + MODES[:r % 3]
                for mode in order:
                    results = run(mode, n, args, workdir)
                    m = {"step": step_time(results)}
                    if mode == "elastic":
                        m["hidden"], m["comm"] = overlap(results)
                    measured.setdefault((mode, n), []).append(m)
                    print(f"round {r + 1} N={n} {mode}: step {1000 * m['step']:.1f} ms"
                          + (f", hidden {100 * m['hidden']:.0f}%" if "hidden" in m else ""),
                          flush=True)
    write(args, measured, started, load_before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
