"""Tributary for Python: elastic, fault-tolerant collectives among training processes.

tributary.Worker joins a cluster and runs collectives on NumPy arrays and torch CPU tensors;
tributary.torch registers the "tributary" torch.distributed backend and holds the elastic
data-parallel trainer. Errors are tributary.Error subclasses carrying the Status text.
"""

from tributary._tributary import (
    Aborted,
    AuthFailed,
    BadFrame,
    BoundaryOutcome,
    Error,
    Evicted,
    Internal,
    InvalidArgument,
    Mismatch,
    Outcome,
    PeerLost,
    RoundFailed,
    StaleEpoch,
    TimedOut,
    Unavailable,
)
from tributary.worker import Work, Worker

__all__ = [
    "Aborted", "AuthFailed", "BadFrame", "BoundaryOutcome", "Error", "Evicted", "Internal",
    "InvalidArgument", "Mismatch", "Outcome", "PeerLost", "RoundFailed", "StaleEpoch", "TimedOut",
    "Unavailable", "Work", "Worker",
]
