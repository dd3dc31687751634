"""Runs a sweep's jobs through towerps-launch, one at a time, resumably.

Layout of a results directory:
  sweep.json                 the parsed sweep file, its "seeds" the seeds run (--seeds included)
  runs/<run>/config.json     the run's settings and exact command line
  runs/<run>/status.json     {"ok": bool, "returncode": int, "started_at", "finished_at", ...}
  runs/<run>/summary.json, metrics-<rank>.jsonl, launch.log, logs/
A run is built in runs/.<run>.partial and renamed into place when it ends, so a directory
named runs/<run> is always complete. It counts as finished only if status.json says ok (the
launcher exited 0) and summary.json exists; anything else is redone on resume.

A results directory holds one set of seeds: resuming it with other seeds (another --seeds, or
an edited seeds list) is refused rather than mixing the runs of both in its means and checks.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time


class ResultsDirError(RuntimeError):
    """The results directory was made with other seeds; the message says which."""


def _seed_list(seeds):
    seeds = list(seeds)
    try:
        seeds.sort()
    except TypeError:  # a hand-edited sweep.json
        pass
    return ", ".join(str(s) for s in seeds)


def check_seeds(results_dir, seeds):
    """Raises ResultsDirError unless results_dir is new or was made with exactly these seeds
    (in any order): its sweep.json's "seeds" (a sweep file without them ran seed 1) and the
    seed of every run directory in runs/."""
    seeds = set(seeds)
    hint = "resume it with the same seeds, or use another results directory"
    path = os.path.join(results_dir, "sweep.json")
    if os.path.exists(path):
        try:
            with open(path) as f:
                source = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise ResultsDirError(f"{path} is unreadable ({e}), so the seeds of the runs in "
                                  f"{results_dir} are unknown; use another results "
                                  "directory") from e
        old = source.get("seeds", [1]) if isinstance(source, dict) else None
        if not isinstance(old, list):
            old = [old]
        if sorted(map(repr, old)) != sorted(map(repr, seeds)):
            raise ResultsDirError(
                f"{results_dir} was made with seeds {_seed_list(old)} (its sweep.json), this "
                f"sweep runs seeds {_seed_list(seeds)}: a results directory holds one set of "
                f"seeds, so its runs are not mixed; {hint}")
    runs = os.path.join(results_dir, "runs")
    for name in sorted(os.listdir(runs)) if os.path.isdir(runs) else []:
        if name.startswith("."):
            continue  # a partial run: redone or left alone, never read
        try:
            with open(os.path.join(runs, name, "config.json")) as f:
                seed = json.load(f).get("seed")
        except (OSError, json.JSONDecodeError, AttributeError):
            continue  # a partial or broken run: redone, or not ours
        if seed not in seeds:
            raise ResultsDirError(
                f"{results_dir} holds run {name} with seed {seed}, this sweep runs seeds "
                f"{_seed_list(seeds)}: a results directory holds one set of seeds, so its "
                f"runs are not mixed; {hint}")


def write_json_atomic(path, obj):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def run_dir(results_dir, run):
    return os.path.join(results_dir, "runs", run.name)


def is_finished(path):
    """True if the run directory holds a successful, complete run."""
    try:
        with open(os.path.join(path, "status.json")) as f:
            status = json.load(f)
    except (OSError, json.JSONDecodeError):
        return False
    return status.get("ok") is True and os.path.isfile(os.path.join(path, "summary.json"))


def _fmt_duration(seconds):
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _run_one(run, index, launcher, final_dir, timeout_s):
    partial = os.path.join(os.path.dirname(final_dir), f".{run.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    cmd = run.command(launcher, partial)
    # The command as it names the final directory, which is where its files end up.
    final_cmd = [a.replace(partial, final_dir) for a in cmd]
    started = time.time()
    write_json_atomic(os.path.join(partial, "config.json"),
                      dict(run.describe(), sweep_index=index, command=final_cmd,
                           launcher=launcher, started_at=started))
    returncode, error = None, None
    with open(os.path.join(partial, "launch.log"), "wb") as log:
        try:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        except OSError as e:
            error = f"cannot start launcher {launcher!r}: {e.strerror}"
        else:
            try:
                returncode = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGTERM)
                returncode = proc.wait()
                error = f"timed out after {timeout_s}s"
            except BaseException:  # KeyboardInterrupt: stop the job, leave the partial run
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait()
                raise
    finished = time.time()
    has_summary = os.path.isfile(os.path.join(partial, "summary.json"))
    ok = returncode == 0 and has_summary and error is None
    if error is None and returncode != 0:
        error = f"launcher exited with status {returncode}"
    elif error is None and not has_summary:
        error = "launcher exited 0 but wrote no summary.json"
    write_json_atomic(os.path.join(partial, "status.json"),
                      {"ok": ok, "returncode": returncode, "error": None if ok else error,
                       "started_at": started, "finished_at": finished})
    shutil.rmtree(final_dir, ignore_errors=True)
    os.replace(partial, final_dir)
    return ok, error, finished - started


MAKE_CTR_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "scripts", "make_ctr_data.py")


def make_ctr_data(results_dir, args, out):
    """Writes the sweep's click logs into <results_dir>/data with scripts/make_ctr_data.py, once
    (its answer.json, written last, says they are complete); returns the directory."""
    data_dir = os.path.abspath(os.path.join(results_dir, "data"))
    if not os.path.isfile(os.path.join(data_dir, "answer.json")):
        cmd = [sys.executable, MAKE_CTR_DATA, "--out", data_dir]
        for key, value in sorted(args.items()):
            cmd += [f"--{key.replace('_', '-')}", str(value)]
        print(f"[sweep] writing click logs: {' '.join(cmd)}", file=out, flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return data_dir


def run_sweep(sweep, results_dir, launcher, timeout_s=600, out=None):
    """Runs every unfinished run of the sweep. Returns (ran, skipped, failed names). Raises
    ResultsDirError, before running anything, when results_dir was made with other seeds."""
    out = sys.stdout if out is None else out
    check_seeds(results_dir, {r.seed for r in sweep.runs})
    os.makedirs(os.path.join(results_dir, "runs"), exist_ok=True)
    write_json_atomic(os.path.join(results_dir, "sweep.json"), sweep.source)
    if sweep.ctr_data is not None:
        data_dir = make_ctr_data(results_dir, sweep.ctr_data, out)
        for r in sweep.runs:
            r.options.setdefault("data_dir", data_dir)
    # With each run's place in the sweep, which reports list runs in.
    todo = [(index, r) for index, r in enumerate(sweep.runs)
            if not is_finished(run_dir(results_dir, r))]
    skipped = len(sweep.runs) - len(todo)
    if skipped:
        print(f"[sweep] {sweep.name}: {skipped} of {len(sweep.runs)} runs already finished; "
              f"running the other {len(todo)}", file=out, flush=True)
    else:
        print(f"[sweep] {sweep.name}: {len(todo)} runs", file=out, flush=True)
    t0 = time.time()
    failed = []
    for i, (index, run) in enumerate(todo, 1):
        print(f"[sweep] run {i}/{len(todo)} {run.name} ...", file=out, flush=True)
        ok, error, seconds = _run_one(run, index, launcher, run_dir(results_dir, run), timeout_s)
        elapsed = time.time() - t0
        eta = elapsed / i * (len(todo) - i)
        state = "ok" if ok else f"FAILED ({error}; see {run_dir(results_dir, run)}/launch.log)"
        print(f"[sweep] run {i}/{len(todo)} {run.name}: {state} in {seconds:.1f}s "
              f"(elapsed {_fmt_duration(elapsed)}, ETA {_fmt_duration(eta)})",
              file=out, flush=True)
        if not ok:
            failed.append(run.name)
    if failed:
        print(f"[sweep] {len(failed)} run(s) failed: {', '.join(failed)}", file=out, flush=True)
    return len(todo), skipped, failed
