"""CUDA tensors through the "tributary" backend (staged through pinned host memory on a side
stream, docs/gpu.md), every rank a process on the one GPU (cuda:0):

- every torch.distributed collective on CUDA tensors, every dtype, odd sizes (dist_sweep.py
  with its tensors on cuda:0), against the same references as the CPU sweep, at world sizes
  2 and 4;
- what CUDA adds (cuda_semantics.py): stream order, the CUDA-aware Future, the coalesced and
  into-tensor collectives, send / recv, the refusal of a CPU + CUDA mix, all or nothing;
- DistributedDataParallel with the model on cuda:0 at world sizes 2 and 4: every rank holds
  the same parameters, and they are those of the same job on CPU tensors (float tolerance: the
  GPU's convolutions round differently from the CPU's).

Skipped, as a whole, where torch sees no GPU or this build has no CUDA support: ctest reports
it as Skipped (tests/python/CMakeLists.txt)."""

import os
import sys

import numpy
import pytest
import torch

import tributary.torch

from cluster import run_workers

if not tributary.torch._c10d.built_with_cuda:
    pytest.skip("this build of the tributary backend has no CUDA support (built against a torch "
                "without CUDA)", allow_module_level=True)
if not torch.cuda.is_available():
    pytest.skip(f"no GPU: torch {torch.__version__} sees no CUDA device",
                allow_module_level=True)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples", "pytorch"))

WORLDS = (2, 4)
STEPS = 30
SWEPT = ("all_reduce_sum", "all_reduce_prod", "all_reduce_min", "all_reduce_max",
         "all_reduce_async", "broadcast/", "reduce/", "all_gather/", "all_gather_base",
         "reduce_scatter/", "reduce_scatter_base", "gather/", "scatter/", "all_to_all/",
         "all_to_all_single")
SEMANTICS = ("producer_on_side_stream", "async_wait_orders_the_current_stream",
             "future_value_and_then", "all_reduce_coalesced", "all_gather_into_tensor",
             "reduce_scatter_tensor", "send_recv", "mixed_devices_refused",
             "mismatch_leaves_the_tensor", "after_the_mismatch", "barrier")


@pytest.fixture(scope="module", params=WORLDS, ids=lambda n: f"world{n}")
def sweep(request, tmp_path_factory):
    n = request.param
    workdir = tmp_path_factory.mktemp(f"cuda_sweep{n}")
    return run_workers(workdir, n, "dist_sweep.py", timeout=400,
                       args_per_rank=lambda i: (i, n, workdir / "rendezvous", "cuda:0"))


@pytest.fixture(scope="module", params=WORLDS, ids=lambda n: f"world{n}")
def semantics(request, tmp_path_factory):
    n = request.param
    workdir = tmp_path_factory.mktemp(f"cuda_semantics{n}")
    return run_workers(workdir, n, "cuda_semantics.py", timeout=300,
                       args_per_rank=lambda i: (i, n, workdir / "rendezvous"))


@pytest.mark.parametrize("collective", SWEPT)
def test_collective_on_cuda_tensors(sweep, collective):
    bad, seen = [], 0
    for rank, result in enumerate(sweep):
        for case, verdict in result["cases"].items():
            if case.startswith(collective) or f"/{collective}" in case:
                seen += 1
                if verdict != "ok":
                    bad.append((rank, case, verdict))
    assert seen >= len(sweep) * 5, f"only {seen} cases of {collective}"
    assert not bad, "\n".join(map(str, bad[:20]))


def test_bytes_moved_on_cuda_tensors(sweep):
    for rank, result in enumerate(sweep):
        moved = {k: v for k, v in result["cases"].items() if k.startswith(("broadcast/torch",
                                                                           "all_gather/torch"))}
        assert moved and all(v == "ok" for v in moved.values()), (rank, moved)


@pytest.mark.parametrize("case", SEMANTICS)
def test_cuda_semantics(semantics, case):
    for rank, result in enumerate(semantics):
        assert result["cases"][case] == "ok", (rank, result["cases"][case])


def train(workdir, n, device):
    results = run_workers(
        workdir, n, "ddp_train.py", timeout=300,
        args_per_rank=lambda i: ("tributary", i, n, workdir / "rendezvous", STEPS,
                                 workdir / f"rank{i}.npz", device))
    params = []
    for r in results:
        with numpy.load(r["cases"]["out"]) as f:
            params.append([f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))])
    return params


@pytest.mark.parametrize("n", WORLDS, ids=lambda n: f"world{n}")
def test_ddp_on_cuda_matches_the_cpu_job(tmp_path, n):
    on_cuda = train(tmp_path / "cuda", n, "cuda:0")
    on_cpu = train(tmp_path / "cpu", n, "cpu")
    for other in on_cuda[1:]:
        for a, b in zip(on_cuda[0], other):
            assert numpy.array_equal(a, b), "ranks of the CUDA job disagree"
    for a, b in zip(on_cpu[0], on_cuda[0]):
        assert a.shape == b.shape
        numpy.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-4)
