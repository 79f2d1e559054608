"""torchrun launches of an unchanged script (workers/torchrun_job.py) with the "tributary"
backend and nothing else started: one agent with 3 processes, and two agents of 2 processes
each meeting at one c10d rendezvous on loopback (two "nodes"). Every rank sees the right sums,
its node's subgroup, its ring neighbour, and the same DDP weights as every other rank.

And tributary.torch.ElasticTrainer under torchrun with no coordinator given
(workers/elastic_torchrun_job.py): a worker SIGKILLed on the first attempt, torchrun restarts
the workers (--max-restarts 1), they find the run's coordinator through the agent's store and
train to the end with identical parameters; the coordinator stops once torchrun has exited."""

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

from cluster import WORKERS, free_port

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
JOB = os.path.join(WORKERS, "torchrun_job.py")


def environment():
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUTARY_COORDINATOR")}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
               # Several "nodes" on one machine: every address is loopback.
               TRIBUTARY_BIND_HOST="127.0.0.1")
    return env


def agents(commands, timeout=150):
    procs = [subprocess.Popen(c, env=environment(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for c in commands]
    outputs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=timeout)
            outputs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, failure(out)


def failure(out):
    """What a failed launch printed that says why: the workers' tracebacks and error lines
    (the agents' info logs would push them out of a plain tail), then the tail."""
    lines = out.splitlines()
    why, in_traceback = [], False
    for line in lines:
        if line.startswith("Traceback") or "[rank" in line and "Traceback" in line:
            in_traceback = True
        if in_traceback or " error " in line or "Error:" in line or " warn " in line:
            why.append(line)
        if in_traceback and not line.startswith((" ", "Traceback")) and line.strip():
            in_traceback = False
    return "\n".join(why[:80]) + "\n--- tail ---\n" + out[-3000:]


def results(out_dir, world):
    seen = []
    for r in range(world):
        with open(out_dir / f"rank{r}.json") as f:
            seen.append(json.load(f))
    return seen


def check(seen, world, per_node):
    for r, s in enumerate(seen):
        assert s["rank"] == r and s["world"] == world, s
        assert s["sum_of_ranks"] == world * (world - 1) / 2, s
        node = r // per_node
        assert s["node_sum"] == sum(range(node * per_node, (node + 1) * per_node)), s
        assert s["ring_from"] == (r - 1) % world, s
        assert s["weights"] == seen[0]["weights"], (r, s["weights"], seen[0]["weights"])


def test_single_node(tmp_path):
    agents([TORCHRUN + ["--standalone", "--nproc-per-node", "3", JOB, str(tmp_path)]])
    check(results(tmp_path, 3), 3, 3)


def test_two_nodes_one_rendezvous(tmp_path):
    endpoint = f"127.0.0.1:{free_port()}"
    common = ["--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
              "--rdzv-endpoint", endpoint, "--rdzv-id", "two-nodes"]
    agents([TORCHRUN + common + ["--rdzv-conf", f"is_host={host}", JOB, str(tmp_path)]
            for host in ("true", "false")])
    check(results(tmp_path, 4), 4, 2)


def test_elastic_trainer_restarted_by_torchrun(tmp_path):
    run_id = f"elastic-{uuid.uuid4().hex[:12]}"
    job = os.path.join(WORKERS, "elastic_torchrun_job.py")
    agents([TORCHRUN + ["--nnodes", "1", "--nproc-per-node", "2", "--max-restarts", "1",
                        "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                        "--rdzv-id", run_id, job, str(tmp_path)]])
    seen = results(tmp_path, 2)
    for s in seen:
        assert s["attempt"] == 1 and s["steps"] == 120 and not s["drained"], s
    assert seen[0]["sha256"] == seen[1]["sha256"], seen
    log = os.path.join(tempfile.gettempdir(), f"tributary-coordinator-{run_id}.log")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        with open(log) as f:
            if "the run's coordinator stops" in f.read():
                break
        time.sleep(0.2)
    else:
        raise AssertionError(f"the run's coordinator is still serving: {log}")
    os.unlink(log)
