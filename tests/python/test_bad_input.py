"""Bad input, through tributary.Worker and through torch.distributed's "tributary" backend,
on 2 real processes: arguments that disagree across ranks fail on every rank with the
Mismatch text (never a hang, never a wrong sum), unusable tensors are refused at the call
with a message that says what to do, and the cluster stays usable afterwards.
"""

import pytest

from cluster import run_workers

# What each local case must raise, and words its message must contain.
API_LOCAL = {
    "non_contiguous_numpy": ("InvalidArgument", "not C-contiguous"),
    "non_contiguous_torch": ("InvalidArgument", "not contiguous"),
    "cuda_tensor": ("InvalidArgument", "without CUDA support"),
    "meta_tensor": ("InvalidArgument", "CPU tensors only"),
    "unsupported_dtype_torch": ("InvalidArgument", "torch.bool"),
    "unsupported_dtype_numpy": ("InvalidArgument", "complex64"),
    "wrong_out_size": ("InvalidArgument", "needs 8"),
    "read_only": ("InvalidArgument", "read-only"),
    "not_an_array": ("TypeError", "NumPy array, a torch tensor or a buffer"),
    "bad_op": ("InvalidArgument", "unsupported reduction"),
}
DIST_LOCAL = {
    "non_contiguous_torch": ("RuntimeError", "not contiguous"),
    "unsupported_dtype_torch": ("RuntimeError", "cannot reduce Short"),
    "bool_avg": ("RuntimeError", "not supported on Bool tensors"),
    "unsupported_op": ("RuntimeError", "not supported"),
    "bitwise_of_floats": ("RuntimeError", "takes integer or bool tensors, got Float"),
    "wrong_list_length": ("RuntimeError", "1 tensors for a group of 2"),
    "all_to_all_splits_not_the_rows": ("RuntimeError", "split sizes add up to 3"),
    "negative_tag": ("RuntimeError", "tags are >= 0"),
    "recv_from_any_source_negative_tag": ("RuntimeError", "tags are >= 0"),
    "root_out_of_range": ("RuntimeError", "root 5 is not a rank of this group of 2"),
}
MISMATCHES = ("dtype_float32_vs_float64", "dtype_float32_vs_int32", "count_8_vs_9")
# A mismatch is noticed by the data plane at once; the rest is moving to fresh links.
MISMATCH_BOUND_S = 20.0


def run(tmp_path, api):
    return run_workers(tmp_path, 2, "bad_input.py", timeout=240,
                       args_per_rank=lambda i: (api, i, tmp_path / "rendezvous"))


@pytest.fixture(scope="module")
def api_results(tmp_path_factory):
    return run(tmp_path_factory.mktemp("api"), "api")


@pytest.fixture(scope="module")
def dist_results(tmp_path_factory):
    return run(tmp_path_factory.mktemp("dist"), "dist")


@pytest.mark.parametrize("case", MISMATCHES)
def test_api_disagreement_fails_every_rank(api_results, case):
    for result in api_results:
        got = result["cases"][case]
        assert got["raised"] == "Mismatch", got
        assert got["message"].startswith("mismatch: "), got
        assert got["seconds"] < MISMATCH_BOUND_S, got


@pytest.mark.parametrize("case", MISMATCHES)
def test_dist_disagreement_fails_every_rank(dist_results, case):
    for result in dist_results:
        got = result["cases"][case]
        assert got["raised"] == "RuntimeError", got
        assert "tributary: mismatch: " in got["message"], got
        assert got["seconds"] < MISMATCH_BOUND_S, got


@pytest.mark.parametrize("case", sorted(API_LOCAL))
def test_api_refuses_unusable_input(api_results, case):
    raised, words = API_LOCAL[case]
    for result in api_results:
        got = result["cases"][case]
        assert got["raised"] == raised and words in got["message"], got


@pytest.mark.parametrize("case", sorted(DIST_LOCAL))
def test_dist_refuses_unusable_input(dist_results, case):
    raised, words = DIST_LOCAL[case]
    for result in dist_results:
        got = result["cases"][case]
        assert got["raised"] == raised and words in got["message"], got


def test_dist_receiver_expecting_another_dtype_fails_with_mismatch(dist_results):
    # Rank 0 sends 4 float32, rank 1 receives 4 int32: the same bytes, another dtype.
    got = dist_results[1]["cases"]["p2p_dtype_mismatch"]
    assert got["raised"] == "RuntimeError" and "tributary: mismatch" in got["message"], got


@pytest.mark.parametrize("api", ["api", "dist"])
def test_cluster_usable_afterwards(api_results, dist_results, api):
    for result in (api_results if api == "api" else dist_results):
        got = result["cases"]["usable_after"]
        assert got["raised"] is None and got["value"] == 2.0, got
