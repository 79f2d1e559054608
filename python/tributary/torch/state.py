"""The training state a joiner receives: the model's state_dict (parameters and buffers),
the optimizer's state, and the trainer's counters, registered with the Worker by reference
(Worker.register_state), sent from a current member at a step boundary and SHA-256 verified.

Registration is by memory, so every member must hold the same tensors with the same sizes
from the start, and keep updating them in place:
  - optimizers create their state lazily, at the first step; materialize() creates it up
    front by one step on zero gradients, then restores the parameters and zeroes the state,
    which is the state a fresh optimizer starts from for SGD (momentum, no dampening),
    Adam/AdamW, RMSprop, Adagrad with a zero initial accumulator (not for SGD with dampening,
    whose first step copies the gradient);
  - check_in_place() refuses, with a clear error, a model or optimizer that replaced a
    registered tensor instead of updating it (a joiner would receive stale memory).
"""

import torch


def materialize(optimizer):
    """Creates the optimizer's per-parameter state now, equal to a fresh optimizer's."""
    params = [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]
    if all(optimizer.state.get(p) for p in params):
        return
    saved = [(p, p.detach().clone(), p.grad) for p in params]
    for p in params:
        p.grad = torch.zeros_like(p)
    optimizer.step()
    with torch.no_grad():
        for p, data, grad in saved:
            p.copy_(data)
            p.grad = grad
    for state in optimizer.state.values():
        for value in state.values():
            if torch.is_tensor(value):
                value.zero_()


def _tensors(model, optimizer, counters):
    entries = [(f"model/{name}", t) for name, t in model.state_dict(keep_vars=True).items()]
    index = 0
    for group in optimizer.param_groups:
        for p in group["params"]:
            for key, value in sorted(optimizer.state.get(p, {}).items()):
                if value is None:  # SGD without momentum keeps momentum_buffer=None
                    continue
                if not torch.is_tensor(value):
                    raise TypeError(f"tributary: optimizer state {key!r} of parameter {index} is "
                                    f"a {type(value).__name__}, not a tensor; a joiner receives "
                                    "tensors only")
                entries.append((f"optimizer/{index}/{key}", value))
            index += 1
    entries.append(("trainer/counters", counters))
    return entries


class TrainingState:
    def __init__(self, model, optimizer, counters):
        materialize(optimizer)
        self._model, self._optimizer, self._counters = model, optimizer, counters
        self.entries = _tensors(model, optimizer, counters)
        for name, t in self.entries:
            if t.device.type != "cpu" or not t.is_contiguous():
                raise ValueError(f"tributary: state {name} must be a contiguous CPU tensor")
        self._addresses = [(name, t.data_ptr()) for name, t in self.entries]

    @property
    def nbytes(self):
        return sum(t.numel() * t.element_size() for _, t in self.entries)

    def register(self, worker):
        for name, t in self.entries:
            worker.register_state(name, t)

    def check_in_place(self):
        now = _tensors(self._model, self._optimizer, self._counters)
        for (name, address), (_, t) in zip(self._addresses, now):
            if t.data_ptr() != address:
                raise RuntimeError(f"tributary: {name} was replaced, not updated in place; the "
                                   "state a joiner receives must keep its memory")
        if len(now) != len(self._addresses):
            raise RuntimeError("tributary: the model or optimizer gained or lost state tensors")
