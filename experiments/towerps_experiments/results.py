"""Reads a results directory and computes the per-run and per-configuration numbers."""

import functools
import glob
import json
import math
import os
import re
import statistics
import time
from dataclasses import dataclass, field


class ResultsError(ValueError):
    """A results directory or one of its files is unreadable; the message names it."""


def _num(x):
    """A float, or None for null / NaN / inf (a diverged run)."""
    if x is None or isinstance(x, bool):
        return None
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


# C printf writes NaN/inf as bare nan, -nan, inf: not JSON. Read them as null (diverged).
_BARE_NONFINITE = re.compile(r'(?<=[:\[,])\s*[-+]?(?:nan|inf(?:inity)?)\b', re.IGNORECASE)


def read_metrics(path):
    """Reads one metrics JSON-lines file. Lines without "kind" are "train" (older binaries).
    A torn last line (the job was killed mid-write) is ignored; a bad line elsewhere is an
    error naming the file and line."""
    lines = []
    with open(path) as f:
        raw = f.read().split("\n")
    for i, text in enumerate(raw, 1):
        if not text.strip():
            continue
        try:
            obj = json.loads(_BARE_NONFINITE.sub("null", text))
        except json.JSONDecodeError as e:
            if i >= len(raw) - 1:
                break
            raise ResultsError(f"{path}:{i}: not a JSON object: {e}") from e
        if not isinstance(obj, dict):
            raise ResultsError(f"{path}:{i}: expected a JSON object, got {text[:60]!r}")
        obj.setdefault("kind", "train")
        lines.append(obj)
    return lines


def staleness_from_histogram(hist):
    """(mean, p99, count) from a histogram where bucket i counts updates with staleness i and
    the last bucket counts that staleness or more (so the mean is a lower bound when the last
    bucket is non-empty). p99 is the smallest s with at least 99% of updates at staleness <= s.
    Returns (None, None, 0) for an empty histogram."""
    counts = [int(c) for c in hist]
    if any(c < 0 for c in counts):
        raise ResultsError(f"staleness histogram has a negative count: {hist}")
    total = sum(counts)
    if total == 0:
        return None, None, 0
    mean = sum(i * c for i, c in enumerate(counts)) / total
    cumulative = 0
    for i, c in enumerate(counts):
        cumulative += c
        if cumulative >= 0.99 * total:
            return mean, i, total
    raise AssertionError("unreachable")


def staleness_from_train_lines(lines):
    """(mean, p99) from per-window "staleness" values of train lines (each the mean staleness
    over its logged window, weighted equally); p99 by nearest rank. None, None if absent."""
    values = sorted(v for v in (_num(l.get("staleness")) for l in lines
                                if l.get("kind") == "train") if v is not None)
    if not values:
        return None, None
    rank = max(1, math.ceil(0.99 * len(values)))
    return sum(values) / len(values), values[rank - 1]


def staleness(summary, train_lines):
    """Best available (mean, p99, source): the summary's histogram, else its mean/p99 fields,
    else the train lines. A summary with max_staleness has its mean from the servers' exact sum,
    which the histogram's mean undercounts once its last bucket holds updates: that mean, with
    the histogram's p99 (source "histogram+sum")."""
    hist = summary.get("staleness_histogram")
    if isinstance(hist, list) and hist:
        mean, p99, n = staleness_from_histogram(hist)
        if n:
            exact = _num(summary.get("mean_staleness"))
            if exact is not None and _num(summary.get("max_staleness")) is not None:
                return exact, p99, "histogram+sum"
            return mean, p99, "histogram"
    mean, p99 = _num(summary.get("mean_staleness")), _num(summary.get("p99_staleness"))
    if mean is not None:
        return mean, p99, "summary"
    mean, p99 = staleness_from_train_lines(train_lines)
    return mean, p99, ("metrics" if mean is not None else None)


def _step_at(points, t, launch=None):
    """One worker's step at time t from its (time, step) log points, sorted by time: linear
    between two points; after the last, the last step; before the first, linear from the time
    of its step 0, found back along the first two points' rate (a worker starts training after
    process start-up, not at launch) but not before `launch` when given. 0 when a single point
    gives no rate."""
    if t >= points[-1][0]:
        return points[-1][1]
    for (t0, s0), (t1, s1) in zip(points, points[1:]):
        if t0 <= t < t1:
            return s0 + (s1 - s0) * (t - t0) / (t1 - t0)
    (t0, s0), (t1, s1) = points[0], (points[1] if len(points) > 1 else (None, None))
    if t1 is None or s1 <= s0 or t1 <= t0:
        return 0
    start = t0 - s0 * (t1 - t0) / (s1 - s0)
    if launch is not None:
        start = min(max(start, launch), t0)
    return 0 if t <= start or t0 <= start else s0 * (t - start) / (t0 - start)


