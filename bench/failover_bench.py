#!/usr/bin/env python3
"""Leader failover of replicated coordinators (docs/fault-tolerance.md, "Replicated
coordinators"): a local etcd, three `tributary coordinator --etcd` processes and soak
agents training; the leader is killed with SIGKILL `--kills` times, each time once the
agents commit steps in the current leader's view, and restarted as a standby on the same
endpoint afterwards (so three coordinators are always there).

Per kill: kill -> the new leader's "elected leader" log line, kill -> the first view it
issues (its "view epoch" line), both from the coordinators' log timestamps (wall clock,
ms) against the wall-clock time of the kill. At the end: no epoch issued twice (every
coordinator's "view epoch" lines), and every committed step identical on every agent.

Usage: failover_bench.py --tributary build/release/cli/tributary [--kills 20]
       [--lease-s 2] [--agents 3] [--out bench/results/failover_DATE.md]
"""
import argparse
import base64
import datetime
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

VIEW = re.compile(r"^(\S+) info tributary\[coordinator\] epoch=\d+: view epoch (\d+) ", re.M)
ELECTED = re.compile(r"^(\S+) info tributary\[coordinator\]: elected leader", re.M)
STEP = re.compile(r"^soak step (\d+) view (\d+) contributors (\S+) attempts \d+ sha256 (\w+) (ok|WRONG)$",
                  re.M)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stamp(text):
    """2026-11-23T09:05:21.807Z -> seconds since the epoch."""
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def wait(cond, timeout, what):
    deadline = time.monotonic() + timeout
    pause = 0.002
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(pause)
        pause = min(pause * 2, 0.02)
    raise SystemExit(f"failover_bench: timed out waiting for {what}")


class Cluster:
    def __init__(self, args, work):
        self.args, self.work = args, work
        self.secret = os.urandom(16).hex()
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        self.etcd = subprocess.Popen(
            [shutil.which("etcd") or "/usr/bin/etcd", "--name", "bench", "--data-dir", f"{work}/etcd",
             "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
             "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls",
             f"http://127.0.0.1:{peer}", "--initial-cluster", f"bench=http://127.0.0.1:{peer}",
             "--log-level", "error"], stdout=subprocess.DEVNULL, stderr=open(f"{work}/etcd.log", "w"))
        wait(self.etcd_up, 15, "etcd")
        self.ports = [free_port() for _ in range(3)]
        self.coordinators = [None] * 3
        self.generation = [0] * 3
        for i in range(3):
            self.start_coordinator(i)
            if i == 0:
                wait(lambda: self.leader() is not None, 10, "the first leader")
        endpoints = ",".join(f"tcp://127.0.0.1:{p}" for p in self.ports)
        self.agents = []
        for a in range(args.agents):
            out = open(f"{work}/agent{a}.out", "w")
            err = open(f"{work}/agent{a}.err", "w")
            self.agents.append(subprocess.Popen(
                [args.tributary, "agent", "--coordinator", endpoints, "--data-port", "0",
                 "--workload", "soak", "--soak-count", "65536", "--soak-steps", "100000000",
                 "--soak-delay-ms", "20"],
                stdout=out, stderr=err, env=dict(os.environ, TRIBUTARY_SECRET=self.secret)))

    def etcd_up(self):
        try:
            self.range("/")
            return True
        except OSError:
            return False

    def range(self, key):
        body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
        with urllib.request.urlopen(f"{self.etcd_url}/v3/kv/range", body, timeout=1) as r:
            return json.load(r)

    def leader(self):
        kvs = self.range("/tributary/default/leader").get("kvs", [])
        return base64.b64decode(kvs[0]["value"]).decode() if kvs else None

    def log_path(self, i, generation=None):
        g = self.generation[i] if generation is None else generation
        return f"{self.work}/coordinator{i}.{g}.err"

    def start_coordinator(self, i):
        self.generation[i] += 1
        port = self.ports[i]
        ready = f"{self.work}/coordinator{i}.ready"
        if os.path.exists(ready):
            os.unlink(ready)
        # The port was just released by the killed process: retry the bind (bounded).
        for _ in range(50):
            p = subprocess.Popen(
                [self.args.tributary, "coordinator", "--bind", f"tcp://127.0.0.1:{port}",
                 "--world-size", str(self.args.agents), "--etcd", self.etcd_url, "--lease-s",
                 str(self.args.lease_s), "--ready-file", ready],
                stdout=subprocess.DEVNULL, stderr=open(self.log_path(i), "w"),
                env=dict(os.environ, TRIBUTARY_SECRET=self.secret))
            if wait(lambda: os.path.exists(ready) or p.poll() is not None, 10, "a coordinator"):
                if p.poll() is None:
                    self.coordinators[i] = p
                    return
            time.sleep(0.1)
        raise SystemExit(f"failover_bench: coordinator {i} cannot bind port {port}")

    def index_of(self, endpoint):
        return self.ports.index(int(endpoint.rsplit(":", 1)[1]))

    def steps(self, a):
        with open(f"{self.work}/agent{a}.out") as f:
            return STEP.findall(f.read())

    def committed_in(self, epoch, count):
        for a in range(self.args.agents):
            if sum(1 for s in self.steps(a) if int(s[1]) >= epoch) < count:
                return False
        return True

    def logs(self):
        for i in range(3):
            for g in range(1, self.generation[i] + 1):
                with open(self.log_path(i, g)) as f:
                    yield f"coordinator{i}.{g}", f.read()

    def max_epoch(self):
        return max((int(e) for _, log in self.logs() for _, e in VIEW.findall(log)), default=0)

    def stop(self):
        for p in self.agents + [c for c in self.coordinators if c] + [self.etcd]:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()


