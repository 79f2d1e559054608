"""The panels of the two dashboards, read from their files: the Grafana JSON
(dashboards/tributary.json) and the Prometheus console template
(dashboards/consoles/tributary.html).

A panel is a title, a kind ("stat" or "graph") and its PromQL queries. Grafana's job
variables ($coordinator, $agents) are replaced by their default values, which are the job
names of dashboards/prometheus/prometheus.yml; the console names those jobs literally.
In the console, a stat is a row of the right-hand table whose value comes from
`prom_query_drilldown` with the query as a Go raw string (`...`), and a graph is an
<h3> title followed by `new PromConsole.Graph({... expr: '...' or [...] ...})`.
"""
import json
import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Panel:
    title: str
    kind: str  # "stat" or "graph"
    exprs: list = field(default_factory=list)


def grafana_panels(path):
    board = json.loads(Path(path).read_text())
    defaults = {}
    for var in board.get("templating", {}).get("list", []):
        current = var.get("current", {}).get("value")
        if current:
            defaults[var["name"]] = current
    panels = []
    for p in board["panels"]:
        exprs = []
        for target in p.get("targets", []):
            expr = target["expr"]
            for name, value in defaults.items():
                expr = expr.replace("$" + name, value)
            if "$" in expr:
                raise ValueError(f"panel {p['title']!r}: unresolved variable in {expr!r}")
            exprs.append(expr)
        panels.append(Panel(p["title"], "stat" if p["type"] == "stat" else "graph", exprs))
    return panels


_STAT_ROW = re.compile(
    r"<tr>\s*<td>([^<]+)</td>\s*<td>\{\{ template \"prom_query_drilldown\" \(args `([^`]+)`")
_GRAPH = re.compile(r"<h3>([^<]+)</h3>\s*<div id=\"([^\"]+)\"[^>]*></div>\s*<script>(.*?)</script>",
                    re.S)
# A list of queries is written one per line, its closing bracket on a line of its own.
_EXPR_FIELD = re.compile(r"expr:\s*(\[\s*\n.*?\n\s*\]|'[^']*')", re.S)
_JS_STRING = re.compile(r"'([^']*)'")


def console_panels(path):
    """Returns the console's panels; graphs carry their div id in `kind` as graph:ID."""
    text = Path(path).read_text()
    panels = [Panel(title.strip(), "stat", [expr]) for title, expr in _STAT_ROW.findall(text)]
    for title, div_id, script in _GRAPH.findall(text):
        m = _EXPR_FIELD.search(script)
        if not m:
            raise ValueError(f"console graph {title!r} has no expr")
        panels.append(Panel(title.strip(), "graph:" + div_id, _JS_STRING.findall(m.group(1))))
    return panels


def graph_count(path):
    """How many graphs the console template creates, counted independently of the parse."""
    return Path(path).read_text().count("new PromConsole.Graph(")


def all_exprs(panels):
    return [e for p in panels for e in p.exprs]