def global_updates_at(train_lines, t, mode, launch=None):
    """Global parameter updates made by time t, estimated from train lines: in sync mode the
    step is already global (the last one logged at or before t); in async, SSP and softsync
    each worker's step is its own count of pushes, so the global count is the sum over workers
    of each one's step at t, interpolated between its log lines (_step_at; `launch`, the job's
    start): a worker logs only every --log-every steps, and the sum of the last steps logged
    lags by up to that many per worker."""
    return _updates_at(worker_points(train_lines), t, mode, launch)


def worker_points(train_lines):
    """Each worker's (time, step) log points, sorted by time: worker -> list."""
    points = {}
    for l in train_lines:
        if l.get("time") is not None and l.get("step") is not None:
            points.setdefault(l.get("worker", 0), []).append((l["time"], l["step"]))
    return {w: sorted(pts) for w, pts in points.items()}


def _updates_at(points, t, mode, launch):
    """global_updates_at on worker_points."""
    if mode == "sync":
        return max((s for pts in points.values() for (time_, s) in pts if time_ <= t), default=0)
    return sum(_step_at(pts, t, launch) for pts in points.values())


@dataclass
class RunResult:
    name: str
    path: str
    config: dict
    status: dict
    summary: dict
    train: list = field(default_factory=list)
    evals: list = field(default_factory=list)
    # The test metric the sweep is judged by: "test_accuracy", or "test_auc" for a sweep of
    # binary models (sweep.METRIC_KEYS). final_accuracy and time_to_target read it.
    score_key: str = "test_accuracy"

    @property
    def ok(self):
        return bool(self.status.get("ok"))

    @property
    def config_name(self):
        return self.config["config_name"]

    @property
    def start(self):
        return self.status.get("started_at") or self.config.get("started_at") or 0.0

    @property
    def final_accuracy(self):
        """The final test score: accuracy, or AUC (score_key)."""
        return _num(self.summary.get(self.score_key))

    @property
    def diverged(self):
        """The summary's "diverged": true (a worker saw a NaN or infinite loss or gradient;
        the servers refused those gradients, so the final numbers may look finite), or, for
        results of older binaries without the field, a null accuracy or null test and train
        losses (the worker's NaN)."""
        if not self.ok:
            return False
        if self.summary.get("diverged") is True:
            return True
        return self.final_accuracy is None or (
            _num(self.summary.get("test_loss")) is None
            and _num(self.summary.get("final_train_loss")) is None)

    def time_to_target(self, target):
        """Seconds from launch until the test accuracy reached target, or None if no
        evaluation did: interpolated linearly between the last evaluation below the target and
        the first at or above it (the first evaluation's own time when it is the first). Not
        the later evaluation's time: evaluations are spaced in steps, so a configuration with
        slower steps evaluates less often and would be charged more of the gap."""
        before = None
        for e in sorted(self.evals, key=lambda e: e.get("time") or 0):
            acc, t = _num(e.get(self.score_key)), e.get("time")
            if acc is None or t is None:
                continue
            if acc >= target:
                if before is not None and acc > before[1]:
                    t = before[0] + (target - before[1]) / (acc - before[1]) * (t - before[0])
                return t - self.start
            before = (t, acc)
        return None

    def staleness(self):
        return staleness(self.summary, self.train)

    @functools.cached_property
    def _points(self):
        """worker_points of the train lines, read once for all of examples_at's calls."""
        return worker_points(self.train)

    def examples_at(self, line):
        """Training examples all workers had processed (batches computed x batch size) when
        `line`, a train or eval line with a "time", was written; None without a batch size.
        A sync step is global and each worker computes one batch per step (a backup worker's
        discarded one included): step x batch x workers, the step taken from the time when the
        line has none. An async, SSP or softsync step is one worker's own count: the sum over
        workers of their steps at the line's time (global_updates_at), x batch; at the final
        evaluation, which waits for every worker's last update, each worker has done the
        summary's steps."""
        batch = self.summary.get("batch_size") or self.config.get("options", {}).get("batch_size")
        if not batch:
            return None
        mode = self.config.get("mode", "sync")
        workers = self.summary.get("workers") or self.config.get("workers") or 1
        if mode != "sync":
            steps = self.summary.get("steps")
            final = (self.evals and line is self.evals[-1] and self.ok
                     and all(line["time"] >= pts[-1][0] for pts in self._points.values()))
            if final and isinstance(steps, int) and not isinstance(steps, bool):
                return steps * workers * batch
            return _updates_at(self._points, line["time"], mode, self.start) * batch
        step = line.get("step")
        if step is None:
            step = _updates_at(self._points, line["time"], mode, None)
        return step * batch * workers


