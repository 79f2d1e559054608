#!/usr/bin/python3
"""Plots for the benchmark tables in bench/results/, written next to each table (the same
name with .png), or into --out-dir:

  plot_results.py compare FILE.md   busbw vs message size, one panel per N, a line per
                                    library (Gloo: its best algorithm at each size; bars:
                                    min-max over repetitions), the iperf3 link as reference
  plot_results.py churn FILE.md     time-to-detect and time-to-recover per fault kind: each
                                    fault when the table lists them, else min/median/p99
  plot_results.py shaped FILE.md    speed-up over float32 and wire MiB per rank, per codec,
                                    one group per table (run) of the file
  plot_results.py all [DIR]         every compare_*, churn_* and shaped_* table in DIR
                                    (default: bench/results)

bench/compare.sh, bench/shaped_link.sh (with OUT) and churn_bench (with --out) call it
after writing their tables. Needs Debian's python3-matplotlib (scripts/deps.sh), which
installs into /usr/bin/python3, hence the interpreter line.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tables as T  # noqa: E402

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
except ImportError:
    sys.exit("plot_results.py: matplotlib is missing: install python3-matplotlib (scripts/deps.sh)")

SYSTEMS = [("tributary", "Tributary", "C0"), ("openmpi", "Open MPI (TCP)", "C1"), ("gloo", "Gloo (best algorithm)", "C2")]


def size_label(b):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= div:
            return f"{b // div}{unit}"
    return str(b)


def read(md, reader, what):
    rows = reader(md.read_text())
    if not rows:
        raise ValueError(f"{md}: no {what} table")
    return rows


def save(fig, png, bottom=0.0):
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.savefig(png, dpi=110)
    plt.close(fig)


def plot_compare(md, png):
    points = read(md, T.compare_points, "'All medians'")
    link = T.compare_link(md.read_text())
    ns = sorted({p.n for p in points})
    fig, axes = plt.subplots(1, len(ns), figsize=(max(8, 5 * len(ns)), 4.2), sharey=True, squeeze=False)
    lines = 0
    for ax, n in zip(axes[0], ns):
        for system, label, color in SYSTEMS:
            series = [p for p in T.best_per_size(points, system) if p.n == n]
            if not series:
                continue
            x = [p.size for p in series]
            y = [p.busbw for p in series]
            err = [[p.busbw - p.low for p in series], [p.high - p.busbw for p in series]]
            ax.errorbar(x, y, yerr=err, marker="o", ms=4, capsize=3, color=color, label=label)
            lines += 1
        bidir = next((v for k, v in link.items() if k.startswith("--bidir")), None)
        if bidir:
            ax.axhline(bidir, ls="--", color="grey", lw=1, label="iperf3 --bidir, per direction")
        sizes = sorted({p.size for p in points if p.n == n})
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sizes, [size_label(s) for s in sizes])
        ax.set_title(f"N = {n}")
        ax.set_xlabel("message size (bytes)")
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("busbw (GB/s, log)")
    axes[0][-1].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"All-reduce busbw vs message size, loopback TCP, medians ({md.name})", fontsize=11)
    save(fig, png)
    return f"{len(ns)} panels, {lines} lines"


def plot_churn(md, png):
    faults = read(md, T.churn_faults, "time-to-detect / time-to-recover")
    fig, axes = plt.subplots(1, 2, figsize=(11, 1.2 + 0.55 * len(faults)), sharey=True)
    labels = [f"{f.phase}: {f.fault}" for f in faults]
    for ax, what in zip(axes, ("detect", "recover")):
        for i, f in enumerate(faults):
            samples = getattr(f, what + "_samples")
            summary = getattr(f, what)
            if samples:
                jitter = [i + 0.25 * ((k * 0.618) % 1 - 0.5) for k in range(len(samples))]
                ax.scatter(samples, jitter, s=12, alpha=0.6, color="C0")
                ax.plot([sorted(samples)[len(samples) // 2]] * 2, [i - 0.3, i + 0.3], color="C3", lw=2)
            elif summary:
                lo, med, p99 = summary
                ax.plot([lo, p99], [i, i], color="C0", lw=2)
                ax.plot([lo, p99], [i, i], "|", color="C0", ms=12)
                ax.plot([med], [i], "o", color="C3", ms=7)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1, 2, 5)))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel(f"time to {what} (s, log)")
        ax.grid(True, axis="x", which="both", alpha=0.3)
    for goal, kind, style in ((1.0, "kill -9", "--"), (2.0, "SIGSTOP", ":")):
        axes[1].axvline(goal, ls=style, lw=1, color="grey", label=f"goal: median after {kind} <= {goal:.0f} s")
    axes[1].legend(fontsize=7, loc="upper right")
    axes[0].set_yticks(range(len(faults)), labels)
    axes[0].invert_yaxis()
    raw = any(f.recover_samples for f in faults)
    how = "each fault (dots), median (bar)" if raw else "min to p99 (line), median (dot)"
    fig.suptitle(f"Churn: time to detect and recover per fault kind; {how} ({md.name})", fontsize=10)
    save(fig, png)
    return f"{len(faults)} fault kinds, {'each fault' if raw else 'min/median/p99'}"


def plot_shaped(md, png):
    runs = read(md, T.shaped_runs, "codec")
    codecs = list(dict.fromkeys(r.codec for r in runs))
    groups = sorted({(r.run, r.ranks) for r in runs})
    fig, axes = plt.subplots(1, 2, figsize=(max(9, 2.2 * len(groups) + 3), 4.2))
    width = 0.8 / len(codecs)
    for ax, attr, ylabel in ((axes[0], "speedup", "speed-up over float32 (x, log)"),
                             (axes[1], "wire_mib", "wire MiB sent per rank (log)")):
        for c, codec in enumerate(codecs):
            xs, ys = [], []
            for g, (run, ranks) in enumerate(groups):
                r = next((r for r in runs if (r.run, r.ranks, r.codec) == (run, ranks, codec)), None)
                if r:
                    xs.append(g + (c - (len(codecs) - 1) / 2) * width)
                    ys.append(getattr(r, attr))
            bars = ax.bar(xs, ys, width, label=codec, color=f"C{c}")
            if attr == "speedup":
                ax.bar_label(bars, labels=[f"{y:.1f}x" for y in ys], fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel(ylabel)
        ax.set_xticks(range(len(groups)),
                      [f"{ranks} ranks" + (f"\nrun {run + 1}" if len(groups) > 2 else "") for run, ranks in groups])
        ax.grid(True, axis="y", which="major", alpha=0.3)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=len(codecs), fontsize=8)
    fig.suptitle(f"64 MiB all-reduce over 100 Mbit/s shaped links, per codec ({md.name})", fontsize=10)
    save(fig, png, bottom=0.07)
    return f"{len(groups)} runs, {len(codecs)} codecs"


PLOTTERS = {"compare": plot_compare, "churn": plot_churn, "shaped": plot_shaped}


def plot(kind, md, out_dir=None):
    png = (Path(out_dir) if out_dir else md.parent) / (md.stem + ".png")
    summary = PLOTTERS[kind](md, png)
    print(f"plot_results.py: wrote {png} ({summary})")
    return png


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=[*PLOTTERS, "all"])
    ap.add_argument("path", nargs="?", help="the table (or, for all, the directory)")
    ap.add_argument("--out-dir", help="write the PNGs here instead of next to the tables")
    args = ap.parse_args()
    if args.kind != "all":
        if not args.path:
            ap.error("which table?")
        plot(args.kind, Path(args.path), args.out_dir)
        return 0
    results = Path(args.path or Path(__file__).resolve().parents[1] / "results")
    done = 0
    for md in sorted(results.glob("*.md")):
        kind = md.name.split("_", 1)[0]
        if kind in PLOTTERS:
            plot(kind, md, args.out_dir)
            done += 1
    if done == 0:
        sys.exit(f"plot_results.py: no compare_*, churn_* or shaped_* tables in {results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
