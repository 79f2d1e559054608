"""tributary.torch: the "tributary" torch.distributed backend, and elastic data-parallel
training (tributary.torch.ElasticTrainer).

Importing this module registers the backend, so that an unchanged DDP script runs over
Tributary with

    import tributary.torch
    dist.init_process_group("tributary", rank=rank, world_size=n)   # env:// rendezvous

and the cluster named by the environment: TRIBUTARY_COORDINATOR (tcp://host:port of a
`tributary coordinator --world-size n`), TRIBUTARY_SECRET, and optionally TRIBUTARY_BIND_HOST
(the data-plane address peers dial; default 127.0.0.1), TRIBUTARY_HOST (the host label the
coordinator orders ranks by; default the hostname) and TRIBUTARY_JOIN_TIMEOUT_S (default: the
group's timeout, at most 120 s). The group has a fixed world (python/torch_backend/
process_group.h); torch's ranks are kept whatever order the coordinator gives the members.
"""

import os
from datetime import timedelta

import torch.distributed as dist

from tributary.torch import _c10d

BACKEND = "tributary"


def _create_process_group(store, rank, world_size, timeout):
    coordinator = os.environ.get("TRIBUTARY_COORDINATOR", "")
    secret = os.environ.get("TRIBUTARY_SECRET", "")
    if not coordinator:
        raise RuntimeError("tributary backend: set TRIBUTARY_COORDINATOR to the coordinator's "
                           "endpoint (tcp://host:port)")
    if not secret:
        raise RuntimeError("tributary backend: set TRIBUTARY_SECRET to the cluster's secret")
    join = os.environ.get("TRIBUTARY_JOIN_TIMEOUT_S")
    join_timeout = timedelta(seconds=float(join)) if join else min(timeout, timedelta(seconds=120))
    return _c10d.create(store, rank, world_size, timeout, coordinator=coordinator, secret=secret,
                        bind_host=os.environ.get("TRIBUTARY_BIND_HOST", "127.0.0.1"),
                        host=os.environ.get("TRIBUTARY_HOST", ""),
                        join_timeout_ms=int(join_timeout.total_seconds() * 1000))


if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create_process_group)

from tributary.torch.elastic import ElasticTrainer, StepContext  # noqa: E402

__all__ = ["BACKEND", "ElasticTrainer", "StepContext"]
