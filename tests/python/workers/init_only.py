"""init_process_group("tributary") against whatever the environment names, then one all_reduce;
reports how it went instead of raising. argv: rank world_size init_file."""

import sys
import time

import torch
import torch.distributed as dist

import tributary.torch  # noqa: F401  (registers the backend)
from reference import report


def main():
    me, n, init_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    start = time.monotonic()
    try:
        dist.init_process_group("tributary", init_method=f"file://{init_file}", rank=me,
                                world_size=n)
        x = torch.ones(3)
        dist.all_reduce(x)
        dist.destroy_process_group()
        outcome = {"raised": None, "message": "", "sum": float(x[0])}
    except Exception as e:  # the test checks the type and the text
        outcome = {"raised": type(e).__name__, "message": str(e)}
    outcome["seconds"] = time.monotonic() - start
    report(outcome)


if __name__ == "__main__":
    sys.exit(main())
