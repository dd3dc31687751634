"""Plots of a results directory (matplotlib, Agg backend), each written as PNG and SVG."""

import math
import os
from dataclasses import dataclass

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
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


# The servers' staleness buckets (ps/server/server_stats.h kStalenessBuckets): the last one counts
# that staleness or more. Summaries drop trailing empty buckets, so only a full-length
# histogram has that open-ended bucket.
STALENESS_BUCKETS = 64
X_LABELS = {"time": "wall-clock seconds since launch",
            "examples": "training examples processed, all workers (batches x batch size)"}
SEED_STYLES = ("-", "--", ":", "-.")


@dataclass
class Series:
    x: list            # where each value was recorded, up to the first non-finite one
    y: list
    diverged_at: float  # x of the first NaN or infinite value; None if there was none


def run_series(run, metric, x_kind):
    """One run's curve: the test score (accuracy, or AUC: RunResult.score_key) at each of its
    evaluations ("accuracy"), or the training loss of each train line of every worker in time
    order ("loss"), against seconds since launch ("time") or training examples processed
    ("examples", RunResult.examples_at). It stops at the first null (NaN or infinite) value."""
    lines, key = (run.evals, run.score_key) if metric == "accuracy" else (run.train, "loss")
    xs, ys = [], []
    for l in lines:
        if l.get("time") is None:
            continue
        x = l["time"] - run.start if x_kind == "time" else run.examples_at(l)
        if x is None:
            continue
        y = res._num(l.get(key))
        if y is None:
            return Series(xs, ys, x)
        xs.append(x)
        ys.append(y)
    return Series(xs, ys, None)


def curve_figure(stats, metric, x_kind, score="accuracy"):
    """Test accuracy ("accuracy") or training loss ("loss") of every finished run against
    seconds since launch ("time") or training examples processed ("examples", comparable
    across sync and async), one line per seed, one colour per configuration. Accuracy has a
    marker at each evaluation and none elsewhere. A run whose values turned NaN or infinite is
    drawn up to its last finite value, which gets an 'x' (with no finite value, the 'x' sits
    on the top edge where the first non-finite one was logged); it and any run whose summary
    says it diverged are labelled "(diverged)". A run with nothing to draw is still listed,
    as "(no data)". Failed runs are not drawn (the report lists them)."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    accuracy = metric == "accuracy"
    runs = 0
    for i, s in enumerate(stats):
        color = f"C{i % 10}"
        for j, r in enumerate(r for r in s.runs if r.ok):
            ser = run_series(r, metric, x_kind)
            label = r.name
            if r.diverged or ser.diverged_at is not None:
                label += " (diverged)"
            elif not ser.x:
                label += " (no data)"
            ax.plot(ser.x, ser.y, color=color, linestyle=SEED_STYLES[j % len(SEED_STYLES)],
                    marker="o" if accuracy else None, markersize=3, label=label)
            cross = dict(color=color, marker="x", markersize=8, markeredgewidth=2,
                         linestyle="none")
            if ser.diverged_at is not None and ser.x:
                ax.plot(ser.x[-1:], ser.y[-1:], **cross)
            elif ser.diverged_at is not None:
                ax.plot([ser.diverged_at], [1.0], transform=ax.get_xaxis_transform(),
                        clip_on=False, **cross)
            runs += 1
    ax.set_xlabel(X_LABELS[x_kind])
    ax.set_ylabel(f"test {score}" if accuracy else "training loss")
    if not accuracy:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    if runs:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no data", ha="center", transform=ax.transAxes)
    ax.set_title(f"{'Test ' + score if accuracy else 'Training loss'} vs "
                 f"{'time' if x_kind == 'time' else 'examples processed'}\n"
                 "(one line per seed; x: last finite value before NaN/inf)", fontsize=10)
    return fig


def curve_stem(metric, x_kind, label="accuracy"):
    """"accuracy_vs_time", "auc_vs_examples", "loss_vs_time"..."""
    return f"{metric if metric == 'loss' else label.lower()}_vs_{x_kind}"


def curve_plot(stats, out_dir, metric, x_kind, label="accuracy"):
    return _save(curve_figure(stats, metric, x_kind, label), out_dir,
                 curve_stem(metric, x_kind, label))


def staleness_histograms(stats, key="staleness_histogram"):
    """{mode label: the summaries' histogram `key` (the dense updates' staleness, or
    "row_staleness_histogram": the tables' rows') summed over that mode's finished runs}."""
    by_mode = {}
    for s in stats:
        for r in s.runs:
            h = r.summary.get(key) if r.ok else None
            if isinstance(h, list) and h:
                label = r.config.get("mode_label", r.config.get("mode", "?"))
                acc = by_mode.setdefault(label, [])
                acc.extend([0] * (len(h) - len(acc)))
                for i, c in enumerate(h):
                    acc[i] += int(c)
    return by_mode


