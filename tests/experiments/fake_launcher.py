#!/usr/bin/env python3
"""A stand-in for towerps-launch in the experiment tests: parses the flags run_sweep passes,
writes plausible metrics and summary files, and exits. Like the real launcher it answers
--list-choices (fixed lists) and --validate-only (a rough copy of the straggler grammar, enough
for the tests; test_sweep.RealLauncherTest checks the real one). Test hooks (arguments of the
test, not of the real CLI), read from the environment of the test that starts it:
  FAKE_LAUNCH_LOG      append "<run-dir>" per invocation to this file
  FAKE_LAUNCH_FAIL     exit 3 without a summary when the --mode equals this value
  FAKE_LAUNCH_INTERRUPT_SEED  for this --seed: write half the files, SIGINT the parent, hang
  FAKE_LAUNCH_DIVERGE  when the --mode equals this value: a summary with "diverged": true and
                       finite chance-level numbers (what a job with --on-nonfinite continue
                       reports once the servers refused its NaN gradients)
"""
import argparse
import json
import os
import re
import signal
import sys
import time

CHOICES = {"modes": ["sync", "async", "ssp", "softsync"], "models": ["mlp", "cnn", "cifar10"],
           "datasets": ["fashion-mnist", "cifar10", "synthetic"],
           "optimizers": ["sgd", "momentum", "adam", "adagrad"],
           "lr_schedules": ["constant", "step", "exponential"]}
if sys.argv[1:] == ["--list-choices"]:
    print(json.dumps(CHOICES, indent=2))
    sys.exit(0)


def validate_only(a):
    """Exit 0 when the straggler flags look valid, else 2 with a launcher-style message."""
    d = r"(\d+(\.\d*)?|\.\d+)(ms|us|s)?"
    problems = []
    if a.straggler is not None:
        m = re.fullmatch(r"(\d+):" + d, a.straggler)
        if not m:
            problems.append(f"--straggler={a.straggler} is not RANK:DELAY (e.g. 1:40ms)")
        elif int(m.group(1)) >= a.workers:
            problems.append(f"--straggler rank {m.group(1)} is not a worker rank "
                            f"0..{a.workers - 1}")
    if a.straggler_dist is not None and not re.fullmatch(f"exp:{d}|uniform:{d}:{d}",
                                                          a.straggler_dist):
        problems.append(f"--straggler-dist={a.straggler_dist} is not exp:MEAN or uniform:LO:HI")
    if a.slow_workers is not None:
        m = re.fullmatch(r"(\d+):(\d+(\.\d*)?)", a.slow_workers)
        if not m or int(m.group(1)) > a.workers or not 1 <= float(m.group(2)) <= 1000:
            problems.append(f"--slow-workers={a.slow_workers}: K must be 0..{a.workers} and "
                            "FACTOR between 1 and 1000")
    if problems:
        print(f"towerps-launch: {problems[0]}", file=sys.stderr)
        sys.exit(2)
    print("[launch] the options are valid")
    sys.exit(0)


p = argparse.ArgumentParser()
for flag in ("--workers", "--epochs", "--seed", "--staleness", "--replicas-to-aggregate",
             "--servers", "--log-every", "--softsync-n", "--evals-per-epoch"):
    p.add_argument(flag, type=int)
for flag in ("--mode", "--model", "--lr", "--run-dir", "--metrics-out", "--summary-out",
             "--dataset", "--optimizer", "--batch-size", "--straggler", "--straggler-dist",
             "--slow-workers", "--max-steps", "--on-nonfinite", "--lr-schedule",
             "--lr-scaling"):
    p.add_argument(flag)
p.add_argument("--staleness-aware-lr", action="store_true")
p.add_argument("--validate-only", action="store_true")
a = p.parse_args()
if a.validate_only:
    a.workers = 2 if a.workers is None else a.workers
    validate_only(a)

if os.environ.get("FAKE_LAUNCH_LOG"):
    with open(os.environ["FAKE_LAUNCH_LOG"], "a") as f:
        f.write(os.path.dirname(a.summary_out) + "\n")
print(f"[launch] fake job: {' '.join(sys.argv[1:])}")
if os.environ.get("FAKE_LAUNCH_FAIL") == a.mode:
    print("[worker:1] E fake failure", file=sys.stderr)
    sys.exit(3)

now = time.time()
stale = 0 if a.mode == "sync" else (a.staleness if a.mode == "ssp" else a.workers - 1)
for rank in range(a.workers):
    with open(a.metrics_out.replace("{rank}", str(rank)), "w") as f:
        for step in (10, 20, 30):
            f.write(json.dumps({"kind": "train", "time": now + step / 100, "worker": rank,
                                "step": step, "epoch": 0, "loss": 2.0 / step,
                                "examples_per_sec": 1000.0, "staleness": stale,
                                "step_seconds": 0.01, "wait_seconds": 0.0,
                                "delay_seconds": 0.0}) + "\n")
        if rank == 0:
            f.write(json.dumps({"kind": "eval", "time": now + 0.3, "worker": 0, "step": 30,
                                "epoch": 1, "test_accuracy": 0.5 + a.seed / 100,
                                "test_loss": 1.0}) + "\n")
        if os.environ.get("FAKE_LAUNCH_INTERRUPT_SEED") == str(a.seed):
            f.flush()
            os.kill(os.getppid(), signal.SIGINT)
            time.sleep(30)
hist = [0] * 4
hist[min(stale, 3)] = 90
diverged = os.environ.get("FAKE_LAUNCH_DIVERGE") == a.mode
if diverged and a.on_nonfinite != "continue":  # the real job stops at the first NaN
    print(f"towerps-launch: worker:0 exited with code 1: diverged at step 3 (loss = nan)",
          file=sys.stderr)
    sys.exit(1)
with open(a.summary_out, "w") as f:
    json.dump({"test_accuracy": 0.1 if diverged else 0.5 + a.seed / 100, "test_loss": 1.0,
               "final_train_loss": 0.07, "diverged": diverged,
               "train_seconds": 0.3, "examples_per_sec": 1000.0 * a.workers, "steps": 30,
               "epochs": a.epochs, "mode": a.mode, "workers": a.workers, "servers": 1,
               "replicas_to_aggregate": a.replicas_to_aggregate or a.workers,
               "staleness_bound": a.staleness, "model": a.model, "batch_size": 64,
               "dropped_stale": 0, "updates_applied": 90, "mean_staleness": float(stale),
               "p99_staleness": float(stale), "staleness_histogram": hist, "rank": 0}, f)
