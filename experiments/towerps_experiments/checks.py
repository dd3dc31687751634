"""A preset's expected effects ([[checks]] in the sweep file), evaluated from measured results.

Each check compares per-configuration means of one metric:
  final_accuracy  mean test accuracy over seeds, a null (NaN) accuracy counting as 0
  time_to_target  mean seconds to the target accuracy; infinite if any seed never reached it.
                  The check's own `target` (e.g. a loose and a tight one) replaces the sweep's
                  target_accuracy for that check
  test_loss       mean final test loss; infinite if any seed diverged or has none
  throughput      mean examples/sec
  mean_staleness  mean staleness of applied updates
Kinds:
  compare    left OP right (OP one of > < >= <=), with an optional margin in favour of OP; a
             negative margin is a tolerance against it (margin -0.03 with >: left > right - 0.03)
  recovers   (fixed - base) >= fraction * (reference - base), and reference > base
  between    value lies between low and high (either order), give or take tolerance
  monotonic  the metric over `configs` never moves against `direction` by more than tolerance
A check never passes on missing data: it is then "not evaluated".

A check is OBSERVED only when it holds on the seed means AND on a strict majority of the seeds,
each seed judged alone on its own runs (for seed s, every configuration's run with seed s). A
seed for which some configuration has no value (no run, a failed run) counts as not holding.
When the results carry no seeds at all, the mean alone decides.
"""

import math
from dataclasses import dataclass, field

METRICS = ("final_accuracy", "time_to_target", "throughput", "mean_staleness", "test_loss")
KINDS = {"compare": {"left", "op", "right", "margin"},
         "recovers": {"base", "fixed", "reference", "fraction"},
         "between": {"value", "low", "high", "tolerance"},
         "monotonic": {"configs", "direction", "tolerance"}}
COMMON = {"description", "kind", "metric", "target"}
OPS = {">": lambda a, b, m: a > b + m, "<": lambda a, b, m: a < b - m,
       ">=": lambda a, b, m: a >= b + m, "<=": lambda a, b, m: a <= b - m}


class CheckError(ValueError):
    pass


@dataclass
class SeedCheck:
    """The check judged on one seed's runs alone."""
    seed: int
    held: bool        # False also when data is missing
    values: dict      # configuration -> the metric on this seed's run (None: no value)
    missing: dict     # configuration -> why it has no value ("no run", "run failed", ...)


@dataclass
class CheckResult:
    description: str
    passed: bool | None   # None: not evaluated (missing or failed runs)
    detail: str
    metric: str = ""
    values: dict = field(default_factory=dict)   # configuration -> metric over the seed means
    mean_passed: bool | None = None              # the check on the means alone
    seeds: list = field(default_factory=list)    # SeedCheck per seed, in seed order

    @property
    def verdict(self):
        return {True: "OBSERVED", False: "NOT OBSERVED", None: "NOT EVALUATED"}[self.passed]

    @property
    def seeds_held(self):
        return sum(s.held for s in self.seeds)


def _config_keys(kind):
    return {"compare": ["left", "right"], "recovers": ["base", "fixed", "reference"],
            "between": ["value", "low", "high"], "monotonic": []}[kind]


