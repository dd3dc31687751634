"""Sweep files: loading, validation and expansion into named runs.

A sweep file (TOML or JSON) lists update modes, straggler settings and value axes; the cross
product of them, times the seeds, is the list of runs. See docs/experiments/README.md.

What the launcher accepts is the launcher's to say: the mode, model, dataset, optimizer and
learning-rate schedule names come from `towerps-launch --list-choices`, and straggler settings
are checked by `towerps-launch --validate-only` (the parser the workers use).
"""

import functools
import itertools
import json
import os
import re
import subprocess
import tomllib
from dataclasses import dataclass, field

# Top-level keys and, for the axes, the launcher option each one feeds.
AXES = {"workers": "--workers", "models": "--model", "epochs": "--epochs", "lrs": "--lr"}
TOP_KEYS = {"name", "description", "target_accuracy", "seeds", "modes", "stragglers",
            "options", "checks", "metric", "ctr_data"} | set(AXES)
# The test metric a sweep is judged by ("metric"): the summary's and the eval lines' key.
METRIC_KEYS = {"accuracy": "test_accuracy", "auc": "test_auc"}
CTR_DATA_KEYS = {"train", "test", "seed", "vocab_max"}
MODE_KEYS = {"name", "mode", "backup_workers", "staleness", "staleness_aware_lr", "lr",
             "softsync_n"}
STRAGGLER_KEYS = {"name", "straggler", "straggler_dist", "slow_workers"}
# Straggler key -> launcher flag.
STRAGGLER_FLAGS = {"straggler": "--straggler", "straggler_dist": "--straggler-dist",
                   "slow_workers": "--slow-workers"}
# Fixed options passed to every run: key in [options] -> launcher flag.
OPTION_FLAGS = {"servers": "--servers", "dataset": "--dataset", "batch_size": "--batch-size",
                "optimizer": "--optimizer", "max_steps": "--max-steps",
                "log_every": "--log-every", "evals_per_epoch": "--evals-per-epoch",
                "lr_schedule": "--lr-schedule", "lr_scaling": "--lr-scaling",
                "intra_op_threads": "--intra-op-threads", "data_dir": "--data-dir",
                "table_optimizer": "--table-optimizer", "table_lr": "--table-lr",
                "worker_cmd": "--worker-cmd"}


class SweepError(ValueError):
    """A sweep file is malformed; the message names the key and the bad value."""


class LauncherError(RuntimeError):
    """The launcher could not be asked what it accepts (missing, failing, or garbled output)."""


