"""Plots of a results directory (matplotlib, Agg backend), each written as PNG and SVG."""

import math
import os

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
except ImportError as e:  # name the interpreter: a pyenv python3 may shadow Debian's
    raise ImportError(f"{e}; the plots need Debian's python3-matplotlib and python3-numpy "
                      "(scripts/setup.sh installs them); run with /usr/bin/python3") from e

from . import results as res

FORMATS = ("png", "svg")


def _save(fig, out_dir, stem):
    paths = []
    for ext in FORMATS:
        p = os.path.join(out_dir, f"{stem}.{ext}")
        fig.savefig(p, dpi=110, bbox_inches="tight")
        paths.append(p)
    plt.close(fig)
    return paths


def _eval_curve(run, x_kind):
    mode = run.config.get("mode", "sync")
    xs, ys = [], []
    for e in run.evals:
        acc = res._num(e.get("test_accuracy"))
        if acc is None or e.get("time") is None:
            continue
        xs.append(e["time"] - run.start if x_kind == "time"
                  else res.global_updates_at(run.train, e["time"], mode))
        ys.append(acc)
    return xs, ys


def _loss_curve(run, x_kind):
    mode = run.config.get("mode", "sync")
    xs, ys = [], []
    for l in run.train:
        loss = res._num(l.get("loss"))
        if loss is None or l.get("time") is None:
            continue
        xs.append(l["time"] - run.start if x_kind == "time"
                  else res.global_updates_at(run.train, l["time"], mode))
        ys.append(loss)
    return xs, ys


def _band(curves):
    """Mean and min/max over seeds on a common grid spanning the range all seeds cover; a
    single seed is drawn as is."""
    curves = [(np.asarray(x, float), np.asarray(y, float)) for x, y in curves if len(x) > 0]
    if not curves:
        return None
    if len(curves) == 1:
        x, y = curves[0]
        order = np.argsort(x, kind="stable")
        return x[order], y[order], None, None
    lo = max(x.min() for x, _ in curves)
    hi = min(x.max() for x, _ in curves)
    if not hi > lo:
        x, y = curves[0]
        return x, y, None, None
    grid = np.linspace(lo, hi, 60)
    ys = np.array([np.interp(grid, x[np.argsort(x, kind="stable")], y[np.argsort(x, kind="stable")])
                   for x, y in curves])
    return grid, ys.mean(axis=0), ys.min(axis=0), ys.max(axis=0)


def curve_plot(stats, out_dir, metric, x_kind):
    fig, ax = plt.subplots(figsize=(7, 4.2))
    fn = _eval_curve if metric == "accuracy" else _loss_curve
    drawn = 0
    for s in stats:
        band = _band([fn(r, x_kind) for r in s.runs if r.ok])
        if band is None:
            continue
        x, y, lo, hi = band
        (line,) = ax.plot(x, y, label=s.name, marker="o" if metric == "accuracy" else None,
                          markersize=3)
        if lo is not None:
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2)
        drawn += 1
    ax.set_xlabel("wall-clock seconds since launch" if x_kind == "time"
                  else "global parameter updates")
    ax.set_ylabel("test accuracy" if metric == "accuracy" else "training loss")
    if metric == "loss":
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    if drawn:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no data", ha="center", transform=ax.transAxes)
    ax.set_title(f"{'Test accuracy' if metric == 'accuracy' else 'Training loss'} vs "
                 f"{'time' if x_kind == 'time' else 'updates'} (band: min-max over seeds)")
    return _save(fig, out_dir, f"{metric}_vs_{x_kind}")


def staleness_plot(stats, out_dir):
    """One histogram per mode label, summed over the runs that report one."""
    by_mode = {}
    for s in stats:
        for r in s.runs:
            h = r.summary.get("staleness_histogram") if r.ok else None
            if isinstance(h, list) and h:
                label = r.config.get("mode_label", r.config.get("mode", "?"))
                acc = by_mode.setdefault(label, [0] * len(h))
                if len(acc) < len(h):
                    acc.extend([0] * (len(h) - len(acc)))
                for i, c in enumerate(h):
                    acc[i] += int(c)
    n = max(1, len(by_mode))
    fig, axes = plt.subplots(n, 1, figsize=(7, 1.8 * n + 0.6), squeeze=False)
    if not by_mode:
        axes[0][0].text(0.5, 0.5, "no staleness histograms in the summaries", ha="center",
                        transform=axes[0][0].transAxes)
    for ax, (label, hist) in zip(axes[:, 0], sorted(by_mode.items())):
        total = sum(hist) or 1
        ax.bar(range(len(hist)), [c / total for c in hist], width=0.8)
        ax.set_ylabel("fraction")
        ax.set_title(f"{label} (last bucket: >= {len(hist) - 1})", fontsize=9)
    axes[-1][0].set_xlabel("staleness of applied update")
    fig.tight_layout()
    return _save(fig, out_dir, "staleness_histogram")


def _bars(stats, out_dir, stem, values, errs, ylabel, title, notes=None):
    fig, ax = plt.subplots(figsize=(max(5, 0.7 * len(stats) + 2), 4))
    names = [s.name for s in stats]
    heights = [v if v is not None and math.isfinite(v) else 0.0 for v in values]
    ax.bar(range(len(names)), heights, yerr=[e or 0.0 for e in errs], capsize=3)
    for i, note in enumerate(notes or []):
        if note:
            ax.text(i, 0, note, ha="center", va="bottom", rotation=90, fontsize=8)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    return _save(fig, out_dir, stem)


def throughput_plot(stats, out_dir):
    return _bars(stats, out_dir, "throughput", [s.throughput[0] for s in stats],
                 [s.throughput[1] for s in stats], "examples / second",
                 "Throughput per configuration (mean, std over seeds)")


def time_to_target_plot(stats, out_dir, target):
    notes = [None if s.n_reached else "not reached" for s in stats]
    return _bars(stats, out_dir, "time_to_target", [s.time_to_target[0] for s in stats],
                 [s.time_to_target[1] for s in stats], "seconds",
                 f"Time to test accuracy {target:g} (seeds that reached it)", notes)


def make_all(stats, out_dir, target):
    """Writes every plot under out_dir; returns {plot stem: [png path, svg path]}."""
    os.makedirs(out_dir, exist_ok=True)
    made = {}
    for metric in ("accuracy", "loss"):
        for x_kind in ("time", "updates"):
            made[f"{metric}_vs_{x_kind}"] = curve_plot(stats, out_dir, metric, x_kind)
    made["staleness_histogram"] = staleness_plot(stats, out_dir)
    made["throughput"] = throughput_plot(stats, out_dir)
    made["time_to_target"] = time_to_target_plot(stats, out_dir, target)
    return made
