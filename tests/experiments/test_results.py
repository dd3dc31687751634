import math
import os
import tempfile
import unittest

import _paths  # noqa: F401
from towerps_experiments import checks, results


class StalenessTest(unittest.TestCase):
    def test_histogram(self):
        # 10 updates at 0, 20 at 1, 30 at 2, 40 at 3 or more: mean (20+60+120)/100 = 2.0;
        # cumulative 10, 30, 60, 100 -> 99% first reached in the last bucket.
        self.assertEqual(results.staleness_from_histogram([10, 20, 30, 40]), (2.0, 3, 100))
        # 990 at 0 and 10 at 5: exactly 99% at staleness 0.
        self.assertEqual(results.staleness_from_histogram([990, 0, 0, 0, 0, 10]),
                         (0.05, 0, 1000))
        # 989 at 0: 99% is first reached at 5.
        self.assertEqual(results.staleness_from_histogram([989, 0, 0, 0, 0, 11])[1], 5)
        self.assertEqual(results.staleness_from_histogram([0, 0]), (None, None, 0))
        with self.assertRaises(results.ResultsError):
            results.staleness_from_histogram([1, -1])

    def test_train_lines(self):
        # A scripted sequence of 100 windows: 98 at 1.0, one at 7.0, one at 9.0, plus a
        # null (diverged) window and an eval line, both ignored.
        lines = [{"kind": "train", "staleness": 1.0}] * 98 + [
            {"kind": "train", "staleness": 7.0}, {"kind": "train", "staleness": 9.0},
            {"kind": "train", "staleness": None}, {"kind": "eval", "staleness": 50.0}]
        mean, p99 = results.staleness_from_train_lines(lines)
        self.assertAlmostEqual(mean, (98 + 7 + 9) / 100)
        self.assertEqual(p99, 7.0)  # nearest rank: the 99th of 100 sorted values

    def test_source_preference(self):
        lines = [{"kind": "train", "staleness": 4.0}]
        self.assertEqual(results.staleness({"staleness_histogram": [1, 1],
                                            "mean_staleness": 9}, lines), (0.5, 1, "histogram"))
        self.assertEqual(results.staleness({"mean_staleness": 2.5, "p99_staleness": 6}, lines),
                         (2.5, 6, "summary"))
        # A summary with the servers' exact sum: its mean, past the histogram's last bucket.
        self.assertEqual(results.staleness({"staleness_histogram": [1, 1], "mean_staleness": 40.5,
                                            "max_staleness": 80}, lines),
                         (40.5, 1, "histogram+sum"))
        self.assertEqual(results.staleness({}, lines), (4.0, 4.0, "metrics"))

    def test_global_updates(self):
        lines = [{"time": 1, "worker": 0, "step": 10}, {"time": 2, "worker": 1, "step": 12},
                 {"time": 3, "worker": 0, "step": 20}, {"time": 9, "worker": 1, "step": 30}]
        # Worker 0 logged step 20 at 3 s; worker 1 is between 12 at 2 s and 30 at 9 s: 14.57.
        self.assertAlmostEqual(results.global_updates_at(lines, 3, "async"), 20 + 12 + 18 / 7)
        self.assertEqual(results.global_updates_at(lines, 3, "sync"), 20)
        # Before its first line, back along its first rate: worker 0 logged 10 at 2 s and 30
        # at 4 s (10 a second), so step 0 was at 1 s; worker 1 logged 12 at 3 s and 30 at 9 s
        # (3 a second), which puts step 0 at -1 s, before the launch at 0 s: from 0 s instead.
        early = [{"time": 2, "worker": 0, "step": 10}, {"time": 4, "worker": 0, "step": 30},
                 {"time": 3, "worker": 1, "step": 12}, {"time": 9, "worker": 1, "step": 30}]
        self.assertAlmostEqual(results.global_updates_at(early, 1.5, "ssp", 0.0), 5 + 6)
        self.assertAlmostEqual(results.global_updates_at(early, 1.5, "ssp"), 5 + 7.5)
        self.assertEqual(results.global_updates_at(early, 0.5, "softsync", 0.0), 2)
        # After its last line a worker stays at its last step.
        self.assertEqual(results.global_updates_at(lines, 20, "async"), 50)
        # One line only: nothing to interpolate from before it.
        self.assertEqual(results.global_updates_at([{"time": 4, "step": 8}], 2, "async"), 0)
        self.assertEqual(results.global_updates_at([{"time": 4, "step": 8}], 4, "async"), 8)


