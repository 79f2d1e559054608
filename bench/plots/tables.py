"""Reads the Markdown tables the benchmarks write into bench/results/ (stdlib only):

  compare_*.md  bench/compare.sh: "All medians" (N, size, system, algo, ..., busbw GB/s,
                busbw range, ...) and the iperf3 link baseline
  churn_*.md    churn_bench: per phase and fault kind, time-to-detect and time-to-recover
                as "min / median / p99", and (newer files) "Every fault" with each time
  shaped_*.md   bench/shaped_link.sh: per codec and rank count, time, wire MiB, speed-up;
                a file may hold several runs (one table each)

Tables are found by their header row, so prose and other tables around them are ignored.
"""
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def markdown_tables(text):
    """Each pipe table as (header cells, rows of cells); the separator row is dropped."""
    tables, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|[-:| ]+\|$", lines[i + 1]):
            header = _cells(lines[i])
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            tables.append((header, rows))
        else:
            i += 1
    return tables


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_size(text):
    m = re.fullmatch(r"([\d.]+)\s*(B|KiB|MiB|GiB)", text.strip())
    if not m:
        raise ValueError(f"not a size: {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def _floats(text, sep):
    """'0.324–0.441' or '0.1 / 0.2 / 0.3' -> floats; '-' -> None."""
    if text.strip() in ("-", ""):
        return None
    return [float(x) for x in text.split(sep)]


@dataclass
class BusbwPoint:
    n: int
    size: int
    system: str
    algo: str
    busbw: float
    low: float
    high: float


def compare_points(text):
    for header, rows in markdown_tables(text):
        if header[:4] == ["N", "size", "system", "algo"] and "busbw range" in header:
            b, r = header.index("busbw GB/s"), header.index("busbw range")
            points = []
            for row in rows:
                low, high = _floats(row[r], "–")
                points.append(BusbwPoint(int(row[0]), parse_size(row[1]), row[2], row[3],
                                         float(row[b]), low, high))
            return points
    return []


def best_per_size(points, system):
    """The best algorithm of `system` at each (N, size), as compare.sh's summary picks it."""
    best = {}
    for p in points:
        key = (p.n, p.size)
        if p.system == system and (key not in best or p.busbw > best[key].busbw):
            best[key] = p
    return sorted(best.values(), key=lambda p: (p.n, p.size))


def compare_link(text):
    """iperf3 medians in GB/s: {'one stream, one way': x, '--bidir, ...': y}."""
    for header, rows in markdown_tables(text):
        if header[:2] == ["test", "median GB/s"]:
            return {row[0]: float(row[1]) for row in rows}
    return {}


@dataclass
class FaultTimes:
    phase: str
    fault: str
    detect: list = None   # [min, median, p99] from the summary table
    recover: list = None
    detect_samples: list = field(default_factory=list)   # from "Every fault", when present
    recover_samples: list = field(default_factory=list)


def churn_faults(text):
    """FaultTimes per (phase, fault kind), in table order."""
    found = {}
    for header, rows in markdown_tables(text):
        if header == ["phase", "fault", "n", "time-to-detect", "time-to-recover"]:
            for row in rows:
                f = found.setdefault((row[0], row[1]), FaultTimes(row[0], row[1]))
                f.detect, f.recover = _floats(row[3], "/"), _floats(row[4], "/")
        elif header == ["phase", "fault", "time-to-detect (s)", "time-to-recover (s)"]:
            for row in rows:
                f = found.setdefault((row[0], row[1]), FaultTimes(row[0], row[1]))
                if row[2] != "-":
                    f.detect_samples.append(float(row[2]))
                if row[3] != "-":
                    f.recover_samples.append(float(row[3]))
    return list(found.values())


@dataclass
class CodecRun:
    run: int       # which table of the file
    ranks: int
    codec: str     # shortened: the codec's name and first option, "@algo" kept
    time_s: float
    wire_mib: float
    speedup: float


def short_codec(name):
    algo = ""
    if " @" in name:
        name, algo = name.split(" @", 1)
        algo = " @" + algo
    return name.split(",", 1)[0] + algo


def shaped_runs(text):
    runs = []
    index = 0
    for header, rows in markdown_tables(text):
        if header[:4] != ["codec", "ranks", "MiB", "time (s)"]:
            continue
        w, s = header.index("wire MiB sent/rank"), header.index("speedup")
        for row in rows:
            runs.append(CodecRun(index, int(row[1]), short_codec(row[0]), float(row[3]),
                                 float(row[w]), float(row[s].rstrip("x"))))
        index += 1
    return runs


def median_by(runs, key, value):
    """{key(run): median of value(run)} over runs sharing a key."""
    groups = defaultdict(list)
    for r in runs:
        groups[key(r)].append(value(r))
    return {k: statistics.median(v) for k, v in groups.items()}
