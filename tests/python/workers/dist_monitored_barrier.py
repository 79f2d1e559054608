"""dist.monitored_barrier through the "tributary" backend, as torch's gloo backend runs it:
every rank passes it, with and without wait_all_ranks, several times, and a collective after
it still works; then the last rank does not come to one: rank 0 raises naming that rank,
within the barrier's timeout, and every other rank raises saying rank 0 knows which rank,
rather than hang. Prints RESULT with one entry per case ("ok" or what went wrong)."""

import sys
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist

import tributary.torch  # noqa: F401  (registers the backend)
from reference import report


def main():
    dist.init_process_group("tributary")
    me, n = dist.get_rank(), dist.get_world_size()
    cases = {}
    try:
        for _ in range(3):
            dist.monitored_barrier(timeout=timedelta(seconds=60))
            dist.monitored_barrier(timeout=timedelta(seconds=60), wait_all_ranks=True)
        cases["all_pass"] = "ok"
    except Exception:
        cases["all_pass"] = traceback.format_exc()
    t = torch.full((3,), float(me))
    dist.all_reduce(t)
    want = float(n * (n - 1) // 2)
    cases["collective_after"] = "ok" if torch.equal(t, torch.full((3,), want)) else str(t)
    if me == n - 1:
        cases["missing_rank"] = "ok"  # this rank is the one that does not come
    else:
        t0 = time.monotonic()
        try:
            dist.monitored_barrier(timeout=timedelta(seconds=2), wait_all_ranks=True)
            cases["missing_rank"] = f"passed although rank {n - 1} never came"
        except RuntimeError as e:
            took = time.monotonic() - t0
            text = str(e)
            if me == 0:
                named = f"Rank {n - 1} failed to pass monitoredBarrier in 2000 ms" in text
            else:
                named = "Please check rank 0 logs for faulty rank" in text
            cases["missing_rank"] = "ok" if named and took < 10 else f"after {took:.1f} s: {text}"
    report(cases)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
