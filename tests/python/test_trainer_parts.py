"""The elastic trainer's parts in one process, no cluster: how gradients are bucketed and in
what order buckets start (with a Worker stand-in that records what it is asked), and the
training state a joiner receives (optimizer state created up front equals a fresh one's)."""

import pytest
import torch
from torch import nn

from tributary.torch.buckets import GradientBuckets
from tributary.torch.state import TrainingState, materialize


class RecordingWorker:
    """Stands in for tributary.Worker: records the buckets started, averages nothing."""

    class Work:
        def __init__(self, log, flat):
            self.flat, self.log = flat, log
            self.started_at = self.finished_at = 0.0

        def wait(self):
            self.log.append(("wait", self.flat.data_ptr()))
            return type("Outcome", (), {"contributors": 1, "attempts": 1})()

    def __init__(self):
        self.log = []

    def all_reduce(self, flat, op, out, async_op):
        assert op == "avg" and async_op and out.data_ptr() != flat.data_ptr()
        self.log.append(("start", flat.data_ptr()))
        out.copy_(flat)  # the average over one member
        return self.Work(self.log, flat)


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                         nn.Linear(16, 4))


def test_buckets_follow_reverse_order_within_the_cap():
    model = mlp()
    cap = 16 * 16 * 4 + 16 * 4  # one 16x16 layer's weight and bias
    buckets = GradientBuckets(model.parameters(), cap_bytes=cap)
    names = {id(p): n for n, p in model.named_parameters()}
    got = [[names[id(p)] for p in b.params] for b in buckets.buckets]
    assert got == [["4.bias", "4.weight", "2.bias"], ["2.weight", "0.bias"], ["0.weight"]]
    for b in buckets.buckets:
        assert len(b.flats) == 2
        assert all(sum(p.numel() for p in b.params) == f.numel() for f in b.flats)


def test_gradients_land_in_the_buckets_and_start_in_order():
    model = mlp()
    buckets = GradientBuckets(model.parameters(), cap_bytes=400)
    worker = RecordingWorker()
    for step in range(2):  # the second step, after zero_grad(set_to_none=True), swaps back
        model.zero_grad(set_to_none=True)
        buckets.prepare(worker, step=0)
        worker.log.clear()
        loss = model(torch.randn(5, 8)).square().sum()
        buckets.backward(loss)
        starts = [ptr for kind, ptr in worker.log if kind == "start"]
        # Each bucket sent the buffer its gradients accumulated in (the one .grad left).
        assert starts == [b.flats[1 - b.current].data_ptr() for b in buckets.buckets]
        # Every bucket started before the first wait: they ran while backward went on.
        assert [kind for kind, _ in worker.log][:len(starts)] == ["start"] * len(starts)
        for b in buckets.buckets:
            # The gradients accumulated in one buffer; .grad now shows the average, in the other.
            assert b.current == (1 if step == 0 else 0)
            for p, view in zip(b.params, b.views[b.current]):
                assert p.grad.data_ptr() == view.data_ptr()
                assert torch.count_nonzero(p.grad) > 0


def test_unused_parameters_still_start_their_bucket():
    model = mlp()
    extra = nn.Linear(3, 3)  # never used in forward
    params = list(extra.parameters()) + list(model.parameters())
    buckets = GradientBuckets(params, cap_bytes=200)
    worker = RecordingWorker()
    buckets.prepare(worker, step=0)
    buckets.backward(model(torch.randn(2, 8)).sum())
    assert len([k for k, _ in worker.log if k == "start"]) == len(buckets.buckets)
    assert torch.count_nonzero(extra.weight.grad) == 0


@pytest.mark.parametrize("make", [
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-3),
    lambda ps: torch.optim.Adam(ps, lr=0.01),
    lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1),
    lambda ps: torch.optim.RMSprop(ps, lr=0.01, momentum=0.5),
])
def test_materialized_optimizer_state_trains_like_a_fresh_one(make):
    fresh_model, early_model = mlp(), mlp()
    fresh, early = make(fresh_model.parameters()), make(early_model.parameters())
    materialize(early)
    assert all(early.state[p] for p in early_model.parameters())
    for a, b in zip(fresh_model.parameters(), early_model.parameters()):
        assert torch.equal(a, b), "materializing moved the parameters"
    for step in range(3):
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(step))
        for model, opt in ((fresh_model, fresh), (early_model, early)):
            opt.zero_grad()
            model(x).square().sum().backward()
            opt.step()
    for a, b in zip(fresh_model.parameters(), early_model.parameters()):
        assert torch.equal(a, b)


def test_state_names_every_tensor_and_refuses_replacement():
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    counters = torch.zeros(4, dtype=torch.int64)
    state = TrainingState(model, opt, counters)
    names = [n for n, _ in state.entries]
    assert "model/1.running_mean" in names and "trainer/counters" in names
    assert sum(n.startswith("optimizer/") for n in names) == 4  # momentum per parameter
    state.check_in_place()
    model[1].running_mean = torch.zeros(4)  # replaced, not updated in place
    with pytest.raises(RuntimeError, match="replaced, not updated in place"):
        state.check_in_place()
