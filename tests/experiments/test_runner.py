import io
import json
import os
import tempfile
import unittest
from unittest import mock

import _paths
from towerps_experiments import runner, sweep

SWEEP = {"name": "resume", "workers": [2], "seeds": [1, 2, 3],
         "modes": [{"mode": "sync"}, {"mode": "async"}]}
# Run order: sync seeds 1..3, then async seeds 1..3.


class ClickLogsTest(unittest.TestCase):
    """A sweep's ctr_data: scripts/make_ctr_data.py writes <results>/data once, and every run
    reads it (--data-dir)."""

    def test_written_once_and_given_to_every_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            results = os.path.join(tmp, "results")
            data = dict(SWEEP, ctr_data={"train": 40, "test": 20, "seed": 3})
            s = sweep.parse(data, "ctr.toml", _paths.FAKE_LAUNCHER)
            out = io.StringIO()
            runner.run_sweep(s, results, _paths.FAKE_LAUNCHER, 60, out)
            data_dir = os.path.join(os.path.abspath(results), "data")
            with open(os.path.join(data_dir, "answer.json")) as f:
                self.assertEqual(json.load(f)["train"], 40)
            with open(os.path.join(data_dir, "train.txt")) as f:
                self.assertEqual(len(f.readlines()), 40)
            for r in s.runs:
                with open(os.path.join(results, "runs", r.name, "config.json")) as f:
                    command = json.load(f)["command"]
                self.assertIn(data_dir, command[command.index("--data-dir") + 1:][:1])
            self.assertIn("writing click logs", out.getvalue())
            # A second sweep over the same results reuses the files.
            s = sweep.parse(data, "ctr.toml", _paths.FAKE_LAUNCHER)
            out = io.StringIO()
            runner.run_sweep(s, results, _paths.FAKE_LAUNCHER, 60, out)
            self.assertNotIn("writing click logs", out.getvalue())


class ResumeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.results = os.path.join(self.tmp.name, "results")
        self.log = os.path.join(self.tmp.name, "invocations.txt")
        self.sweep = sweep.parse(SWEEP, "resume.toml", _paths.FAKE_LAUNCHER)

    def tearDown(self):
        self.tmp.cleanup()

    def invocations(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [os.path.basename(l.strip()) for l in f if l.strip()]

    def run_sweep(self, **env):
        env = dict(os.environ, FAKE_LAUNCH_LOG=self.log, **env)
        out = io.StringIO()
        with mock.patch.dict(os.environ, env, clear=True):
            result = runner.run_sweep(self.sweep, self.results, _paths.FAKE_LAUNCHER, 60, out)
        return result, out.getvalue()

    def test_interrupt_then_resume_runs_only_the_rest(self):
        # Seed 3 interrupts the sweep (SIGINT) half-way through writing its files.
        with self.assertRaises(KeyboardInterrupt):
            self.run_sweep(FAKE_LAUNCH_INTERRUPT_SEED="3")
        self.assertEqual(self.invocations(),
                         [".sync-seed1.partial", ".sync-seed2.partial", ".sync-seed3.partial"])
        runs = os.path.join(self.results, "runs")
        self.assertTrue(runner.is_finished(os.path.join(runs, "sync-seed1")))
        self.assertTrue(runner.is_finished(os.path.join(runs, "sync-seed2")))
        self.assertFalse(os.path.exists(os.path.join(runs, "sync-seed3")))
        self.assertTrue(os.path.isdir(os.path.join(runs, ".sync-seed3.partial")))

        os.remove(self.log)
        (ran, skipped, failed), out = self.run_sweep()
        self.assertEqual((ran, skipped, failed), (4, 2, []))
        self.assertEqual(self.invocations(), [".sync-seed3.partial", ".async-seed1.partial",
                                              ".async-seed2.partial", ".async-seed3.partial"])
        self.assertIn("2 of 6 runs already finished", out)
        self.assertIn("run 4/4 async-seed3: ok", out)
        self.assertIn("ETA", out)
        self.assertEqual(sorted(os.listdir(runs)), sorted(r.name for r in self.sweep.runs))

        # Everything finished: a third call runs nothing.
        os.remove(self.log)
        (ran, skipped, _), _ = self.run_sweep()
        self.assertEqual((ran, skipped, self.invocations()), (0, 6, []))

    def test_run_directory_contents(self):
        self.run_sweep()
        d = os.path.join(self.results, "runs", "async-seed2")
        with open(os.path.join(d, "config.json")) as f:
            config = json.load(f)
        self.assertEqual(config["command"][0], _paths.FAKE_LAUNCHER)
        self.assertIn(os.path.join(d, "summary.json"), config["command"])
        self.assertEqual(config["config_name"], "async")
        self.assertEqual(sorted(os.listdir(d)), ["config.json", "launch.log", "metrics-0.jsonl",
                                                 "metrics-1.jsonl", "status.json",
                                                 "summary.json"])
        with open(os.path.join(self.results, "sweep.json")) as f:
            self.assertEqual(json.load(f)["name"], "resume")

    def test_failures_are_recorded_and_redone_on_resume(self):
        (ran, _, failed), out = self.run_sweep(FAKE_LAUNCH_FAIL="async")
        self.assertEqual(ran, 6)
        self.assertEqual(failed, ["async-seed1", "async-seed2", "async-seed3"])
        self.assertIn("FAILED (launcher exited with status 3", out)
        with open(os.path.join(self.results, "runs", "async-seed1", "status.json")) as f:
            status = json.load(f)
        self.assertEqual((status["ok"], status["returncode"]), (False, 3))
        os.remove(self.log)
        (ran, skipped, failed), _ = self.run_sweep()
        self.assertEqual((ran, skipped, failed), (3, 3, []))

    def test_diverged_runs_finish_and_are_recorded_as_diverged(self):
        # The sweep passes --on-nonfinite continue, so a run that diverges finishes (the fake
        # launcher, like the real one, exits 1 without it) and reports finite chance-level
        # numbers with "diverged": true.
        from towerps_experiments import results
        (ran, _, failed), _ = self.run_sweep(FAKE_LAUNCH_DIVERGE="async")
        self.assertEqual((ran, failed), (6, []))
        runs = {r.name: r for r in results.load_results(self.results)}
        self.assertEqual(runs["async-seed1"].final_accuracy, 0.1)
        self.assertTrue(runs["async-seed1"].diverged)
        self.assertFalse(runs["sync-seed1"].diverged)
        stats = {s.name: s for s in results.config_stats(runs.values(), 0.5)}
        self.assertEqual((stats["async"].n_ok, stats["async"].n_diverged), (3, 3))
        self.assertEqual(stats["sync"].n_diverged, 0)

    def test_missing_launcher_is_a_failed_run(self):
        out = io.StringIO()
        _, _, failed = runner.run_sweep(self.sweep, self.results, "/nonexistent/launch", 60, out)
        self.assertEqual(len(failed), 6)
        self.assertIn("cannot start launcher '/nonexistent/launch'", out.getvalue())


if __name__ == "__main__":
    unittest.main()
