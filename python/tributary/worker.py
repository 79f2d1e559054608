"""A member of a Tributary cluster, from Python.

    import numpy, tributary
    w = tributary.Worker("tcp://coordinator:7070")   # the secret comes from TRIBUTARY_SECRET
    grad = numpy.ones(1000, dtype=numpy.float32)
    outcome = w.all_reduce(grad, op="avg")           # in place; GIL released while it runs
    print(outcome.epoch, outcome.contributors)

Collectives take NumPy arrays, torch CPU tensors or buffer-protocol objects, contiguous,
without copies. With async_op=True a collective returns a Work at once and runs on the
Worker's queue (in submission order) while Python goes on; Work.wait() gives its Outcome.
Failures raise tributary.Error subclasses whose message is the Status text.

Buffers belong to the collective until it is done: do not write into or free them before
(the Worker keeps a reference, so freeing is safe; writing is not).
"""

import os

from tributary import _tributary
from tributary._arrays import as_buffer, expect_count, invalid, same_kind

DEFAULT_WAIT_S = 300.0


class Work:
    """A collective that was started with async_op=True."""

    __slots__ = ("_ticket", "_timeout", "_outcome")

    def __init__(self, ticket, timeout):
        self._ticket = ticket
        self._timeout = timeout
        self._outcome = None

    def is_completed(self):
        return self._ticket.done()

    def wait(self, timeout=None):
        """The Outcome (raises the collective's error; TimedOut after `timeout` seconds)."""
        if self._outcome is None:
            self._outcome = self._ticket.wait(self._timeout if timeout is None else timeout)
        return self._outcome

    @property
    def started_at(self):
        """time.monotonic() when the queue started the collective (once completed)."""
        return self._ticket.started_at

    @property
    def finished_at(self):
        return self._ticket.finished_at


def _config(coordinator, secret, options):
    config = _tributary.WorkerConfig()
    config.coordinator = coordinator or os.environ.get("TRIBUTARY_COORDINATOR", "")
    if not config.coordinator:
        raise invalid("no coordinator: pass one (tcp://host:port) or set TRIBUTARY_COORDINATOR")
    config.secret = secret or os.environ.get("TRIBUTARY_SECRET", "")
    if not config.secret:
        raise invalid("no cluster secret: set TRIBUTARY_SECRET")
    seconds = {"join_timeout": "join_timeout_ms", "collective_timeout": "collective_timeout_ms",
               "recovery_timeout": "recovery_timeout_ms", "deadline_floor": "deadline_floor_ms",
               "stall_timeout": "stall_timeout_ms"}
    for key, value in options.items():
        if value is None:
            continue
        if key in seconds:
            setattr(config, seconds[key], int(value * 1000))
        elif hasattr(config, key):
            setattr(config, key, value)
        else:
            raise TypeError(f"Worker() got an unexpected keyword argument '{key}'")
    return config


