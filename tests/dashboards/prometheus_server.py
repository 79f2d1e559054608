"""A real Prometheus server for tests, run from the project's own configuration.

The configuration directory is staged the way the docker compose stack mounts it:
prometheus.yml and rules/ are symlinks to dashboards/prometheus/ (the same files, not
copies), targets/ is a directory the test owns and writes file_sd lists into. Consoles
come from dashboards/consoles with the console libraries Debian's package ships.

Every wait has a deadline; the server is stopped (SIGTERM, then SIGKILL) on close().
"""
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

# Debian ships prom.lib and menu.lib as examples; the prom/prometheus image ships the
# same files in /usr/share/prometheus/console_libraries.
CONSOLE_LIBRARIES = ("/usr/share/doc/prometheus/examples/console_libraries",
                     "/usr/share/prometheus/console_libraries",
                     "/etc/prometheus/console_libraries")


def console_libraries():
    for d in CONSOLE_LIBRARIES:
        if (Path(d) / "prom.lib").is_file():
            return d
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_with_parent():
    """preexec_fn: the child gets SIGKILL if this test process dies (ctest timeout)."""
    import ctypes
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def poll(deadline, what, fn, interval=0.25):
    """Calls fn until it returns a true value or the deadline (time.monotonic()) passes."""
    last = None
    while True:
        last = fn()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


class Prometheus:
    def __init__(self, source_dir, work_dir, log_path):
        self.config_dir = Path(work_dir) / "prometheus"
        self.targets_dir = self.config_dir / "targets"
        self.targets_dir.mkdir(parents=True)
        prom_src = Path(source_dir) / "dashboards" / "prometheus"
        (self.config_dir / "prometheus.yml").symlink_to(prom_src / "prometheus.yml")
        (self.config_dir / "rules").symlink_to(prom_src / "rules")
        for job in ("coordinator", "agents"):
            self.write_targets(job, [])
        self.consoles = Path(source_dir) / "dashboards" / "consoles"
        self.tsdb = Path(work_dir) / "tsdb"
        self.log_path = log_path
        self.process = None
        self.port = None

    def write_targets(self, job, addresses):
        """Replaces targets/<job>.json atomically; Prometheus picks the change up at once."""
        tmp = self.targets_dir / f".{job}.json.tmp"
        tmp.write_text(json.dumps([{"targets": sorted(addresses)}]))
        os.replace(tmp, self.targets_dir / f"{job}.json")

    def start(self, deadline):
        libraries = console_libraries()
        for attempt in range(3):  # another program may take the free port first
            self.port = free_port()
            log = open(self.log_path, "ab")
            self.process = subprocess.Popen(
                ["prometheus", f"--config.file={self.config_dir / 'prometheus.yml'}",
                 f"--storage.tsdb.path={self.tsdb}{attempt}",
                 f"--web.listen-address=127.0.0.1:{self.port}",
                 f"--web.console.templates={self.consoles}",
                 f"--web.console.libraries={libraries}", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT, preexec_fn=kill_with_parent)
            log.close()

            def ready():
                if self.process.poll() is not None:
                    return "exited"
                return "ready" if self._status("/-/ready") == 200 else None
            if poll(deadline, "prometheus to become ready", ready) == "ready":
                return
        raise AssertionError(f"prometheus did not start; see {self.log_path}")

    def close(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def _status(self, path):
        try:
            with urllib.request.urlopen(self.url(path), timeout=2) as r:
                return r.status
        except (urllib.error.URLError, OSError):
            return None

    def api(self, path, **params):
        """GET /api/v1/<path>; returns `data`, raises on an error answer."""
        url = self.url("/api/v1/" + path) + ("?" + urllib.parse.urlencode(params) if params else "")
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:
            body = json.load(e)
        if body.get("status") != "success":
            raise AssertionError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr, at=None):
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self.api("query", **params)["result"]

    def query_range(self, expr, start, end, step):
        return self.api("query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}",
                        step=str(step))["result"]

    def value(self, expr):
        """The single value of a one-element instant vector, or None."""
        r = self.query(expr)
        return float(r[0]["value"][1]) if len(r) == 1 else None
