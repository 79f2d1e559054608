"""Sharded data parallelism trains the same over "tributary" as over "gloo": torch's
FullyShardedDataParallel (2 processes), fully_shard over a 1-D mesh and over a 2-D
(replicate, shard) mesh whose dimensions are subgroups (4 processes). Same seeds and data,
5 Adam steps; the full parameters agree to float tolerance with gloo's, and every rank of a
run holds the same parameters."""

import numpy
import pytest

from cluster import run_torch_workers

KINDS = {"fsdp1": 2, "fsdp2": 4, "hsdp": 4}


def train(tmp_path, backend, kind):
    """The full parameters each rank saved, by rank."""
    results = run_torch_workers(tmp_path, KINDS[kind], "fsdp_train.py",
                                args=(backend, kind, str(tmp_path / "rank{rank}.npz")),
                                timeout=180)
    params = []
    for r in results:
        with numpy.load(r["cases"]["out"]) as f:
            params.append([f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))])
    return params


@pytest.fixture(scope="module", params=sorted(KINDS))
def runs(request, tmp_path_factory):
    kind = request.param
    return kind, {backend: train(tmp_path_factory.mktemp(f"{kind}_{backend}"), backend, kind)
                  for backend in ("gloo", "tributary")}


def test_every_rank_holds_the_same_parameters(runs):
    kind, params = runs
    for backend, by_rank in params.items():
        for rank, other in enumerate(by_rank[1:], start=1):
            for a, b in zip(by_rank[0], other):
                assert numpy.array_equal(a, b), (kind, backend, rank)


def test_tributary_matches_gloo(runs):
    kind, params = runs
    gloo, trib = params["gloo"][0], params["tributary"][0]
    assert len(gloo) == len(trib) == 6
    for a, b in zip(gloo, trib):
        assert a.shape == b.shape
        numpy.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6, err_msg=kind)


def test_training_moved_the_parameters(runs):
    kind, params = runs
    import torch
    torch.manual_seed(0)
    first = torch.nn.Linear(24, 64)
    moved = float(numpy.abs(params["tributary"][0][0] - first.weight.detach().numpy()).max())
    assert moved > 1e-3, f"{kind}: 5 Adam steps left the first layer where it started"
