"""Real processes for the Python tests: a `tributary coordinator` on an ephemeral port and
Python worker processes (the build's interpreter, the package from the build tree), or, for
torch.distributed scripts that start their own coordinator, workers alone with torch's env://
rendezvous (run_torch_workers). Every wait is bounded; whatever is still running at the end is
killed.

Workers report by printing one line `RESULT <json>` on stdout; their stderr goes to a file
that failures quote.
"""

import json
import os
import socket
import subprocess
import sys
import time

from tributary.local_coordinator import LocalCoordinator

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "workers")


def _worker_env(coordinator):
    env = dict(os.environ)
    env.update(coordinator.environment())
    # One compute thread per process: N workers share the machine's cores with each other.
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (os.environ.get("PYTHONPATH", ""), WORKERS) if p)
    return env


class Worker:
    """One Python worker process running tests/python/workers/<script>."""

    def __init__(self, workdir, name, script, args, env):
        self.name = name
        self.stdout_path = os.path.join(workdir, f"{name}.out")
        self.stderr_path = os.path.join(workdir, f"{name}.err")
        self._out = open(self.stdout_path, "wb")
        self._err = open(self.stderr_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-B", os.path.join(WORKERS, script), *map(str, args)],
            env=env, stdout=self._out, stderr=self._err)

    @property
    def pid(self):
        return self.process.pid

    def signal(self, sig):
        if self.process.poll() is None:
            self.process.send_signal(sig)

    def stdout_lines(self):
        with open(self.stdout_path, "rb") as f:
            return f.read().decode(errors="replace").splitlines()

    def stderr_tail(self, lines=25):
        with open(self.stderr_path, "rb") as f:
            return "\n".join(f.read().decode(errors="replace").splitlines()[-lines:])

    def result(self):
        """The worker's RESULT payload, or None if it printed none."""
        for line in reversed(self.stdout_lines()):
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])
        return None

    def wait(self, deadline):
        try:
            return self.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def close(self):
        self.kill()
        self._out.close()
        self._err.close()


class Cluster:
    """A coordinator and the workers started against it; a context manager that kills all."""

    def __init__(self, workdir, world_size, coordinator_args=()):
        self.workdir = str(workdir)
        self.coordinator = LocalCoordinator(world_size, workdir=self.workdir,
                                            extra_args=coordinator_args)
        self.env = _worker_env(self.coordinator)
        self.workers = []

    def start(self, script, args=(), name=None, env=None):
        name = name or f"worker{len(self.workers)}"
        full_env = dict(self.env)
        full_env.update(env or {})
        w = Worker(self.workdir, name, script, args, full_env)
        self.workers.append(w)
        return w

    def wait(self, workers, timeout):
        """Waits for `workers` (bounded); kills and fails on the first that overruns."""
        deadline = time.monotonic() + timeout
        codes = {}
        for w in workers:
            code = w.wait(deadline)
            if code is None:
                self.close()
                raise AssertionError(f"{w.name} still running after {timeout:.0f} s\n"
                                     f"{w.stderr_tail()}")
            codes[w.name] = code
        return codes

    def diagnose(self, workers):
        return "\n".join(f"--- {w.name} (exit {w.process.returncode}):\n{w.stderr_tail()}"
                         for w in workers)

    def close(self):
        for w in self.workers:
            w.close()
        self.coordinator.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def run_workers(workdir, n, script, args=(), timeout=180.0, per_rank_env=None,
                args_per_rank=None, coordinator_args=()):
    """Starts a coordinator for n, n workers running `script`, waits; returns the results
    (one per worker, in start order) after checking each exited 0 with a RESULT."""
    with Cluster(workdir, n, coordinator_args) as cluster:
        workers = [cluster.start(script, args_per_rank(i) if args_per_rank else args,
                                 env=(per_rank_env(i) if per_rank_env else None))
                   for i in range(n)]
        codes = cluster.wait(workers, timeout)
        bad = [w for w in workers if codes[w.name] != 0 or w.result() is None]
        assert not bad, "workers failed:\n" + cluster.diagnose(bad)
        return [w.result() for w in workers]


def free_port():
    """A port nobody listens on now (bound on 0 and read back), for torch's MASTER_PORT."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_torch_workers(workdir, n, script, args=(), timeout=180.0, env=None, per_rank_env=None):
    """n workers running a torch.distributed `script` with env:// (RANK, WORLD_SIZE, MASTER_*,
    as torchrun sets them) and no TRIBUTARY_COORDINATOR: the group starts its own. Checks each
    exited 0 with a RESULT; returns the results by rank."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUTARY_COORDINATOR")}
    base.update({"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
                 "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""),
                                                           WORKERS) if p),
                 "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
                 "WORLD_SIZE": str(n), "LOCAL_WORLD_SIZE": str(n)})
    base.update(env or {})
    workers = [Worker(str(workdir), f"rank{r}", script, args,
                      dict(base, RANK=str(r), LOCAL_RANK=str(r),
                           **(per_rank_env(r) if per_rank_env else {}))) for r in range(n)]
    try:
        deadline = time.monotonic() + timeout
        for w in workers:
            if w.wait(deadline) is None:
                raise AssertionError(f"{w.name} still running after {timeout:.0f} s\n"
                                     f"{w.stderr_tail()}")
        bad = [w for w in workers if w.process.returncode != 0 or w.result() is None]
        assert not bad, "workers failed:\n" + "\n".join(
            f"--- {w.name} (exit {w.process.returncode}):\n{w.stderr_tail()}" for w in bad)
        return [w.result() for w in workers]
    finally:
        for w in workers:
            w.close()
