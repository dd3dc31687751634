"""report.md for a results directory: the configuration table, failures, checks and plots."""

import math
import os

from . import checks as checks_mod
from . import results as res
from .sweep import METRIC_KEYS


def _pm(mean_std, fmt="{:.4f}"):
    mean, std = mean_std
    if mean is None:
        return "—"
    if std is None:
        return f"{fmt.format(mean)} (one value: no spread)"
    return f"{fmt.format(mean)} ± {fmt.format(std)}"


def _opt(v, fmt):
    return "—" if v is None else fmt.format(v)


def _loss(s):
    if s.test_loss is None:
        return "—"
    if s.test_loss == math.inf:
        return "inf (diverged or missing)"
    return _pm((s.test_loss, s.test_loss_std)) if s.test_loss_std is not None else \
        "{:.4f}".format(s.test_loss)


def table(stats, target, label="accuracy"):
    """The configurations' table; `label` names the sweep's test metric ("accuracy", "AUC").
    With embedding tables, the rows' staleness follows the dense updates'."""
    rows = any(s.mean_row_staleness is not None for s in stats)
    head = (f"| configuration | runs ok | final {label} (mean ± std) | final test loss | "
            f"diverged | time to {target:g} s (mean ± std) | reached | examples/s | "
            "mean staleness | p99 staleness | dropped gradients |" +
            (" mean row staleness | p99 row staleness |" if rows else ""))
    lines = [head, "|" + "---|" * (13 if rows else 11)]
    for s in stats:
        lines.append(
            f"| {s.name} | {s.n_ok}/{len(s.runs)} | {_pm(s.accuracy)} | {_loss(s)} | "
            f"{s.n_diverged} | "
            f"{_pm(s.time_to_target, '{:.1f}')} | {s.n_reached}/{s.n_ok} | "
            f"{_pm(s.throughput, '{:.0f}')} | {_opt(s.mean_staleness, '{:.2f}')} | "
            f"{_opt(s.p99_staleness, '{:g}')} | {_opt(s.dropped, '{:.0f}')} |" +
            (f" {_opt(s.mean_row_staleness, '{:.3f}')} | {_opt(s.p99_row_staleness, '{:g}')} |"
             if rows else ""))
    return "\n".join(lines)


def report_seeds(stats, sweep_source):
    """The sweep's seeds (sweep.json) and every seed that has a run, sorted."""
    seeds = {x for x in sweep_source.get("seeds", []) or []
             if isinstance(x, int) and not isinstance(x, bool)}
    return sorted(seeds | {seed for s in stats for seed in s.by_seed})


def _seed_accuracy(s, seed):
    """One cell of the per-seed accuracy table."""
    st = s.by_seed.get(seed)
    if st is None:
        return "—"
    if st.n_ok == 0:
        return "failed"
    acc = st.accuracy[0]
    text = "null" if acc is None else f"{acc:.4f}"
    return f"{text} (diverged)" if st.n_diverged else text


def seed_table(stats, seeds):
    """Final test accuracy of each configuration's run with each seed: a row per seed, a
    column per configuration."""
    lines = ["| seed | " + " | ".join(s.name for s in stats) + " |",
             "|" + "---|" * (len(stats) + 1)]
    for x in seeds:
        lines.append(f"| {x} | " + " | ".join(_seed_accuracy(s, x) for s in stats) + " |")
    return "\n".join(lines)


def _cell(v, metric):
    if v is None or v == math.inf:
        return checks_mod._fmt(v, metric)
    return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def check_seed_table(c, indent="  "):
    """The values behind one check: the means, then each seed, and whether it held."""
    names = list(c.values)
    yes_no = {True: "yes", False: "no", None: "—"}
    lines = [f"| {c.metric} | " + " | ".join(names) + " | holds |",
             "|" + "---|" * (len(names) + 2),
             "| mean | " + " | ".join(_cell(c.values[n], c.metric) for n in names) +
             f" | {yes_no[c.mean_passed]} |"]
    for sc in c.seeds:
        cells = [sc.missing.get(n) or _cell(sc.values[n], c.metric) for n in names]
        held = yes_no[sc.held] + (" (missing data)" if sc.missing else "")
        lines.append(f"| seed {sc.seed} | " + " | ".join(cells) + f" | {held} |")
    return "\n".join(indent + l for l in lines)


