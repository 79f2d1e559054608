"""Gradients in flat buckets, averaged across the members while backward is still running.

Parameters are grouped into buckets (reverse registration order, which is roughly the order
backward produces their gradients; one dtype per bucket; at most `cap_bytes` each, like
DistributedDataParallel's bucket_cap_mb). Each parameter's .grad is a view into its bucket,
so autograd accumulates straight into the bucket, and after backward() a view of the
average. A hook on each parameter's gradient
accumulator counts it ready; a bucket whose gradients are all ready is started at once as an
asynchronous all-reduce on the Worker's queue (agent/collective_queue.h) and runs there while
backward goes on computing the earlier layers.

Buckets start strictly in index order, on every member: a ready bucket waits for the ones
before it, and finish() starts whatever backward did not complete (parameters without a
gradient this step contribute zeros). So every member queues the same collectives in the
same order, whatever its autograd did.

Averaging is the collective's own "avg", which divides by the members of the epoch that
produced the result: the bucket's Outcome.contributors. A bucket re-run after a member died
is averaged over the survivors who re-ran it (docs/fault-tolerance.md).
"""

import time

import torch

DEFAULT_CAP_BYTES = 25 * 1024 * 1024  # DistributedDataParallel's default bucket_cap_mb


class Bucket:
    """Parameters whose gradients are averaged together, and two flat buffers for them: the
    gradients accumulate in one and the average lands in the other (out of place, so the
    runtime keeps no copy of the input for a re-run: the input is left intact anyway), and
    then the parameters' .grad views move over to it. A codec works in place: one buffer."""

    __slots__ = ("index", "params", "flats", "views", "current", "pending", "work")

    def __init__(self, index, dtype, params, buffers):
        self.index = index
        self.params = params
        total = sum(p.numel() for p in params)
        self.flats = [torch.zeros(total, dtype=dtype) for _ in range(buffers)]
        self.views = []
        for flat in self.flats:
            views, offset = [], 0
            for p in params:
                views.append(flat[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
            self.views.append(views)
        self.current = 0  # the buffer the gradients accumulate in
        self.pending = len(params)
        self.work = None

    @property
    def flat(self):
        return self.flats[self.current]

    def point_grads(self):
        """Every parameter's .grad is its view into the current buffer."""
        for p, view in zip(self.params, self.views[self.current]):
            if p.grad is None or p.grad.data_ptr() != view.data_ptr():
                p.grad = view


def _check(p):
    if p.device.type != "cpu":
        raise ValueError(f"tributary: parameter on {p.device}; the trainer runs on CPU tensors")
    if p.is_sparse or not p.is_contiguous():
        raise ValueError("tributary: parameters must be dense and contiguous")


class GradientBuckets:
    def __init__(self, parameters, cap_bytes=DEFAULT_CAP_BYTES, compressed=False):
        params = [p for p in parameters if p.requires_grad]
        for p in params:
            _check(p)
            if compressed and p.dtype != torch.float32:
                raise ValueError(f"tributary: a codec compresses float32 gradients, not {p.dtype}")
        self.compressed = compressed
        buffers = 1 if compressed else 2
        self.buckets = []
        current, size = [], 0
        for p in reversed(params):
            nbytes = p.numel() * p.element_size()
            if current and (current[0].dtype != p.dtype or size + nbytes > cap_bytes):
                self.buckets.append(Bucket(len(self.buckets), current[0].dtype, current, buffers))
                current, size = [], 0
            current.append(p)
            size += nbytes
        if current:
            self.buckets.append(Bucket(len(self.buckets), current[0].dtype, current, buffers))
        # The accumulator nodes must stay referenced for their hooks to stay registered.
        self._accumulators = []
        for bucket in self.buckets:
            for p in bucket.params:
                accumulator = p.view_as(p).grad_fn.next_functions[0][0]
                accumulator.register_hook(self._hook(bucket))
                self._accumulators.append(accumulator)
        self._worker = None
        self._step = 0
        self._next = 0
        self._active = False
        self.backward_started = self.backward_ended = 0.0

    @property
    def nbytes(self):
        return sum(f.numel() * f.element_size() for b in self.buckets for f in b.flats)

    def _hook(self, bucket):
        def ready(grad_inputs, grad_outputs):
            if self._active:
                bucket.pending -= 1
                self._start_ready()
        return ready

    def _start(self, bucket):
        if self.compressed:
            bucket.work = self._worker.all_reduce_compressed(
                bucket.flat, op="avg", tensor_id=bucket.index + 1, step=self._step, async_op=True)
        else:
            bucket.work = self._worker.all_reduce(bucket.flat, op="avg",
                                                  out=bucket.flats[1 - bucket.current],
                                                  async_op=True)

    def _start_ready(self):
        while self._next < len(self.buckets) and self.buckets[self._next].pending == 0:
            self._start(self.buckets[self._next])
            self._next += 1

    def prepare(self, worker, step):
        """Before backward: zeroed buckets, .grad views in place (zero_grad(set_to_none=True)
        may have dropped them), nothing started."""
        self._worker, self._step = worker, step
        for bucket in self.buckets:
            bucket.flat.zero_()
            bucket.pending = len(bucket.params)
            bucket.work = None
            bucket.point_grads()
        self._next = 0
        self._active = True

    def backward(self, loss):
        """loss.backward() with the buckets all-reduced as they fill; returns their Outcomes
        once every bucket is averaged (the .grad views hold the averages)."""
        self.backward_started = time.monotonic()
        try:
            loss.backward()
        finally:
            self.backward_ended = time.monotonic()
            self._active = False
        # Buckets that backward did not fill (unused parameters) go now, in order.
        for bucket in self.buckets[self._next:]:
            bucket.pending = 0
        self._start_ready()
        outcomes = [bucket.work.wait() for bucket in self.buckets]
        for bucket in self.buckets:
            bucket.current = len(bucket.flats) - 1 - bucket.current  # where the average is
            bucket.point_grads()
        return outcomes

    def overlap(self):
        """(communication seconds, of which during backward) of the last backward()."""
        total = hidden = 0.0
        for bucket in self.buckets:
            start, end = bucket.work.started_at, bucket.work.finished_at
            total += end - start
            hidden += max(0.0, min(end, self.backward_ended) - max(start, self.backward_started))
        return total, hidden
