"""TLS on data links from Python (docs/security.md): `tributary.Worker(tls=...)` reaches the
agent. Two real processes over TCP: with `tls="all"` on both the all-reduce is right; with
it on one member only, the coordinator refuses the second to join, naming both settings
(which shows the option took effect: a plaintext pair would have summed), and the first
never gets its world; a bad mode is refused at once. The capture proving the bytes are
encrypted is tests/tls (C++ agents, same code path)."""

import pytest

import tributary
from cluster import run_workers


def test_both_members_with_tls_all_reduce(tmp_path):
    results = run_workers(tmp_path, 2, "tls_all_reduce.py", timeout=120,
                          args_per_rank=lambda i: ("all", f"h{i}", 20))
    for r in results:
        assert r["error"] is None, r
        assert r["ok"], r


def test_a_member_with_other_tls_is_refused_at_the_join(tmp_path):
    results = run_workers(tmp_path, 2, "tls_all_reduce.py", timeout=120,
                          args_per_rank=lambda i: ("all" if i == 0 else "off", f"h{i}", 6))
    assert not any(r["ok"] for r in results), results
    refused = [r for r in results
               if r["error"] and r["error"].startswith("InvalidArgument")
               and "every member needs the same setting" in r["error"]]
    assert len(refused) == 1, results
    assert "tls:off" in refused[0]["error"] and "tls:all/psk" in refused[0]["error"], refused


def test_a_bad_mode_is_refused_at_once():
    config = tributary._tributary.WorkerConfig()
    with pytest.raises(tributary.InvalidArgument, match="cross-zone"):
        config.tls = "sometimes"
    config.tls = "cross-zone"
    assert config.tls == "cross-zone"


def test_failover_is_auto_by_default_and_a_bad_choice_is_refused():
    # On by default where there is another network (docs/transports.md); on/off force it.
    config = tributary._tributary.WorkerConfig()
    assert config.failover == "auto"
    with pytest.raises(tributary.InvalidArgument, match="auto, on or off"):
        config.failover = "sometimes"
    config.failover = "off"
    assert config.failover == "off"
    config.data_addresses = ["10.0.0.1", "10.1.0.1"]
    assert config.data_addresses == ["10.0.0.1", "10.1.0.1"]
    config.stall_timeout_ms = 1500
    assert config.stall_timeout_ms == 1500