def validate(check, where, config_names):
    if not isinstance(check, dict):
        raise CheckError(f"{where} = {check!r}: must be a table")
    kind = check.get("kind")
    if kind not in KINDS:
        raise CheckError(f"{where}: key 'kind' = {kind!r}: must be one of {', '.join(KINDS)}")
    for key in check:
        if key not in KINDS[kind] | COMMON:
            raise CheckError(f"{where}: key '{key}' = {check[key]!r}: unknown for kind "
                             f"'{kind}' (allowed: {', '.join(sorted(KINDS[kind] | COMMON))})")
    if check.get("metric") not in METRICS:
        raise CheckError(f"{where}: key 'metric' = {check.get('metric')!r}: must be one of "
                         f"{', '.join(METRICS)}")
    if "target" in check:
        target = check["target"]
        if check["metric"] != "time_to_target":
            raise CheckError(f"{where}: key 'target' = {target!r}: only a time_to_target check "
                             "takes a target")
        if not (isinstance(target, (int, float)) and not isinstance(target, bool)
                and 0 < target <= 1):
            raise CheckError(f"{where}: key 'target' = {target!r}: must be an accuracy in (0, 1]")
    for key in ("margin", "tolerance", "fraction"):
        value = check.get(key)
        if key in check and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                 and math.isfinite(value)):
            raise CheckError(f"{where}: key '{key}' = {value!r}: must be a finite number")
    names = [check.get(k) for k in _config_keys(kind)]
    if kind == "monotonic":
        names = check.get("configs")
        if not isinstance(names, list) or len(names) < 2:
            raise CheckError(f"{where}: key 'configs' = {names!r}: need a list of >= 2 names")
        if check.get("direction") not in ("increasing", "decreasing"):
            raise CheckError(f"{where}: key 'direction' = {check.get('direction')!r}: must be "
                             "'increasing' or 'decreasing'")
    if kind == "compare" and check.get("op") not in OPS:
        raise CheckError(f"{where}: key 'op' = {check.get('op')!r}: must be one of "
                         f"{', '.join(OPS)}")
    for key, name in zip(_config_keys(kind) or ["configs"] * len(names), names):
        if name not in config_names:
            raise CheckError(f"{where}: key '{key}' = {name!r}: no such configuration "
                             f"(have: {', '.join(sorted(config_names))})")


def metric_value(stats, metric, target=None):
    """The check metric of one ConfigStats, or None if it has no successful run. `target`: the
    accuracy a time_to_target check asks for, when not the sweep's own."""
    if stats.n_ok == 0:
        return None
    if metric == "final_accuracy":
        return stats.accuracy_or_zero
    if metric == "time_to_target" and target is not None:
        times = [r.time_to_target(target) for r in stats.runs if r.ok]
        return math.inf if None in times else sum(times) / len(times)
    if metric == "time_to_target":
        return stats.time_to_target[0] if stats.n_reached == stats.n_ok else math.inf
    if metric == "test_loss":
        return stats.test_loss
    if metric == "throughput":
        return stats.throughput[0]
    return stats.mean_staleness


def _fmt(v, metric="time_to_target"):
    if v is None:
        return "n/a"
    if v == math.inf:
        return "not reached" if metric.startswith("time_to_target") else "inf (diverged or missing)"
    return f"{v:.4g}"


def _judge(check, values):
    """(holds, rule text) of the check on complete values (configuration -> number)."""
    kind = check["kind"]
    if kind == "compare":
        margin = check.get("margin", 0.0)
        passed = OPS[check["op"]](values[check["left"]], values[check["right"]], margin)
        slack = f" {'-' if '>' in check['op'] else '+'} {-margin:g}"
        rule = f"{check['left']} {check['op']} {check['right']}" + (
            f" by more than {margin:g}" if margin > 0 else slack if margin < 0 else "")
    elif kind == "recovers":
        b, f, r = (values[check[k]] for k in ("base", "fixed", "reference"))
        frac = check.get("fraction", 0.5)
        gap = r - b
        passed = gap > 0 and (f - b) >= frac * gap
        got = (f - b) / gap if gap > 0 and math.isfinite(gap) else float("nan")
        rule = (f"{check['fixed']} recovers >= {frac:.0%} of the gap from {check['base']} to "
                f"{check['reference']} (recovered {got:.0%})" if gap > 0 else
                f"no gap: {check['reference']} is not above {check['base']}")
    elif kind == "between":
        v, lo, hi = (values[check[k]] for k in ("value", "low", "high"))
        tol = check.get("tolerance", 0.0)
        passed = min(lo, hi) - tol <= v <= max(lo, hi) + tol
        rule = f"{check['value']} between {check['low']} and {check['high']}" + (
            f" (tolerance {tol})" if tol else "")
    else:
        names = check["configs"]
        tol = check.get("tolerance", 0.0)
        seq = [values[n] for n in names]
        sign = 1 if check["direction"] == "increasing" else -1
        passed = all(a == b or sign * (b - a) >= -tol for a, b in zip(seq, seq[1:]))
        rule = f"{check['direction']} along {' -> '.join(names)}" + (
            f" (tolerance {tol})" if tol else "")
    return bool(passed), rule


