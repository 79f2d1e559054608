"""Every collective of tributary.Worker, through NumPy arrays and torch tensors, every dtype,
odd sizes, in place and out of place, against reference.py. Prints RESULT with one entry per
case ("ok" or what was wrong)."""

import sys

import numpy
import torch

import tributary
from reference import (OPS, SIZES, all_to_all_received, gathered, reduce_scattered, reduced,
                       report, same, values)

NUMPY_DTYPES = ("float32", "float64", "float16", "int8", "uint8", "int32", "int64")
TORCH_DTYPES = NUMPY_DTYPES + ("bfloat16",)


def make(container, dtype):
    if container == "numpy":
        return lambda v: numpy.ascontiguousarray(v.astype(dtype))
    tdtype = getattr(torch, dtype)
    return lambda v: torch.from_numpy(v).to(tdtype).contiguous()


def empty(container, dtype, count):
    if container == "numpy":
        return numpy.zeros(count, dtype=dtype)
    return torch.zeros(count, dtype=getattr(torch, dtype))


def cases_for(w, container, dtype, count):
    """(name, run) pairs; run() returns "ok" or a description of the difference."""
    n, me = w.size, w.rank
    arr = make(container, dtype)
    zeros = lambda k: empty(container, dtype, k)

    def all_reduce(op):
        def run():
            x = arr(values(op, me, count, n))
            out = w.all_reduce(x, op=op)
            if out.contributors != n:
                return f"contributors {out.contributors} != {n}"
            return same(x, reduced(op, count, n))
        return run

    def all_reduce_out():
        x, y = arr(values("sum", me, count, n)), zeros(count)
        w.all_reduce(x, out=y)
        return same(y, reduced("sum", count, n)) if same(x, values("sum", me, count, n)) == "ok" \
            else "input modified"

    def broadcast():
        x = arr(values("sum", me, count, n))
        w.broadcast(x, root=1)
        return same(x, values("sum", 1, count, n))

    def reduce(in_place):
        x = arr(values("sum", me, count, n))
        y = None if in_place else zeros(count)
        w.reduce(x, root=2 % n, op="sum", out=y)
        if me != 2 % n:
            return "ok"
        return same(x if in_place else y, reduced("sum", count, n))

    def all_gather(in_place):
        y = zeros(count * n)
        x = y[me * count:(me + 1) * count] if in_place else arr(values("sum", me, count, n))
        if in_place:
            x[:] = arr(values("sum", me, count, n))
        w.all_gather(x, y)
        return same(y, gathered(count, n))

    def reduce_scatter():
        x, y = arr(values("sum", me, count * n, n)), zeros(count)
        w.reduce_scatter(x, y)
        return same(y, reduce_scattered(me, count, n))

    def gather():
        x = arr(values("sum", me, count, n))
        y = zeros(count * n) if me == 1 else None
        w.gather(x, y, root=1)
        return same(y, gathered(count, n)) if me == 1 else "ok"

    def scatter():
        y = zeros(count)
        x = arr(values("sum", 0, count * n, n)) if me == 0 else None
        w.scatter(y, x, root=0)
        return same(y, values("sum", 0, count * n, n)[me * count:(me + 1) * count])

    def all_to_all():
        x, y = arr(values("sum", me, count * n, n)), zeros(count * n)
        w.all_to_all(x, y)
        return same(y, all_to_all_received(me, count, n))

    yield from ((f"all_reduce_{op}", all_reduce(op)) for op in OPS)
    yield "all_reduce_out_of_place", all_reduce_out
    yield "broadcast", broadcast
    yield "reduce_in_place", lambda: reduce(True)
    yield "reduce_out_of_place", lambda: reduce(False)
    yield "all_gather", lambda: all_gather(False)
    yield "all_gather_in_place", lambda: all_gather(True)
    yield "reduce_scatter", reduce_scatter
    yield "gather", gather
    yield "scatter", scatter
    yield "all_to_all", all_to_all


def main():
    w = tributary.Worker()
    results = {}
    for container, dtypes in (("numpy", NUMPY_DTYPES), ("torch", TORCH_DTYPES)):
        for dtype in dtypes:
            for count in SIZES:
                for name, run in cases_for(w, container, dtype, count):
                    key = f"{container}/{name}/{dtype}/{count}"
                    try:
                        results[key] = run()
                    except tributary.Error as e:
                        results[key] = f"{type(e).__name__}: {e}"
    # Asynchronous collectives: many in flight at once, completed in order.
    xs = [numpy.full(1000 + k, k + w.rank, dtype=numpy.float32) for k in range(16)]
    works = [w.all_reduce(x, async_op=True) for x in xs]
    outcomes = [work.wait() for work in works]
    ok = all(o.contributors == w.size for o in outcomes) and all(
        numpy.all(x == sum(k + r for r in range(w.size))) for k, x in enumerate(xs)) and all(
        a.finished_at <= b.started_at for a, b in zip(works, works[1:]))
    results["async/all_reduce_in_order"] = "ok" if ok else "wrong results or order"
    # The codec path (this Worker's codec is float32: plain floats, exact), in place.
    for step, count in enumerate(SIZES):
        for container in ("numpy", "torch"):
            x = make(container, "float32")(values("sum", w.rank, count, w.size))
            w.all_reduce_compressed(x, op="sum", tensor_id=7, step=step)
            results[f"{container}/all_reduce_compressed/float32/{count}"] = same(
                x, reduced("sum", count, w.size))
    w.barrier()
    results["barrier"] = "ok"
    w.leave()
    report(results)


if __name__ == "__main__":
    sys.exit(main())
