"""A coordinator given by the environment (TRIBUTARY_COORDINATOR) that cannot serve the
torch.distributed group fails it at once, saying why, instead of after the join timeout:
one started for another world size, and one whose world formed already (a previous job on it
has left). A coordinator of the right size serves the group, and one started with
--serve-jobs serves one job after another."""

from cluster import Cluster

# The join timeout the backend would otherwise wait out.
PROMPT_S = 15.0


def init_all(tmp_path, cluster, n, tag):
    init = tmp_path / f"rendezvous-{tag}"
    workers = [cluster.start("init_only.py", (i, n, init), name=f"{tag}{i}") for i in range(n)]
    codes = cluster.wait(workers, 120)
    assert all(c == 0 for c in codes.values()), cluster.diagnose(workers)
    return [w.result()["cases"] for w in workers]


def test_right_size_serves_the_group(tmp_path):
    with Cluster(tmp_path, 2) as cluster:
        for r in init_all(tmp_path, cluster, 2, "job"):
            assert r["raised"] is None and r["sum"] == 2.0, r


def test_another_world_size_is_named_at_once(tmp_path):
    with Cluster(tmp_path, 3) as cluster:
        for r in init_all(tmp_path, cluster, 2, "job"):
            assert r["raised"] == "RuntimeError", r
            assert "forms a world of 3 members" in r["message"], r
            assert "this torch.distributed group has 2" in r["message"], r
            assert r["seconds"] < PROMPT_S, r


def test_a_world_that_formed_already_is_named_at_once(tmp_path):
    with Cluster(tmp_path, 2) as cluster:
        for r in init_all(tmp_path, cluster, 2, "first"):
            assert r["raised"] is None, r
        for r in init_all(tmp_path, cluster, 2, "second"):
            assert r["raised"] == "RuntimeError", r
            assert "formed its world already" in r["message"], r
            assert "--serve-jobs" in r["message"], r
            assert r["seconds"] < PROMPT_S, r


def test_serve_jobs_serves_job_after_job(tmp_path):
    with Cluster(tmp_path, 2, coordinator_args=("--serve-jobs",)) as cluster:
        for job in ("first", "second", "third"):
            for r in init_all(tmp_path, cluster, 2, job):
                assert r["raised"] is None and r["sum"] == 2.0, (job, r)
