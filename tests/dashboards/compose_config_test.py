"""The docker compose stack's wiring, checked without a Docker engine (there is none on
the development machines; docker/README.md says what was and was not run):

1. Every bind mount of docker/compose.yaml names a file or directory that exists.
2. Prometheus mounts the very files the native tests run (dashboards/prometheus/
   prometheus.yml and rules/, dashboards/consoles), and its flags point at the mounted
   paths. The container's /etc/prometheus is rebuilt from the mounts in a temporary
   directory and `promtool check config` loads it, rule files included, from there.
3. The fixed target lists name compose services, on the port each serves /metrics on.
4. Grafana's provisioning reaches Prometheus by its service name and port, and its
   dashboard provider reads the directory where dashboards/tributary.json is mounted.

Usage: compose_config_test.py SOURCE_DIR. Exit 77 (ctest: skipped) without promtool.
"""
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from outcome import run_with_promtool

METRICS_FLAG = re.compile(r"--metrics[ =]\S*:(\d+)")


def bind_mounts(service, compose_dir):
    """(host path, container path) for each bind mount (named volumes are left out)."""
    mounts = []
    for v in service.get("volumes", []):
        src, dst = v.split(":")[:2]
        if src.startswith((".", "/")):
            mounts.append(((compose_dir / src).resolve(), dst))
    return mounts


def flags(service):
    out = {}
    for arg in service.get("command", []):
        if arg.startswith("--") and "=" in arg:
            k, v = arg.split("=", 1)
            out[k] = v
    return out


def metrics_port(service):
    m = METRICS_FLAG.search(" ".join(service.get("command", []) + service.get("entrypoint", [])))
    return int(m.group(1)) if m else None


def check_mounts(services, compose_dir):
    errors = []
    for name, svc in services.items():
        for src, dst in bind_mounts(svc, compose_dir):
            if not src.exists():
                errors.append(f"{name}: bind mount source {src} ({dst}) does not exist")
    return errors


def check_prometheus(src, services, compose_dir, promtool):
    errors = []
    prom = services["prometheus"]
    mounts = {dst: path for path, dst in bind_mounts(prom, compose_dir)}
    f = flags(prom)
    want = {
        "/etc/prometheus/prometheus.yml": src / "dashboards/prometheus/prometheus.yml",
        "/etc/prometheus/rules": src / "dashboards/prometheus/rules",
        f.get("--web.console.templates", "(unset)"): src / "dashboards/consoles",
    }
    for dst, path in want.items():
        if mounts.get(dst) != path.resolve():
            errors.append(f"prometheus: {dst} should be {path}, is {mounts.get(dst)}")
    if f.get("--config.file") != "/etc/prometheus/prometheus.yml":
        errors.append(f"prometheus: --config.file is {f.get('--config.file')}")
    with tempfile.TemporaryDirectory() as tmp:
        for dst, path in mounts.items():
            staged = Path(tmp + dst)
            staged.parent.mkdir(parents=True, exist_ok=True)
            staged.symlink_to(path)
        r = subprocess.run([promtool, "check", "config", tmp + "/etc/prometheus/prometheus.yml"],
                           capture_output=True, text=True, timeout=60)
        print(r.stdout.strip())
        if r.returncode != 0:
            errors.append(f"promtool check config in the container's layout failed:\n{r.stdout}{r.stderr}")
        targets = Path(tmp) / "etc/prometheus/targets"
        for job in ("coordinator", "agents"):
            errors += check_targets(targets / f"{job}.json", services)
    return errors


def check_targets(path, services):
    if not path.is_file():
        return [f"{path.name}: missing from the mounted targets directory"]
    errors = []
    for group in json.loads(path.read_text()):
        for target in group["targets"]:
            host, port = target.rsplit(":", 1)
            if host not in services:
                errors.append(f"{path.name}: {target}: no compose service {host}")
            elif metrics_port(services[host]) != int(port):
                errors.append(f"{path.name}: {target}: {host} serves /metrics on {metrics_port(services[host])}")
    return errors


def check_grafana(services, compose_dir):
    errors = []
    graf = services["grafana"]
    mounts = {dst: path for path, dst in bind_mounts(graf, compose_dir)}
    prov = mounts.get("/etc/grafana/provisioning")
    if prov is None:
        return ["grafana: /etc/grafana/provisioning is not mounted"]
    prom_port = flags(services["prometheus"]).get("--web.listen-address", ":9090").rsplit(":", 1)[1]
    for f in sorted((prov / "datasources").glob("*.yml")):
        for ds in yaml.safe_load(f.read_text())["datasources"]:
            if ds["type"] == "prometheus" and ds["url"] != f"http://prometheus:{prom_port}":
                errors.append(f"{f.name}: data source url {ds['url']}, Prometheus is prometheus:{prom_port}")
    providers = [p for f in sorted((prov / "dashboards").glob("*.yml"))
                 for p in yaml.safe_load(f.read_text())["providers"]]
    dirs = {p["options"]["path"] for p in providers}
    boards = [dst for dst in mounts if dst.endswith(".json")]
    if not boards or any(str(Path(b).parent) not in dirs for b in boards):
        errors.append(f"grafana: dashboards mounted at {boards}, providers read {sorted(dirs)}")
    for b in boards:
        if mounts[b].name != "tributary.json" or "panels" not in json.loads(mounts[b].read_text()):
            errors.append(f"grafana: {b} is not the project's dashboard")
    home = graf.get("environment", {}).get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
    if home and home not in boards:
        errors.append(f"grafana: home dashboard {home} is not mounted")
    return errors


def checks(src, promtool):
    compose_dir = src / "docker"
    services = yaml.safe_load((compose_dir / "compose.yaml").read_text())["services"]
    errors = check_mounts(services, compose_dir)
    errors += check_prometheus(src, services, compose_dir, promtool)
    errors += check_grafana(services, compose_dir)
    print(f"services: {', '.join(services)}")
    return errors


if __name__ == "__main__":
    sys.exit(run_with_promtool(checks))
