"""The elastic trainer's coordinator under torchrun: nothing to start by hand.

A worker of a torchrun job that is given no coordinator (no argument, no
TRIBUTARY_COORDINATOR) asks torchrun's agent store (MASTER_ADDR:MASTER_PORT, which lives in
the agent for the whole run, across restarts of the workers) for the run's coordinator. The
first worker of the run to ask starts it: a process of its own (this module's main), in a
session of its own so that torchrun tearing the workers down for a restart leaves it running;
it serves the run until the agent's store goes away (the run is over), and publishes its
endpoint and a freshly generated secret under the run's id. Every later worker, a restarted
one included, finds them there.

The coordinator's first world is the job's WORLD_SIZE; after that, members join at step
boundaries and receive the training state from a member that has it (ElasticTrainer). When
torchrun restarts every worker at once (its policy on any failure), nobody is left to hand the
state over: the restarted workers start over from their initial state, as torchrun jobs
without a checkpoint do.
"""

import datetime
import os
import secrets
import subprocess
import sys
import tempfile
import time

_NAMESPACE = "tributary/elastic/"


def under_torchrun():
    return "TORCHELASTIC_RUN_ID" in os.environ and "MASTER_ADDR" in os.environ


def _agent_store(timeout_s):
    import torch.distributed as dist
    return dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                         is_master=False, timeout=datetime.timedelta(seconds=timeout_s),
                         wait_for_workers=False)


def coordinator_for_run(bind_host="127.0.0.1", timeout_s=120.0):
    """(endpoint, secret) of this torchrun run's coordinator, started if nobody did yet."""
    store = _agent_store(timeout_s)
    key = _NAMESPACE + os.environ["TORCHELASTIC_RUN_ID"]
    if store.add(key + "/host", 1) == 1:
        secret = secrets.token_hex(16)
        env = dict(os.environ, TRIBUTARY_SECRET=secret)
        log = os.path.join(tempfile.gettempdir(),
                           f"tributary-coordinator-{os.environ['TORCHELASTIC_RUN_ID']}.log")
        with open(log, "ab") as err:
            process = subprocess.Popen(
                [sys.executable, "-m", "tributary.torch.torchrun", bind_host,
                 os.environ.get("WORLD_SIZE", "1")],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                start_new_session=True, text=True)
        endpoint = process.stdout.readline().strip()
        process.stdout.close()
        if not endpoint.startswith("tcp://"):
            raise RuntimeError("tributary: the run's coordinator did not start (exit "
                               f"{process.poll()}; its log: {log})")
        store.set(key + "/endpoint", endpoint + "\n" + secret)
    store.wait([key + "/endpoint"], datetime.timedelta(seconds=timeout_s))
    endpoint, secret = store.get(key + "/endpoint").decode().split("\n", 1)
    return endpoint, secret


def _serve(bind_host, world_size):
    """The coordinator process: serves until torchrun's agent store stops answering."""
    from tributary import _tributary
    coordinator = _tributary.EmbeddedCoordinator(f"tcp://{bind_host}:0",
                                                 os.environ["TRIBUTARY_SECRET"], world_size)
    print(coordinator.endpoint, flush=True)
    os.close(1)
    store = _agent_store(10.0)
    while True:
        time.sleep(1.0)
        try:
            store.check([_NAMESPACE])  # any round trip: the agent is alive
        except Exception:  # the agent is gone: the run is over
            print("tributary: torchrun's agent is gone; the run's coordinator stops",
                  file=sys.stderr, flush=True)
            return 0


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1], int(sys.argv[2])))
