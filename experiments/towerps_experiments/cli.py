"""Entry points of experiments/run_sweep, make_report and run_preset."""

import argparse
import os
import sys

from . import checks, results, runner, sweep

EXPERIMENTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(EXPERIMENTS_DIR)
DEFAULT_LAUNCHER = os.path.join(REPO_ROOT, "build", "release", "bin", "towerps-launch")
PRESETS_DIR = os.path.join(EXPERIMENTS_DIR, "presets")


def _report(results_dir, target, out=sys.stdout):
    from . import report  # late: plotting needs matplotlib
    path, check_results = report.make_report(results_dir, target)
    print(f"[report] {path}", file=out)
    for c in check_results:
        print(f"[check] {c.verdict}: {c.description}. {c.detail}.", file=out)
    return check_results


def _sweep_and_report(sweep_file, results_dir, launcher, timeout_s, no_report, seeds=None,
                      prog="run_sweep", worker_cmd=None):
    # The launcher first: it says what a sweep file may ask for.
    if not (os.path.isfile(launcher) and os.access(launcher, os.X_OK)):
        print(f"{prog}: launcher {launcher!r} is not an executable file; build it "
              "(cmake --preset release && cmake --build --preset release) or pass --launcher",
              file=sys.stderr)
        return 2, None
    try:
        sw = sweep.load(sweep_file, launcher, seeds, worker_cmd)
    except (sweep.SweepError, checks.CheckError) as e:
        print(f"{prog}: bad sweep file: {e}", file=sys.stderr)
        return 2, None
    except sweep.LauncherError as e:
        print(f"{prog}: cannot check the sweep file with the launcher: {e}", file=sys.stderr)
        return 2, None
    try:
        _, _, failed = runner.run_sweep(sw, results_dir, launcher, timeout_s)
    except runner.ResultsDirError as e:
        hint = " (--results-dir DIR)" if prog == "run_preset" else ""
        print(f"{prog}: {e}{hint}", file=sys.stderr)
        return 2, None
    except KeyboardInterrupt:
        print("\n[sweep] interrupted; run the same command again to resume", file=sys.stderr)
        return 130, None
    check_results = None if no_report else _report(results_dir, None)
    return (1 if failed else 0), check_results


def seed_list(text):
    """argparse type of --seeds: comma-separated integers >= 0, at least one, none repeated."""
    try:
        return sweep.parse_seed_list(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"invalid seed list {e}") from e


def _common(p):
    p.add_argument("--launcher", default=DEFAULT_LAUNCHER,
                   help="towerps-launch binary (default: %(default)s)")
    p.add_argument("--seeds", type=seed_list, default=None, metavar="S,S,...",
                   help="run these seeds (comma-separated integers >= 0, e.g. 4,5,6) instead "
                   "of the sweep file's; a results directory made with other seeds is not "
                   "resumed")
    p.add_argument("--worker-cmd", default=None, metavar="CMD",
                   help="every run's workers are this command, a PyTorch script using the "
                   "towerps package (towerps-launch --worker-cmd; the sweep's models then only "
                   "name the runs); replaces the file's options.worker_cmd")
    p.add_argument("--timeout", type=int, default=600, help="seconds per run (default 600)")
    p.add_argument("--no-report", action="store_true", help="skip plots and report.md")


def run_sweep_main(argv=None):
    p = argparse.ArgumentParser(prog="run_sweep", description="Runs a TowerPS sweep file; "
                                "rerun the same command to resume an interrupted sweep.")
    p.add_argument("sweep_file", help="TOML or JSON sweep file")
    p.add_argument("results_dir", help="results directory (created; reused to resume)")
    _common(p)
    a = p.parse_args(argv)
    return _sweep_and_report(a.sweep_file, a.results_dir, a.launcher, a.timeout, a.no_report,
                             a.seeds, worker_cmd=a.worker_cmd)[0]


def make_report_main(argv=None):
    p = argparse.ArgumentParser(prog="make_report",
                                description="Regenerates plots/ and report.md of a results dir.")
    p.add_argument("results_dir")
    p.add_argument("--target", type=float, default=None,
                   help="target test accuracy (default: the sweep's target_accuracy, or 0.85)")
    a = p.parse_args(argv)
    try:
        _report(a.results_dir, a.target)
    except (results.ResultsError, ValueError) as e:
        print(f"make_report: {e}", file=sys.stderr)
        return 2
    return 0


def run_preset_main(argv=None):
    names = sorted(f[:-5] for f in os.listdir(PRESETS_DIR) if f.endswith(".toml"))
    p = argparse.ArgumentParser(prog="run_preset", description="Runs one preset sweep, "
                                "writes its report and says whether its expected effect "
                                "appeared.")
    p.add_argument("preset", help=f"one of: {', '.join(names)}")
    p.add_argument("--results-dir", default=None,
                   help="default: towerps-results/<preset> in the current directory (resumed "
                   "if it exists; give another one to run other --seeds)")
    _common(p)
    a = p.parse_args(argv)
    if a.preset not in names:
        print(f"run_preset: preset {a.preset!r} not found in {PRESETS_DIR} "
              f"(have: {', '.join(names)})", file=sys.stderr)
        return 2
    # Never the source tree: the current directory's, as a run directory is.
    results_dir = a.results_dir or os.path.join(os.getcwd(), "towerps-results", a.preset)
    print(f"[preset] {a.preset}: results in {results_dir}")
    rc, check_results = _sweep_and_report(os.path.join(PRESETS_DIR, f"{a.preset}.toml"),
                                          results_dir, a.launcher, a.timeout, a.no_report,
                                          a.seeds, "run_preset", a.worker_cmd)
    if check_results is not None:
        seen = sum(c.passed is True for c in check_results)
        print(f"[preset] {a.preset}: expected effect observed in {seen} of "
              f"{len(check_results)} checks (details above and in {results_dir}/report.md)")
    return rc
