import os
import unittest

import _paths
from towerps_experiments import sweep

BASE = {"name": "t", "workers": [4, 8], "seeds": [1, 2],
        "modes": [{"mode": "sync"}, {"mode": "sync", "backup_workers": 1}, {"mode": "async"},
                  {"mode": "async", "staleness_aware_lr": True},
                  {"mode": "ssp", "staleness": [0, 4]}]}


def parse(launcher=_paths.FAKE_LAUNCHER, **changes):
    data = dict(BASE, **changes)
    return sweep.parse(data, "t.toml", launcher)


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
        # A diverged run is a result to record, not a failure.
        for cmd in cmds.values():
            self.assertEqual(cmd[cmd.index("--on-nonfinite") + 1], "continue")


class WorkerCmdTest(unittest.TestCase):
    def test_a_sweep_of_pytorch_workers_runs_the_script_and_names_its_model_freely(self):
        s = parse(workers=[2], seeds=[1], modes=[{"mode": "async"}],
                  options={"worker_cmd": "python3 train.py --epochs 1"})
        cmd = s.runs[0].command("L", "/r")
        self.assertEqual(cmd[cmd.index("--worker-cmd") + 1], "python3 train.py --epochs 1")
        self.assertEqual(cmd[cmd.index("--model") + 1], "pytorch")
        s = parse(workers=[2], seeds=[1], modes=[{"mode": "async"}], models=["my_net"],
                  options={"worker_cmd": "python3 train.py"})
        self.assertEqual(s.runs[0].model, "my_net")

    def test_load_takes_the_script_from_the_command_line(self):
        import json
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(dict(BASE, workers=[2], seeds=[1], modes=[{"mode": "sync"}],
                           options={"servers": 1}), f)
        try:
            s = sweep.load(f.name, _paths.FAKE_LAUNCHER, worker_cmd="python3 t.py")
        finally:
            os.unlink(f.name)
        cmd = s.runs[0].command("L", "/r")
        self.assertEqual(cmd[cmd.index("--worker-cmd") + 1], "python3 t.py")
        self.assertEqual(cmd[cmd.index("--servers") + 1], "1")
        self.assertEqual(s.source["options"]["worker_cmd"], "python3 t.py")  # recorded

    def test_without_a_script_the_model_must_be_the_launchers(self):
        with self.assertRaises(sweep.SweepError):
            parse(workers=[2], seeds=[1], modes=[{"mode": "async"}], models=["my_net"])


