"""Elastic data-parallel training for PyTorch models, on the agent's elastic loop.

    trainer = ElasticTrainer(model, optimizer, coordinator="tcp://host:7070")

    def step(ctx):                      # after every step boundary, in the current world
        if ctx.step >= total_steps:
            return "finished"
        x, y = my_batch(ctx.rank, ctx.world_size, ctx.step)
        ctx.backward(loss_fn(model(x), y))   # gradients averaged while backward runs
        optimizer.step()
        return "continue"

    report = trainer.run(step)

What happens around a step is the agent's elastic loop (agent/elastic_loop.h, the same
loop as the CLI's): joining, the step boundary (joins, drains, view changes), rejoining
after an eviction, SIGTERM draining at the next boundary. A joiner receives the model's
state_dict, the optimizer's state and the trainer's counters from a current member at its
first boundary, SHA-256 verified (state.py), before its first step.

Within a step, gradients are bucketed and all-reduced as backward produces them
(buckets.py). When a member dies mid-step, each bucket is all-or-nothing
(docs/fault-tolerance.md): a bucket it contributed to either committed on every survivor,
or is re-run by the survivors with their original gradients and averaged over them; every
survivor ends the step holding the same bits. ctx.world_size and ctx.rank follow the world
at each boundary, so shard the data by them.

Counters (ctx.step, and ctx.data_epoch / ctx.batch for the data loader's position) are part
of the state a joiner receives; ctx.step counts the steps that ran backward.
"""

import collections
import hashlib
import os

import torch

from tributary import _tributary
from tributary.torch import torchrun
from tributary.torch.buckets import DEFAULT_CAP_BYTES, GradientBuckets
from tributary.torch.state import TrainingState
from tributary.worker import DEFAULT_WAIT_S, Worker, _config

_STEP, _DATA_EPOCH, _BATCH = 0, 1, 2
_RESULTS = {True: "continue", None: "continue", False: "finished", "continue": "continue",
            "finished": "finished", "drain": "drain"}


class StepContext:
    """What a step sees: the world it runs in, the counters, and backward()."""

    def __init__(self, trainer, worker, boundary):
        self._trainer = trainer
        self.worker = worker          # tributary.Worker, valid during this step
        self.boundary = boundary      # the BoundaryOutcome before this step
        self.rank = worker.rank
        self.world_size = worker.size
        self.epoch = worker.epoch     # the view (membership epoch)
        self.ran_backward = False

    step = property(lambda self: int(self._trainer.counters[_STEP]))

    def _counter(index):
        return property(lambda self: int(self._trainer.counters[index]),
                        lambda self, v: self._trainer.counters.__setitem__(index, int(v)))

    data_epoch = _counter(_DATA_EPOCH)
    batch = _counter(_BATCH)
    del _counter

    def backward(self, loss):
        """loss.backward() with bucketed, overlapped averaging; returns the buckets' Outcomes."""
        self.ran_backward = True
        return self._trainer._backward(self.worker, loss)


class ElasticTrainer:
    """Elastic data-parallel training of `model` with `optimizer` (see the module docs).

    bucket_cap_mb: bucket size (DDP's default, 25). codec: "float32" (plain average) or a
    codec spec ("qint8:bucket=512", "topk:density=0.01", ...) with error feedback per bucket.
    rejoin_delay: seconds before rejoining after an eviction. Other keywords are Worker
    options (join_timeout, recovery_timeout, min_world_size, host, bind_host, ...).
    """

    def __init__(self, model, optimizer, *, coordinator=None, secret=None, codec="float32",
                 bucket_cap_mb=DEFAULT_CAP_BYTES / 2**20, rejoin_delay=1.5,
                 wait_timeout=DEFAULT_WAIT_S, **worker_options):
        self.model = model
        self.optimizer = optimizer
        self.counters = torch.zeros(4, dtype=torch.int64)
        self.state = TrainingState(model, optimizer, self.counters)
        self.buckets = GradientBuckets(model.parameters(), int(bucket_cap_mb * 2**20),
                                       compressed=codec != "float32")
        if coordinator is None and not os.environ.get("TRIBUTARY_COORDINATOR") and \
                torchrun.under_torchrun():
            # Under torchrun with nothing given: the run's coordinator (tributary/torch/
            # torchrun.py), found or started through torchrun's agent store.
            coordinator, secret = torchrun.coordinator_for_run(
                worker_options.get("bind_host") or "127.0.0.1")
        self.config = _config(coordinator, secret, dict(worker_options, codec=codec))
        self.wait_timeout = wait_timeout
        self.loop = _tributary.ElasticLoop(rejoin_delay=rejoin_delay, retry_delay=rejoin_delay)
        # The last steps' timings and contributors (see _backward), for reports and benchmarks.
        self.history = collections.deque(maxlen=100000)

    @property
    def step(self):
        return int(self.counters[_STEP])

    def request_drain(self):
        """Leave at the next step boundary (what SIGTERM does during run())."""
        self.loop.request_drain()

    def parameters_sha256(self):
        """SHA-256 of every parameter's bytes, in state_dict order: equal on every member."""
        h = hashlib.sha256()
        for t in self.model.state_dict().values():
            h.update(t.detach().contiguous().view(torch.uint8).numpy().tobytes())
        return h.hexdigest()

    def run(self, step_fn):
        """Runs the elastic loop until step_fn returns "finished" (or False), a drain, or an
        error; returns the ElasticReport."""
        def register(native):
            self.state.register(Worker._from_native(native, self.wait_timeout))

        def step(native, boundary):
            self.state.check_in_place()
            ctx = StepContext(self, Worker._from_native(native, self.wait_timeout), boundary)
            result = step_fn(ctx)
            if ctx.ran_backward:
                self.counters[_STEP] += 1
            if result not in _RESULTS:
                raise ValueError(f"step function returned {result!r}; return 'continue' (True), "
                                 "'finished' (False) or 'drain'")
            return _RESULTS[result]

        return self.loop.run(self.config, register, step, lambda: self.step, self.wait_timeout)

    def _backward(self, worker, loss):
        self.buckets.prepare(worker, self.step)
        outcomes = self.buckets.backward(loss)
        comm, hidden = self.buckets.overlap()
        self.history.append({
            "step": self.step,
            "backward_s": self.buckets.backward_ended - self.buckets.backward_started,
            "comm_s": comm,
            "hidden_s": hidden,
            "contributors": [o.contributors for o in outcomes],
            "attempts": max((o.attempts for o in outcomes), default=1),
        })
        return outcomes

