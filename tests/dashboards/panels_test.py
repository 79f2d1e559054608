"""Static checks of the dashboards and rules (no server):

1. The console template shows the same panels as the Grafana dashboard: the same titles,
   stats as stats and time series as graphs, the same queries in the same order.
2. Every query of both parses as PromQL (promtool checks them as recording rules).
3. Every tributary_* series a dashboard or the rules in recording.yml / alerts.yml read
   is one the C++ code registers (agent/, coordinator/, membership/), and every
   tributary:* series is one recording.yml records. links.yml is the exception: it reads
   a series the transport layer will export (its header says so) and is unit-tested only.

Usage: panels_test.py SOURCE_DIR. Exit 77 (ctest: skipped) without promtool.
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import panels as P
from outcome import run_with_promtool

SERIES = re.compile(r"\b(tributary(?:_[a-z0-9]+)+|tributary(?::[a-z0-9_]+)+)\b")
REGISTERED = re.compile(r'\.Name\("(tributary_[a-z0-9_]+)"\)')
RECORDED = re.compile(r"^\s*- record: (\S+)", re.M)


def exported_series(src):
    names = set()
    for folder in ("agent", "coordinator", "membership"):
        for f in (src / folder).rglob("*.cc"):
            names.update(REGISTERED.findall(f.read_text()))
    # A histogram is read through its _bucket, _sum and _count series.
    hist = {n for n in names if n.endswith("_seconds")}
    names |= {h + s for h in hist for s in ("_bucket", "_sum", "_count")}
    return names


def rule_exprs(path):
    """The expressions of a rules file, one string per rule (block scalars included)."""
    exprs, current = [], None
    for line in path.read_text().splitlines():
        m = re.match(r"^(\s*)expr: ?(.*)$", line)
        if m:
            current = {"indent": len(m.group(1)), "text": [] if m.group(2) == "|" else [m.group(2)]}
            exprs.append(current)
            continue
        if current is not None:
            if line.strip() and len(line) - len(line.lstrip()) <= current["indent"]:
                current = None
            else:
                current["text"].append(line.strip())
    return [" ".join(e["text"]) for e in exprs]


def check_same_panels(grafana, console, graphs_in_template):
    errors = []
    if graphs_in_template != sum(1 for p in console if p.kind.startswith("graph")):
        errors.append(f"the console creates {graphs_in_template} graphs but {sum(1 for p in console if p.kind.startswith('graph'))} were read")
    by_title = {p.title: p for p in console}
    for g in grafana:
        c = by_title.pop(g.title, None)
        if c is None:
            errors.append(f"Grafana panel {g.title!r} is not on the console")
            continue
        if (g.kind == "stat") != (c.kind == "stat"):
            errors.append(f"{g.title!r}: a {g.kind} in Grafana, a {c.kind} on the console")
        if g.exprs != c.exprs:
            errors.append(f"{g.title!r}: queries differ\n  grafana: {g.exprs}\n  console: {c.exprs}")
    for title in by_title:
        errors.append(f"console panel {title!r} is not in the Grafana dashboard")
    return errors


def check_parse(promtool, exprs):
    with tempfile.TemporaryDirectory() as tmp:
        rules = Path(tmp) / "queries.yml"
        body = "groups:\n  - name: dashboard-queries\n    rules:\n"
        for i, e in enumerate(exprs):
            body += f"      - record: dashboard:query_{i}\n        expr: '{e.replace(chr(39), chr(39) * 2)}'\n"
        rules.write_text(body)
        r = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True,
                           timeout=60)
        return [] if r.returncode == 0 else [f"promtool rejects a dashboard query:\n{r.stdout}{r.stderr}"]


def check_series(where, exprs, known):
    errors = []
    for e in exprs:
        for name in SERIES.findall(e):
            if name not in known:
                errors.append(f"{where}: {name} is neither registered by the C++ code nor recorded: {e}")
    return errors


def checks(src, promtool):
    dash = src / "dashboards"
    grafana = P.grafana_panels(dash / "tributary.json")
    console = P.console_panels(dash / "consoles" / "tributary.html")
    errors = check_same_panels(grafana, console, P.graph_count(dash / "consoles" / "tributary.html"))
    errors += check_parse(promtool, P.all_exprs(grafana) + P.all_exprs(console))

    rules = dash / "prometheus" / "rules"
    known = exported_series(src) | set(RECORDED.findall((rules / "recording.yml").read_text()))
    errors += check_series("tributary.json", P.all_exprs(grafana), known)
    errors += check_series("tributary.html", P.all_exprs(console), known)
    for name in ("recording.yml", "alerts.yml"):
        errors += check_series(name, rule_exprs(rules / name), known)
    pending = set(SERIES.findall(" ".join(rule_exprs(rules / "links.yml")))) - known
    print(f"{len(grafana)} Grafana panels, {len(console)} console panels, "
          f"{len(P.all_exprs(grafana))} queries each; {len(known)} known series; "
          f"links.yml reads not-yet-exported {sorted(pending)}")
    return errors


if __name__ == "__main__":
    sys.exit(run_with_promtool(checks))
