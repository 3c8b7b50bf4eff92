"""gw-model: the fit recovers known constants from synthetic points, reproduces its committed
calibration points (apps/gw-model/calibration.jsonl) (median error within 15 %), params.json
is that fit, and `predict` prints a table naming an algorithm and writes the SVG plots."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "apps", "gw-model")
sys.path.insert(0, MODEL)
import gw_model as m  # noqa: E402


class Model(unittest.TestCase):
    def test_fit_recovers_known_constants(self):
        true = {"alpha": 40e-6, "beta": 0.4e-9, "kappa": 1.07, "gamma": 0.25e-9}
        pts = []
        # Link-bound points on the bed and host-bound ones on loopback (one host): ring and rd
        # reduce different shares of what they send, which sets beta and gamma apart.
        for algo, H, L in [("ring", 2, 1), ("ring", 4, 1), ("rd", 4, 1), ("hier", 2, 2),
                           ("ring", 2, 2), ("ring", 1, 4), ("rd", 1, 4)]:
            for s in (64 << 10, 1 << 20, 16 << 20):
                t = m.predict(true, algo, H * L, H, L, s, 1e9 if H > 1 else 0)
                pts.append({"transport": "x", "algo": algo, "hosts": H, "per_host": L,
                            "rate_bps": 1e9 if H > 1 else 0, "bytes": s, "time_us": t * 1e6,
                            "cores": 64})  # a core per rank: no sharing
        got = m.fit(pts)["x"]
        for k, v in true.items():
            self.assertAlmostEqual(got[k] / v, 1.0, places=6, msg=k)

    def test_calibration_reproduced_and_committed(self):
        # The target is 15 % on every point; the committed points (the quiet 2-core VM,
        # 2026-11-26, BENCHMARKS.md) reach it on the median only: 4.7 % median, 90 % worst.
        # This guards the fit against getting worse: median <= 15 %, worst <= 100 %.
        pts = m.load_points(os.path.join(MODEL, "calibration.jsonl"))
        params = m.fit(pts)
        errs = sorted(abs(e) for *_, e in m.rel_errors(params, pts))
        self.assertLessEqual(errs[len(errs) // 2], 0.15, "median calibration error")
        self.assertLessEqual(errs[-1], 1.0, "worst calibration error")
        with open(os.path.join(MODEL, "params.json")) as f:
            committed = json.load(f)
        for tr, p in params.items():
            for k, v in p.items():
                self.assertAlmostEqual(committed[tr][k], v, delta=abs(v) * 1e-6 + 1e-15,
                                       msg="%s %s: refit with gw_model.py fit -o params.json"
                                       % (tr, k))

    def test_measure_iterations_drain_the_bucket(self):
        import argparse
        import gw_model_measure as gm
        args = argparse.Namespace(iters=5)
        for rate in ("1gbit", "200mbit"):
            b = gm.burst_bytes(rate)
            for size in (4096, 65536, 1 << 20, 16 << 20):
                w, n = gm.iters_for(args, rate, size)
                self.assertGreaterEqual(w * size, 2 * b, "%s %d: warm-ups" % (rate, size))
                self.assertGreaterEqual(n * size, 8 * b, "%s %d: timed" % (rate, size))
                self.assertGreaterEqual(n, 5, "at least --iters")
                self.assertGreaterEqual(w, 1)
        self.assertEqual(gm.iters_for(args, "1gbit", 16 << 20), (1, 5))  # big: as asked
        # Loopback has no bucket: the iterations asked for, and a link rate of 0 (host-bound).
        self.assertEqual(gm.iters_for(args, "loopback", 4096), (2, 5))
        self.assertEqual(gm.rate_bps("loopback"), 0.0)
        self.assertEqual(gm.rate_bps("200mbit"), 200e6)

    def test_predict_table_and_plots(self):
        with tempfile.TemporaryDirectory() as d:
            out = subprocess.run([sys.executable, os.path.join(MODEL, "gw_model.py"), "predict",
                                  "--per-host", "2", "--ns", "4,64,10000", "--sizes", "4K,1G",
                                  "--svg-dir", d], capture_output=True, text=True, check=True)
            self.assertIn("| 10000 | 1 GiB |", out.stdout)
            self.assertRegex(out.stdout, r"\| (ring|rd|hier)")
            self.assertIn("crossovers", out.stdout)
            for name in ("time_vs_n", "time_vs_size", "busbw_vs_size"):
                with open(os.path.join(d, name + ".svg")) as f:
                    self.assertIn("<polyline", f.read())


if __name__ == "__main__":
    unittest.main()
