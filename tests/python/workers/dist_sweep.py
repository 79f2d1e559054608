"""Every torch.distributed collective through the "tributary" backend, every dtype it claims,
odd sizes, in place and out of place, sync and async, against reference.py.

argv: torch_rank world_size init_file [device], or "env" alone (torch's env://, as torchrun
sets it, and no coordinator given: the group starts its own). device: where the tensors are
(default cpu; cuda:0 for the CUDA tests, test_cuda.py). Averages are exact on odd worlds only (reference.py): even worlds skip
avg. Prints RESULT with one entry per case."""

import sys

import torch
import torch.distributed as dist

import tributary.torch  # registers the backend
from reference import (SIZES, all_to_all_received, gathered, reduce_scattered, reduced, report,
                       same, values)

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int32, torch.int64)
OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}


def cases_for(me, n, dtype, count, device="cpu"):
    t = lambda v: torch.from_numpy(v).to(dtype).to(device)
    zeros = lambda k: torch.zeros(k, dtype=dtype, device=device)

    def all_reduce(op, async_op=False):
        def run():
            x = t(values(op, me, count, n))
            work = dist.all_reduce(x, op=OPS[op], async_op=async_op)
            if async_op:
                work.wait()
                if not work.is_completed() or not work.is_success():
                    return "async work not complete after wait()"
            return same(x, reduced(op, count, n))
        return run

    def broadcast():
        x = t(values("sum", me, count, n))
        dist.broadcast(x, src=1)
        return same(x, values("sum", 1, count, n))

    def reduce():
        x = t(values("sum", me, count, n))
        dist.reduce(x, dst=2 % n)
        return same(x, reduced("sum", count, n)) if me == 2 % n else "ok"

    def all_gather():
        out = [zeros(count) for _ in range(n)]
        dist.all_gather(out, t(values("sum", me, count, n)))
        return same(torch.cat(out), gathered(count, n))

    def all_gather_base():
        out = zeros(count * n)
        dist._all_gather_base(out, t(values("sum", me, count, n)))
        return same(out, gathered(count, n))

    def reduce_scatter():
        x = t(values("sum", me, count * n, n))
        out = zeros(count)
        dist.reduce_scatter(out, list(x.chunk(n)) if count else [zeros(0) for _ in range(n)])
        return same(out, reduce_scattered(me, count, n))

    def reduce_scatter_base():
        out = zeros(count)
        dist._reduce_scatter_base(out, t(values("sum", me, count * n, n)))
        return same(out, reduce_scattered(me, count, n))

    def gather():
        out = [zeros(count) for _ in range(n)] if me == 1 else None
        dist.gather(t(values("sum", me, count, n)), out, dst=1)
        return same(torch.cat(out), gathered(count, n)) if me == 1 else "ok"

    def scatter():
        out = zeros(count)
        src = t(values("sum", 0, count * n, n))
        dist.scatter(out, [c.contiguous() for c in src.split(count)] if me == 0 and count else
                     ([zeros(0) for _ in range(n)] if me == 0 else None), src=0)
        return same(out, values("sum", 0, count * n, n)[me * count:(me + 1) * count])

    def all_to_all():
        x = t(values("sum", me, count * n, n))
        ins = [c.contiguous() for c in x.split(count)] if count else [zeros(0) for _ in range(n)]
        outs = [zeros(count) for _ in range(n)]
        dist.all_to_all(outs, ins)
        return same(torch.cat(outs), all_to_all_received(me, count, n))

    def all_to_all_single():
        out = zeros(count * n)
        dist.all_to_all_single(out, t(values("sum", me, count * n, n)))
        return same(out, all_to_all_received(me, count, n))

    yield from ((f"all_reduce_{op}", all_reduce(op)) for op in OPS if op != "avg" or n % 2)
    yield "all_reduce_async", all_reduce("sum", async_op=True)
    yield "broadcast", broadcast
    yield "reduce", reduce
    yield "all_gather", all_gather
    yield "all_gather_base", all_gather_base
    yield "reduce_scatter", reduce_scatter
    yield "reduce_scatter_base", reduce_scatter_base
    yield "gather", gather
    yield "scatter", scatter
    yield "all_to_all", all_to_all
    yield "all_to_all_single", all_to_all_single


def moved_as_bytes(me, n, device="cpu"):
    """Data movement takes dtypes that cannot be reduced (bool, int16, complex) as bytes."""
    results = {}
    for dtype in (torch.bool, torch.int16, torch.complex64):
        x = (torch.arange(5) + me).to(dtype).to(device)
        dist.broadcast(x, src=0)
        results[f"broadcast/{dtype}"] = "ok" if torch.equal(x.cpu(), torch.arange(5).to(dtype)) \
            else f"got {x}"
        out = [torch.zeros(5, dtype=dtype, device=device) for _ in range(n)]
        dist.all_gather(out, (torch.arange(5) + me).to(dtype).to(device))
        out = [o.cpu() for o in out]
        want = [(torch.arange(5) + r).to(dtype) for r in range(n)]
        results[f"all_gather/{dtype}"] = "ok" if all(map(torch.equal, out, want)) else f"got {out}"
    return results


def main():
    device = "cpu"
    if sys.argv[1] == "env":
        dist.init_process_group("tributary")
        me, n = dist.get_rank(), dist.get_world_size()
    else:
        me, n, init_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
        device = sys.argv[4] if len(sys.argv) > 4 else "cpu"
        dist.init_process_group("tributary", init_method=f"file://{init_file}", rank=me,
                                world_size=n)
    results = {}
    for dtype in DTYPES:
        for count in SIZES:
            for name, run in cases_for(me, n, dtype, count, device):
                key = f"{name}/{str(dtype)[6:]}/{count}"
                try:
                    results[key] = run()
                except RuntimeError as e:
                    results[key] = f"RuntimeError: {e}"
    results.update(moved_as_bytes(me, n, device))
    dist.barrier()
    results["barrier"] = "ok"
    dist.destroy_process_group()
    report(results)


if __name__ == "__main__":
    sys.exit(main())