def _names(check):
    kind = check["kind"]
    return list(dict.fromkeys(check["configs"] if kind == "monotonic"
                              else [check[k] for k in _config_keys(kind)]))


def _seed_check(check, stats_by_name, names, seed):
    metric = check["metric"]
    values, missing = {}, {}
    for n in names:
        st = stats_by_name[n].by_seed.get(seed) if n in stats_by_name else None
        values[n] = metric_value(st, metric, check.get("target")) if st is not None else None
        if st is None:
            missing[n] = "no run"
        elif st.n_ok == 0:
            missing[n] = "run failed"
        elif values[n] is None:
            missing[n] = f"no {metric}"
    held = not missing and _judge(check, values)[0]
    return SeedCheck(seed, held, values, missing)


def evaluate(check, stats_by_name, seeds=None):
    """Judges one check on the seed means and on each seed alone. `seeds`: the seeds to judge
    (default: every seed with a run in any of stats_by_name); a seed without a value for some
    configuration counts as not holding."""
    kind, metric = check["kind"], check["metric"]
    desc = check.get("description", f"{kind} on {metric}")
    names = _names(check)
    if seeds is None:
        seeds = sorted({seed for st in stats_by_name.values() for seed in st.by_seed})
    per_seed = [_seed_check(check, stats_by_name, names, s) for s in seeds]
    values = {n: metric_value(stats_by_name[n], metric, check.get("target"))
              if n in stats_by_name else None for n in names}
    shown = ", ".join(f"{n} = {_fmt(v, metric)}" for n, v in values.items())
    missing = [n for n, v in values.items() if v is None]
    label = f"{metric} {check['target']:g}" if "target" in check else metric
    result = CheckResult(desc, None, "", label, values, None, per_seed)
    if missing:
        result.detail = f"{label}: {shown}; no data for {', '.join(missing)}"
        return result
    mean_passed, rule = _judge(check, values)
    result.mean_passed = mean_passed
    result.detail = f"{label}: {shown}; expected {rule}"
    if not per_seed:  # results without seeds: the mean alone
        result.passed = mean_passed
        return result
    held, n = result.seeds_held, len(per_seed)
    majority = held * 2 > n
    result.passed = mean_passed and majority
    if n == 1:
        result.detail += ("; one seed: it cannot show whether the effect outlasts the noise "
                          "between seeds (run more with --seeds)")
    if mean_passed:
        result.detail += f"; holds on the mean and on {held} of {n} seeds"
        if not majority:
            result.detail += " (a strict majority is needed)"
    else:
        result.detail += f"; fails on the mean; holds on {held} of {n} seeds"
    lacking = [f"seed {sc.seed} ({'; '.join(f'{c}: {why}' for c, why in sc.missing.items())})"
               for sc in per_seed if sc.missing]
    if lacking:
        result.detail += f"; counted as not holding for lack of data: {', '.join(lacking)}"
    return result


def evaluate_all(checks, stats, seeds=None):
    """Every check against the configuration stats. `seeds`: the sweep's seeds (from its
    sweep.json); seeds with runs are added to them."""
    by_name = {s.name: s for s in stats}
    all_seeds = {x for x in (seeds or []) if isinstance(x, int) and not isinstance(x, bool)}
    all_seeds |= {seed for s in stats for seed in s.by_seed}
    return [evaluate(c, by_name, sorted(all_seeds)) for c in checks]