def staleness_figure(stats, key="staleness_histogram",
                     what="staleness of applied update (versions behind)", unit="updates"):
    """The staleness of applied updates, one panel per mode label (staleness_histograms): the
    bar over [s, s+1), labelled s, is the fraction of updates s versions behind. Both axes
    start at 0; the panels share the x axis, which ends after the largest staleness seen (at
    least 1), so a sync run is one bar at 0."""
    by_mode = staleness_histograms(stats, key)
    hi = max([1] + [max(i for i, c in enumerate(h) if c) + 1 for h in by_mode.values() if any(h)])
    n = max(1, len(by_mode))
    fig, axes = plt.subplots(n, 1, figsize=(7, 1.8 * n + 0.6), squeeze=False, sharex=True)
    if not by_mode:
        axes[0][0].text(0.5, 0.5, "no staleness histograms in the summaries", ha="center",
                        transform=axes[0][0].transAxes)
    for ax, (label, hist) in zip(axes[:, 0], sorted(by_mode.items())):
        total = sum(hist)
        ax.bar(range(len(hist)), [c / (total or 1) for c in hist], width=1, align="edge",
               edgecolor="white", linewidth=0.5)
        ax.set_ylim(bottom=0)
        ax.set_ylabel("fraction")
        last = ""
        if len(hist) >= STALENESS_BUCKETS and hist[-1]:
            # The open-ended bucket, labelled with its count: a small fraction draws no bar.
            last = f"; the last bar counts >= {len(hist) - 1}: {hist[-1]}"
            ax.annotate(f">= {len(hist) - 1}: {hist[-1]}", (len(hist) - 0.5, hist[-1] / total),
                        ha="right", va="bottom", fontsize=8)
        ax.set_title(f"{label}: {total} {unit}{last}", fontsize=9)
    bottom = axes[-1][0]
    bottom.set_xlim(0, hi)
    ticks = [int(t) for t in MaxNLocator(integer=True).tick_values(0, max(1, hi - 1))
             if 0 <= t < hi]
    bottom.set_xticks([t + 0.5 for t in ticks], [str(t) for t in ticks])
    bottom.set_xlabel(what)
    fig.tight_layout()
    return fig


def staleness_plot(stats, out_dir):
    return _save(staleness_figure(stats), out_dir, "staleness_histogram")


def row_staleness_plot(stats, out_dir):
    return _save(staleness_figure(stats, "row_staleness_histogram",
                                  "row staleness (the row's updates between its pull and push)",
                                  "row updates"),
                 out_dir, "row_staleness_histogram")


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


def time_to_target_plot(stats, out_dir, target, label="accuracy"):
    notes = [None if s.n_reached else "not reached" for s in stats]
    return _bars(stats, out_dir, "time_to_target", [s.time_to_target[0] for s in stats],
                 [s.time_to_target[1] for s in stats], "seconds",
                 f"Time to test {label} {target:g} (seeds that reached it)", notes)


def make_all(stats, out_dir, target, label="accuracy"):
    """Writes every plot under out_dir; returns {plot stem: [png path, svg path]}. `label`:
    the sweep's test metric ("accuracy" or "AUC"), whose curves are named after it."""
    os.makedirs(out_dir, exist_ok=True)
    made = {}
    for metric in ("accuracy", "loss"):
        for x_kind in ("time", "examples"):
            made[curve_stem(metric, x_kind, label)] = curve_plot(stats, out_dir, metric, x_kind,
                                                                 label)
    made["staleness_histogram"] = staleness_plot(stats, out_dir)
    if staleness_histograms(stats, "row_staleness_histogram"):
        made["row_staleness_histogram"] = row_staleness_plot(stats, out_dir)
    made["throughput"] = throughput_plot(stats, out_dir)
    made["time_to_target"] = time_to_target_plot(stats, out_dir, target, label)
    return made
