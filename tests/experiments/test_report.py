import json
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
        self.assertEqual(self.row("async"), ["async", "2/3", "0.8400 (one value: no spread)",
                                             "inf (diverged or missing)", "1", "—", "0/2",
                                             "32000 ± 2828", "1.38", "3", "6"])
        self.assertIn("target test accuracy 0.85", self.text)

    def test_failures_and_checks(self):
        self.assertIn("- `async-seed3`: launcher exited with status 1", self.text)
        self.assertIn("**OBSERVED**: sync ends more accurate than async. final_accuracy: "
                      "sync = 0.87, async = 0.42", self.text)
        self.assertIn("**NOT OBSERVED**: sync is faster than async", self.text)
        self.assertEqual([c.passed for c in self.checks], [True, False])

    def test_an_auc_sweep_reports_auc_and_row_staleness(self):
        # The same runs as a sweep of binary models: their summaries' and evaluations' test_auc
        # (here accuracy - 0.1) is the score, and the tables' row staleness gets columns.
        d = os.path.join(self.tmp.name, "auc")
        shutil.copytree(self.dir, d)
        with open(os.path.join(d, "sweep.json")) as f:
            source = json.load(f)
        with open(os.path.join(d, "sweep.json"), "w") as f:
            json.dump(dict(source, metric="auc", target_accuracy=0.75), f)
        for run in os.listdir(os.path.join(d, "runs")):
            path = os.path.join(d, "runs", run)
            summary_path = os.path.join(path, "summary.json")
            if os.path.exists(summary_path):
                with open(summary_path) as f:
                    s = json.load(f)
                if isinstance(s.get("test_accuracy"), (int, float)):
                    s["test_auc"] = s["test_accuracy"] - 0.1
                s.update(mean_row_staleness=0.25, p99_row_staleness=2)
                with open(summary_path, "w") as f:
                    json.dump(s, f)
            metrics = os.path.join(path, "metrics-0.jsonl")
            if os.path.exists(metrics):
                with open(metrics) as f:
                    lines = f.readlines()
                for i, line in enumerate(lines):
                    try:  # a line cut short, as a killed run leaves, stays as it is
                        e = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    if e.get("kind") == "eval" and isinstance(e.get("test_accuracy"), float):
                        lines[i] = json.dumps(dict(e, test_auc=e["test_accuracy"] - 0.1)) + "\n"
                with open(metrics, "w") as f:
                    f.writelines(lines)
        path, _ = report.make_report(d, with_plots=False)
        with open(path) as f:
            text = f.read()
        self.assertIn("target test AUC 0.75", text)
        self.assertIn("| configuration | runs ok | final AUC (mean ± std) |", text)
        self.assertIn("mean row staleness | p99 row staleness |", text)
        self.assertIn("| sync | 2/2 | 0.7700 ± 0.0141 | 0.4000 ± 0.0000 | 0 | 7.6 ± 2.2 | 2/2 |",
                      text)
        self.assertIn("| 0.250 | 2 |", text)
        self.assertIn("## Per-seed final AUC", text)

    def test_target_override(self):
        d = os.path.join(self.tmp.name, "other")
        shutil.copytree(self.dir, d)
        path, _ = report.make_report(d, target=0.8, with_plots=False)
        with open(path) as f:
            text = f.read()
        # At 0.8: async seed 2 reaches it at its first evaluation (3 s); sync at 5 s and 4 s.
        self.assertIn("| async | 2/3 | 0.8400 (one value: no spread) | inf (diverged or missing) | 1 | "
                      "3.0 (one value: no spread) | 1/2 |", text)
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
