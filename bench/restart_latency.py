#!/usr/bin/python3
"""Time from killing a worker to the job's next completed step (sync, local mode).

Runs a towerps-launch job (1 server, --workers workers, a step line every step), kills worker
--victim (or, with --victim ps, the server, which comes back from its checkpoint) with SIGKILL
at seeded steps, and watches a surviving worker's log: it cannot finish two more steps until the
restarted process is back and the job moves again. The figure is the time from the kill to that
survivor's second step line after it (which overestimates recovery by at most one step time,
printed alongside).

With --replicas 2 the server has a standby holding a replica of every chunk: a killed server's
chunks fail over to the other replica instead of coming back from a checkpoint. --signal STOP
freezes the server instead of killing it (it answers nothing, as a hung host): the workers must
notice it from missed pings alone; it is woken once the job has moved on.

  bench/restart_latency.py [--launch build/release/bin/towerps-launch] [--model mlp]
                           [--workers 3] [--victim RANK|ps] [--replicas 1|2] [--signal KILL|STOP]
                           [--kills 5] [--seed 1] [--json]
"""
import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

STEP = re.compile(r"^step (\d+),", re.M)


def steps(path):
    try:
        with open(path) as f:
            return [int(m) for m in STEP.findall(f.read())]
    except FileNotFoundError:
        return []


def process_pid(run_dir, role, rank):
    pid = None
    try:
        with open(os.path.join(run_dir, "processes.txt")) as f:
            for line in f:
                w = line.split()
                if len(w) >= 4 and w[0] == role and w[1] == str(rank) and w[2] == "pid":
                    pid = int(w[3])  # a restart appends a line: the last one is current
    except FileNotFoundError:
        pass
    return pid


def one_kill(args, kill_step, scratch):
    run_dir = os.path.join(scratch, "run")
    server = args.victim == "ps"
    survivor = 1 if args.victim != "1" else 0
    cmd = [args.launch, "--servers", "1", "--workers", str(args.workers), "--model", args.model,
           "--max-steps", str(args.steps), "--log-every", "1", "--run-dir", run_dir]
    if server and args.replicas == 1:
        cmd += ["--checkpoint-dir", os.path.join(scratch, "ckpt"), "--checkpoint-every", "50"]
    cmd += ["--ps-replicas", str(args.replicas)]
    with open(os.path.join(scratch, "out.txt"), "w") as out:
        job = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    survivor_log = os.path.join(run_dir, "worker-%d.log" % survivor)
    deadline = time.monotonic() + 120
    while not any(s >= kill_step for s in steps(survivor_log)):
        if job.poll() is not None or time.monotonic() > deadline:
            job.kill()
            sys.exit("restart_latency: the job ended before step %d; see %s/out.txt" %
                     (kill_step, scratch))
        time.sleep(0.001)
    before = len(steps(survivor_log))
    victim = process_pid(run_dir, "ps", 0) if server else process_pid(run_dir, "worker",
                                                                      int(args.victim))
    sig = signal.SIGSTOP if args.signal == "STOP" else signal.SIGKILL
    os.kill(victim, sig)
    killed = time.monotonic()
    while len(steps(survivor_log)) < before + 2:
        if job.poll() is not None or time.monotonic() > killed + 60:
            job.kill()
            sys.exit("restart_latency: no progress after the kill; see %s/out.txt" % scratch)
        time.sleep(0.001)
    recovered = time.monotonic() - killed
    if sig == signal.SIGSTOP:
        os.kill(victim, signal.SIGCONT)
    code = job.wait(timeout=300)
    if code != 0:
        sys.exit("restart_latency: the job exited %d; see %s/out.txt" % (code, scratch))
    return recovered


def step_time(args, scratch):
    """Undisturbed seconds per step (summary of a short run), for scale."""
    summary = os.path.join(scratch, "summary.json")
    cmd = [args.launch, "--servers", "1", "--workers", str(args.workers), "--model", args.model,
           "--max-steps", str(args.steps), "--run-dir", os.path.join(scratch, "plain"),
           "--summary-out", summary]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(summary) as f:
        s = json.load(f)
    return s["train_seconds"] / s["steps"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--launch", default="build/release/bin/towerps-launch")
    p.add_argument("--model", default="mlp")
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--victim", default="2", help="worker rank to kill, or ps (the server)")
    p.add_argument("--replicas", type=int, choices=(1, 2), default=1)
    p.add_argument("--signal", choices=("KILL", "STOP"), default="KILL")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--kills", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.signal == "STOP" and (args.victim != "ps" or args.replicas != 2):
        sys.exit("restart_latency: --signal STOP is for --victim ps with --replicas 2 (a frozen "
                 "process is never restarted; only a failover gets past it)")
    if args.workers < 2 or (args.victim != "ps" and not (
            args.victim.isdigit() and int(args.victim) < args.workers)):
        sys.exit("restart_latency: --victim must be ps or a worker rank below --workers "
                 "(at least 2), not %r" % args.victim)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="towerps-restart-") as scratch:
        per_step = step_time(args, scratch)
        times = []
        for i in range(args.kills):
            kill_step = rng.randint(args.steps // 5, args.steps * 3 // 5)
            d = os.path.join(scratch, "kill%d" % i)
            os.makedirs(d)
            times.append(one_kill(args, kill_step, d))
            print("kill %d at step %d: next completed step %.3f s later" %
                  (i + 1, kill_step, times[-1]), file=sys.stderr)
    result = {"model": args.model, "workers": args.workers, "victim": args.victim,
              "replicas": args.replicas, "signal": args.signal,
              "kills": args.kills,
              "median_s": statistics.median(times), "max_s": max(times),
              "step_s": per_step, "times_s": times}
    if args.json:
        print(json.dumps(result))
    else:
        print("SIG%s of %s (--ps-replicas %d) to next completed step: median %.3f s, max %.3f s "
              "over %d kills (an undisturbed step takes %.4f s)" %
              (args.signal, "ps:0" if args.victim == "ps" else "worker:" + args.victim,
               args.replicas, result["median_s"], result["max_s"], args.kills, per_step))


if __name__ == "__main__":
    main()
