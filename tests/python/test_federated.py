"""Federated rounds from Python (docs/federated.md): `tributary.Worker.federated_round` on 3
real processes. A late member is told (contributed False, its tensor untouched) and its
update, folded into its residual, is in its next round's contribution; a contributor holds
the weighted mean of exactly the contributors and weights its outcome names; below
min_participants every member gets RoundFailed and keeps its input."""

import pytest

from cluster import run_workers

WORLD = 3


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_workers(tmp_path_factory.mktemp("federated"), WORLD, "federated.py", timeout=180)


def mean(pairs):
    """sum(w * x) / sum(w) over (x, w) pairs."""
    return sum(w * x for x, w in pairs) / sum(w for _, w in pairs)


def test_a_late_member_is_told_and_the_others_average_without_it(results):
    late = max(r["rank"] for r in results)
    for r in results:
        first = r["rounds"][0]
        assert "error" not in first, first
        if r["rank"] == late:
            assert first["contributed"] is False, first
            assert first["values"] == [late + 1.0], "a late member's tensor is untouched"
        else:
            assert first["contributed"] is True, first
            # Rank k contributes k + 1 with weight k + 1; the contributors are named.
            assert sorted(first["weights"]) == [k + 1.0 for k in range(WORLD) if k != late]
            expected = mean([(k + 1.0, k + 1.0) for k in range(WORLD) if k != late])
            assert first["values"] == [pytest.approx(expected, rel=1e-6)], first
            assert first["total_weight"] == sum(first["weights"])


def test_the_late_update_is_folded_into_the_next_round(results):
    late = max(r["rank"] for r in results)
    # Round 2: everyone; the late member adds round 1's update (late + 1) to its own.
    expected = mean([((k + 1.0) * (2 if k == late else 1), k + 1.0) for k in range(WORLD)])
    values = set()
    for r in results:
        second = r["rounds"][1]
        assert second.get("contributed") is True, second
        assert sorted(second["weights"]) == [k + 1.0 for k in range(WORLD)]
        assert len(second["values"]) == 1
        values.add(second["values"][0])
    assert len(values) == 1, f"contributors disagree: {values}"
    assert values.pop() == pytest.approx(expected, rel=1e-6)


def test_below_min_participants_every_member_fails_and_keeps_its_input(results):
    for r in results:
        third = r["rounds"][2]
        assert third.get("error", "").startswith("RoundFailed"), third
        assert "fewer than min_participants 4" in third["error"], third
        assert third["values"] == [r["rank"] + 1.0], third
