#!/usr/bin/env python3
"""CPU-milliseconds a step of a running native job, per process, and its examples/s: the
measure for a job that keeps every core busy, where the wall clock follows the machine's
mood more than the code. Each sample starts a job (towerps-launch, --log-every 10), lets it
warm up, reads every process's CPU time (utime + stime of all its threads, /proc/<pid>/stat)
and worker 0's step at the start and the end of a window, then stops the job. With --vs, the
samples alternate between two launchers (each runs the towerps-server and towerps-worker beside
it), and the median of the paired ratios is reported, so that a drift of the machine between
pairs does not read as a difference.

    python3 bench/job_cpu.py --launch build/release/bin/towerps-launch \\
        [--vs /tmp/old/bin/towerps-launch] [--pairs 6] [--window 3] -- \\
        --model dlrm_small --dataset criteo --data-dir /tmp/ctr200 --servers 2 --workers 2 \\
        --batch-size 128 --mode sync --table-placement whole --transport shm \\
        --intra-op-threads 1 --bind-cores

The job's flags follow `--`; --max-steps, --log-every, --log-level and --run-dir are this
script's. One process's CPU a step (servers and workers apart) and the total are printed per
sample; the examples/s are the job's, from worker 0's steps over the window (a sync job's
workers step together), the window opening and closing as worker 0 logs a step."""

import argparse
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time

STEP = re.compile(rb"\] step (\d+),")


def last_step(log):
    """The last step worker 0 logged, or -1."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, os.path.getsize(log) - 8192))
            steps = STEP.findall(f.read())
    except OSError:
        return -1
    return int(steps[-1]) if steps else -1


def next_step(log, timeout):
    """Waits for worker 0 to log a new step (lines every 10 steps) and returns it with the time
    it was seen, so that a window's steps and its seconds begin and end together."""
    first, deadline = last_step(log), time.monotonic() + timeout
    while time.monotonic() < deadline:
        step = last_step(log)
        if step != first:
            return step, time.monotonic()
        time.sleep(0.002)
    sys.exit("job_cpu: worker 0 logged no step for %d s" % timeout)


def examples_per_step(run_dir):
    """The job's examples a step (batch size times workers), from the launcher's job.json."""
    try:
        with open(os.path.join(run_dir, "job.json")) as f:
            job = json.load(f)["job"]
        return int(job["batch-size"]) * int(job["workers"])
    except (OSError, ValueError, KeyError) as e:
        sys.exit("job_cpu: cannot read the job's batch size and workers from %s: %s"
                 % (os.path.join(run_dir, "job.json"), e))


def processes(run_dir):
    """(name, pid) of the job's servers and workers, from the launcher's processes.txt."""
    try:
        with open(os.path.join(run_dir, "processes.txt")) as f:
            return [(w[0] + w[1], int(w[3])) for w in (line.split() for line in f)
                    if len(w) >= 4 and w[0] in ("ps", "worker")]
    except (OSError, ValueError):
        return []