def _ask_launcher(launcher, args):
    try:
        return subprocess.run([launcher, *args], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
    except OSError as e:
        raise LauncherError(f"cannot run {launcher!r}: {e.strerror}") from e
    except subprocess.TimeoutExpired as e:
        raise LauncherError(f"{launcher} {' '.join(args)} did not answer in 60 s") from e


@functools.lru_cache(maxsize=None)
def launcher_choices(launcher):
    """The names `launcher` accepts, from `launcher --list-choices`: a dict of lists under
    "modes", "models", "datasets", "optimizers" and "lr_schedules". Raises LauncherError."""
    p = _ask_launcher(launcher, ["--list-choices"])
    if p.returncode != 0:
        raise LauncherError(f"{launcher} --list-choices exited with status {p.returncode}: "
                            f"{p.stderr.strip()}")
    try:
        choices = json.loads(p.stdout)
    except json.JSONDecodeError as e:
        raise LauncherError(f"{launcher} --list-choices printed no JSON: {e}") from e
    for key in ("modes", "models", "datasets", "optimizers", "lr_schedules"):
        if not isinstance(choices.get(key), list):
            raise LauncherError(f"{launcher} --list-choices has no {key!r} list")
    return choices


@functools.lru_cache(maxsize=None)
def launcher_rejects(launcher, flags):
    """None when `launcher --validate-only FLAGS` accepts the flags (a tuple), otherwise the
    launcher's error message."""
    p = _ask_launcher(launcher, ["--validate-only", *flags])
    if p.returncode == 0:
        return None
    message = p.stderr.strip().removeprefix("towerps-launch: ")
    return message or f"{launcher} --validate-only exited with status {p.returncode}"


@dataclass(frozen=True)
class ModeSpec:
    label: str
    mode: str
    backup_workers: int = 0
    staleness: int | None = None
    staleness_aware_lr: bool = False
    lr: float | None = None  # overrides the lrs axis for this mode
    softsync_n: int | None = None  # softsync: n (each update averages workers / n gradients)


@dataclass(frozen=True)
class StragglerSpec:
    label: str
    straggler: str | None = None
    straggler_dist: str | None = None
    slow_workers: str | None = None

    def flags(self):
        out = []
        if self.straggler:
            out += ["--straggler", self.straggler]
        if self.straggler_dist:
            out += ["--straggler-dist", self.straggler_dist]
        if self.slow_workers:
            out += ["--slow-workers", self.slow_workers]
        return out


@dataclass(frozen=True)
class Run:
    """One launcher invocation. config_name groups the seeds of one configuration."""
    config_name: str
    name: str
    seed: int
    mode: ModeSpec
    straggler: StragglerSpec
    workers: int
    model: str
    epochs: int
    lr: float
    options: dict = field(default_factory=dict)

    def command(self, launcher, run_dir):
        """The exact launcher command line, writing all outputs under run_dir. A run that
        diverges is a result here, not a failure: --on-nonfinite continue trains it to the end
        and its summary says "diverged": true."""
        cmd = [launcher, "--workers", str(self.workers), "--mode", self.mode.mode,
               "--model", self.model, "--epochs", str(self.epochs), "--lr", _fmt(self.lr),
               "--seed", str(self.seed), "--on-nonfinite", "continue"]
        if self.mode.mode == "sync" and self.mode.backup_workers:
            cmd += ["--replicas-to-aggregate", str(self.workers - self.mode.backup_workers)]
        if self.mode.mode == "ssp":
            cmd += ["--staleness", str(self.mode.staleness)]
        if self.mode.mode == "softsync":
            cmd += ["--softsync-n", str(self.mode.softsync_n)]
        if self.mode.staleness_aware_lr:
            cmd.append("--staleness-aware-lr")
        cmd += self.straggler.flags()
        for key in sorted(self.options):
            cmd += [OPTION_FLAGS[key], str(self.options[key])]
        cmd += ["--run-dir", os.path.join(run_dir, "logs"),
                "--metrics-out", os.path.join(run_dir, "metrics-{rank}.jsonl"),
                "--summary-out", os.path.join(run_dir, "summary.json")]
        return cmd

    def describe(self):
        return {"config_name": self.config_name, "name": self.name, "seed": self.seed,
                "mode": self.mode.mode, "mode_label": self.mode.label,
                "backup_workers": self.mode.backup_workers, "staleness": self.mode.staleness,
                "staleness_aware_lr": self.mode.staleness_aware_lr,
                "softsync_n": self.mode.softsync_n,
                "straggler": self.straggler.label, "workers": self.workers,
                "model": self.model, "epochs": self.epochs, "lr": self.lr,
                "options": dict(self.options)}


@dataclass
class Sweep:
    name: str
    description: str
    target_accuracy: float  # the target of `metric`
    runs: list
    checks: list
    source: dict  # the parsed file with the seeds as run, copied into the results directory
    metric: str = "accuracy"  # or "auc" (binary models)
    # Click logs to write with scripts/make_ctr_data.py into <results>/data before the runs,
    # which then read them (--data-dir): its arguments (train, test, seed, vocab_max), or None.
    ctr_data: dict | None = None


def _fmt(x):
    return repr(float(x)).rstrip("0").rstrip(".") if isinstance(x, float) else str(x)


def _where(path, key):
    return f"{path}: key '{key}'"


def _require(cond, path, key, value, why):
    if not cond:
        raise SweepError(f"{_where(path, key)} = {value!r}: {why}")


def _as_list(path, key, value, kind, check=None, why=""):
    values = value if isinstance(value, list) else [value]
    _require(len(values) > 0, path, key, value, "must not be empty")
    for v in values:
        ok = isinstance(v, kind) and not isinstance(v, bool)
        kind_name = "number" if isinstance(kind, tuple) else kind.__name__
        _require(ok, path, key, value, f"each value must be a {kind_name}")
        if check is not None:
            _require(check(v), path, key, v, why)
    return values


def load_file(path):
    """Parses a TOML (.toml) or JSON (.json) sweep file into a dict."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise SweepError(f"cannot read sweep file {path}: {e.strerror}") from e
    try:
        if path.endswith(".json"):
            return json.loads(data)
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SweepError(f"{path}: not valid {'JSON' if path.endswith('.json') else 'TOML'}: {e}") from e


def _mode_axis(table, where, mode, owner, key, minimum, missing, foreign):
    """The values of a mode's own axis (ssp's staleness, softsync's n): required for `owner`,
    integers >= minimum; refused for any other mode, which gets [None]."""
    if mode != owner:
        _require(key not in table, where, key, table.get(key), foreign)
        return [None]
    _require(key in table, where, key, None, missing)
    return _as_list(where, key, table[key], int, lambda v: v >= minimum, f"must be >= {minimum}")


def _parse_mode(path, i, table, modes):
    where = f"{path}: modes[{i}]"
    _require(isinstance(table, dict), path, f"modes[{i}]", table, "must be a table")
    for key in table:
        _require(key in MODE_KEYS, where, key, table[key],
                 f"unknown key (allowed: {', '.join(sorted(MODE_KEYS))})")
    mode = table.get("mode")
    _require(mode in modes, where, "mode", mode, f"must be one of {', '.join(modes)}")
    backup = table.get("backup_workers", 0)
    _require(isinstance(backup, int) and not isinstance(backup, bool) and backup >= 0,
             where, "backup_workers", backup, "must be an integer >= 0")
    _require(backup == 0 or mode == "sync", where, "backup_workers", backup,
             "backup workers exist only in sync mode")
    salr = table.get("staleness_aware_lr", False)
    _require(isinstance(salr, bool), where, "staleness_aware_lr", salr, "must be true or false")
    _require(not salr or mode != "sync", where, "staleness_aware_lr", salr,
             "applies to async, ssp and softsync only")
    lr = table.get("lr")
    _require(lr is None or (isinstance(lr, (int, float)) and not isinstance(lr, bool) and lr > 0),
             where, "lr", lr, "must be a number > 0")
    bounds = _mode_axis(table, where, mode, "ssp", "staleness", 0,
                        "ssp needs a staleness bound", "only ssp takes a staleness bound")
    ns = _mode_axis(table, where, mode, "softsync", "softsync_n", 1,
                    "softsync needs n (a number or a list)", "only softsync takes n")
    base = table.get("name")
    _require(base is None or (isinstance(base, str) and base and "/" not in base), where,
             "name", base, "must be a non-empty string without '/'")
    specs = []
    for s in bounds:
        for n in ns:
            if base is None:
                label = mode
                label += f"-b{backup}" if backup else ""
                label += f"-s{s}" if s is not None else ""
                label += f"-n{n}" if n is not None else ""
                label += "-salr" if salr else ""
            else:
                label = base
                label += f"-s{s}" if len(bounds) > 1 else ""
                label += f"-n{n}" if len(ns) > 1 else ""
            specs.append(ModeSpec(label, mode, backup, s, salr,
                                  float(lr) if lr is not None else None, n))
    return specs


def _parse_straggler(path, i, table):
    where = f"{path}: stragglers[{i}]"
    _require(isinstance(table, dict), path, f"stragglers[{i}]", table, "must be a table")
    for key in table:
        _require(key in STRAGGLER_KEYS, where, key, table[key],
                 f"unknown key (allowed: {', '.join(sorted(STRAGGLER_KEYS))})")
        _require(isinstance(table[key], str), where, key, table[key], "must be a string")
    label = table.get("name")
    if label is None:
        parts = [table[k].replace(":", "_") for k in ("straggler", "straggler_dist",
                                                      "slow_workers") if k in table]
        label = "+".join(parts) if parts else "none"
    _require(label and "/" not in label, where, "name", label, "must be non-empty, without '/'")
    return StragglerSpec(label, table.get("straggler"), table.get("straggler_dist"),
                         table.get("slow_workers"))


def _check_stragglers(path, stragglers, workers, launcher):
    """Each straggler setting, with each worker count, as the launcher checks it."""
    for i, s in enumerate(stragglers):
        for key, flag in STRAGGLER_FLAGS.items():
            value = getattr(s, key)
            if value is None:
                continue
            for n in workers:
                why = launcher_rejects(launcher, ("--workers", str(n), flag, value))
                _require(why is None, f"{path}: stragglers[{i}]", key, value, why)


def parse_seed_list(text):
    """The seeds of `--seeds 4,5,6`: comma-separated integers >= 0, at least one, none
    repeated. Raises ValueError naming the bad value."""
    if not text.strip():
        raise ValueError(f"{text!r}: no seeds (expected e.g. 4,5,6)")
    seeds = []
    for item in (x.strip() for x in text.split(",")):
        if not re.fullmatch(r"[0-9]+", item, re.ASCII):
            why = "an empty entry" if not item else f"{item!r} is not an integer >= 0"
            raise ValueError(f"{text!r}: {why} (expected e.g. 4,5,6)")
        seed = int(item)
        if seed >= 2**64:
            raise ValueError(f"{text!r}: {item} does not fit the launcher's 64-bit --seed")
        if seed in seeds:
            raise ValueError(f"{text!r}: seed {seed} is repeated")
        seeds.append(seed)
    return seeds


def _parse_ctr_data(path, ctr_data):
    """The sweep's ctr_data table (None when absent), checked key by key."""
    if ctr_data is not None:
        _require(isinstance(ctr_data, dict), path, "ctr_data", ctr_data, "must be a table")
        for key, value in ctr_data.items():
            _require(key in CTR_DATA_KEYS, f"{path}: ctr_data", key, value,
                     f"unknown key (allowed: {', '.join(sorted(CTR_DATA_KEYS))})")
            _require(isinstance(value, int) and not isinstance(value, bool) and value >= 0,
                     f"{path}: ctr_data", key, value, "must be an integer >= 0")
    return ctr_data


def _parse_options(path, options, choices):
    """The sweep's options table: known flags, and names the launcher accepts."""
    _require(isinstance(options, dict), path, "options", options, "must be a table")
    for key, value in options.items():
        _require(key in OPTION_FLAGS, f"{path}: options", key, value,
                 f"unknown option (allowed: {', '.join(sorted(OPTION_FLAGS))})")
    for key, names in (("dataset", "datasets"), ("optimizer", "optimizers"),
                       ("lr_schedule", "lr_schedules")):
        if key in options:
            _require(options[key] in choices[names], f"{path}: options", key, options[key],
                     f"must be one of {', '.join(choices[names])}")
    return options


def _expand_runs(path, modes, stragglers, workers, models, epochs, lrs, seeds, options):
    """Every run of the sweep's grid, seed by seed; runs that would share a name are an error."""
    runs = []
    for m, s, n, model, e, lr in itertools.product(modes, stragglers, workers, models, epochs,
                                                   lrs):
        lr_eff = m.lr if m.lr is not None else lr
        config = config_name(m, s, n, model, e, lr_eff, workers, models, epochs, lrs,
                             stragglers)
        for seed in seeds:
            runs.append(Run(config, f"{config}-seed{seed}", seed, m, s, n, model, e, lr_eff,
                            dict(options)))
    names = [r.name for r in runs]
    dup = sorted({x for x in names if names.count(x) > 1})
    _require(not dup, path, "lrs", dup,
             "runs would share a name (a mode's own 'lr' makes the lrs axis collapse?)")
    return runs


def parse(data, path, launcher, seeds=None):
    """Validates a parsed sweep dict and expands it into a Sweep; `launcher` (towerps-launch)
    says which names and straggler settings it accepts. `seeds`, when given, replaces the
    file's seeds list (--seeds). The Sweep's source always records the seeds it runs. Raises
    SweepError, or LauncherError when the launcher cannot be asked."""
    choices = launcher_choices(launcher)
    _require(isinstance(data, dict), path, "<top>", type(data).__name__, "must be a table")
    if seeds is not None:
        data = dict(data, seeds=list(seeds))
    for key in data:
        _require(key in TOP_KEYS, path, key, data[key],
                 f"unknown key (allowed: {', '.join(sorted(TOP_KEYS))})")
    name = data.get("name", os.path.splitext(os.path.basename(path))[0])
    _require(isinstance(name, str) and name, path, "name", name, "must be a non-empty string")
    target = data.get("target_accuracy", 0.85)
    _require(isinstance(target, (int, float)) and 0 < target <= 1, path, "target_accuracy",
             target, "must be in (0, 1]")
    metric = data.get("metric", "accuracy")
    _require(metric in METRIC_KEYS, path, "metric", metric,
             f"must be one of {', '.join(METRIC_KEYS)}")
    ctr_data = _parse_ctr_data(path, data.get("ctr_data"))
    _require("modes" in data, path, "modes", None, "at least one mode is required")
    _require(isinstance(data["modes"], list), path, "modes", data["modes"],
             "must be an array of tables ([[modes]])")
    modes = [m for i, t in enumerate(data["modes"])
             for m in _parse_mode(path, i, t, choices["modes"])]
    stragglers = data.get("stragglers", [{}])
    _require(isinstance(stragglers, list), path, "stragglers", stragglers,
             "must be an array of tables ([[stragglers]])")
    stragglers = [_parse_straggler(path, i, t) for i, t in enumerate(stragglers)]
    workers = _as_list(path, "workers", data.get("workers", [2]), int, lambda n: n >= 1,
                       "must be >= 1")
    # A job of PyTorch workers (options.worker_cmd) trains the script's model: its name only
    # names the runs.
    scripted = isinstance(data.get("options"), dict) and "worker_cmd" in data["options"]
    models = _as_list(path, "models", data.get("models", ["pytorch" if scripted else "mlp"]), str,
                      lambda m: scripted or m in choices["models"],
                      f"must be one of {', '.join(choices['models'])}")
    epochs = _as_list(path, "epochs", data.get("epochs", [1]), int, lambda e: e >= 1,
                      "must be >= 1")
    lrs = [float(x) for x in _as_list(path, "lrs", data.get("lrs", [0.05]), (int, float),
                                      lambda x: not isinstance(x, bool) and x > 0, "must be > 0")]
    seeds = _as_list(path, "seeds", data.get("seeds", [1]), int, lambda s: s >= 0, "must be >= 0")
    _require(len(set(seeds)) == len(seeds), path, "seeds", seeds, "must not repeat")
    options = _parse_options(path, data.get("options", {}), choices)
    _check_stragglers(path, stragglers, workers, launcher)
    for m in modes:
        for n in workers:
            _require(m.backup_workers < n, f"{path}: mode '{m.label}'", "backup_workers",
                     m.backup_workers, f"must be smaller than workers = {n}")
    labels = [m.label for m in modes]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    _require(not dup, path, "modes", dup, "two modes have the same name; give them 'name's")
    slabels = [s.label for s in stragglers]
    dup = sorted({x for x in slabels if slabels.count(x) > 1})
    _require(not dup, path, "stragglers", dup, "two straggler settings have the same name")
    checks = data.get("checks", [])
    _require(isinstance(checks, list), path, "checks", checks, "must be an array of tables")

    runs = _expand_runs(path, modes, stragglers, workers, models, epochs, lrs, seeds, options)
    from . import checks as checks_mod  # validated here so a bad check fails before any run
    for i, c in enumerate(checks):
        checks_mod.validate(c, f"{path}: checks[{i}]", {r.config_name for r in runs})
    return Sweep(name, data.get("description", ""), float(target), runs, checks,
                 dict(data, seeds=list(seeds)), metric, ctr_data)


def config_name(mode, straggler, workers, model, epochs, lr, all_workers, all_models,
                all_epochs, all_lrs, all_stragglers):
    """Mode label, then one token per axis that has more than one value in the sweep."""
    parts = [mode.label]
    if len(all_workers) > 1:
        parts.append(f"w{workers}")
    if len(all_models) > 1:
        parts.append(model)
    if len(all_epochs) > 1:
        parts.append(f"e{epochs}")
    if len(all_lrs) > 1 or mode.lr is not None:
        parts.append(f"lr{_fmt(lr)}")
    if len(all_stragglers) > 1:
        parts.append(straggler.label)
    return "-".join(parts)


def load(path, launcher, seeds=None, worker_cmd=None):
    """Loads and expands a sweep file; `seeds`, when given, replaces its seeds, and
    `worker_cmd` its options' worker_cmd (every run's workers are that script). Raises
    SweepError naming the bad key and value, or LauncherError (see parse)."""
    data = load_file(path)
    if worker_cmd is not None:
        _require(isinstance(data, dict), path, "<top>", type(data).__name__, "must be a table")
        options = data.get("options", {})
        _require(isinstance(options, dict), path, "options", options, "must be a table")
        data = dict(data, options=dict(options, worker_cmd=worker_cmd))
    return parse(data, path, launcher, seeds)
