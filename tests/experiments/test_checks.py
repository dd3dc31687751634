"""Checks with their own accuracy target (time_to_target), the test_loss metric, negative
margins (tolerances), and every preset against the real launcher."""
import math
import os
import unittest

import _paths
from towerps_experiments import checks, results, sweep


def run(config, seed, evals, loss=0.4, diverged=False):
    """A finished run: evals are (seconds after launch, test accuracy) pairs."""
    return results.RunResult(
        name=f"{config}-seed{seed}", path="", status={"ok": True, "started_at": 100.0},
        config={"config_name": config, "seed": seed, "mode": "sync"},
        summary={"test_accuracy": evals[-1][1], "test_loss": loss, "diverged": diverged},
        evals=[{"time": 100.0 + t, "test_accuracy": a} for t, a in evals])


def stats(*runs):
    return {s.name: s for s in results.config_stats(list(runs), 0.8)}


TIME = {"kind": "compare", "metric": "time_to_target", "left": "async", "op": "<",
        "right": "sync"}


class TargetTest(unittest.TestCase):
    # async is at 0.80 first (2 s against 4 s) but never at 0.86; sync gets there at 8 s.
    STATS = stats(*[run("async", s, [(2, 0.80), (6, 0.84), (9, 0.85)]) for s in (1, 2, 3)],
                  *[run("sync", s, [(4, 0.80), (8, 0.86), (12, 0.87)]) for s in (1, 2, 3)])

    def test_each_check_has_its_own_target(self):
        loose = checks.evaluate(dict(TIME, target=0.80), self.STATS)
        self.assertIs(loose.passed, True)
        self.assertEqual(loose.values, {"async": 2.0, "sync": 4.0})
        self.assertEqual(loose.metric, "time_to_target 0.8")
        self.assertIn("time_to_target 0.8: async = 2, sync = 4", loose.detail)
        tight = checks.evaluate(dict(TIME, target=0.86), self.STATS)
        self.assertIs(tight.passed, False)
        self.assertEqual(tight.values, {"async": math.inf, "sync": 8.0})
        self.assertIn("async = not reached", tight.detail)
        # Without a target of its own, the sweep's (0.8 here) applies.
        self.assertEqual(checks.evaluate(TIME, self.STATS).values, {"async": 2.0, "sync": 4.0})

    def test_a_seed_that_never_reaches_it_makes_the_mean_infinite(self):
        st = stats(run("async", 1, [(2, 0.86)]), run("async", 2, [(3, 0.70)]),
                   run("sync", 1, [(4, 0.86)]), run("sync", 2, [(5, 0.86)]))
        c = checks.evaluate(dict(TIME, target=0.86), st)
        self.assertEqual(c.values["async"], math.inf)
        self.assertEqual([s.held for s in c.seeds], [True, False])
        self.assertIs(c.passed, False)

    def test_bad_targets_are_refused(self):
        names = {"async", "sync"}
        for bad in (0, 1.5, "0.8", True):
            with self.assertRaises(checks.CheckError) as cm:
                checks.validate(dict(TIME, target=bad), "f: checks[0]", names)
            self.assertIn(f"key 'target' = {bad!r}: must be an accuracy in (0, 1]",
                          str(cm.exception))
        with self.assertRaises(checks.CheckError) as cm:
            checks.validate(dict(TIME, metric="final_accuracy", target=0.8), "f: checks[0]",
                            names)
        self.assertIn("only a time_to_target check takes a target", str(cm.exception))


class TestLossAndToleranceTest(unittest.TestCase):
    def test_test_loss_counts_a_diverged_run_as_infinite(self):
        st = stats(run("s0", 1, [(1, 0.8)], loss=0.45), run("s0", 2, [(1, 0.8)], loss=0.47),
                   run("s8", 1, [(1, 0.8)], loss=0.44), run("s8", 2, [(1, 0.1)], diverged=True))
        self.assertAlmostEqual(st["s0"].test_loss, 0.46)
        self.assertEqual(st["s8"].test_loss, math.inf)
        rising = {"kind": "monotonic", "metric": "test_loss", "configs": ["s0", "s8"],
                  "direction": "increasing"}
        c = checks.evaluate(rising, st)
        self.assertIs(c.mean_passed, True)
        self.assertEqual([s.held for s in c.seeds], [False, True])  # 0.44 < 0.45 on seed 1

    def test_a_negative_margin_is_a_tolerance(self):
        st = stats(run("salr", 1, [(1, 0.83)]), run("sync", 1, [(1, 0.85)]))
        within = {"kind": "compare", "metric": "final_accuracy", "left": "salr", "op": ">",
                  "right": "sync", "margin": -0.03}
        c = checks.evaluate(within, st)
        self.assertIs(c.passed, True)
        self.assertIn("expected salr > sync - 0.03", c.detail)
        self.assertIs(checks.evaluate(dict(within, margin=-0.01), st).passed, False)
        below = dict(within, op="<", left="sync", right="salr")
        self.assertIn("expected sync < salr + 0.03", checks.evaluate(below, st).detail)


class EdgeCaseTest(unittest.TestCase):
    def test_equal_infinities_do_not_break_a_monotonic_check(self):
        # Two diverged configurations (infinite test loss) in a row are equal, not a fall.
        st = stats(run("s0", 1, [(1, 0.8)], loss=0.45), run("s2", 1, [(1, 0.1)], diverged=True),
                   run("s8", 1, [(1, 0.1)], diverged=True))
        rising = {"kind": "monotonic", "metric": "test_loss", "configs": ["s0", "s2", "s8"],
                  "direction": "increasing"}
        c = checks.evaluate(rising, st)
        self.assertIs(c.passed, True)
        self.assertIn("s2 = inf (diverged or missing)", c.detail)

    def test_margins_tolerances_and_fractions_must_be_finite_numbers(self):
        names = {"async", "sync"}
        for key, bad in (("margin", True), ("margin", float("nan")), ("margin", "0.1"),
                         ("tolerance", float("inf"))):
            check = dict(TIME, **{key: bad})
            if key == "tolerance":
                check = {"kind": "between", "metric": "throughput", "value": "async",
                         "low": "sync", "high": "sync", key: bad}
            with self.assertRaises(checks.CheckError) as cm:
                checks.validate(check, "f: checks[0]", names)
            self.assertIn(f"key '{key}' = {bad!r}: must be a finite number", str(cm.exception))


@unittest.skipUnless(os.access(_paths.REAL_LAUNCHER, os.X_OK),
                     "TOWERPS_LAUNCH_BIN (set by CTest) is not a built towerps-launch")
class PresetsTest(unittest.TestCase):
    def test_every_preset_parses_with_three_seeds_and_known_configurations(self):
        presets = os.path.join(_paths.REPO, "experiments", "presets")
        names = sorted(f for f in os.listdir(presets) if f.endswith(".toml"))
        self.assertEqual(names, ["backup.toml", "embeddings.toml", "race.toml", "race_wide.toml",
                                 "ssp.toml", "ssp_wide.toml", "staleness.toml"])
        for name in names:
            s = sweep.load(os.path.join(presets, name), _paths.REAL_LAUNCHER)
            self.assertGreaterEqual(len(s.source["seeds"]), 3, name)
            self.assertTrue(s.checks, name)


if __name__ == "__main__":
    unittest.main()
