#!/usr/bin/env python3
"""Aggregate a bench/compare.sh run directory into a Markdown report.

Reads every r*_np*.log in the run directory. A log holds rows in the shared format

  # <system> allreduce np=<N> ...
  #       size        count    type   redop        algo     time_us  algbw(GB/s)  busbw(GB/s)  #wrong
          4096         1024   float     sum        ring       41.20        0.099        0.149       0

The header line names the system and N; if a bench prints no header, the file
name (r<rep>_np<N>_<system>_<band>.log) does. Each log is one repetition.
Also reads r<rep>_iperf3_oneway.json / r<rep>_iperf3_bidir.json /
r<rep>_iperf3_agg_<i>.json and meta.txt.

Per (system, algo, N, size): median time and median busbw over repetitions.
Stdlib only.
"""
import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

HEADER_RE = re.compile(r"^#\s*(\S+)\s+allreduce\s+np=(\d+)")
NAME_RE = re.compile(r"^r(\d+)_np(\d+)_([A-Za-z0-9]+)_")
SMALL = 4096  # the latency size


def parse_row(line):
    f = line.split()
    # Tributary's rows add a tenth column (the cost model's prediction): not aggregated.
    if len(f) not in (9, 10) or line.lstrip().startswith("#"):
        return None
    try:
        return {
            "size": int(f[0]), "count": int(f[1]), "type": f[2], "redop": f[3],
            "algo": f[4], "time_us": float(f[5]), "algbw": float(f[6]),
            "busbw": float(f[7]), "wrong": int(f[8]),
        }
    except ValueError:
        return None


def read_logs(run_dir):
    """Returns {(system, algo, np, size): [row, ...]} and a list of notes."""
    samples = defaultdict(list)
    notes = []
    for log in sorted(run_dir.glob("r*_np*.log")):
        m = NAME_RE.match(log.name)
        system, np_ = (m.group(3), int(m.group(2))) if m else (None, None)
        for line in log.read_text(errors="replace").splitlines():
            h = HEADER_RE.match(line)
            if h:
                system, np_ = h.group(1), int(h.group(2))
                continue
            if line.startswith("# FAILED") or line.startswith("# skipped"):
                notes.append(f"{log.name}: {line[2:]}")
                continue
            row = parse_row(line)
            if row is None or system is None:
                continue
            samples[(system, row["algo"], np_, row["size"])].append(row)
    return samples, notes


def iperf_gbps(path, keys):
    try:
        end = json.loads(path.read_text())["end"]
        return [end[k]["bits_per_second"] / 8e9 for k in keys]
    except (OSError, ValueError, KeyError):
        return None


def read_iperf(run_dir):
    oneway, fwd, rev = [], [], []
    for p in sorted(run_dir.glob("r*_iperf3_oneway.json")):
        v = iperf_gbps(p, ["sum_received"])
        if v:
            oneway.append(v[0])
    for p in sorted(run_dir.glob("r*_iperf3_bidir.json")):
        v = iperf_gbps(p, ["sum_received", "sum_received_bidir_reverse"])
        if v:
            fwd.append(v[0])
            rev.append(v[1])
    return oneway, fwd, rev


def read_iperf_aggregate(run_dir):
    """Per repetition, the sum over the concurrent streams (r<rep>_iperf3_agg_<i>.json)."""
    per_rep = defaultdict(list)
    for p in sorted(run_dir.glob("r*_iperf3_agg_*.json")):
        m = re.match(r"r(\d+)_iperf3_agg_(\d+)\.json$", p.name)
        v = iperf_gbps(p, ["sum_received"]) if m else None
        per_rep[m.group(1) if m else None].append(v[0] if v else None)
    # A repetition with a failed stream has no sum: it would understate the capacity.
    return [sum(v) for k, v in sorted(per_rep.items()) if k and None not in v]


def read_load(run_dir):
    """CPU pressure samples (percent) taken before each launch."""
    psi = []
    path = run_dir / "load.txt"
    if path.exists():
        for m in re.finditer(r"psi_cpu_some_avg10=([0-9.]+)", path.read_text()):
            psi.append(float(m.group(1)))
    return psi


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(x, spec=".3f"):
    return "–" if x is None else format(x, spec)


