#!/usr/bin/python3
"""The demo's plot: training loss and test accuracy over steps, the world size under them,
and every injected fault marked where it happened.

  demo_plot.py RUN_DIR OUT.png

Reads RUN_DIR/steps.csv (step, seconds, loss, accuracy, world, view) and RUN_DIR/faults.csv
(step, seconds, kind, worker, view, handled), both written by `tributary demo`, which runs
this script from next to its binary when the run ends. Needs Debian's python3-matplotlib.
"""
import csv
import sys
from pathlib import Path

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("demo_plot.py: matplotlib is missing: install python3-matplotlib (scripts/deps.sh)")

COLORS = {"kill -9": "C3", "SIGSTOP": "C1", "join": "C2", "drain": "C4"}


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main(run_dir, png):
    steps = read(Path(run_dir) / "steps.csv")
    faults = read(Path(run_dir) / "faults.csv") if (Path(run_dir) / "faults.csv").exists() else []
    if not steps:
        sys.exit(f"demo_plot.py: {run_dir}/steps.csv has no steps")
    x = [int(r["step"]) for r in steps]
    loss = [float(r["loss"]) for r in steps]
    world = [int(r["world"]) for r in steps]
    evals = [(int(r["step"]), 100.0 * float(r["accuracy"])) for r in steps if r["accuracy"]]

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 1]})
    top.plot(x, loss, color="C0", linewidth=0.8, label="training loss")
    top.set_ylabel("loss")
    top.set_yscale("log")
    acc = top.twinx()
    if evals:
        acc.plot([e[0] for e in evals], [e[1] for e in evals], color="C5", marker="o",
                 markersize=2.5, linewidth=1.2, label="test accuracy")
    acc.set_ylabel("test accuracy (%)")
    acc.set_ylim(0, 100)
    bottom.step(x, world, where="post", color="C7")
    bottom.set_ylabel("workers")
    bottom.set_xlabel("step")
    bottom.set_ylim(0, max(world) + 1)
    for f in faults:
        step = int(f["step"])
        color = COLORS.get(f["kind"], "k")
        label = f'{f["kind"]} w{f["worker"]}' + ("" if f["handled"] == "1" else " (NOT HANDLED)")
        for ax in (top, bottom):
            ax.axvline(step, color=color, linestyle="--", linewidth=1)
        bottom.annotate(label, xy=(step, 0.08), xycoords=("data", "axes fraction"),
                        xytext=(3, 0), textcoords="offset points", color=color, fontsize=8,
                        backgroundcolor="white")
    lines = top.get_lines()[:1] + acc.get_lines()[:1]
    top.legend(lines, [l.get_label() for l in lines], loc="center right", fontsize=8)
    top.set_title("tributary demo: training through faults")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