class MetricsFileTest(unittest.TestCase):
    def test_nan_kind_default_and_torn_last_line(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "m.jsonl")
            with open(p, "w") as f:
                f.write('{"step":1,"loss":-nan,"staleness":inf}\n'
                        '{"kind":"eval","test_accuracy":null}\n{"step":3,"lo')
            lines = results.read_metrics(p)
            self.assertEqual(lines, [{"step": 1, "loss": None, "staleness": None, "kind": "train"},
                                     {"kind": "eval", "test_accuracy": None}])
            with open(p, "w") as f:
                f.write('{"step":1}\nbroken\n{"step":2}\n')
            with self.assertRaises(results.ResultsError) as cm:
                results.read_metrics(p)
            self.assertIn("m.jsonl:2", str(cm.exception))

    def test_evals_from_launch_log(self):
        import time
        start = time.mktime((2026, 11, 22, 5, 39, 0, 0, 0, -1))
        log = ("[worker:0] I 05:39:20.827 epoch 1 done: test accuracy = 0.8494, test loss = 0.4\n"
               "[worker:1] I 05:39:21.000 epoch 1 done: test accuracy = 0.9, test loss = 0.4\n"
               "[worker:0] test accuracy = 0.8853 (after 2340 steps, 7.6 s)\n")
        evals = results.evals_from_launch_log(log, start, start + 30)
        self.assertEqual(len(evals), 2)
        self.assertAlmostEqual(evals[0]["time"] - start, 20.827, places=3)
        self.assertEqual((evals[0]["test_accuracy"], evals[1]["test_accuracy"]), (0.8494, 0.8853))
        self.assertEqual(evals[1]["time"], start + 30)


class ChecksTest(unittest.TestCase):
    def stats(self, **acc):
        out = {}
        for name, value in acc.items():
            out[name] = results.ConfigStats(name, [], 1, 0, 0, (value, 0), value, (None, None),
                                            0, (1000.0, 0), 0, 0, 0, 0)
        return out

    def test_recovers(self):
        c = {"kind": "recovers", "metric": "final_accuracy", "base": "a", "fixed": "f",
             "reference": "s", "fraction": 0.5}
        r = checks.evaluate(c, self.stats(a=0.1, f=0.7, s=0.9))
        self.assertTrue(r.passed)
        self.assertIn("recovered 75%", r.detail)
        self.assertFalse(checks.evaluate(c, self.stats(a=0.1, f=0.4, s=0.9)).passed)
        self.assertFalse(checks.evaluate(c, self.stats(a=0.9, f=0.9, s=0.8)).passed)
        r = checks.evaluate(c, self.stats(a=0.1, s=0.9))
        self.assertIsNone(r.passed)
        self.assertEqual(r.verdict, "NOT EVALUATED")

    def test_between_monotonic_compare(self):
        st = self.stats(s0=0.80, s4=0.85, s16=0.84)
        self.assertTrue(checks.evaluate({"kind": "between", "metric": "final_accuracy",
                                         "value": "s4", "low": "s16", "high": "s0",
                                         "tolerance": 0.01}, st).passed)
        mono = {"kind": "monotonic", "metric": "final_accuracy", "configs": ["s0", "s4", "s16"],
                "direction": "increasing"}
        self.assertFalse(checks.evaluate(mono, st).passed)
        self.assertTrue(checks.evaluate(dict(mono, tolerance=0.02), st).passed)
        cmp_ = {"kind": "compare", "metric": "final_accuracy", "left": "s4", "op": ">",
                "right": "s0"}
        self.assertTrue(checks.evaluate(cmp_, st).passed)
        self.assertFalse(checks.evaluate(dict(cmp_, margin=0.1), st).passed)

    def test_time_to_target_not_reached_is_infinite(self):
        s = results.ConfigStats("x", [], 2, 0, 0, (0.9, 0), 0.9, (5.0, 0), 1, (1, 0), 0, 0, 0, 0)
        self.assertEqual(checks.metric_value(s, "time_to_target"), math.inf)


if __name__ == "__main__":
    unittest.main()
