import os
import unittest

import _paths
from towerps_experiments import plots, results


def run(name, mode, train, evals=(), **summary):
    """A finished run of configuration `mode` started at time 0, batch 64, 4 workers."""
    config = {"config_name": mode, "mode": mode, "mode_label": mode, "workers": 4}
    summary = dict({"mode": mode, "workers": 4, "batch_size": 64, "diverged": False,
                    "test_accuracy": 0.8, "test_loss": 0.5, "final_train_loss": 0.5}, **summary)
    return results.RunResult(name, "", config, {"ok": True, "started_at": 0.0}, summary,
                             list(train), list(evals))


def curves(fig):
    """{legend label: the Line2D drawn with it}, and the 'x' (divergence) markers drawn."""
    ax = fig.axes[0]
    labelled = {l.get_label(): l for l in ax.get_lines() if not l.get_label().startswith("_")}
    crosses = [l for l in ax.get_lines() if l.get_marker() == "x"]
    return labelled, crosses


class PlotsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        runs = results.load_results(os.path.join(_paths.DATA, "small_results"))
        cls.stats = results.config_stats(runs, 0.85)
        cls.runs = {r.name: r for r in runs}

    def tearDown(self):
        plots.plt.close("all")

    def test_accuracy_markers_only_at_evaluations(self):
        fig = plots.curve_figure(self.stats, "accuracy", "time")
        lines, crosses = curves(fig)
        # Each finished run's evaluations (times since launch): markers there and nowhere else.
        self.assertEqual({k: list(l.get_xdata()) for k, l in lines.items()},
                         {"sync-seed1": [5.0, 10.0], "sync-seed2": [4.0, 8.0],
                          "async-seed1 (diverged)": [3.0], "async-seed2": [3.0, 6.0]})
        self.assertTrue(all(l.get_marker() == "o" for l in lines.values()))
        self.assertEqual(list(lines["sync-seed2"].get_ydata()), [0.82, 0.88])
        self.assertEqual(crosses, [])  # no evaluation was NaN
        # One colour per configuration.
        self.assertEqual(lines["sync-seed1"].get_color(), lines["sync-seed2"].get_color())
        self.assertNotEqual(lines["sync-seed1"].get_color(), lines["async-seed2"].get_color())

    def test_diverged_run_drawn_up_to_divergence(self):
        # async-seed1 logs losses 2.0 and 1.0 at 2.5 s and 5 s, then NaN.
        lines, crosses = curves(plots.curve_figure(self.stats, "loss", "time"))
        diverged = lines["async-seed1 (diverged)"]
        self.assertEqual(list(diverged.get_xdata()), [2.5, 5.0])
        self.assertEqual([(list(c.get_xdata()), list(c.get_ydata())) for c in crosses],
                         [([5.0], [1.0])])
        self.assertEqual(crosses[0].get_color(), diverged.get_color())
        self.assertIsNone(plots.run_series(self.runs["async-seed2"], "loss", "time").diverged_at)

    def test_run_diverged_from_the_start_is_drawn(self):
        # Every loss null (NaN before the first log line): listed, with an 'x' on the top edge
        # where the first NaN was logged.
        nan = [{"time": t, "worker": 0, "step": 20 * t, "loss": None} for t in (1.0, 2.0)]
        ok = [{"time": t, "worker": 0, "step": 20 * t, "loss": 1.0 / t} for t in (1.0, 2.0)]
        stats = results.config_stats([run("async-seed1", "async", nan, diverged=True),
                                      run("sync-seed1", "sync", ok)], 0.85)
        fig = plots.curve_figure(stats, "loss", "time")
        lines, crosses = curves(fig)
        self.assertEqual(sorted(lines), ["async-seed1 (diverged)", "sync-seed1"])
        self.assertEqual(len(lines["async-seed1 (diverged)"].get_xdata()), 0)
        self.assertEqual(len(crosses), 1)
        self.assertEqual(list(crosses[0].get_xdata()), [1.0])
        self.assertEqual(list(crosses[0].get_ydata()), [1.0])  # axes fraction: the top edge
        self.assertIsNot(crosses[0].get_transform(), fig.axes[0].transData)
        # A run with nothing at all to draw is still in the legend.
        stats = results.config_stats([run("sync-seed2", "sync", [])], 0.85)
        lines, _ = curves(plots.curve_figure(stats, "accuracy", "examples"))
        self.assertEqual(list(lines), ["sync-seed2 (no data)"])

    def test_examples_axis(self):
        # Sync: step x batch 64 x 4 workers; async: each worker's own steps summed, x 64.
        sync, async_ = self.runs["sync-seed1"], self.runs["async-seed2"]
        self.assertEqual(plots.run_series(sync, "loss", "examples").x,
                         [12800, 25600, 38400, 51200])
        self.assertEqual(plots.run_series(sync, "accuracy", "examples").x, [51200, 102400])
        self.assertEqual(plots.run_series(async_, "loss", "examples").x,
                         [3200, 6400, 9600, 12800])
        # Evaluations at 3 s and 6 s, between the worker's lines at 2.5 s (step 50), 5 s (100)
        # and 7.5 s (150): steps 60 and 120 by interpolation, not the 50 and 100 last logged.
        self.assertEqual(plots.run_series(async_, "accuracy", "examples").x, [3840, 7680])
        # The final evaluation, after every train line, waited for every worker's last update:
        # each of the 4 has done the summary's 30 steps, though the last one logged was 20.
        train = [{"time": 1.0, "worker": w, "step": 10} for w in range(4)] + \
                [{"time": 2.0, "worker": w, "step": 20} for w in range(4)]
        evals = [{"time": 1.5, "test_accuracy": 0.5}, {"time": 3.0, "test_accuracy": 0.7}]
        finished = run("softsync-seed1", "softsync", train, evals, steps=30)
        self.assertEqual(plots.run_series(finished, "accuracy", "examples").x,
                         [4 * 15 * 64, 4 * 30 * 64])
        fig = plots.curve_figure(self.stats, "loss", "examples")
        self.assertIn("examples processed", fig.axes[0].get_xlabel())
        self.assertIn("vs examples processed", fig.axes[0].get_title())

    def test_staleness_axes_start_at_zero(self):
        fig = plots.staleness_figure(self.stats)
        self.assertEqual([ax.get_title() for ax in fig.axes],
                         ["async: 200 updates", "sync: 200 updates"])
        for ax in fig.axes:
            self.assertEqual(ax.get_xlim(), (0.0, 4.0))  # up to the largest staleness, 3
            self.assertEqual(ax.get_ylim()[0], 0.0)
        sync_bars = [(p.get_x(), p.get_height()) for p in fig.axes[1].patches
                     if p.get_height() > 0]
        self.assertEqual(sync_bars, [(0.0, 1.0)])

    def test_sync_only_staleness_is_one_bar_at_zero(self):
        stats = results.config_stats([run("sync-seed1", "sync", [],
                                          staleness_histogram=[500])], 0.85)
        (ax,) = plots.staleness_figure(stats).axes
        self.assertEqual(ax.get_xlim(), (0.0, 1.0))
        self.assertEqual(ax.get_ylim()[0], 0.0)
        self.assertEqual([(p.get_x(), p.get_height()) for p in ax.patches], [(0.0, 1.0)])
        self.assertEqual([t.get_text() for t in ax.get_xticklabels()], ["0"])
        # A full-length histogram's last bucket is open-ended, and the title says so.
        stats = results.config_stats([run("async-seed1", "async", [],
                                          staleness_histogram=[1] * 64)], 0.85)
        (ax,) = plots.staleness_figure(stats).axes
        self.assertEqual(ax.get_title(), "async: 64 updates; the last bar counts >= 63: 1")
        # Drawn and labelled, however small its fraction: the x axis reaches it.
        self.assertGreaterEqual(ax.get_xlim()[1], 64)
        self.assertIn(">= 63: 1", [t.get_text() for t in ax.texts])


if __name__ == "__main__":
    unittest.main()
