"""Bad input through both APIs, on 2 ranks: arguments that disagree across ranks, tensors a
collective cannot use. Every case must raise a Python exception with a clear message, on
every rank, in bounded time, and leave the cluster usable. argv: api|dist rank init_file.

Prints RESULT {"cases": {name: {"raised": type name or None, "message": str, "seconds": s}}}.
"""

import sys
import time

import numpy
import torch

import tributary
from reference import report

MISMATCHES = ("dtype_float32_vs_float64", "dtype_float32_vs_int32", "count_8_vs_9")


def attempt(fn):
    start = time.monotonic()
    try:
        fn()
        raised, message = None, ""
    except Exception as e:  # the test checks the type
        raised, message = type(e).__name__, str(e)
    return {"raised": raised, "message": message, "seconds": time.monotonic() - start}


class FakeCudaTensor(torch.Tensor):
    """A CPU tensor that reports a CUDA device: what a GPU tensor looks like to the checks,
    on a torch built without CUDA (where no real one can be made)."""

    @property
    def device(self):
        return torch.device("cuda", 0)


def read_only(a):
    a.flags.writeable = False
    return a


def mismatched(name, me):
    """Rank 0 and rank 1 disagree about the collective named `name`."""
    if name == "dtype_float32_vs_float64":
        return numpy.ones(8, dtype=numpy.float32 if me == 0 else numpy.float64)
    if name == "dtype_float32_vs_int32":
        return numpy.ones(8, dtype=numpy.float32 if me == 0 else numpy.int32)
    return numpy.ones(8 + me, dtype=numpy.float32)


def api_cases(me):
    w = tributary.Worker()
    cases = {}
    for name in MISMATCHES:
        cases[name] = attempt(lambda: w.all_reduce(mismatched(name, me)))
    local = {
        "non_contiguous_numpy": lambda: w.all_reduce(numpy.ones((4, 4), numpy.float32)[:, ::2]),
        "non_contiguous_torch": lambda: w.all_reduce(torch.ones(4, 3).t()),
        "cuda_tensor": lambda: w.all_reduce(torch.ones(4).as_subclass(FakeCudaTensor)),
        "meta_tensor": lambda: w.all_reduce(torch.empty(4, device="meta")),
        "unsupported_dtype_torch": lambda: w.all_reduce(torch.ones(4, dtype=torch.bool)),
        "unsupported_dtype_numpy": lambda: w.all_reduce(numpy.ones(4, numpy.complex64)),
        "wrong_out_size": lambda: w.all_gather(numpy.ones(4, numpy.float32),
                                               numpy.ones(7, numpy.float32)),
        "read_only": lambda: w.all_reduce(read_only(numpy.ones(4, numpy.float32))),
        "not_an_array": lambda: w.all_reduce([1.0, 2.0]),
        "bad_op": lambda: w.all_reduce(numpy.ones(4, numpy.float32), op="xor"),
    }
    for name, fn in local.items():
        cases[name] = attempt(fn)
    x = numpy.ones(16, dtype=numpy.float32)
    cases["usable_after"] = attempt(lambda: w.all_reduce(x))
    cases["usable_after"]["value"] = float(x[0])
    w.leave()
    return cases


def dist_cases(me, init_file):
    import torch.distributed as dist
    import tributary.torch  # noqa: F401  (registers the backend)
    dist.init_process_group("tributary", init_method=f"file://{init_file}", rank=me,
                            world_size=2)
    cases = {}
    for name in MISMATCHES:
        cases[name] = attempt(lambda: dist.all_reduce(torch.from_numpy(mismatched(name, me))))
    local = {
        "non_contiguous_torch": lambda: dist.all_reduce(torch.ones(4, 3).t()),
        "unsupported_dtype_torch": lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)),
        "bool_avg": lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool), op=dist.ReduceOp.AVG),
        "unsupported_op": lambda: dist.reduce(torch.ones(4, dtype=torch.int32), dst=0,
                                              op=dist.ReduceOp.BAND),
        "bitwise_of_floats": lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BOR),
        "wrong_list_length": lambda: dist.all_gather([torch.ones(4)], torch.ones(4)),
        "all_to_all_splits_not_the_rows": lambda: dist.all_to_all_single(
            torch.zeros(4), torch.ones(4), output_split_sizes=[1, 2], input_split_sizes=[3, 1]),
        "negative_tag": lambda: dist.send(torch.ones(4), dst=1 - me, tag=-1),
        "recv_from_any_source_negative_tag": lambda: dist.recv(torch.ones(4), tag=-1),
        "root_out_of_range": lambda: dist.broadcast(torch.ones(4), group_src=5),
    }
    for name, fn in local.items():
        cases[name] = attempt(fn)
    # Point-to-point last among the failures: a mismatch fails the group's point-to-point
    # links for good (their errors are sticky), not its collectives.
    if me == 0:
        cases["p2p_dtype_mismatch"] = attempt(lambda: dist.send(torch.ones(4), dst=1))
    else:
        cases["p2p_dtype_mismatch"] = attempt(
            lambda: dist.recv(torch.ones(4, dtype=torch.int32), src=0))
    x = torch.ones(16)
    cases["usable_after"] = attempt(lambda: dist.all_reduce(x))
    cases["usable_after"]["value"] = float(x[0])
    dist.destroy_process_group()
    return cases


def main():
    api, me = sys.argv[1], int(sys.argv[2])
    report(api_cases(me) if api == "api" else dist_cases(me, sys.argv[3]))


if __name__ == "__main__":
    sys.exit(main())