# "[worker:0] I 05:39:20.827 epoch 1 done: test accuracy = 0.8494, test loss = 0.406023"
_EPOCH_LOG = re.compile(r"^\[worker:0\] I (\d\d):(\d\d):(\d\d(?:\.\d+)?) epoch (\d+) done: "
                        r"test accuracy = ([0-9.eE+-]+|nan|-nan), test loss = (\S+)")


_FINAL_LOG = re.compile(r"^\[worker:0\] test accuracy = ([0-9.eE+-]+|nan|-nan) \(after (\d+) steps")


def evals_from_launch_log(text, started_at, finished_at=None):
    """Eval points parsed from the chief's log lines, for binaries that write no "eval"
    metric lines. Per-epoch lines carry local time of day only; the date is the one of
    started_at (the next day if that would put the line before the start). The final
    evaluation line has no time: it is placed at finished_at (job end, an upper bound)."""
    day = time.localtime(started_at)
    out = []
    for line in text.splitlines():
        m = _EPOCH_LOG.match(line)
        final = _FINAL_LOG.match(line)
        if final and finished_at is not None:
            out.append({"kind": "eval", "time": finished_at, "worker": 0,
                        "step": int(final.group(2)), "test_accuracy": _num(final.group(1)),
                        "source": "launch.log final line, time = job end"})
        if not m:
            continue
        hh, mm, ss, epoch, acc, loss = m.groups()
        t = time.mktime((day.tm_year, day.tm_mon, day.tm_mday, int(hh), int(mm), 0, 0, 0, -1))
        t += float(ss)
        if t < started_at - 60:
            t += 86400
        out.append({"kind": "eval", "time": t, "worker": 0, "epoch": int(epoch),
                    "test_accuracy": _num(acc), "test_loss": _num(loss), "source": "launch.log"})
    return out


def load_run(path):
    def read(name, required):
        p = os.path.join(path, name)
        if not os.path.exists(p):
            if required:
                raise ResultsError(f"{p}: missing")
            return {}
        try:
            with open(p) as f:
                return json.load(f)
        except json.JSONDecodeError as e:
            raise ResultsError(f"{p}: not valid JSON: {e}") from e
    config = read("config.json", True)
    status = read("status.json", True)
    summary = read("summary.json", False)
    lines = []
    for m in sorted(glob.glob(os.path.join(path, "metrics-*.jsonl"))):
        lines += read_metrics(m)
    train = sorted((l for l in lines if l["kind"] == "train"), key=lambda l: l.get("time") or 0)
    evals = [l for l in lines if l["kind"] == "eval"]
    log = os.path.join(path, "launch.log")
    if not evals and os.path.exists(log):
        with open(log, errors="replace") as f:
            evals = evals_from_launch_log(f.read(), status.get("started_at")
                                          or config.get("started_at") or time.time(),
                                          status.get("finished_at"))
    evals.sort(key=lambda l: l.get("time") or 0)
    return RunResult(os.path.basename(path), path, config, status, summary, train, evals)


def _sweep_order(run):
    """Runs in the order the sweep file lists them (config.json's sweep_index), then by name;
    so configurations, the report's rows and the plots' bars, follow the sweep file."""
    index = run.config.get("sweep_index")
    if not isinstance(index, int) or isinstance(index, bool):
        return (1, 0, run.name)
    return (0, index, run.name)


def load_results(results_dir, score_key="test_accuracy"):
    """All complete run directories (runs/<name>, not the hidden .partial ones), in the
    sweep's order; runs whose config.json has no sweep_index follow, by name. `score_key`: the
    test metric the sweep is judged by (RunResult.score_key)."""
    runs_dir = os.path.join(results_dir, "runs")
    if not os.path.isdir(runs_dir):
        raise ResultsError(f"{results_dir}: no runs/ directory; is this a results directory?")
    runs = [load_run(os.path.join(runs_dir, d)) for d in os.listdir(runs_dir)
            if not d.startswith(".") and os.path.isdir(os.path.join(runs_dir, d))]
    for r in runs:
        r.score_key = score_key
    return sorted(runs, key=_sweep_order)


