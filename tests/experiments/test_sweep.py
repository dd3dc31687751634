import unittest

import _paths  # noqa: F401
from towerps_experiments import sweep

BASE = {"name": "t", "workers": [4, 8], "seeds": [1, 2],
        "modes": [{"mode": "sync"}, {"mode": "sync", "backup_workers": 1}, {"mode": "async"},
                  {"mode": "async", "staleness_aware_lr": True},
                  {"mode": "ssp", "staleness": [0, 4]}]}


def parse(**changes):
    data = dict(BASE, **changes)
    return sweep.parse(data, "t.toml")


class ExpansionTest(unittest.TestCase):
    def test_cross_product_and_names(self):
        s = parse()
        self.assertEqual(len(s.runs), 6 * 2 * 2)  # 6 modes x 2 worker counts x 2 seeds
        configs = sorted({r.config_name for r in s.runs})
        self.assertEqual(configs, sorted(
            f"{m}-w{n}" for m in ("sync", "sync-b1", "async", "async-salr", "ssp-s0", "ssp-s4")
            for n in (4, 8)))
        self.assertIn("ssp-s4-w8-seed2", [r.name for r in s.runs])

    def test_single_valued_axes_stay_out_of_names(self):
        s = parse(workers=[8], lrs=[0.01], stragglers=[{"straggler": "3:40ms"}])
        self.assertEqual(sorted({r.config_name for r in s.runs})[0], "async")

    def test_straggler_axis_and_mode_lr_in_names(self):
        s = parse(workers=[4], modes=[{"mode": "async", "lr": 0.01, "name": "async-low"}],
                  stragglers=[{}, {"straggler": "3:40ms"}])
        self.assertEqual(sorted({r.config_name for r in s.runs}),
                         ["async-low-lr0.01-3_40ms", "async-low-lr0.01-none"])

    def test_command_line(self):
        s = parse(workers=[8], seeds=[5], options={"servers": 2, "log_every": 20},
                  stragglers=[{"straggler": "7:40ms", "slow_workers": "1:3"}])
        cmds = {r.config_name: r.command("L", "/r") for r in s.runs}
        backup = cmds["sync-b1"]
        self.assertEqual(backup[backup.index("--replicas-to-aggregate") + 1], "7")
        self.assertNotIn("--replicas-to-aggregate", cmds["sync"])
        self.assertIn("--staleness-aware-lr", cmds["async-salr"])
        ssp = cmds["ssp-s4"]
        self.assertEqual(ssp[ssp.index("--staleness") + 1], "4")
        for flag, value in (("--seed", "5"), ("--servers", "2"), ("--straggler", "7:40ms"),
                            ("--slow-workers", "1:3"), ("--log-every", "20"),
                            ("--metrics-out", "/r/metrics-{rank}.jsonl"),
                            ("--summary-out", "/r/summary.json")):
            self.assertEqual(backup[backup.index(flag) + 1], value, flag)
        self.assertEqual(backup[0], "L")


class ErrorTest(unittest.TestCase):
    def assertBad(self, fragment_list, **changes):
        with self.assertRaises(sweep.SweepError) as cm:
            parse(**changes)
        for fragment in fragment_list:
            self.assertIn(fragment, str(cm.exception))

    def test_bad_values_are_named(self):
        self.assertBad(["'mode'", "'asinc'"], modes=[{"mode": "asinc"}])
        self.assertBad(["'workers'", "0"], workers=[0])
        self.assertBad(["'backup_workers'", "4", "workers = 4"], workers=[4],
                       modes=[{"mode": "sync", "backup_workers": 4}])
        self.assertBad(["'staleness'"], modes=[{"mode": "ssp"}])
        self.assertBad(["'staleness'", "only ssp"], modes=[{"mode": "async", "staleness": 2}])
        self.assertBad(["'straggler'", "'slow'"], stragglers=[{"straggler": "slow"}])
        self.assertBad(["'lrs'", "'x'"], lrs=["x"])
        self.assertBad(["'epoch'"], epoch=[1])
        self.assertBad(["options", "'optimiser'"], options={"optimiser": "sgd"})
        self.assertBad(["'seeds'", "must not repeat"], seeds=[1, 1])

    def test_bad_check_is_named(self):
        from towerps_experiments import checks
        with self.assertRaises(checks.CheckError) as cm:
            parse(checks=[{"kind": "compare", "metric": "final_accuracy", "left": "sync-w4",
                           "op": ">", "right": "nope"}])
        self.assertIn("'right' = 'nope'", str(cm.exception))

    def test_toml_file(self):
        import os
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "s.toml")
            with open(p, "w") as f:
                f.write('workers = [2]\n[[modes]]\nmode = "ssp"\nstaleness = [1, 2]\n')
            s = sweep.load(p)
            self.assertEqual(s.name, "s")
            self.assertEqual([r.name for r in s.runs], ["ssp-s1-seed1", "ssp-s2-seed1"])
            with open(p, "w") as f:
                f.write("workers = [2\n")
            with self.assertRaises(sweep.SweepError) as cm:
                sweep.load(p)
            self.assertIn("not valid TOML", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
