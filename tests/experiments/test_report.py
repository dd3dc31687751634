import os
import shutil
import tempfile
import unittest

import _paths
from towerps_experiments import report


class ReportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = os.path.join(cls.tmp.name, "small_results")
        shutil.copytree(os.path.join(_paths.DATA, "small_results"), cls.dir)
        cls.path, cls.checks = report.make_report(cls.dir)
        with open(cls.path) as f:
            cls.text = f.read()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def row(self, config):
        rows = [l for l in self.text.splitlines() if l.startswith(f"| {config} |")]
        self.assertEqual(len(rows), 1, self.text)
        return [c.strip() for c in rows[0].strip("|").split("|")]

    def test_table_numbers(self):
        # Hand-computed from tests/experiments/data/small_results (see the runs' files).
        # Time to 0.85, interpolated between evaluations: seed 1 from 0.80 at 5 s to 0.86 at
        # 10 s, 9.17 s; seed 2 from 0.82 at 4 s to 0.88 at 8 s, 6 s.
        self.assertEqual(self.row("sync"), ["sync", "2/2", "0.8700 ± 0.0141", "0.4000 ± 0.0000",
                                            "0", "7.6 ± 2.2", "2/2", "21000 ± 1414", "0.00",
                                            "0", "0"])
        # async: seed 1 diverged, seed 2 reached 0.84 (< 0.85 target), seed 3 failed;
        # staleness from histograms [10,20,30,40] (2.0) and [50,30,15,5] (0.75).
        # Its test loss is infinite: a seed diverged.
        self.assertEqual(self.row("async"), ["async", "2/3", "0.8400 ± 0.0000",
                                             "inf (diverged or missing)", "1", "—", "0/2",
                                             "32000 ± 2828", "1.38", "3", "6"])
        self.assertIn("target test accuracy 0.85", self.text)

    def test_failures_and_checks(self):
        self.assertIn("- `async-seed3`: launcher exited with status 1", self.text)
        self.assertIn("**OBSERVED**: sync ends more accurate than async. final_accuracy: "
                      "sync = 0.87, async = 0.42", self.text)
        self.assertIn("**NOT OBSERVED**: sync is faster than async", self.text)
        self.assertEqual([c.passed for c in self.checks], [True, False])

    def test_target_override(self):
        d = os.path.join(self.tmp.name, "other")
        shutil.copytree(self.dir, d)
        path, _ = report.make_report(d, target=0.8, with_plots=False)
        with open(path) as f:
            text = f.read()
        # At 0.8: async seed 2 reaches it at its first evaluation (3 s); sync at 5 s and 4 s.
        self.assertIn("| async | 2/3 | 0.8400 ± 0.0000 | inf (diverged or missing) | 1 | "
                      "3.0 ± 0.0 | 1/2 |", text)
        self.assertIn("| sync | 2/2 | 0.8700 ± 0.0141 | 0.4000 ± 0.0000 | 0 | 4.5 ± 0.7 | 2/2 |",
                      text)

    def test_plots_exist(self):
        stems = ["accuracy_vs_time", "accuracy_vs_examples", "loss_vs_time", "loss_vs_examples",
                 "staleness_histogram", "throughput", "time_to_target"]
        for stem in stems:
            png = os.path.join(self.dir, "plots", f"{stem}.png")
            svg = os.path.join(self.dir, "plots", f"{stem}.svg")
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", png)
            self.assertGreater(os.path.getsize(png), 2000, png)
            with open(svg) as f:
                self.assertIn("<svg", f.read(), svg)
            self.assertIn(f"](plots/{stem}.png)", self.text)


if __name__ == "__main__":
    unittest.main()
