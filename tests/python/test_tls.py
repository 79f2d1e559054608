"""TLS on data links from Python (docs/security.md): `tributary.Worker(tls=...)` reaches the
data plane. Two real processes over TCP: with `tls="all"` on both the all-reduce is right;
with it on one member only, both are refused with the TLS mode mismatch (which shows the
option took effect: a plaintext pair would have summed); a bad mode is refused at once.
The capture proving the bytes are encrypted is tests/tls (C++ agents, same code path)."""

import pytest

import tributary
from cluster import run_workers


def test_both_members_with_tls_all_reduce(tmp_path):
    results = run_workers(tmp_path, 2, "tls_all_reduce.py", timeout=120,
                          args_per_rank=lambda i: ("all", f"h{i}"))
    for r in results:
        assert r["error"] is None, r
        assert r["ok"], r


def test_one_member_without_tls_is_refused_on_both_sides(tmp_path):
    results = run_workers(tmp_path, 2, "tls_all_reduce.py", timeout=120,
                          args_per_rank=lambda i: ("all" if i == 0 else "off", f"h{i}"))
    for r in results:
        assert not r["ok"], r
        assert r["error"] and "TLS mode mismatch" in r["error"], r


def test_a_bad_mode_is_refused_at_once():
    config = tributary._tributary.WorkerConfig()
    with pytest.raises(tributary.InvalidArgument, match="cross-zone"):
        config.tls = "sometimes"
    config.tls = "cross-zone"
    assert config.tls == "cross-zone"
