#!/usr/bin/python3
"""What a worker and a server message cost, as the worker count grows (issue 36).

Runs `towerps-launch --servers S --workers N --mode M --epochs E` for each N of --workers, and
samples every process of the job from /proc while it runs (every --interval seconds): each
worker's and server's peak resident memory and CPU time (utime + stime). A server's
requests are the pulls it served (async: nearly every one rides with a push); its CPU per request
is its CPU time over them. Prints one line per N, or JSON with --json:

  workers  wall_s  acc  worker private MiB (median, max) + shared  server private MiB
  worker_cpu_s (median)  server_cpu_s (sum)  requests  server_us_per_request  examples_per_s

Private memory (RssAnon + RssShmem) is what one more process costs; shared (RssFile: the
binaries and libraries, cuBLAS's among them) is one copy for the host.

  bench/many_workers.py [--launch build/release/bin/towerps-launch] [--workers 8,16,32]
                        [--servers 4] [--mode async] [--epochs 1] [--seed 1] [--json]
                        [-- extra towerps-launch options]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

STATS = re.compile(r"stats: (\d+) gradients, (\d+) updates, (\d+) pulls served")
TICK = os.sysconf("SC_CLK_TCK")


def processes(run_dir):
    """{pid: (role, rank)} from the launcher's processes.txt, as far as it is written."""
    out = {}
    try:
        with open(os.path.join(run_dir, "processes.txt")) as f:
            for line in f:
                p = line.split()
                if len(p) >= 4 and p[2] == "pid":
                    out[int(p[3])] = (p[0], int(p[1]))
    except FileNotFoundError:
        pass
    return out


def sample(pid):
    """(private resident KiB, shared file-backed resident KiB, CPU seconds) of a live process;
    None once it is gone. Private (RssAnon) is what each more worker costs; file-backed pages
    (RssFile: the binaries and libraries) are one copy for every process of the host."""
    try:
        with open(f"/proc/{pid}/status") as f:
            kib = {l.split(":")[0]: int(l.split()[1]) for l in f if l.startswith("Rss")}
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
        return kib["RssAnon"] + kib.get("RssShmem", 0), kib["RssFile"], cpu
    except (FileNotFoundError, ProcessLookupError, KeyError, IndexError, ValueError):
        return None


def run_job(args, workers, work):
    run_dir = os.path.join(work, f"run-{workers}")
    summary = os.path.join(work, f"summary-{workers}.json")
    cmd = [args.launch, "--servers", str(args.servers), "--workers", str(workers), "--mode",
           args.mode, "--epochs", str(args.epochs), "--seed", str(args.seed), "--run-dir", run_dir,
           "--summary-out", summary] + args.extra
    began = time.monotonic()
    log = open(os.path.join(work, f"launch-{workers}.log"), "w")
    job = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    seen = {}  # pid -> [role, peak private KiB, peak shared KiB, CPU s at the last sample]
    while job.poll() is None:
        for pid, (role, rank) in processes(run_dir).items():
            s = sample(pid)
            if s is None:
                continue
            old = seen.get(pid, [role, 0, 0, 0])
            seen[pid] = [role, max(old[1], s[0]), max(old[2], s[1]), s[2]]
        time.sleep(args.interval)
    wall = time.monotonic() - began
    if job.returncode != 0:
        sys.exit(f"many_workers: the {workers}-worker job exited with {job.returncode}; "
                 f"see {log.name}")
    with open(summary) as f:
        s = json.load(f)
    requests = 0
    for srv in range(args.servers):
        with open(os.path.join(run_dir, f"ps-{srv}.log")) as f:
            m = STATS.findall(f.read())
        if not m:
            sys.exit(f"many_workers: no stats line in {run_dir}/ps-{srv}.log")
        requests += int(m[-1][2])
    w = [v for v in seen.values() if v[0] == "worker"]
    ps = [v for v in seen.values() if v[0] == "ps"]
    if not w or not ps:
        sys.exit(f"many_workers: the {workers}-worker job ended before it could be sampled")
    server_cpu = sum(v[3] for v in ps)
    return {
        "workers": workers, "servers": args.servers, "mode": args.mode, "wall_s": wall,
        "test_accuracy": s["test_accuracy"], "examples_per_sec": s["examples_per_sec"],
        "mean_staleness": s["mean_staleness"],
        "worker_private_mib_median": statistics.median(v[1] for v in w) / 1024,
        "worker_private_mib_max": max(v[1] for v in w) / 1024,
        "worker_shared_mib_max": max(v[2] for v in w) / 1024,
        "worker_cpu_s_median": statistics.median(v[3] for v in w),
        "server_private_mib_max": max(v[1] for v in ps) / 1024,
        "server_cpu_s": server_cpu, "requests": requests,
        "server_us_per_request": 1e6 * server_cpu / max(requests, 1),
        "sampled_workers": len(w),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--launch", default="build/release/bin/towerps-launch")
    ap.add_argument("--workers", default="8,16,32")
    ap.add_argument("--servers", type=int, default=4)
    ap.add_argument("--mode", default="async")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("extra", nargs="*", help="after --: more towerps-launch options")
    args = ap.parse_args()
    try:
        counts = [int(n) for n in args.workers.split(",")]
    except ValueError:
        sys.exit(f"many_workers: --workers {args.workers!r}: give worker counts as 8,16,32")
    rows = []
    with tempfile.TemporaryDirectory(prefix="towerps-workers.") as work:
        for n in counts:
            r = run_job(args, n, work)
            rows.append(r)
            if not args.json:
                print(f"{n:4d} workers: {r['wall_s']:6.1f} s, acc {r['test_accuracy']:.4f}, "
                      f"worker private {r['worker_private_mib_median']:.0f} MiB (max "
                      f"{r['worker_private_mib_max']:.0f}) + shared "
                      f"{r['worker_shared_mib_max']:.0f}, server private "
                      f"{r['server_private_mib_max']:.0f} MiB, worker CPU "
                      f"{r['worker_cpu_s_median']:.2f} s,"
                      f" servers {r['server_cpu_s']:.2f} CPU s for {r['requests']} requests = "
                      f"{r['server_us_per_request']:.1f} us each, {r['examples_per_sec']:.0f} "
                      f"examples/s", flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
