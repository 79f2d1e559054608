"""Starts a local elastic training cluster: a `tributary coordinator` and N train.py workers
on this machine, with the demo's fault flags, and checks at the end that every surviving
worker holds bitwise-identical parameters.

    python3 examples/pytorch/launch.py --workers 4 --kill-at 60 --join-at 100 --drain-at 140

--kill-at S: one worker SIGKILLs itself in the middle of step S's backward; --stop-at S: one
SIGSTOPs itself at step S and gets SIGCONT --stop-for-ms later (it finds it was evicted and
rejoins); --join-at S: one more worker joins once step S is reached (at a step boundary; it
receives the state from a current member). It is started with the others and held before it
joins until then: a torch 2 process takes seconds to import on a busy machine, which would
otherwise let short runs end before it arrives; --drain-at S: one worker gets
SIGTERM (it finishes its step and leaves; nobody sees a failure); --straggler-ms N: one
worker is N ms slower per step. Arguments after `--` go to every train.py.

The secret is random and passed in the environment only. Exit status 0 when training
finished and the survivors agree. --json writes the summary (tests read it).
"""

import argparse
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
PROGRESS = re.compile(r"^\s*(\d+)\s+\d+\s+[\d.]+\s")
# After the first worker finished, for the others to finish too. Generous: a torch 2 process
# takes 0.4-0.6 s to exit on its own, and several seconds when four exit at once on two busy
# cores (the ctest -j2 runs), which 5 s did not always cover.
GRACE_S = 15.0


def use_package(package_dir):
    """The package built in this checkout, for this process and the workers it starts."""
    if os.path.isdir(package_dir):
        sys.path.insert(0, package_dir)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (package_dir, os.environ.get("PYTHONPATH")) if p)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--kill-at", type=int, default=-1)
    p.add_argument("--stop-at", type=int, default=-1)
    p.add_argument("--stop-for-ms", type=int, default=3000)
    p.add_argument("--join-at", type=int, default=-1)
    p.add_argument("--drain-at", type=int, default=-1)
    p.add_argument("--straggler-ms", type=int, default=0)
    p.add_argument("--timeout-s", type=float, default=300.0, help="bound on the whole run")
    p.add_argument("--tributary-bin", default=os.environ.get(
        "TRIBUTARY_BIN", os.path.join(REPO, "build", "release", "cli", "tributary")),
                   help="the tributary binary (the coordinator)")
    p.add_argument("--package-dir", default=os.path.join(REPO, "build", "release", "python"),
                   help="where the tributary package was built (put first on PYTHONPATH)")
    p.add_argument("--log-dir", help="workers' stderr (default: a temporary directory)")
    p.add_argument("--json", help="write the run's summary here")
    p.add_argument("--quiet", action="store_true", help="only events and the summary")
    args, rest = p.parse_known_args(argv)
    args.train_args = [a for a in rest if a != "--"]
    return args


