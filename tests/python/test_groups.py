"""torch 2's ProcessGroup surface through the "tributary" backend, at world sizes 2, 3 and 4,
with nothing started but the worker processes (env:// as torchrun sets it; each group starts
its own coordinator): subgroups of every shape with their collectives interleaved with the
default group's, point-to-point rings, coalesced collectives, uneven all-to-all, sparse
all_reduce, bool and bitwise reductions, receives from any rank and abort() (workers/dist_groups.py holds the cases and their references); and
monitored_barrier (workers/dist_monitored_barrier.py)."""

import pytest

from cluster import run_torch_workers

WORLDS = (2, 3, 4)
# Cases every world reports (others depend on the world: overlapping pairs, new_subgroups).
COMMON = ("halves/all_reduce", "halves/interleaved_world", "halves/broadcast",
          "halves/all_gather", "singleton/all_reduce", "split_group/all_reduce_max",
          "ring/recv_first", "ring/send_first", "ring/tags_out_of_order",
          "ring/batch_isend_irecv", "ring/4MiB", "p2p/collective_while_recv_pending",
          "p2p/wait_times_out", "p2p/completes_after_timeout", "all_reduce_coalesced",
          "all_gather_coalesced", "all_gather_into_tensor_coalesced",
          "reduce_scatter_tensor_coalesced", "all_to_all_single/uneven",
          "all_to_all/blocks_of_other_sizes", "sparse/all_reduce_sum", "bool/all_reduce_sum",
          "bool/all_reduce_max", "bool/all_reduce_product", "bool/all_reduce_min",
          "bool/all_reduce_coalesced", "bool/reduce_scatter_tensor", "bitwise/all_reduce_band",
          "bitwise/all_reduce_bor", "bitwise/all_reduce_bxor", "bitwise/all_reduce_bxor_bool")


@pytest.fixture(scope="module", params=WORLDS, ids=lambda n: f"world{n}")
def world(request, tmp_path_factory):
    n = request.param
    return n, run_torch_workers(tmp_path_factory.mktemp(f"world{n}"), n, "dist_groups.py",
                                timeout=180)


def test_every_case_holds_on_every_rank(world):
    n, results = world
    for rank, result in enumerate(results):
        cases = result["cases"]
        missing = [c for c in COMMON if c not in cases]
        assert not missing, f"rank {rank} did not run {missing}: {cases}"
        bad = {c: v for c, v in cases.items() if v != "ok"}
        assert not bad, f"rank {rank} of {n}: {bad}"


def test_world_dependent_subgroups_ran(world):
    n, results = world
    for rank, result in enumerate(results):
        cases = result["cases"]
        pairs = [c for c in cases if c.startswith("overlapping/")]
        assert len(pairs) == (1 if n == 2 else 2), (rank, pairs)
        assert ("new_subgroups/all_reduce" in cases) == (n % 2 == 0)
        assert ("halves/p2p_ring" in cases) == (n >= 4 or (n == 3 and rank >= 1))
        assert ("abort/running_collective_fails" in cases) == (rank == 0)
        assert ("abort/later_calls_fail" in cases) == (rank == 0)
        for case in ("p2p/recv_any_source", "p2p/irecv_any_source_posted_first",
                     "p2p/recv_any_source_by_tag"):
            assert (case in cases) == (rank == 0), (rank, case)


def test_a_second_group_on_the_same_store_forms_its_own_cluster(tmp_path):
    n = 3
    results = run_torch_workers(tmp_path, n, "reinit.py", timeout=120)
    for r in results:
        assert r["cases"]["sums"] == [n * (n - 1) / 2, n * (n - 1) / 2 + n], r


def test_monitored_barrier_passes_and_names_the_rank_that_did_not_come(tmp_path):
    results = run_torch_workers(tmp_path, 3, "dist_monitored_barrier.py", timeout=120)
    for rank, r in enumerate(results):
        assert r["cases"] == {"all_pass": "ok", "collective_after": "ok",
                              "missing_rank": "ok", "departed_rank": "ok"}, (rank, r["cases"])