class SoftsyncModeTest(unittest.TestCase):
    def test_softsync_n_is_an_axis_of_the_mode(self):
        s = parse(workers=[4], seeds=[1],
                  modes=[{"mode": "softsync", "softsync_n": [1, 4]},
                         {"mode": "softsync", "softsync_n": 2, "staleness_aware_lr": True}])
        cmds = {r.config_name: r.command("L", "/r") for r in s.runs}
        self.assertEqual(sorted(cmds), ["softsync-n1", "softsync-n2-salr", "softsync-n4"])
        n4 = cmds["softsync-n4"]
        self.assertEqual(n4[n4.index("--softsync-n") + 1], "4")
        self.assertIn("--staleness-aware-lr", cmds["softsync-n2-salr"])
        with self.assertRaises(sweep.SweepError) as cm:
            parse(modes=[{"mode": "softsync"}])
        self.assertIn("softsync needs n", str(cm.exception))
        with self.assertRaises(sweep.SweepError) as cm:
            parse(modes=[{"mode": "async", "softsync_n": 2}])
        self.assertIn("only softsync takes n", str(cm.exception))


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
        self.assertBad(["'straggler'", "'slow'", "is not RANK:DELAY"],
                       stragglers=[{"straggler": "slow"}])
        self.assertBad(["stragglers[1]", "'straggler_dist'", "'gauss:1ms'"],
                       stragglers=[{}, {"straggler_dist": "gauss:1ms"}])
        self.assertBad(["'models'", "'resnet'", "mlp, cnn, cifar10"], models=["resnet"])
        self.assertBad(["'dataset'", "'mnist'"], options={"dataset": "mnist"})
        self.assertBad(["'optimizer'", "'rmsprop'"], options={"optimizer": "rmsprop"})
        self.assertBad(["'lr_schedule'", "'cosine'"], options={"lr_schedule": "cosine"})
        self.assertBad(["'lrs'", "'x'"], lrs=["x"])
        self.assertBad(["'epoch'"], epoch=[1])
        self.assertBad(["options", "'optimiser'"], options={"optimiser": "sgd"})
        self.assertBad(["'seeds'", "must not repeat"], seeds=[1, 1])

    def test_metric_and_click_logs(self):
        s = parse()
        self.assertEqual((s.metric, s.ctr_data), ("accuracy", None))
        s = parse(metric="auc", ctr_data={"train": 1000, "test": 200, "seed": 2})
        self.assertEqual((s.metric, s.ctr_data), ("auc", {"train": 1000, "test": 200, "seed": 2}))
        self.assertBad(["'metric'", "'f1'", "accuracy, auc"], metric="f1")
        self.assertBad(["ctr_data", "'rows'", "unknown key"], ctr_data={"rows": 3})
        self.assertBad(["ctr_data", "'train'", "-1"], ctr_data={"train": -1})
        self.assertBad(["'ctr_data'", "must be a table"], ctr_data=[1])

    def test_straggler_rank_is_checked_against_every_worker_count(self):
        self.assertEqual(len(parse(workers=[4], stragglers=[{"straggler": "3:40ms"}]).runs), 12)
        self.assertBad(["'straggler'", "'3:40ms'", "rank 3"], workers=[2, 4],
                       stragglers=[{"straggler": "3:40ms"}])

    def test_a_launcher_that_cannot_answer_is_reported(self):
        with self.assertRaises(sweep.LauncherError) as cm:
            parse(launcher="/nonexistent/towerps-launch")
        self.assertIn("/nonexistent/towerps-launch", str(cm.exception))
        with self.assertRaises(sweep.LauncherError) as cm:
            parse(launcher="/bin/false")
        self.assertIn("--list-choices exited with status 1", str(cm.exception))

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
            s = sweep.load(p, _paths.FAKE_LAUNCHER)
            self.assertEqual(s.name, "s")
            self.assertEqual([r.name for r in s.runs], ["ssp-s1-seed1", "ssp-s2-seed1"])
            with open(p, "w") as f:
                f.write("workers = [2\n")
            with self.assertRaises(sweep.SweepError) as cm:
                sweep.load(p, _paths.FAKE_LAUNCHER)
            self.assertIn("not valid TOML", str(cm.exception))


REAL_LAUNCHER = _paths.REAL_LAUNCHER


@unittest.skipUnless(os.access(REAL_LAUNCHER, os.X_OK),
                     "TOWERPS_LAUNCH_BIN (set by CTest) is not a built towerps-launch")
class RealLauncherTest(unittest.TestCase):
    """The choices and the straggler grammar come from the real towerps-launch."""

    def test_choices_come_from_the_binary(self):
        choices = sweep.launcher_choices(REAL_LAUNCHER)
        self.assertEqual(choices["modes"], ["sync", "async", "ssp", "softsync"])
        self.assertIn("cifar10", choices["models"])
        self.assertIn("synthetic", choices["datasets"])
        self.assertIn("adam", choices["optimizers"])
        self.assertIn("exponential", choices["lr_schedules"])
        self.assertEqual(len(parse(REAL_LAUNCHER, models=["cnn"]).runs), 24)

    def test_the_launcher_checks_straggler_settings(self):
        s = parse(REAL_LAUNCHER, workers=[4], stragglers=[
            {"straggler": "3:40ms"}, {"straggler_dist": "uniform:0ms:20ms"},
            {"slow_workers": "1:3"}])
        self.assertEqual(len(s.runs), 6 * 3 * 2)
        for bad, message in (({"straggler": "3:40parsecs"}, "--straggler delay"),
                             ({"straggler": "4:1ms"}, "--straggler rank 4"),
                             ({"straggler_dist": "uniform:30ms:10ms"}, "HI is below LO"),
                             ({"slow_workers": "1:0.5"}, "FACTOR between 1 and 1000")):
            with self.assertRaises(sweep.SweepError) as cm:
                parse(REAL_LAUNCHER, workers=[4], stragglers=[bad])
            self.assertIn(message, str(cm.exception))
            self.assertIn(repr(next(iter(bad.values()))), str(cm.exception))


if __name__ == "__main__":
    unittest.main()
