"""tributary.torch: the "tributary" torch.distributed backend, and elastic data-parallel
training (tributary.torch.ElasticTrainer).

Importing this module registers the backend for CPU tensors, and for CUDA tensors when torch
and this build have CUDA (they are staged through pinned host memory on a side stream, as
torch's gloo backend does: docs/gpu.md), so that an unchanged DDP or FSDP script runs over
Tributary with

    import tributary.torch
    dist.init_process_group("tributary")      # under torchrun, or any init_method

Nothing else has to run: every group (the default one and each subgroup) starts a coordinator
of its own inside its rank 0 and shares its endpoint and a fresh secret with the group's
members through torch's store. To use a coordinator started separately (a `tributary
coordinator --world-size n`, or replicated ones on etcd), set TRIBUTARY_COORDINATOR to its
endpoint(s) and TRIBUTARY_SECRET to the cluster's secret; it then serves the default group
(subgroups still start their own).

Optional environment: TRIBUTARY_BIND_HOST (the address this process listens on for data and,
on a group's rank 0, for the group's coordinator; default 127.0.0.1 when every rank runs on
this host, else this host's address), TRIBUTARY_HOST (the host label the coordinator orders
ranks by; default the hostname) and TRIBUTARY_JOIN_TIMEOUT_S (default: the group's timeout,
at most 120 s). The group has a fixed world (python/torch_backend/backend.h); torch's ranks are
kept whatever order the coordinator gives the members.
"""

import atexit
import os
import socket
from datetime import timedelta

import torch
import torch.distributed as dist

from tributary.torch import _c10d

BACKEND = "tributary"


def _bind_host():
    explicit = os.environ.get("TRIBUTARY_BIND_HOST")
    if explicit:
        return explicit
    # torchrun says how many ranks run on this host; when they are all of them, loopback.
    local, world = os.environ.get("LOCAL_WORLD_SIZE"), os.environ.get("WORLD_SIZE")
    if local is None or world is None or local == world:
        return "127.0.0.1"
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError as e:
        raise RuntimeError("tributary backend: ranks on several hosts and this host's address is "
                           f"unknown ({e}): set TRIBUTARY_BIND_HOST") from e


def _create_backend(store, rank, world_size, timeout):
    coordinator = os.environ.get("TRIBUTARY_COORDINATOR", "")
    secret = os.environ.get("TRIBUTARY_SECRET", "")
    # The environment's coordinator serves the default group only (the one being created
    # while torch.distributed is not initialized yet); every later group (new_group,
    # split_group) forms a cluster of its own.
    if dist.is_initialized():
        coordinator = secret = ""
    if coordinator and not secret:
        raise RuntimeError("tributary backend: TRIBUTARY_COORDINATOR is set but TRIBUTARY_SECRET "
                           "is not: set it to the cluster's secret (or unset both and the group "
                           "starts its own coordinator)")
    join = os.environ.get("TRIBUTARY_JOIN_TIMEOUT_S")
    join_timeout = timedelta(seconds=float(join)) if join else min(timeout, timedelta(seconds=120))
    host = _bind_host()
    return _c10d.create(store, rank, world_size, timeout, coordinator=coordinator, secret=secret,
                        bind_host=host, host=os.environ.get("TRIBUTARY_HOST", ""),
                        coordinator_host=host,
                        join_timeout_ms=int(join_timeout.total_seconds() * 1000))


# The devices the backend takes: CUDA when this build stages CUDA tensors (it was built against
# a torch with CUDA) and the torch running has CUDA; a GPU need not be present to register.
DEVICES = ["cpu", "cuda"] if _c10d.built_with_cuda and torch.backends.cuda.is_built() else ["cpu"]

if BACKEND not in dist.Backend.backend_list:
    dist.Backend.register_backend(BACKEND, _create_backend, devices=DEVICES)
    # Groups still alive at exit (destroy_process_group never called, or a subgroup held by a
    # module) leave and stop their threads before the interpreter tears down.
    atexit.register(_c10d._shutdown_all)

from tributary.torch.elastic import ElasticTrainer, StepContext  # noqa: E402

__all__ = ["BACKEND", "DEVICES", "ElasticTrainer", "StepContext"]
