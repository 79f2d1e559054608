"""dist.monitored_barrier through the "tributary" backend, as torch's gloo backend runs it:
every rank passes it, with and without wait_all_ranks, several times, and a collective after
it still works; then the last rank does not come to one (it stays, waiting on the store until
the others are done): rank 0 raises naming that rank, within the barrier's timeout, and every
other rank raises saying rank 0 knows which rank, rather than hang. Then, on a second group of
every rank, the last rank leaves (destroys that group, closing its connections) instead of
coming: rank 0 names it at once, saying it could not check the others (who come only after it
failed), and the others fail at once too. Prints RESULT with one entry per case ("ok"
or what went wrong)."""

import sys
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist

import tributary.torch  # noqa: F401  (registers the backend)
from reference import report


def failed_barrier(me, last, group, timeout, within, also=""):
    """A monitored_barrier (wait_all_ranks) that `last` does not pass: "ok" when it raises
    within `within` seconds saying what it should, else what happened instead."""
    t0 = time.monotonic()
    try:
        dist.monitored_barrier(group=group, timeout=timeout, wait_all_ranks=True)
        return f"passed although rank {last} never came"
    except RuntimeError as e:
        took = time.monotonic() - t0
        text = str(e)
    limit = timeout.total_seconds()
    if me == 0:
        # Named alone: the ranks that did come are not blamed for the one that did not.
        named = (f"[Rank 0]: Rank {last} failed to pass monitoredBarrier in {int(limit * 1000)} ms"
                 in text and also in text)
    else:
        named = "Please check rank 0 logs for faulty rank" in text
    return "ok" if named and took < within else f"after {took:.1f} s: {text}"


def main():
    dist.init_process_group("tributary")
    me, n = dist.get_rank(), dist.get_world_size()
    store = dist.distributed_c10d._get_default_store()
    second = dist.new_group(list(range(n)))
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
    last = n - 1
    if me == last:
        cases["missing_rank"] = "ok"  # this rank is the one that does not come
        store.wait([f"missing_rank_done/{r}" for r in range(last)], timedelta(seconds=60))
        dist.destroy_process_group(second)  # leaves instead of coming
        store.set("departed", "1")
        cases["departed_rank"] = "ok"
    else:
        cases["missing_rank"] = failed_barrier(me, last, None, timedelta(seconds=2), within=10)
        store.set(f"missing_rank_done/{me}", "1")
        # A rank that left is seen at once, well before the timeout. The others come after
        # rank 0 failed: their arrivals cannot be checked, and they are not blamed for it.
        wait_for = "departed" if me == 0 else "rank0_failed"
        store.wait([wait_for], timedelta(seconds=60))
        others = ", ".join(str(r) for r in range(1, last))
        also = f"; rank{'s' if last > 2 else ''} {others} could not be checked" if others else ""
        cases["departed_rank"] = failed_barrier(me, last, second, timedelta(seconds=60),
                                                within=20, also=also)
        if me == 0:
            store.set("rank0_failed", "1")
    report(cases)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
