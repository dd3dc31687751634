"""--seeds (run_preset, run_sweep), one set of seeds per results directory, the majority rule
of the checks, and the per-seed values in report.md."""
import contextlib
import io
import json
import os
import tempfile
import unittest
from unittest import mock

import _paths
from towerps_experiments import checks, cli, report, results, runner, sweep

SWEEP = {"name": "seeds", "workers": [2], "seeds": [1, 2],
         "modes": [{"mode": "sync"}, {"mode": "async"}]}


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.log = os.path.join(self.tmp.name, "invocations.txt")

    def invocations(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [os.path.basename(l.strip()) for l in f if l.strip()]

    def main(self, entry, argv):
        """(exit status, stdout, stderr) of a CLI entry point; argparse errors are statuses."""
        out, err = io.StringIO(), io.StringIO()
        env = dict(os.environ, FAKE_LAUNCH_LOG=self.log)
        for key in ("FAKE_LAUNCH_FAIL", "FAKE_LAUNCH_INTERRUPT_SEED", "FAKE_LAUNCH_DIVERGE"):
            env.pop(key, None)
        with mock.patch.dict(os.environ, env, clear=True), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = entry(argv)
            except SystemExit as e:
                rc = e.code
        return rc, out.getvalue(), err.getvalue()


class SeedsOptionTest(TempDirTest):
    def setUp(self):
        super().setUp()
        self.sweep_file = os.path.join(self.tmp.name, "seeds.json")
        with open(self.sweep_file, "w") as f:
            json.dump(SWEEP, f)
        self.results = os.path.join(self.tmp.name, "results")

    def run_sweep(self, *extra):
        return self.main(cli.run_sweep_main, [self.sweep_file, self.results, "--launcher",
                                              _paths.FAKE_LAUNCHER, "--no-report", *extra])

    def seeds_in(self, results_dir):
        return sorted({r.config["seed"] for r in results.load_results(results_dir)})

    def test_seeds_replace_the_files_seeds(self):
        rc, out, err = self.run_sweep("--seeds", "4,5,6")
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(self.invocations()), sorted(
            f".{m}-seed{s}.partial" for m in ("sync", "async") for s in (4, 5, 6)))
        self.assertEqual(self.seeds_in(self.results), [4, 5, 6])
        with open(os.path.join(self.results, "runs", "async-seed5", "config.json")) as f:
            command = json.load(f)["command"]
        self.assertEqual(command[command.index("--seed") + 1], "5")
        with open(os.path.join(self.results, "sweep.json")) as f:
            self.assertEqual(json.load(f)["seeds"], [4, 5, 6])

    def test_resume_needs_the_same_seeds(self):
        self.assertEqual(self.run_sweep("--seeds", "4,5")[0], 0)
        os.remove(self.log)
        # Other seeds, or the file's own (1, 2), would mix two sets in one directory.
        for extra in (("--seeds", "4,6"), ("--seeds", "4"), ()):
            rc, _, err = self.run_sweep(*extra)
            self.assertEqual(rc, 2, extra)
            self.assertIn("was made with seeds 4, 5", err)
            self.assertIn("another results directory", err)
            self.assertEqual(self.invocations(), [], extra)
        # The same seeds, in any order: resumed, nothing left to run.
        rc, out, _ = self.run_sweep("--seeds", "5,4")
        self.assertEqual(rc, 0)
        self.assertIn("4 of 4 runs already finished", out)
        self.assertEqual(self.invocations(), [])
        self.assertEqual(self.seeds_in(self.results), [4, 5])

    def test_a_directory_made_without_seeds_is_not_mixed_either(self):
        self.assertEqual(self.run_sweep()[0], 0)
        rc, _, err = self.run_sweep("--seeds", "1,2,3")
        self.assertEqual(rc, 2)
        self.assertIn("was made with seeds 1, 2 (its sweep.json), this sweep runs seeds 1, 2, 3",
                      err)
        # A run directory of another seed, even without sweep.json (older tooling).
        os.remove(os.path.join(self.results, "sweep.json"))
        with self.assertRaises(runner.ResultsDirError) as cm:
            runner.check_seeds(self.results, {1})
        self.assertIn("seed 2", str(cm.exception))

    def test_run_preset_seeds_and_report(self):
        d = os.path.join(self.tmp.name, "preset")
        rc, _, err = self.main(cli.run_preset_main, [
            "backup", "--seeds", "4,5,6", "--results-dir", d, "--launcher",
            _paths.FAKE_LAUNCHER, "--no-report"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(self.invocations()), 6)  # 2 modes x 3 seeds, none of 1, 2, 3
        self.assertEqual(self.seeds_in(d), [4, 5, 6])
        path, check_results = report.make_report(d, with_plots=False)
        with open(path) as f:
            text = f.read()
        # The fake launcher's accuracy is 0.5 + seed / 100 in every mode.
        self.assertIn("| seed | sync | sync-b1 |", text)  # the preset's order, not the names
        for seed in (4, 5, 6):
            acc = f"{0.5 + seed / 100:.4f}"
            self.assertIn(f"| {seed} | {acc} | {acc} |", text)
        self.assertEqual([len(c.seeds) for c in check_results], [3, 3])
        # Again with other seeds into the same directory: refused, with the option to change.
        rc, _, err = self.main(cli.run_preset_main, [
            "backup", "--seeds", "7", "--results-dir", d, "--launcher",
            _paths.FAKE_LAUNCHER, "--no-report"])
        self.assertEqual(rc, 2)
        self.assertIn("run_preset:", err)
        self.assertIn("--results-dir", err)

    def test_bad_seed_lists_are_rejected(self):
        for value, fragment in (("4,x", "'x' is not an integer >= 0"),
                                ("4,4", "seed 4 is repeated"),
                                ("", "no seeds"),
                                ("4,,5", "an empty entry"),
                                ("-1", "'-1' is not an integer >= 0"),
                                ("1.5", "'1.5'"),
                                ("+3", "'+3'"),
                                (str(2**64), "64-bit")):
            for entry, argv in ((cli.run_preset_main, ["staleness"]),
                                (cli.run_sweep_main, [self.sweep_file, self.results])):
                rc, _, err = self.main(entry, [*argv, "--launcher", _paths.FAKE_LAUNCHER,
                                               f"--seeds={value}"])
                self.assertEqual(rc, 2, value)
                self.assertIn("argument --seeds: invalid seed list", err)
                self.assertIn(fragment, err)
        self.assertEqual(self.invocations(), [])
        self.assertFalse(os.path.exists(self.results))

    def test_sweep_parse_with_seeds(self):
        s = sweep.parse(SWEEP, "s.toml", _paths.FAKE_LAUNCHER, seeds=[9, 3])
        self.assertEqual([r.name for r in s.runs],
                         ["sync-seed9", "sync-seed3", "async-seed9", "async-seed3"])
        self.assertEqual(s.source["seeds"], [9, 3])
        self.assertEqual(SWEEP["seeds"], [1, 2])  # the caller's dict is left alone
        self.assertEqual(sweep.parse_seed_list(" 4, 5 ,6"), [4, 5, 6])


def write_results(results_dir, accuracies, sweep_checks, seeds=(1, 2, 3)):
    """A results directory by hand: accuracies maps a configuration to one test accuracy per
    seed, "failed" for a failed run, None for no run at all."""
    os.makedirs(os.path.join(results_dir, "runs"))
    with open(os.path.join(results_dir, "sweep.json"), "w") as f:
        json.dump({"name": "majority", "seeds": list(seeds), "target_accuracy": 0.5,
                   "checks": sweep_checks}, f)
    for config, accs in accuracies.items():
        for seed, acc in zip(seeds, accs):
            if acc is None:
                continue
            d = os.path.join(results_dir, "runs", f"{config}-seed{seed}")
            os.makedirs(d)
            ok = acc != "failed"
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump({"config_name": config, "name": os.path.basename(d), "seed": seed,
                           "mode": "sync", "workers": 2, "started_at": 100.0}, f)
            with open(os.path.join(d, "status.json"), "w") as f:
                json.dump({"ok": ok, "returncode": 0 if ok else 1, "started_at": 100.0,
                           "finished_at": 110.0,
                           "error": None if ok else "launcher exited with status 1"}, f)
            if ok:
                with open(os.path.join(d, "summary.json"), "w") as f:
                    json.dump({"test_accuracy": acc, "test_loss": 0.5,
                               "final_train_loss": 0.5, "examples_per_sec": 1000.0}, f)


COMPARE = {"kind": "compare", "metric": "final_accuracy", "left": "sync", "op": ">",
           "right": "async", "description": "sync beats async"}


class MajorityRuleTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.n = 0

    def report(self, accuracies, sweep_checks=(COMPARE,), seeds=(1, 2, 3)):
        self.n += 1
        d = os.path.join(self.tmp.name, f"r{self.n}")
        write_results(d, accuracies, list(sweep_checks), seeds)
        path, check_results = report.make_report(d, with_plots=False)
        with open(path) as f:
            return check_results, f.read()

    def test_holds_on_the_mean_but_on_one_seed_of_three(self):
        # Means 0.6333 > 0.4333, but sync wins on seed 1 only.
        (c,), text = self.report({"sync": [0.9, 0.5, 0.5], "async": [0.1, 0.6, 0.6]})
        self.assertIs(c.mean_passed, True)
        self.assertIs(c.passed, False)
        self.assertEqual(c.verdict, "NOT OBSERVED")
        self.assertEqual([(s.seed, s.held) for s in c.seeds], [(1, True), (2, False), (3, False)])
        self.assertIn("holds on the mean and on 1 of 3 seeds (a strict majority is needed)",
                      c.detail)
        self.assertIn("**NOT OBSERVED**: sync beats async.", text)

    def test_holds_on_the_mean_and_two_seeds_of_three(self):
        (c,), text = self.report({"sync": [0.9, 0.8, 0.5], "async": [0.1, 0.7, 0.6]})
        self.assertIs(c.passed, True)
        self.assertIn("holds on the mean and on 2 of 3 seeds", c.detail)
        self.assertIn("**OBSERVED**: sync beats async.", text)
        # The per-seed values behind the check, then each run's accuracy.
        for row in ("| final_accuracy | sync | async | holds |",
                    "| mean | 0.7333 | 0.4667 | yes |",
                    "| seed 1 | 0.9 | 0.1 | yes |",
                    "| seed 2 | 0.8 | 0.7 | yes |",
                    "| seed 3 | 0.5 | 0.6 | no |",
                    "## Per-seed final accuracy",
                    "| seed | async | sync |",
                    "| 1 | 0.1000 | 0.9000 |",
                    "| 3 | 0.6000 | 0.5000 |"):
            self.assertIn(row, text)

    def test_fails_on_the_mean_holds_on_two_seeds(self):
        (c,), _ = self.report({"sync": [0.6, 0.6, 0.1], "async": [0.5, 0.5, 0.9]})
        self.assertIs(c.passed, False)
        self.assertIn("fails on the mean; holds on 2 of 3 seeds", c.detail)

    def test_a_seed_without_a_run_counts_as_not_holding(self):
        # Seed 3 of sync failed: 2 of 3 still hold.
        (c,), text = self.report({"sync": [0.9, 0.8, "failed"], "async": [0.1, 0.7, 0.6]})
        self.assertIs(c.passed, True)
        self.assertIn("holds on the mean and on 2 of 3 seeds", c.detail)
        self.assertIn("seed 3 (sync: run failed)", c.detail)
        self.assertIn("| seed 3 | run failed | 0.6 | no (missing data) |", text)
        self.assertIn("| 3 | 0.6000 | failed |", text)
        # Seeds 2 (no run) and 3 (failed) of sync: 1 of 3, though the mean of seed 1 holds.
        (c,), text = self.report({"sync": [0.9, None, "failed"], "async": [0.1, 0.7, 0.6]})
        self.assertIs(c.passed, False)
        self.assertIn("holds on the mean and on 1 of 3 seeds", c.detail)
        self.assertIn("seed 2 (sync: no run), seed 3 (sync: run failed)", c.detail)
        self.assertIn("| 2 | 0.7000 | — |", text)

    def test_recovers_is_judged_per_seed(self):
        rec = {"kind": "recovers", "metric": "final_accuracy", "base": "async",
               "fixed": "salr", "reference": "sync", "fraction": 0.5}
        # Means: gap 0.8 - 0.1, salr recovers (0.5 - 0.1) / 0.7 = 57%; per seed 86%, 14%, 71%.
        (c,), _ = self.report({"sync": [0.8, 0.8, 0.8], "async": [0.1, 0.1, 0.1],
                               "salr": [0.7, 0.2, 0.6]}, [rec])
        self.assertIs(c.passed, True)
        self.assertEqual([s.held for s in c.seeds], [True, False, True])
        (c,), _ = self.report({"sync": [0.8, 0.8, 0.8], "async": [0.1, 0.1, 0.1],
                               "salr": [0.9, 0.2, 0.4]}, [rec])
        self.assertIs(c.mean_passed, True)  # (0.5 - 0.1) / 0.7 on the means
        self.assertIs(c.passed, False)      # 1 of 3 seeds
        self.assertIn("1 of 3 seeds", c.detail)

    def test_one_seed_and_results_without_seeds(self):
        (c,), _ = self.report({"sync": [0.9], "async": [0.1]}, seeds=(4,))
        self.assertIs(c.passed, True)
        self.assertIn("on 1 of 1 seeds", c.detail)
        self.assertIn("one seed: it cannot show whether the effect outlasts the noise", c.detail)
        # Stats without per-seed runs (no seeds known): the mean alone decides, as before.
        st = {n: results.ConfigStats(n, [], 1, 0, 0, (v, 0), v, (None, None), 0, (1.0, 0), 0,
                                     0, 0, 0) for n, v in (("sync", 0.9), ("async", 0.1))}
        self.assertIs(checks.evaluate(COMPARE, st).passed, True)


if __name__ == "__main__":
    unittest.main()