class WorkerProcess:
    def __init__(self, index, role, argv, env, log_dir):
        self.index, self.role = index, role
        self.stderr = open(os.path.join(log_dir, f"worker{index}.err"), "wb")
        self.process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                        stderr=self.stderr)
        os.set_blocking(self.process.stdout.fileno(), False)
        self.pending = b""
        self.result = None
        self.open = True

    def signal(self, sig):
        if self.process.poll() is None:
            self.process.send_signal(sig)

    def is_stopped(self):
        try:
            with open(f"/proc/{self.process.pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "T"
        except OSError:
            return False


class Launch:
    def __init__(self, args):
        self.args = args
        self.deadline = time.monotonic() + args.timeout_s
        self.log_dir = args.log_dir or tempfile.mkdtemp(prefix="tributary-launch-")
        os.makedirs(self.log_dir, exist_ok=True)
        self.env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.env.setdefault("OMP_NUM_THREADS", "1")
        # Straggler eviction only when a straggler is asked for: Python workers sharing a few
        # cores with each other (and a compiler) have compute-time spikes the policy would
        # punish, and an evicted worker waits out a minute's cool-down.
        extra = (["--straggler-cooldown-s", "5"] if args.straggler_ms
                 else ["--no-straggler-eviction"])
        from tributary.local_coordinator import LocalCoordinator  # from --package-dir
        self.coordinator = LocalCoordinator(args.workers, workdir=self.log_dir,
                                            binary=args.tributary_bin, extra_args=extra)
        self.env.update(self.coordinator.environment())
        self.workers = []
        self.selector = selectors.DefaultSelector()
        self.max_step = -1
        self.events = []
        self.finished_at = None

    def event(self, text):
        self.events.append(text)
        print(f"launch: {text}", flush=True)

    def spawn(self, role="", extra=()):
        argv = [sys.executable, "-B", os.path.join(HERE, "train.py"), "--print-every", "5",
                *self.args.train_args, *extra]
        w = WorkerProcess(len(self.workers), role, argv, self.env, self.log_dir)
        self.workers.append(w)
        self.selector.register(w.process.stdout, selectors.EVENT_READ, w)
        return w

    def start(self):
        a = self.args
        roles = {}
        victims = iter(range(a.workers - 1, -1, -1))  # distinct victims, last first
        if a.kill_at >= 0:
            roles[next(victims)] = ("kill", ["--kill-at", str(a.kill_at)])
        if a.stop_at >= 0:
            roles[next(victims)] = ("stop", ["--stop-at", str(a.stop_at)])
        if a.drain_at >= 0:
            roles[next(victims)] = ("drain", [])
        if a.straggler_ms:
            roles[next(victims)] = ("straggler", ["--slow-ms", str(a.straggler_ms)])
        for i in range(a.workers):
            role, extra = roles.get(i, ("", []))
            self.spawn(role, extra)
        if a.join_at >= 0:
            self.join_signal = os.path.join(self.log_dir, "join.go")
            self.spawn("joiner", ["--join-when", self.join_signal])

    def on_line(self, w, line):
        if line.startswith("RESULT "):
            w.result = json.loads(line[len("RESULT "):])
            if not w.result["drained"] and self.finished_at is None:
                self.finished_at = time.monotonic()
            return
        m = PROGRESS.match(line)
        if m:
            self.max_step = max(self.max_step, int(m.group(1)))
            if self.args.quiet:
                return
        print(line, flush=True)

    def read(self, timeout):
        for key, _ in self.selector.select(timeout):
            w = key.data
            chunk = os.read(key.fileobj.fileno(), 65536)
            if not chunk:
                self.selector.unregister(key.fileobj)
                w.open = False
                if w.pending:
                    self.on_line(w, w.pending.decode(errors="replace"))
                continue
            w.pending += chunk
            *lines, w.pending = w.pending.split(b"\n")
            for line in lines:
                self.on_line(w, line.decode(errors="replace"))

    def inject(self, state):
        a = self.args
        if a.join_at >= 0 and not state["joined"] and self.max_step >= a.join_at:
            state["joined"] = True
            self.event(f"step {self.max_step}: one more worker joins (at a step boundary)")
            with open(self.join_signal, "w"):
                pass
        for w in self.workers:
            if w.role == "drain" and not state["drained"] and self.max_step >= a.drain_at:
                state["drained"] = True
                self.event(f"step {self.max_step}: SIGTERM to worker {w.index} (drain)")
                w.signal(signal.SIGTERM)
            if w.role == "stop" and state["continue_at"] is None and w.is_stopped():
                self.event(f"worker {w.index} is stopped (SIGSTOP); SIGCONT in "
                           f"{a.stop_for_ms} ms")
                state["continue_at"] = time.monotonic() + a.stop_for_ms / 1000
            if w.role == "stop" and state["continue_at"] and not state["continued"] and \
                    time.monotonic() >= state["continue_at"]:
                state["continued"] = True
                self.event(f"SIGCONT to worker {w.index}")
                w.signal(signal.SIGCONT)

    def stop_late(self, state):
        """Training is over: workers still running (a late rejoiner) drain, then die."""
        if self.finished_at is None or time.monotonic() - self.finished_at < GRACE_S:
            return
        for w in self.workers:
            if w.process.poll() is None:
                if not state["terminated"]:
                    self.event(f"training is over; stopping worker {w.index}, still running")
                    w.role = "late"
                    w.signal(signal.SIGCONT)
                    w.signal(signal.SIGTERM)
                else:
                    w.signal(signal.SIGKILL)
        state["terminated"] = True
        self.finished_at = time.monotonic()

    def run(self):
        self.start()
        state = {"joined": False, "drained": False, "continue_at": None, "continued": False,
                 "terminated": False}
        timed_out = False
        while any(w.open for w in self.workers):
            self.read(0.05)
            self.inject(state)
            self.stop_late(state)
            if time.monotonic() > self.deadline:
                self.event(f"timed out after {self.args.timeout_s:.0f} s; stopping everything")
                timed_out = True
                break
        return self.summarize(timed_out)

    def summarize(self, timed_out):
        failures = int(timed_out)
        for w in self.workers:
            w.signal(signal.SIGCONT)
            try:
                code = w.process.wait(max(1.0, self.deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                w.process.kill()
                code = w.process.wait(10)
            expected = (w.role == "kill" and code == -signal.SIGKILL) or w.role == "late"
            if code != 0 and not expected:
                self.event(f"worker {w.index} ({w.role or 'worker'}) exited with {code}; "
                           f"stderr in {w.stderr.name}")
                failures += 1
            w.stderr.close()
        self.coordinator.stop()
        survivors = [w.result for w in self.workers
                     if w.result and not w.result["drained"] and w.role != "late"]
        hashes = {r["sha256"] for r in survivors}
        if len(hashes) == 1:
            print(f"launch: {len(survivors)} surviving workers hold bitwise-identical parameters "
                  f"(sha256 {next(iter(hashes))[:16]}...), test accuracy "
                  f"{100 * survivors[0]['accuracy']:.2f}%", flush=True)
        else:
            print(f"launch: DISAGREEMENT: {len(survivors)} surviving workers hold {len(hashes)} "
                  "parameter sets" if hashes else "launch: no worker finished training",
                  flush=True)
            failures += 1
        summary = {"ok": failures == 0, "survivors": survivors, "identical": len(hashes) == 1,
                   "events": self.events, "log_dir": self.log_dir,
                   "roles": {w.index: w.role for w in self.workers},
                   "results": [w.result for w in self.workers]}
        if self.args.json:
            with open(self.args.json, "w") as f:
                json.dump(summary, f, indent=1)
        if failures == 0 and not self.args.log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)
        return 0 if failures == 0 else 1


def main(argv=None):
    args = parse_args(argv)
    use_package(args.package_dir)
    launch = Launch(args)
    try:
        return launch.run()
    finally:
        for w in launch.workers:
            if w.process.poll() is None:
                w.process.kill()
        launch.coordinator.stop()


if __name__ == "__main__":
    sys.exit(main())
