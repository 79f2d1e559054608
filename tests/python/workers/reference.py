"""Inputs and NumPy references for the collective sweeps (api_sweep.py, dist_sweep.py).

Inputs are small integers, so that every dtype (int8 and bfloat16 included) holds them and
every result exactly, whatever order a reduction adds in; `avg` inputs sum to a multiple of
the world size (odd sizes only), so the average is exact too.
"""

import numpy

SIZES = (0, 1, 7, 1023, 65537)  # 65537 float32s: several pipeline chunks
OPS = ("sum", "prod", "min", "max", "avg")


def values(op, rank, count, world):
    """Rank `rank`'s input for a reduction `op` (int64; callers cast)."""
    i = numpy.arange(count, dtype=numpy.int64)
    if op == "prod":
        return 1 + (i + rank) % 2
    if op == "avg":
        assert world % 2 == 1, "exact averages need an odd world size"
        return (i % 5 + 2) + (rank - (world - 1) // 2)
    return (i * 7 + rank * 3) % 5 + 1


def reduced(op, count, world):
    """The reduction of every rank's values(op, ...)."""
    stack = numpy.stack([values(op, r, count, world) for r in range(world)])
    if op == "sum":
        return stack.sum(axis=0)
    if op == "prod":
        return stack.prod(axis=0)
    if op == "min":
        return stack.min(axis=0)
    if op == "max":
        return stack.max(axis=0)
    return stack.sum(axis=0) // world


def gathered(count, world):
    return numpy.concatenate([values("sum", r, count, world) for r in range(world)])


def reduce_scattered(rank, count, world):
    """Rank `rank`'s block of the sum of every rank's values(sum, count * world)."""
    total = numpy.stack([values("sum", r, count * world, world) for r in range(world)]).sum(axis=0)
    return total[rank * count:(rank + 1) * count]


def all_to_all_received(rank, count, world):
    """What rank `rank` receives: block `rank` of every rank's values(sum, count * world)."""
    block = slice(rank * count, (rank + 1) * count)
    return numpy.concatenate([values("sum", r, count * world, world)[block] for r in range(world)])


def same(got, want):
    """Exact comparison of a result (NumPy array or torch tensor) with an int64 reference."""
    if hasattr(got, "detach"):
        got = got.detach().cpu().double().numpy()
    got = numpy.asarray(got, dtype=numpy.float64).reshape(-1)
    want = numpy.asarray(want, dtype=numpy.float64).reshape(-1)
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    bad = numpy.nonzero(got != want)[0]
    if bad.size:
        i = int(bad[0])
        return f"{bad.size} of {want.size} wrong; first at {i}: {got[i]} != {want[i]}"
    return "ok"


def report(cases):
    """The RESULT line the test reads."""
    import json
    print("RESULT " + json.dumps({"cases": cases}), flush=True)


def leave_after_baseline(backend):
    """After the RESULT line of a run over another backend than tributary (the parity tests'
    gloo baselines): leave without the interpreter's teardown. Torch's gloo can abort in its
    own teardown at exit ("terminate called without an active exception", rank 1 of the 4-rank
    fully_shard baseline once in 2026-12-08's suite, after destroy_process_group and the RESULT),
    which is not what the tests compare. Tributary's runs exit normally, so a crash of its own
    at exit still fails them."""
    if backend == "tributary":
        return
    import os
    import sys
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