def human(size):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--shm", action="store_true",
                    help="a compare.sh --shm run: Open MPI vader, Tributary shm and TCP")
    args = ap.parse_args()

    samples, notes = read_logs(args.runs)
    oneway, bidir_fwd, bidir_rev = read_iperf(args.runs)
    iperf_one = med(oneway)
    bidir_per_dir = [(a + b) / 2 for a, b in zip(bidir_fwd, bidir_rev)]
    iperf_bidir = med(bidir_per_dir)
    aggregate = read_iperf_aggregate(args.runs)
    iperf_agg = med(aggregate)

    # Medians per (system, algo, np, size).
    stats = {}
    for key, rows in samples.items():
        stats[key] = {
            "time_us": med([r["time_us"] for r in rows]),
            "busbw": med([r["busbw"] for r in rows]),
            "algbw": med([r["algbw"] for r in rows]),
            "busbw_min": min(r["busbw"] for r in rows),
            "busbw_max": max(r["busbw"] for r in rows),
            "wrong": max(r["wrong"] for r in rows),
            "n": len(rows),
        }
    nps = sorted({k[2] for k in stats})
    sizes = sorted({k[3] for k in stats})
    systems = sorted({k[0] for k in stats})

    def best(system, np_, size, by):
        """(algo, stats) of `system` at (np, size): max busbw or min time."""
        cands = [(k[1], s) for k, s in stats.items()
                 if k[0] == system and k[2] == np_ and k[3] == size]
        if not cands:
            return None, None
        if by == "busbw":
            return max(cands, key=lambda c: c[1]["busbw"])
        return min(cands, key=lambda c: c[1]["time_us"])

    out = []
    w = out.append
    if args.shm:
        w("# Same-host all-reduce: Tributary shared memory vs Open MPI vader vs "
          "Tributary TCP\n")
    else:
        w("# All-reduce comparison: Tributary vs Open MPI vs Gloo (loopback TCP)\n")
    w("float32 sum, nccl-tests method: time = mean over timed iterations after "
      "warm-up, max over ranks; algbw = bytes/time; busbw = algbw·2(n−1)/n; "
      "#wrong from a separate check pass (exact small-integer sums, every "
      "element compared). Values below are **medians over repetitions**; "
      "GB/s = 10⁹ B/s.\n")
    meta = args.runs / "meta.txt"
    if meta.exists():
        w("## Run\n")
        for line in meta.read_text().splitlines():
            w(f"- {line}")
        w("")
    psi = read_load(args.runs)
    if psi:
        w(f"CPU pressure before each launch (PSI cpu some avg10, % of time "
          f"runnable tasks waited for a CPU): median {statistics.median(psi):.0f}%, "
          f"max {max(psi):.0f}% over {len(psi)} launches.\n")
        if statistics.median(psi) > 20:
            w("> **Warning: measured on a contended machine** (other work was "
              "competing for the CPUs); absolute numbers are pessimistic and "
              "noisy. Compare systems only within this run.\n")
    if args.shm:
        shm_summary(w, nps, sizes, best)
        all_medians(w, stats, None, None)
        return finish(w, out, stats, notes, args.out)
    if "tributary" not in systems:
        w("> **Tributary not included in this run** (its bench binary was "
          "missing); the Tributary columns and ratios are empty.\n")

    w("## Link baseline: iperf3 on 127.0.0.1\n")
    w("| test | median GB/s | samples |")
    w("|---|---:|---|")
    w(f"| one stream, one way | {fmt(iperf_one)} | "
      f"{', '.join(fmt(x) for x in oneway) or '–'} |")
    w(f"| --bidir, per direction (mean of both) | {fmt(iperf_bidir)} | "
      f"{', '.join(f'{fmt(a)}/{fmt(b)}' for a, b in zip(bidir_fwd, bidir_rev)) or '–'} |")
    w(f"| 4 streams at once (4 processes, 2 each way, 1 MiB writes), sum | {fmt(iperf_agg)} | "
      f"{', '.join(fmt(x) for x in aggregate) or '–'} |")
    w("")
    w("The sum of concurrent streams is the machine's loopback TCP capacity. Every "
      "bandwidth-optimal all-reduce (ring, halving-doubling) makes each rank send "
      "2(N−1)/N of the buffer, so N ranks together push N·busbw bytes/s through "
      "loopback: that capacity ÷ N (the \"TCP ceiling\" below) is busbw no library "
      "can be expected to pass, since iperf3 does nothing with the bytes.\n")

    w("## Summary per (N, size)\n")
    w("Trib/MPI and Trib/Gloo are busbw ratios (>1: Tributary faster), against "
      "Open MPI and the best Gloo algorithm at that point.\n")
    w("| N | size | Open MPI busbw | best Gloo busbw (algo) | Tributary busbw (algo) "
      "| Trib/MPI | Trib/Gloo | TCP ceiling | Trib/ceiling |")
    w("|---:|---:|---:|---|---|---:|---:|---:|---:|")
    for np_ in nps:
        for size in sizes:
            _, mpi = best("openmpi", np_, size, "busbw")
            galgo, gloo = best("gloo", np_, size, "busbw")
            talgo, trib = best("tributary", np_, size, "busbw")
            if not (mpi or gloo or trib):
                continue
            ceiling = ratio(iperf_agg, np_)
            g = f"{fmt(gloo['busbw'])} ({galgo})" if gloo else "–"
            t = f"{fmt(trib['busbw'])} ({talgo})" if trib else "–"
            w(f"| {np_} | {human(size)} | {fmt(mpi and mpi['busbw'])} | {g} | {t} | "
              f"{fmt(ratio(trib and trib['busbw'], mpi and mpi['busbw']), '.2f')} | "
              f"{fmt(ratio(trib and trib['busbw'], gloo and gloo['busbw']), '.2f')} | "
              f"{fmt(ceiling)} | {fmt(ratio(trib and trib['busbw'], ceiling), '.2f')} |")
    w("")

    w(f"## Latency at {human(SMALL)}\n")
    w("Time ratios (<1: Tributary faster), against Open MPI and the fastest "
      "Gloo algorithm at this size.\n")
    w("| N | Open MPI µs | fastest Gloo µs (algo) | Tributary µs (algo) | Trib/MPI | Trib/Gloo |")
    w("|---:|---:|---|---|---:|---:|")
    for np_ in nps:
        _, mpi = best("openmpi", np_, SMALL, "time")
        galgo, gloo = best("gloo", np_, SMALL, "time")
        talgo, trib = best("tributary", np_, SMALL, "time")
        if not (mpi or gloo or trib):
            continue
        g = f"{fmt(gloo['time_us'], '.1f')} ({galgo})" if gloo else "–"
        t = f"{fmt(trib['time_us'], '.1f')} ({talgo})" if trib else "–"
        w(f"| {np_} | {fmt(mpi and mpi['time_us'], '.1f')} | {g} | {t} | "
          f"{fmt(ratio(trib and trib['time_us'], mpi and mpi['time_us']), '.2f')} | "
          f"{fmt(ratio(trib and trib['time_us'], gloo and gloo['time_us']), '.2f')} |")
    w("")

    all_medians(w, stats, iperf_one, iperf_bidir)
    return finish(w, out, stats, notes, args.out)


