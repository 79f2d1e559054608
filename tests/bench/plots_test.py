"""bench/plots: the table readers on small tables written the way the benchmarks write
them (exact values), then every committed table in bench/results/ drawn into a temporary
directory (each PNG decoded far enough to know it is an image of a sane size).

Usage: plots_test.py SOURCE_DIR. Exit 77 (ctest: skipped) without python3-matplotlib.
"""
import struct
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SOURCE = Path(sys.argv.pop(1)).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SOURCE / "bench" / "plots"))
import tables as T  # noqa: E402

COMPARE = """## Link baseline: iperf3 on 127.0.0.1

| test | median GB/s | samples |
|---|---:|---|
| one stream, one way | 4.819 | 5.157, 4.819, 2.705 |
| --bidir, per direction (mean of both) | 2.469 | 3.382/2.469 |

## All medians

| N | size | system | algo | time µs | algbw GB/s | busbw GB/s | busbw range | busbw/iperf1 | busbw/iperf⇄ | #wrong (max) | reps |
|---:|---:|---|---|---:|---:|---:|---|---:|---:|---:|---:|
| 2 | 4 KiB | gloo | bcube | 579.8 | 0.007 | 0.007 | 0.007–0.017 | 0.00 | 0.00 | 0 | 3 |
| 2 | 4 KiB | gloo | ring | 397.9 | 0.010 | 0.010 | 0.000–0.017 | 0.00 | 0.00 | 0 | 3 |
| 2 | 4 KiB | tributary | direct | 10.0 | 0.411 | 0.411 | 0.324–0.441 | 0.09 | 0.17 | 0 | 3 |
| 4 | 256 MiB | openmpi | default | 1278063.3 | 0.210 | 0.315 | 0.252–0.639 | 0.07 | 0.13 | 0 | 3 |
"""

CHURN = """| phase | fault | n | time-to-detect | time-to-recover |
|---|---|---|---|---|
| churn | kill -9 | 2/2 | 0.246 / 0.257 / 0.257 | 0.250 / 0.262 / 0.262 |
| churn | SIGSTOP | 0/1 | 0.900 / 0.900 / 0.900 | - |

## Every fault

| phase | fault | time-to-detect (s) | time-to-recover (s) |
|---|---|---|---|
| churn | kill -9 | 0.246 | 0.250 |
| churn | SIGSTOP | 0.900 | - |
| churn | kill -9 | 0.257 | 0.262 |
"""

SHAPED = """2 ranks, 64 MiB float32 all-reduce (avg), load average 1.0

| codec | ranks | MiB | time (s) | goodput (MB/s) | wire MiB sent/rank | speedup | #wrong | rel. L2 error |
|---|---:|---:|---:|---:|---:|---:|---:|---:|
| float32 @ring | 2 | 64 | 6.096 | 11.0 | 64.00 | 1.000x | 0 | 2.75e-08 |
| topk:density=0.01,warmup=0,momentum=0 | 2 | 64 | 0.099 | 680.5 | 0.51 | 61.81x | 0 | 1.15e+00 |

4 ranks, later

| codec | ranks | MiB | time (s) | goodput (MB/s) | wire MiB sent/rank | speedup | #wrong | rel. L2 error |
|---|---:|---:|---:|---:|---:|---:|---:|---:|
| qint8:bucket=512,stochastic=1,ef=1 | 4 | 64 | 2.620 | 25.6 | 24.20 | 3.411x | 0 | 2.10e-02 |
"""


class Readers(unittest.TestCase):
    def test_compare(self):
        points = T.compare_points(COMPARE)
        self.assertEqual(len(points), 4)
        self.assertEqual((points[3].n, points[3].size, points[3].busbw, points[3].low, points[3].high),
                         (4, 256 << 20, 0.315, 0.252, 0.639))
        best = T.best_per_size(points, "gloo")
        self.assertEqual([(p.algo, p.busbw) for p in best], [("ring", 0.010)])
        self.assertEqual(T.compare_link(COMPARE)["--bidir, per direction (mean of both)"], 2.469)

    def test_churn(self):
        faults = {f.fault: f for f in T.churn_faults(CHURN)}
        self.assertEqual(faults["kill -9"].recover, [0.250, 0.262, 0.262])
        self.assertEqual(faults["kill -9"].recover_samples, [0.250, 0.262])
        self.assertIsNone(faults["SIGSTOP"].recover)
        self.assertEqual(faults["SIGSTOP"].detect_samples, [0.9])
        self.assertEqual(faults["SIGSTOP"].recover_samples, [])

    def test_shaped(self):
        runs = T.shaped_runs(SHAPED)
        self.assertEqual([(r.run, r.ranks, r.codec, r.speedup, r.wire_mib) for r in runs],
                         [(0, 2, "float32 @ring", 1.0, 64.0), (0, 2, "topk:density=0.01", 61.81, 0.51),
                          (1, 4, "qint8:bucket=512", 3.411, 24.2)])

    def test_sizes_and_bad_input(self):
        self.assertEqual(T.parse_size("64 KiB"), 65536)
        with self.assertRaises(ValueError):
            T.parse_size("64 kb")
        self.assertEqual(T.compare_points("no tables here"), [])


def png_size(path):
    data = path.read_bytes()[:24]
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise AssertionError(f"{path} is not a PNG")
    return struct.unpack(">II", data[16:24])


class CommittedTables(unittest.TestCase):
    def test_every_table_is_drawn(self):
        results = SOURCE / "bench" / "results"
        expected = sorted(md.stem for md in results.glob("*.md")
                          if md.name.split("_", 1)[0] in ("compare", "churn", "shaped"))
        self.assertTrue(expected, "no benchmark tables committed")
        with tempfile.TemporaryDirectory() as out:
            r = subprocess.run([str(SOURCE / "bench/plots/plot_results.py"), "all", str(results),
                                "--out-dir", out], capture_output=True, text=True, timeout=100)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            print(r.stdout, end="")
            drawn = sorted(p.stem for p in Path(out).glob("*.png"))
            self.assertEqual(drawn, expected)
            for p in Path(out).glob("*.png"):
                w, h = png_size(p)
                self.assertTrue(600 <= w <= 4000 and 250 <= h <= 3000, f"{p.name}: {w}x{h}")


if __name__ == "__main__":
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("python3-matplotlib is not installed (scripts/deps.sh installs it)")
        sys.exit(77)
    unittest.main(verbosity=2)