class Worker:
    """Joins the cluster (bounded by join_timeout) and runs collectives.

    Keyword options mirror the agent's flags: codec ("float32", "qint8:bucket=512",
    "topk:density=0.01", ...; every member the same), join_timeout, collective_timeout,
    recovery_timeout, deadline_floor (seconds), min_world_size, host, zone, bind_host,
    advertise_host, data_port, metrics_bind ("127.0.0.1:0"), algorithm, chunk_bytes,
    codec_seed, agreement, speculative_max_bytes, transport, data_addresses (a list,
    most preferred first), failover ("auto": standby paths where there are two or more
    data addresses and the group is not on shared memory; "on", "off"), stall_timeout
    (seconds). wait_timeout bounds every wait on a collective (seconds).
    """

    def __init__(self, coordinator=None, *, secret=None, wait_timeout=DEFAULT_WAIT_S,
                 **options):
        self._native = _tributary.Worker.start(_config(coordinator, secret, options))
        self.wait_timeout = wait_timeout

    @classmethod
    def _from_native(cls, native, wait_timeout=DEFAULT_WAIT_S):
        """A Worker around a native one (the elastic loop's, for the length of a step)."""
        self = cls.__new__(cls)
        self._native = native
        self.wait_timeout = wait_timeout
        return self

    # --- who and where -------------------------------------------------------------------
    rank = property(lambda self: self._native.rank)
    size = property(lambda self: self._native.size)
    epoch = property(lambda self: self._native.epoch)
    member_id = property(lambda self: self._native.member_id)
    data_port = property(lambda self: self._native.data_port)
    metrics_port = property(lambda self: self._native.metrics_port)
    step = property(lambda self: self._native.step)
    draining = property(lambda self: self._native.draining)

    def _done(self, ticket, async_op):
        work = Work(ticket, self.wait_timeout)
        return work if async_op else work.wait()

    # --- collectives ---------------------------------------------------------------------
    def all_reduce(self, tensor, op="sum", *, out=None, async_op=False):
        """Reduces `tensor` over the members, in place (or into `out`)."""
        src = as_buffer(tensor, "tensor", writable=out is None)
        dst = src if out is None else as_buffer(out, "out")
        same_kind(src, dst, "tensor", "out")
        expect_count(dst, src.count, "out", "all_reduce")
        return self._done(self._native.all_reduce(src.address, dst.address, src.count, src.dtype,
                                                  op, (src.owner, dst.owner)), async_op)

    def broadcast(self, tensor, root=0, *, async_op=False):
        """Root's `tensor` into every member's `tensor`."""
        buf = as_buffer(tensor, "tensor")
        return self._done(self._native.broadcast(buf.address, buf.address, buf.count, buf.dtype,
                                                 root, buf.owner), async_op)

    def reduce(self, tensor, root=0, op="sum", *, out=None, async_op=False):
        """The reduction lands on `root` only: in its `tensor`, or its `out`."""
        src = as_buffer(tensor, "tensor", writable=out is None)
        dst = src if out is None else as_buffer(out, "out")
        same_kind(src, dst, "tensor", "out")
        expect_count(dst, src.count, "out", "reduce")
        return self._done(self._native.reduce(src.address, dst.address, src.count, src.dtype, op,
                                              root, (src.owner, dst.owner)), async_op)

    def all_gather(self, tensor, out, *, async_op=False):
        """`out` (size x tensor's elements) receives every member's `tensor`, by rank."""
        src = as_buffer(tensor, "tensor", writable=False)
        dst = as_buffer(out, "out")
        same_kind(src, dst, "tensor", "out")
        expect_count(dst, src.count * self.size, "out", f"all_gather of {self.size} members")
        return self._done(self._native.all_gather(src.address, dst.address, src.count, src.dtype,
                                                  (src.owner, dst.owner)), async_op)

    def reduce_scatter(self, tensor, out, op="sum", *, async_op=False):
        """`tensor` holds size blocks of out's length; member r receives block r reduced."""
        src = as_buffer(tensor, "tensor", writable=False)
        dst = as_buffer(out, "out")
        same_kind(src, dst, "tensor", "out")
        expect_count(src, dst.count * self.size, "tensor", f"reduce_scatter of {self.size} members")
        return self._done(self._native.reduce_scatter(src.address, dst.address, dst.count,
                                                      src.dtype, op, (src.owner, dst.owner)),
                          async_op)

    def gather(self, tensor, out=None, root=0, *, async_op=False):
        """Root's `out` (size x tensor's elements) receives every member's `tensor`."""
        src = as_buffer(tensor, "tensor", writable=False)
        if self.rank == root:
            if out is None:
                raise invalid("gather: the root needs `out`")
            dst = as_buffer(out, "out")
            same_kind(src, dst, "tensor", "out")
            expect_count(dst, src.count * self.size, "out", f"gather of {self.size} members")
            address, owner = dst.address, dst.owner
        else:
            address, owner = 0, None
        return self._done(self._native.gather(src.address, address, src.count, src.dtype, root,
                                              (src.owner, owner)), async_op)

    def scatter(self, out, tensor=None, root=0, *, async_op=False):
        """Root's `tensor` holds size blocks of out's length; member r receives block r."""
        dst = as_buffer(out, "out")
        if self.rank == root:
            if tensor is None:
                raise invalid("scatter: the root needs `tensor` (what it scatters)")
            src = as_buffer(tensor, "tensor", writable=False)
            same_kind(dst, src, "out", "tensor")
            expect_count(src, dst.count * self.size, "tensor", f"scatter to {self.size} members")
            address, owner = src.address, src.owner
        else:
            address, owner = 0, None
        return self._done(self._native.scatter(address, dst.address, dst.count, dst.dtype, root,
                                               (owner, dst.owner)), async_op)

    def all_to_all(self, tensor, out, *, async_op=False):
        """Block j of member i's `tensor` becomes block i of member j's `out`."""
        src = as_buffer(tensor, "tensor", writable=False)
        dst = as_buffer(out, "out")
        same_kind(src, dst, "tensor", "out")
        expect_count(dst, src.count, "out", "all_to_all")
        if src.count % self.size:
            raise invalid(f"all_to_all: {src.count} elements do not split into {self.size} blocks")
        if src.count and src.address < dst.address + dst.nbytes and \
                dst.address < src.address + src.nbytes:
            raise invalid("all_to_all cannot run in place: `out` overlaps `tensor`")
        return self._done(self._native.all_to_all(src.address, dst.address, src.count // self.size,
                                                  src.dtype, (src.owner, dst.owner)), async_op)

    def barrier(self, *, async_op=False):
        return self._done(self._native.barrier(), async_op)

    def all_reduce_compressed(self, tensor, op="avg", *, tensor_id=0, step=0, matrices=(),
                              async_op=False):
        """A float32 gradient through the Worker's codec, in place, with error feedback kept
        per `tensor_id`; `step` must be equal on every member (docs/compression.md).
        `matrices`: (offset, rows, cols) of the weight matrices inside (for PowerSGD)."""
        buf = as_buffer(tensor, "tensor")
        if buf.dtype != "float32":
            raise invalid(f"all_reduce_compressed takes float32, not {buf.dtype}")
        return self._done(self._native.all_reduce_compressed(
            buf.address, buf.count, op, tensor_id, step, [tuple(m) for m in matrices],
            buf.owner), async_op)

    def federated_round(self, tensor, *, round, weight, deadline=10.0, min_participants=1,
                        late="fold", tensor_id=0):
        """A federated round (docs/federated.md) on a float32 tensor, in place: the weighted
        mean over the members that contribute by `deadline` seconds after the round opens.
        Returns a FederatedOutcome; `contributed` False means this member was late (the tensor
        is untouched; late="fold" adds it into the residual for `tensor_id`, "drop" forgets
        it). Fewer than `min_participants`: raises RoundFailed on every member."""
        buf = as_buffer(tensor, "tensor")
        if buf.dtype != "float32":
            raise invalid(f"federated_round takes float32, not {buf.dtype}")
        return self._native.federated_round(buf.address, buf.count, round, float(weight),
                                            float(deadline), min_participants, late, tensor_id,
                                            self.wait_timeout)

    # --- elasticity ----------------------------------------------------------------------
    def register_state(self, name, tensor):
        """Training state a joiner receives (SHA-256 verified) at a step boundary: the same
        names and sizes on every member; `tensor` must keep its memory for the Worker's life
        (update it in place)."""
        buf = as_buffer(tensor, name)
        self._native.register_state(name, buf.address, buf.nbytes, buf.owner, self.wait_timeout)

    def step_boundary(self):
        """Joins, drains and view changes happen here; call it before each step."""
        return self._native.step_boundary(self.wait_timeout)

    def wait_all(self, timeout=None):
        """Waits until every collective started so far is done."""
        self._native.wait_idle(self.wait_timeout if timeout is None else timeout)

    def drain(self):
        """Leave at the next step boundary (a spot preemption notice)."""
        self._native.drain()

    def leave(self):
        """Leaves the cluster now (also done when the Worker is garbage-collected)."""
        self._native.leave()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.leave()
