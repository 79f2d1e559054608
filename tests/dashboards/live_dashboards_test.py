"""The dashboards against a real cluster: a real Prometheus, loading the project's scrape
configuration, rules and console template, scrapes `tributary demo` (a coordinator and 4
workers training the digits MLP; one worker kills itself with SIGKILL at step 240, a new
one joins at step 400). Once Prometheus has scraped every target (before the kill, or the
run says the machine was too loaded) and seen the failure, the join and the new member
committing:

  - headless Chromium opens the console dashboard; its screenshot and DOM are saved as
    artifacts; every graph must be drawn with data and every table value present;
  - every Grafana panel query returns data (a finite value) at that moment;
  - every rule evaluates without error, TributaryMemberFailed fires, and the alerts a
    healthy cluster must not raise are silent.

When the demo has finished (exit 0, survivors bitwise identical), every Grafana panel
query must also return a graph's worth of points over the run (query_range).

Usage: live_dashboards_test.py SOURCE_DIR TRIBUTARY_BINARY ARTIFACTS_DIR
Artifacts: console.png, console.dom.html, demo.log, prometheus.log, queries.json.
Exit 77 (ctest: skipped) when prometheus, its console libraries or chromium is missing.
"""
import json
import math
import shutil
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import console_page
import panels as P
from demo_cluster import DemoCluster
from outcome import SKIPPED, verdict
from prometheus_server import Prometheus, console_libraries, poll

WORKERS = 4
MUST_NOT_FIRE = ("TributaryCoordinatorMissing", "TributaryNoCommittedCollective",
                 "TributaryMembershipBelowFloor", "TributaryRecoverySlow")


def missing_tools():
    missing = [t for t in ("prometheus",) if not shutil.which(t)]
    if not console_libraries():
        missing.append("the Prometheus console libraries (prom.lib)")
    if not console_page.chromium():
        missing.append("chromium")
    return missing


def finite(samples):
    return [float(s["value"][1]) for s in samples if math.isfinite(float(s["value"][1]))]