def kill_once(c, k):
    epoch = c.max_epoch()
    wait(lambda: c.committed_in(epoch, 3), 60, f"steps in epoch {epoch}")
    leader = c.leader()
    i = c.index_of(leader)
    generation = c.generation[i]
    killed_at = time.time()
    c.coordinators[i].send_signal(signal.SIGKILL)
    c.coordinators[i].wait()

    def new_view():
        for j in range(3):
            if j == i:
                continue
            with open(c.log_path(j)) as f:
                log = f.read()
            views = [(stamp(t), int(e)) for t, e in VIEW.findall(log) if int(e) > epoch]
            elected = [stamp(t) for t in ELECTED.findall(log) if stamp(t) >= killed_at - 0.001]
            if views and elected:
                return j, elected[0] - killed_at, views[0][0] - killed_at, views[0][1]
        return None

    j, elected, viewed, new_epoch = wait(new_view, 30, f"a new leader after kill {k}")
    c.start_coordinator(i)  # back as a standby, same endpoint
    del generation
    return {"kill": k, "killed": f"c{i}", "new": f"c{j}", "elected": elected, "view": viewed,
            "epoch": new_epoch}


def check(c):
    problems = []
    by_step = {}
    for a in range(c.args.agents):
        for step, view, contributors, sha, ok in c.steps(a):
            if ok != "ok":
                problems.append(f"agent{a} step {step}: WRONG")
            seen = by_step.setdefault(step, (view, contributors, sha))
            if seen != (view, contributors, sha):
                problems.append(f"agent{a} step {step}: disagrees with another agent")
    issuers = {}
    for name, log in c.logs():
        for _, e in VIEW.findall(log):
            issuers.setdefault(int(e), []).append(name)
    twice = {e: who for e, who in issuers.items() if len(who) > 1}
    for e, who in twice.items():
        problems.append(f"epoch {e} issued by {', '.join(who)}")
    return problems, len(by_step), len(issuers)


def q(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p * (len(values) - 1))))]


def report(args, rows, problems, steps, epochs, command):
    goal = args.lease_s + 0.5
    el = [r["elected"] for r in rows]
    vw = [r["view"] for r in rows]
    out = [f"# Leader failover of replicated coordinators ({datetime.date.today()})", "",
           f"`{command}`", "",
           f"Three coordinators on one local etcd 3.4 (Debian's etcd-server), lease {args.lease_s} s; "
           f"{args.agents} soak agents (65536 float32 per all-reduce, 20 ms compute per step) "
           f"given all three endpoints. Each kill: SIGKILL of the leader once the agents "
           f"committed 3 steps in its latest view; the killed coordinator is restarted as a "
           f"standby on its endpoint. Times from the wall-clock time of the kill to the new "
           f"leader's log lines (ms resolution). Machine: 2 cores shared with other builds.", "",
           "| kill | killed | new leader | kill -> elected (s) | kill -> first view (s) | epoch |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['kill']} | {r['killed']} | {r['new']} | {r['elected']:.3f} | "
                   f"{r['view']:.3f} | {r['epoch']} |")
    out += ["", "| | min | median | p95 | max |", "|---|---|---|---|---|",
            f"| kill -> elected (s) | {min(el):.3f} | {statistics.median(el):.3f} | {q(el, 0.95):.3f} | {max(el):.3f} |",
            f"| kill -> first view (s) | {min(vw):.3f} | {statistics.median(vw):.3f} | {q(vw, 0.95):.3f} | {max(vw):.3f} |",
            "", "## Goals", "",
            f"- kill -> first view under lease + 0.5 s = {goal:.1f} s: median {statistics.median(vw):.3f} s, "
            f"max {max(vw):.3f} s ({sum(1 for v in vw if v < goal)}/{len(vw)} kills met it)",
            f"- no epoch issued twice: {epochs} epochs issued, "
            f"{'none twice' if not any('issued by' in p for p in problems) else 'SOME TWICE'}",
            f"- every committed step identical on every agent: {steps} steps, "
            f"{len([p for p in problems if 'agent' in p])} problems"]
    if problems:
        out += ["", "Problems:", ""] + [f"- {p}" for p in problems[:20]]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tributary", required=True)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--lease-s", type=int, default=2)
    ap.add_argument("--agents", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="tributary-failover-")
    c = Cluster(args, work)
    rows = []
    try:
        for k in range(1, args.kills + 1):
            rows.append(kill_once(c, k))
            r = rows[-1]
            print(f"kill {k}: {r['killed']} -> {r['new']}: elected after {r['elected']:.3f} s, "
                  f"first view after {r['view']:.3f} s (epoch {r['epoch']})", flush=True)
        wait(lambda: c.committed_in(c.max_epoch(), 3), 60, "steps after the last kill")
        problems, steps, epochs = check(c)
    finally:
        c.stop()
    command = "bench/failover_bench.py " + " ".join(sys.argv[1:])
    text = report(args, rows, problems, steps, epochs, command)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    shutil.rmtree(work, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