def load_sweep_source(results_dir):
    p = os.path.join(results_dir, "sweep.json")
    if not os.path.exists(p):
        return {}
    with open(p) as f:
        return json.load(f)


def _mean_std(values):
    """(mean, sample standard deviation); the deviation is None for one value, which cannot
    show a spread (reports say so rather than print 0)."""
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


@dataclass
class ConfigStats:
    name: str
    runs: list               # every RunResult of this configuration
    n_ok: int
    n_failed: int
    n_diverged: int
    accuracy: tuple          # (mean, std) over seeds that did not diverge
    accuracy_or_zero: float  # mean with a diverged seed counted as 0 (for checks); None if no ok run
    time_to_target: tuple    # (mean, std) over the seeds that reached the target
    n_reached: int
    throughput: tuple        # examples/sec (mean, std)
    mean_staleness: float
    p99_staleness: float
    dropped: float           # mean dropped_stale per run
    updates: float           # mean updates_applied per run
    # seed -> the ConfigStats of this configuration's run(s) with that seed alone (for the
    # per-seed checks and the report); seeds without a run are absent.
    by_seed: dict = field(default_factory=dict)
    test_loss: float | None = None  # mean final test loss; inf if a run diverged or has none
    test_loss_std: float | None = None  # over the runs, when none is inf
    # Models with embedding tables: the rows' staleness (updates a row received between a
    # worker's pull and its push), the mean of the runs' means and the largest p99; else None.
    mean_row_staleness: float | None = None
    p99_row_staleness: float | None = None

    @property
    def seeds(self):
        return sorted(self.by_seed)


def run_seed(run):
    """The run's seed (from its config.json), or None when it does not say."""
    seed = run.config.get("seed")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def config_stats(runs, target):
    """Groups runs by configuration (in first-seen order) and aggregates over seeds; each
    ConfigStats also holds one per seed (by_seed)."""
    groups = {}
    for r in runs:
        groups.setdefault(r.config_name, []).append(r)
    out = []
    for name, rs in groups.items():
        stats = _aggregate(name, rs, target)
        per_seed = {}
        for r in rs:
            if run_seed(r) is not None:
                per_seed.setdefault(run_seed(r), []).append(r)
        stats.by_seed = {seed: _aggregate(name, srs, target)
                         for seed, srs in sorted(per_seed.items())}
        out.append(stats)
    return out


def _aggregate(name, rs, target):
    """The ConfigStats of the runs rs (one configuration), without by_seed."""
    ok = [r for r in rs if r.ok]
    accs = [r.final_accuracy for r in ok]
    ttt = [r.time_to_target(target) for r in ok]
    stal = [r.staleness() for r in ok]
    means = [s[0] for s in stal if s[0] is not None]
    p99s = [s[1] for s in stal if s[1] is not None]
    dropped = [_num(r.summary.get("dropped_stale")) for r in ok]
    updates = [_num(r.summary.get("updates_applied")) for r in ok]
    losses = [_num(r.summary.get("test_loss")) for r in ok]
    losses = [math.inf if r.diverged or x is None else x for r, x in zip(ok, losses)]
    row_means = [_num(r.summary.get("mean_row_staleness")) for r in ok]
    row_means = [x for x in row_means if x is not None]
    row_p99s = [_num(r.summary.get("p99_row_staleness")) for r in ok]
    row_p99s = [x for x in row_p99s if x is not None]
    return ConfigStats(
        name=name, runs=rs, n_ok=len(ok), n_failed=len(rs) - len(ok),
        n_diverged=sum(r.diverged for r in ok),
        accuracy=_mean_std(accs),
        accuracy_or_zero=(statistics.fmean(a if a is not None else 0.0 for a in accs)
                          if accs else None),
        time_to_target=_mean_std(ttt), n_reached=sum(t is not None for t in ttt),
        throughput=_mean_std([_num(r.summary.get("examples_per_sec")) for r in ok]),
        mean_staleness=statistics.fmean(means) if means else None,
        p99_staleness=max(p99s) if p99s else None,
        dropped=_mean_std(dropped)[0], updates=_mean_std(updates)[0],
        test_loss=statistics.fmean(losses) if losses else None,
        test_loss_std=(_mean_std(losses)[1] if losses and all(map(math.isfinite, losses))
                       else None),
        mean_row_staleness=statistics.fmean(row_means) if row_means else None,
        p99_row_staleness=max(row_p99s) if row_p99s else None)
