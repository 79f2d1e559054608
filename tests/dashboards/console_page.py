"""The console dashboard as a browser shows it: headless Chromium (Debian's `chromium`)
loads the page from Prometheus, runs its JavaScript, and gives back a screenshot and the
DOM as it stands afterwards.

--virtual-time-budget lets the page's timers and XHRs (one query_range per graph query)
run to completion before Chromium captures, without a wall-clock wait; the result is the
DOM after Rickshaw drew the graphs. The checks read that DOM: every graph div holds an
SVG whose plotted paths have points, no graph says "No timeseries returned" or "Error
loading data", every legend names its series, and no table value is "-" (what
prom_query_drilldown prints for an empty answer).
"""
import re
import shutil
import subprocess
from html.parser import HTMLParser

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--mute-audio", "--window-size=1400,3200",
                  "--virtual-time-budget=15000"]
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}
POINT = re.compile(r"[ML]\s*(-?[\d.]+(?:e-?\d+)?)\s*,\s*(-?[\d.]+(?:e-?\d+)?)")


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


def capture(url, user_data_dir, screenshot, timeout=60):
    """Writes the screenshot and returns the rendered DOM (two loads of the page)."""
    base = [chromium(), *CHROMIUM_FLAGS]
    subprocess.run(base + [f"--user-data-dir={user_data_dir}-shot", f"--screenshot={screenshot}", url],
                   check=True, capture_output=True, timeout=timeout)
    r = subprocess.run(base + [f"--user-data-dir={user_data_dir}-dom", "--dump-dom", url],
                       check=True, capture_output=True, timeout=timeout)
    return r.stdout.decode(errors="replace")


class Graph:
    def __init__(self, div_id):
        self.id = div_id
        self.paths = []    # points per plotted series path
        self.errors = []   # "No timeseries returned", "Error loading data"
        self.legend = []   # series names
        self.svg = False


class ConsoleDom(HTMLParser):
    """Collects the graphs (divs of class tributary_graph), table values and all text."""

    def __init__(self, html):
        super().__init__()
        self.stack = []   # (tag, attrs dict, graph or None)
        self.graphs = {}
        self.drilldowns = []
        self.text = []
        self._capture = None  # (kind, graph) while inside an element whose text we want
        self.feed(html)

    def _graph(self):
        for _, _, g in reversed(self.stack):
            if g is not None:
                return g
        return None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        graph = None
        if tag == "div" and "tributary_graph" in classes:
            graph = self.graphs.setdefault(a.get("id"), Graph(a.get("id")))
        g = graph or self._graph()
        if g is not None and tag == "svg":
            g.svg = True
        if g is not None and tag == "path" and "path" in classes:
            g.paths.append(len(POINT.findall(a.get("d", ""))))
        if g is not None and tag == "div" and "prom_graph_error" in classes:
            self._capture = ("error", g)
        if g is not None and tag == "span" and "label" in classes:
            self._capture = ("legend", g)
        if tag == "a" and "prom_query_drilldown" in classes:
            self._capture = ("drilldown", None)
        if tag not in VOID:
            self.stack.append((tag, a, graph))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break
        self._capture = None

    def handle_data(self, data):
        self.text.append(data)
        if self._capture and data.strip():
            kind, g = self._capture
            if kind == "error":
                g.errors.append(data.strip())
            elif kind == "legend":
                g.legend.append(data.strip())
            else:
                self.drilldowns.append(data.strip())


def check(dom, graph_ids, titles):
    """Returns a list of problems with the rendered page (empty: all graphs have data)."""
    page = ConsoleDom(dom)
    problems = []
    text = " ".join(" ".join(page.text).split())
    for title in titles:
        if " ".join(title.split()) not in text:
            problems.append(f"panel title {title!r} is not on the page")
    for gid in graph_ids:
        g = page.graphs.get(gid)
        if g is None:
            problems.append(f"graph #{gid}: no such element")
            continue
        if g.errors:
            problems.append(f"graph #{gid}: {g.errors}")
        if not g.svg or not any(n >= 2 for n in g.paths):
            problems.append(f"graph #{gid}: no plotted series with data (points per path: {g.paths})")
        if not g.legend:
            problems.append(f"graph #{gid}: empty legend")
    empty = [v for v in page.drilldowns if v == "-"]
    if not page.drilldowns or empty:
        problems.append(f"table values: {page.drilldowns} ('-' is an empty answer)")
    return problems, page
