"""`tributary demo` as a cluster to scrape: a coordinator and N worker processes with
/metrics on ephemeral ports, one worker killed (kill -9) and one joined mid-run.

The demo relays every process's output; this reads it on a thread, keeps a log, and
hands each /metrics port to a callback as it is printed:
  tributary[coordinator]: listening on tcp://..., metrics on port P, ...
  tributary[agent]: member M rank R data HOST:PORT metrics P
(the joiner prints its line when it is admitted). The demo runs in its own process
group, so close() can stop it and every process it started.
"""
import os
import re
import signal
import subprocess
import threading
import time

from prometheus_server import kill_with_parent

COORDINATOR_METRICS = re.compile(r"listening on \S+, metrics on port (\d+)")
AGENT_METRICS = re.compile(r"member (\d+) rank \d+ data \S+ metrics (\d+)")
VIEW = re.compile(r"view epoch (\d+) \((\w+)\): (\d+) members")
AGREE = re.compile(r"demo: \d+ surviving workers hold bitwise-identical parameters")


class DemoCluster:
    # The kill at step 240 (~13 s in) leaves Prometheus time to discover and first scrape
    # every target (its file discovery sends updates at most every 5 s, then a 2 s scrape
    # interval): a counter first seen after its increment shows no increase.
    def __init__(self, binary, log_path, on_coordinator, on_agent, workers=4, kill_at=240,
                 join_at=400, epochs=36, step_delay_ms=50, timeout_s=150):
        self.argv = [binary, "demo", "--workers", str(workers), "--metrics", "127.0.0.1:0",
                     "--coordinator-metrics", "127.0.0.1:0", "--kill-at", str(kill_at),
                     "--join-at", str(join_at), "--epochs", str(epochs),
                     "--step-delay-ms", str(step_delay_ms), "--timeout-s", str(timeout_s),
                     "--verbose"]  # the processes' log lines, with their /metrics ports
        self.log_path = log_path
        self.on_coordinator = on_coordinator
        self.on_agent = on_agent
        self.views = []  # (seconds since start, epoch, cause, members)
        self.agreed = False
        self.process = None
        self.reader = None
        self.started = None

    def start(self):
        self.started = time.monotonic()
        self.process = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        start_new_session=True, preexec_fn=kill_with_parent)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        with open(self.log_path, "w") as log:
            for raw in self.process.stdout:
                line = raw.decode(errors="replace").rstrip("\n")
                elapsed = time.monotonic() - self.started
                log.write(f"[{elapsed:7.2f}] {line}\n")
                log.flush()
                self._handle(line, elapsed)

    def _handle(self, line, elapsed):
        if m := COORDINATOR_METRICS.search(line):
            self.on_coordinator(int(m.group(1)))
        elif "tributary[agent]" in line and (m := AGENT_METRICS.search(line)):
            self.on_agent(int(m.group(1)), int(m.group(2)))
        elif m := VIEW.search(line):
            self.views.append((elapsed, int(m.group(1)), m.group(2), int(m.group(3))))
        elif AGREE.search(line):
            self.agreed = True

    def wait(self, timeout):
        """The demo's exit status once its output is drained; raises on timeout."""
        rc = self.process.wait(timeout=timeout)
        self.reader.join(timeout=10)
        return rc

    def close(self):
        # Only while the demo is unreaped: its pid (the group's id) cannot be reused yet.
        if self.process and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(timeout=10)