def cpu_seconds(pid):
    """utime + stime of every thread of `pid` (live or ended), or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sample(launch, job_flags, args):
    """One job: {"ms": {process: CPU ms a step}, "total": ..., "examples_per_sec": ...}."""
    with tempfile.TemporaryDirectory(prefix="towerps_job_cpu_") as out:
        run_dir = os.path.join(out, "run")
        cmd = [launch] + job_flags + ["--max-steps", "100000000", "--log-every", "10",
                                      "--log-level", "info", "--run-dir", run_dir]
        with open(os.path.join(out, "launch.log"), "wb") as log:
            # Its own process group, so that nothing of the job outlives the sample.
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        try:
            worker_log = os.path.join(run_dir, "worker-0.log")
            deadline = time.monotonic() + args.start_timeout
            while last_step(worker_log) < args.warmup_steps:
                if proc.poll() is not None or time.monotonic() > deadline:
                    with open(os.path.join(out, "launch.log"), "rb") as f:
                        tail = f.read()[-3000:].decode(errors="replace")
                    sys.exit("job_cpu: the job did not reach step %d within %d s (exit %s):\n%s"
                             % (args.warmup_steps, args.start_timeout, proc.poll(), tail))
                time.sleep(0.1)
            procs = processes(run_dir)
            if not procs:
                sys.exit("job_cpu: %s names no server or worker" %
                         os.path.join(run_dir, "processes.txt"))
            examples = examples_per_step(run_dir)
            step0, t0 = next_step(worker_log, args.start_timeout)
            cpu0 = {n: cpu_seconds(p) for n, p in procs}
            time.sleep(args.window)
            step1, t1 = next_step(worker_log, args.start_timeout)
            cpu1 = {n: cpu_seconds(p) for n, p in procs}
        finally:
            proc.send_signal(signal.SIGINT)  # the launcher stops its job in order
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the group
            except ProcessLookupError:
                pass
            proc.wait()
    steps = step1 - step0
    if steps <= 0 or any(cpu0[n] is None or cpu1[n] is None for n in cpu0):
        sys.exit("job_cpu: no step or a process ended within the window (steps %d); a longer "
                 "--window?" % steps)
    ms = {n: 1000 * (cpu1[n] - cpu0[n]) / steps for n in sorted(cpu0)}
    return {"ms": ms, "total": sum(ms.values()),
            "examples_per_sec": steps * examples / (t1 - t0)}


def line(s):
    parts = " ".join("%s %.2f" % (n, v) for n, v in s["ms"].items())
    return "%s, total %.2f ms a step; %.0f examples/s" % (parts, s["total"],
                                                         s["examples_per_sec"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("--launch", default="towerps-launch", help="the launcher to measure")
    ap.add_argument("--vs", help="a second launcher, alternated with --launch (A/B)")
    ap.add_argument("--pairs", type=int, default=3, help="samples of each launcher")
    ap.add_argument("--window", type=float, default=3.0, help="seconds measured per sample")
    ap.add_argument("--warmup-steps", type=int, default=200,
                    help="steps worker 0 logs before the window opens")
    ap.add_argument("--start-timeout", type=int, default=120,
                    help="seconds a job may take to reach --warmup-steps")
    ap.add_argument("job_flags", nargs=argparse.REMAINDER,
                    help="after --: the job's towerps-launch flags")
    args = ap.parse_args()
    flags = args.job_flags[1:] if args.job_flags[:1] == ["--"] else args.job_flags
    if not flags:
        ap.error("give the job's flags after --, e.g. -- --model dlrm_small --workers 2 ...")
    for own in ("--max-steps", "--log-every", "--log-level", "--run-dir"):
        if any(f == own or f.startswith(own + "=") for f in flags):
            ap.error("%s is this script's; drop it from the job's flags" % own)
    if args.pairs < 1 or args.window <= 0:
        ap.error("--pairs must be at least 1 and --window positive")
    print("job: %s" % " ".join(shlex.quote(f) for f in flags), flush=True)
    ratios_cpu, ratios_eps = [], []
    for i in range(args.pairs):
        a = sample(args.launch, flags, args)
        print("sample %d A: %s" % (i + 1, line(a)), flush=True)
        if not args.vs:
            continue
        b = sample(args.vs, flags, args)
        print("sample %d B: %s" % (i + 1, line(b)), flush=True)
        ratios_cpu.append(b["total"] / a["total"])
        ratios_eps.append(b["examples_per_sec"] / a["examples_per_sec"])
    if args.vs:
        print("B/A, median of %d pairs: CPU a step %.3f (%s), examples/s %.3f (%s)"
              % (args.pairs, statistics.median(ratios_cpu),
                 " ".join("%.2f" % r for r in ratios_cpu), statistics.median(ratios_eps),
                 " ".join("%.2f" % r for r in ratios_eps)))


if __name__ == "__main__":
    main()
