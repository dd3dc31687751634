"""A preset's expected effects ([[checks]] in the sweep file), evaluated from measured results.

Each check compares per-configuration means of one metric:
  final_accuracy  mean test accuracy over seeds, a null (NaN) accuracy counting as 0
  time_to_target  mean seconds to the target accuracy; infinite if any seed never reached it
  throughput      mean examples/sec
  mean_staleness  mean staleness of applied updates
Kinds:
  compare    left OP right (OP one of > < >= <=), with an optional margin in favour of OP
  recovers   (fixed - base) >= fraction * (reference - base), and reference > base
  between    value lies between low and high (either order), give or take tolerance
  monotonic  the metric over `configs` never moves against `direction` by more than tolerance
A check never passes on missing data: it is then "not evaluated".
"""

import math
from dataclasses import dataclass

METRICS = ("final_accuracy", "time_to_target", "throughput", "mean_staleness")
KINDS = {"compare": {"left", "op", "right", "margin"},
         "recovers": {"base", "fixed", "reference", "fraction"},
         "between": {"value", "low", "high", "tolerance"},
         "monotonic": {"configs", "direction", "tolerance"}}
COMMON = {"description", "kind", "metric"}
OPS = {">": lambda a, b, m: a > b + m, "<": lambda a, b, m: a < b - m,
       ">=": lambda a, b, m: a >= b + m, "<=": lambda a, b, m: a <= b - m}


class CheckError(ValueError):
    pass


@dataclass
class CheckResult:
    description: str
    passed: bool | None   # None: not evaluated (missing or failed runs)
    detail: str

    @property
    def verdict(self):
        return {True: "OBSERVED", False: "NOT OBSERVED", None: "NOT EVALUATED"}[self.passed]


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


def metric_value(stats, metric):
    """The check metric of one ConfigStats, or None if it has no successful run."""
    if stats.n_ok == 0:
        return None
    if metric == "final_accuracy":
        return stats.accuracy_or_zero
    if metric == "time_to_target":
        return stats.time_to_target[0] if stats.n_reached == stats.n_ok else math.inf
    if metric == "throughput":
        return stats.throughput[0]
    return stats.mean_staleness


def _fmt(v):
    if v is None:
        return "n/a"
    if v == math.inf:
        return "not reached"
    return f"{v:.4g}"


def evaluate(check, stats_by_name):
    kind, metric = check["kind"], check["metric"]
    desc = check.get("description", f"{kind} on {metric}")
    names = check["configs"] if kind == "monotonic" else [check[k] for k in _config_keys(kind)]
    values = {n: metric_value(stats_by_name[n], metric) if n in stats_by_name else None
              for n in names}
    shown = ", ".join(f"{n} = {_fmt(v)}" for n, v in values.items())
    missing = [n for n, v in values.items() if v is None]
    if missing:
        return CheckResult(desc, None, f"{metric}: {shown}; no data for {', '.join(missing)}")
    if kind == "compare":
        passed = OPS[check["op"]](values[check["left"]], values[check["right"]],
                                  check.get("margin", 0.0))
        rule = f"{check['left']} {check['op']} {check['right']}" + (
            f" by more than {check['margin']}" if check.get("margin") else "")
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
        tol = check.get("tolerance", 0.0)
        seq = [values[n] for n in names]
        sign = 1 if check["direction"] == "increasing" else -1
        passed = all(sign * (b - a) >= -tol for a, b in zip(seq, seq[1:]))
        rule = f"{check['direction']} along {' -> '.join(names)}" + (
            f" (tolerance {tol})" if tol else "")
    return CheckResult(desc, bool(passed), f"{metric}: {shown}; expected {rule}")


def evaluate_all(checks, stats):
    by_name = {s.name: s for s in stats}
    return [evaluate(c, by_name) for c in checks]
