"""A `tributary coordinator` process on this machine, on an ephemeral port: for launchers,
tests, benchmarks and notebooks that start a whole cluster locally.

    with LocalCoordinator(world_size=4) as coordinator:
        env = dict(os.environ, TRIBUTARY_COORDINATOR=coordinator.endpoint,
                   TRIBUTARY_SECRET=coordinator.secret)
        ... start workers with env ...

The secret is random unless given, and reaches the coordinator through its environment,
never its command line. The binary is `binary`, else $TRIBUTARY_BIN, else `tributary` on
PATH. Starting waits (bounded) until the coordinator has bound its port.
"""

import os
import secrets
import shutil
import subprocess
import time


def find_binary(binary=None):
    path = binary or os.environ.get("TRIBUTARY_BIN") or shutil.which("tributary")
    if not path or not os.access(path, os.X_OK):
        raise FileNotFoundError("no tributary binary: pass one, set TRIBUTARY_BIN, or put "
                                "`tributary` on PATH (build/release/cli/tributary)")
    return path


class LocalCoordinator:
    def __init__(self, world_size, *, workdir, binary=None, secret=None, extra_args=(),
                 timeout=30.0):
        self.secret = secret or secrets.token_hex(16)
        ready = os.path.join(workdir, "coordinator.endpoint")
        if os.path.exists(ready):
            os.unlink(ready)
        self.log_path = os.path.join(workdir, "coordinator.log")
        self._log = open(self.log_path, "wb")
        env = dict(os.environ, TRIBUTARY_SECRET=self.secret)
        self.process = subprocess.Popen(
            [find_binary(binary), "coordinator", "--bind", "tcp://127.0.0.1:0", "--world-size",
             str(world_size), "--ready-file", ready, *extra_args],
            env=env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        pause = 0.001
        while not os.path.exists(ready):  # the coordinator renames it into place once bound
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the coordinator did not start: {self.log_tail()}")
            time.sleep(pause)
            pause = min(2 * pause, 0.05)
        with open(ready) as f:
            self.endpoint = f.read().strip()

    def environment(self):
        """What a worker needs to join: TRIBUTARY_COORDINATOR and TRIBUTARY_SECRET."""
        return {"TRIBUTARY_COORDINATOR": self.endpoint, "TRIBUTARY_SECRET": self.secret}

    def log_tail(self, lines=20):
        with open(self.log_path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-lines:]).decode(errors="replace")

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