def render(results_dir, stats, target, plots, check_results, sweep_source):
    label = metric_label(sweep_source)
    name = sweep_source.get("name", os.path.basename(os.path.normpath(results_dir)))
    out = [f"# Sweep `{name}`", ""]
    if sweep_source.get("description"):
        out += [sweep_source["description"].strip(), ""]
    n_runs = sum(len(s.runs) for s in stats)
    out += [f"{n_runs} runs in {len(stats)} configurations; target test {label} {target:g}. "
            "Means and standard deviations are over seeds. A seed counts as *diverged* when its "
            "summary says so (a NaN or infinite loss or gradient was seen; the runs use "
            "--on-nonfinite continue and the servers refuse such gradients), or, for results "
            "without that field, when its accuracy is null or both its test and train losses "
            "are (NaN); a null accuracy is left out of the mean, a reported one (a diverged "
            "model scores ~0.1) is kept. A test loss is infinite when a seed diverged. Time to "
            f"target counts from launch (process start-up included) until the test {label} "
            "reached the target, interpolated between the evaluations either side, over the "
            "seeds that reached it. Staleness comes from the summary's "
            "histogram where present.", "", "## Configurations", "", table(stats, target, label),
            ""]
    seeds = report_seeds(stats, sweep_source)
    if seeds:
        out += [f"## Per-seed final {label}", "",
                f"Final test {label} of each seed's run (*failed*: the run failed; —: no run; "
                "*diverged*: see above).", "", seed_table(stats, seeds), ""]
    failed = [r for s in stats for r in s.runs if not r.ok]
    out += ["## Failed runs", ""]
    if failed:
        for r in failed:
            err = r.status.get("error") or f"exit status {r.status.get('returncode')}"
            out.append(f"- `{r.name}`: {err} (log: `runs/{r.name}/launch.log`)")
    else:
        out.append("None.")
    out.append("")
    if check_results:
        out += ["## Expected effects", "",
                "A check is OBSERVED only when it holds on the seed means and on a strict "
                "majority of the seeds, each seed judged on its own runs; a seed with a "
                "missing or failed run counts as not holding. Below each check: its metric "
                "on the means and on each seed.", ""]
        for c in check_results:
            out.append(f"- **{c.verdict}**: {c.description}. {c.detail}.")
            if c.seeds:
                out += ["", check_seed_table(c), ""]
        if out[-1] != "":
            out.append("")
    out += ["## Plots", ""]
    for stem, paths in plots.items():
        rel = [os.path.relpath(p, results_dir) for p in paths]
        png = next(p for p in rel if p.endswith(".png"))
        svg = next((p for p in rel if p.endswith(".svg")), None)
        out.append(f"![{stem}]({png})" + (f" ([SVG]({svg}))" if svg else ""))
        out.append("")
    out += ["## Commands", ""]
    for s in stats:
        for r in s.runs:
            cmd = r.config.get("command")
            if cmd:
                out.append(f"- `{r.name}`: `{' '.join(cmd)}`")
    out.append("")
    return "\n".join(out)


def metric_label(sweep_source):
    """The sweep's test metric as the report names it: "accuracy", or "AUC"."""
    return "AUC" if sweep_source.get("metric") == "auc" else "accuracy"


def make_report(results_dir, target=None, with_plots=True):
    """Regenerates plots/ and report.md in results_dir. Returns (report path, check results)."""
    sweep_source = res.load_sweep_source(results_dir)
    metric = sweep_source.get("metric", "accuracy")
    if target is None:
        target = float(sweep_source.get("target_accuracy", 0.85))
    if not (0 < target <= 1) or math.isnan(target):
        raise ValueError(f"--target = {target}: must be in (0, 1]")
    runs = res.load_results(results_dir, METRIC_KEYS.get(metric, "test_accuracy"))
    stats = res.config_stats(runs, target)
    plots = {}
    if with_plots:
        from . import plots as plots_mod  # imported here: only plotting needs matplotlib
        plots = plots_mod.make_all(stats, os.path.join(results_dir, "plots"), target,
                                   metric_label(sweep_source))
    check_results = checks_mod.evaluate_all(sweep_source.get("checks", []), stats,
                                            report_seeds(stats, sweep_source))
    path = os.path.join(results_dir, "report.md")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(render(results_dir, stats, target, plots, check_results, sweep_source))
    os.replace(tmp, path)
    return path, check_results