SHM_SYSTEMS = (("openmpi", "Open MPI vader"), ("tributaryshm", "Tributary shm"),
               ("tributarytcp", "Tributary TCP"))


def shm_summary(w, nps, sizes, best):
    """The --shm tables: busbw per (N, size), then 4 KiB latency; shm against the others."""
    def cell(entry, key, spec):
        algo, s = entry
        if s is None:
            return "–"
        value = fmt(s[key], spec)
        return value if algo == "default" else f"{value} ({algo})"

    for by, key, spec, sizes_here, title, explain in (
            ("busbw", "busbw", ".3f", sizes, "## Summary per (N, size)\n",
             "Ratios of busbw (>1: Tributary's shared memory faster); Tributary's "
             "algorithm is its automatic choice.\n"),
            ("time", "time_us", ".1f", [SMALL], f"## Latency at {human(SMALL)}\n",
             "Ratios of time (<1: Tributary's shared memory faster; the goal against "
             "vader is <= 1.2).\n")):
        w(title)
        w(explain)
        unit = "busbw GB/s" if by == "busbw" else "µs"
        w("| N | size | " + " | ".join(f"{label} {unit}" for _, label in SHM_SYSTEMS) +
          " | shm/vader | shm/TCP |")
        w("|---:|---:|" + "---:|" * (len(SHM_SYSTEMS) + 2))
        for np_ in nps:
            for size in sizes_here:
                got = {system: best(system, np_, size, by) for system, _ in SHM_SYSTEMS}
                if not any(s for _, s in got.values()):
                    continue
                shm = got["tributaryshm"][1]
                ratios = [ratio(shm and shm[key], other and other[key])
                          for other in (got["openmpi"][1], got["tributarytcp"][1])]
                w(f"| {np_} | {human(size)} | " +
                  " | ".join(cell(got[system], key, spec) for system, _ in SHM_SYSTEMS) +
                  " | " + " | ".join(fmt(r, ".2f") for r in ratios) + " |")
        w("")


def all_medians(w, stats, iperf_one, iperf_bidir):
    w("## All medians\n")
    w("busbw/iperf1 = busbw ÷ iperf3 one-way; busbw/iperf⇄ = busbw ÷ iperf3 "
      "--bidir per-direction rate. busbw range = min–max over repetitions.\n")
    w("| N | size | system | algo | time µs | algbw GB/s | busbw GB/s | busbw range "
      "| busbw/iperf1 | busbw/iperf⇄ | #wrong (max) | reps |")
    w("|---:|---:|---|---|---:|---:|---:|---|---:|---:|---:|---:|")
    for key in sorted(stats, key=lambda k: (k[2], k[3], k[0], k[1])):
        system, algo, np_, size = key
        s = stats[key]
        w(f"| {np_} | {human(size)} | {system} | {algo} | {fmt(s['time_us'], '.1f')} | "
          f"{fmt(s['algbw'])} | {fmt(s['busbw'])} | "
          f"{fmt(s['busbw_min'])}–{fmt(s['busbw_max'])} | "
          f"{fmt(ratio(s['busbw'], iperf_one), '.2f')} | "
          f"{fmt(ratio(s['busbw'], iperf_bidir), '.2f')} | {s['wrong']} | {s['n']} |")
    w("")


def finish(w, out, stats, notes, path):
    wrong = [k for k, s in stats.items() if s["wrong"]]
    if wrong or notes:
        w("## Problems\n")
        for k in sorted(wrong):
            w(f"- #wrong > 0: {k[0]} {k[1]} np={k[2]} size={k[3]}")
        for n in notes:
            w(f"- {n}")
        w("")
    path.write_text("\n".join(out))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