class Scenario:
    def __init__(self, source, binary, artifacts, work):
        self.source, self.artifacts, self.work = source, artifacts, work
        self.prom = Prometheus(source, work, artifacts / "prometheus.log")
        self.agents = {}  # member id -> metrics port
        self.demo = DemoCluster(binary, artifacts / "demo.log", self._coordinator, self._agent,
                                workers=WORKERS)
        self.report = {}
        self.grafana = P.grafana_panels(source / "dashboards" / "tributary.json")
        self.console = P.console_panels(source / "dashboards" / "consoles" / "tributary.html")

    def _coordinator(self, port):
        self.prom.write_targets("coordinator", [f"127.0.0.1:{port}"])

    def _agent(self, member, port):
        self.agents[member] = port
        self.prom.write_targets("agents", [f"127.0.0.1:{p}" for p in self.agents.values()])

    def state(self):
        """What Prometheus has seen of the failure and the join, by the dashboards' series."""
        prom = self.prom
        joiner = None
        if len(self.agents) > WORKERS:
            joiner = f"127.0.0.1:{self.agents[max(self.agents)]}"
        firing = {a["labels"]["alertname"] for a in prom.api("alerts")["alerts"] if a["state"] == "firing"}
        return {
            "failure view": prom.value('tributary:view_changes:increase5m{cause="failure"}'),
            "join view": prom.value('tributary:view_changes:increase5m{cause="boundary"}'),
            "members": prom.value('tributary:membership_size'),
            "agent targets down": prom.value('count(up{job="tributary-agents"} == 0)'),
            "joiner commits/s": joiner and prom.value(
                f'sum(rate(tributary_collectives_total{{instance="{joiner}",result="ok"}}[1m]))'),
            "TributaryMemberFailed": "TributaryMemberFailed" in firing,
        }

    def ready(self, s):
        return (s["failure view"] and s["join view"] and s["members"] == WORKERS and
                s["agent targets down"] == 1 and s["joiner commits/s"] and s["TributaryMemberFailed"])

    def wait_for_first_scrapes(self, deadline):
        """Until Prometheus has scraped the coordinator and every worker once. A view change
        before that is invisible to the dashboards (a counter first seen at 1 did not
        increase in Prometheus's eyes), so it is reported as the reason, not as a bug."""
        def scraped():
            return (self.prom.value('count(up{job="tributary-coordinator"} == 1)') == 1 and
                    self.prom.value('count(up{job="tributary-agents"} == 1)') == WORKERS)
        poll(deadline, "Prometheus's first scrape of the coordinator and every worker", scraped,
             interval=0.25)
        early = [v for v in self.demo.views if v[2] != "initial"]
        if early:
            raise AssertionError(f"Prometheus first scraped the cluster after its view change "
                                 f"{early[0]}: the machine is too loaded for this scenario")

    def wait_for_failure_and_join(self, deadline):
        last = {}

        def seen():
            nonlocal last
            last = self.state()
            return self.ready(last)
        try:
            poll(deadline, "the failure and the join in Prometheus", seen, interval=0.5)
        except AssertionError as e:
            raise AssertionError(f"{e}; last state {last}; views {self.demo.views}") from None
        self.report["state"] = last

    def check_console(self, since):
        duration = int(time.time() - since) + 10
        url = self.prom.url("/consoles/tributary.html#pctc" +
                            urllib.parse.quote(json.dumps({"duration": duration, "endTime": 0})))
        dom = console_page.capture(url, self.work / "chromium", self.artifacts / "console.png")
        (self.artifacts / "console.dom.html").write_text(dom)
        graphs = [p.kind.split(":", 1)[1] for p in self.console if p.kind.startswith("graph:")]
        problems, page = console_page.check(dom, graphs, [p.title for p in self.console])
        self.report["console"] = {g.id: {"points per path": g.paths, "legend": g.legend}
                                  for g in page.graphs.values()}
        self.report["console table"] = page.drilldowns
        return [f"console: {p}" for p in problems]

    def check_instant(self, at):
        problems, answers = [], {}
        for panel in self.grafana:
            for expr in panel.exprs:
                values = finite(self.prom.query(expr, at=at))
                answers[expr] = values
                if not values:
                    problems.append(f"Grafana panel {panel.title!r}: no data for {expr}")
        self.report["instant"] = answers
        return problems

    def check_rules(self):
        problems = []
        for group in self.prom.api("rules")["groups"]:
            for rule in group["rules"]:
                if rule.get("health") != "ok":
                    problems.append(f"rule {rule['name']}: health {rule.get('health')}: {rule.get('lastError')}")
        active = {a["labels"]["alertname"]: a["state"] for a in self.prom.api("alerts")["alerts"]}
        self.report["alerts"] = active
        if active.get("TributaryMemberFailed") != "firing":
            problems.append(f"TributaryMemberFailed is not firing after a kill: {active}")
        problems += [f"{name} is {active[name]} on a healthy cluster" for name in MUST_NOT_FIRE if name in active]
        return problems

    def check_range(self, start, end):
        problems, points = [], {}
        for panel in self.grafana:
            for expr in panel.exprs:
                series = self.prom.query_range(expr, start, end, 2)
                best = max((sum(math.isfinite(float(v)) for _, v in s["values"]) for s in series), default=0)
                points[expr] = best
                if best < 2:
                    problems.append(f"Grafana panel {panel.title!r}: no graph over the run for {expr}")
        self.report["range points"] = points
        return problems

    def run(self):
        timings = {}
        t = time.monotonic()
        self.prom.start(time.monotonic() + 60)
        since = time.time()
        timings["prometheus ready"] = time.monotonic() - t
        self.demo.start()
        self.wait_for_first_scrapes(time.monotonic() + 60)
        timings["targets scraped"] = time.monotonic() - t
        self.wait_for_failure_and_join(time.monotonic() + 100)
        timings["failure and join seen"] = time.monotonic() - t
        at = time.time()
        problems = self.check_console(since)
        timings["console captured"] = time.monotonic() - t
        problems += self.check_instant(at)
        problems += self.check_rules()
        rc = self.demo.wait(timeout=150)
        timings["demo finished"] = time.monotonic() - t
        if rc != 0 or not self.demo.agreed:
            problems.append(f"the demo exited with {rc} (survivors agreed: {self.demo.agreed})")
        problems += self.check_range(since, time.time())
        self.report["views"] = self.demo.views
        self.report["timings"] = timings
        return problems


def main():
    source, binary, artifacts = Path(sys.argv[1]).resolve(), sys.argv[2], Path(sys.argv[3])
    missing = missing_tools()
    if missing:
        print(f"not installed: {', '.join(missing)} (scripts/deps.sh installs the Debian packages)")
        return SKIPPED
    shutil.rmtree(artifacts, ignore_errors=True)
    artifacts.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as work:
        scenario = Scenario(source, binary, artifacts, Path(work))
        try:
            problems = scenario.run()
        except Exception as e:  # report what was seen so far, then fail
            problems = [f"{type(e).__name__}: {e}"]
        finally:
            scenario.demo.close()
            scenario.prom.close()
            (artifacts / "queries.json").write_text(json.dumps(scenario.report, indent=1))
    print(json.dumps({k: scenario.report.get(k) for k in ("timings", "state", "alerts", "views")}, indent=1))
    print(f"artifacts: {artifacts}")
    return verdict(problems)


if __name__ == "__main__":
    sys.exit(main())
