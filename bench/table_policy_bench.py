#!/usr/bin/env python3
"""What admission and eviction buy (job/table_policy.h): native dlrm_small, 2 servers and 2
workers in sync, on a click stream whose ids drift (scripts/make_ctr_data.py --drift), once per
policy. For each: the rows the servers hold at the end, each server's peak RSS (VmHWM, read
from /proc by this script every 0.1 s while the job runs), the test AUC against the stream's
Bayes AUC, what the policies did (from the summary) and the job's wall time.

  bench/table_policy_bench.py --launch build/release/bin/towerps-launch --data-dir D
      [--policies none,min2,ttl,min2+ttl] [--epochs 1] [--ttl-steps 300] [--json]

D holds train.txt, test.txt and answer.json from make_ctr_data.py (e.g. --train 300000 --test
30000 --seed 1 --drift 3). Prints a Markdown table (or one JSON object per policy).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time


def policy_flags(name, ttl_steps):
    flags = {"none": [], "min2": ["--table-admission-min-count", "2"],
             "ttl": ["--table-ttl-steps", str(ttl_steps)],
             "min2+ttl": ["--table-admission-min-count", "2", "--table-ttl-steps", str(ttl_steps)]}
    if name not in flags:
        raise SystemExit("table_policy_bench: unknown policy '%s' (one of %s)"
                         % (name, ", ".join(flags)))
    return flags[name]


def peak_rss_mib(pid):
    try:
        with open("/proc/%d/status" % pid) as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def server_pids(run_dir):
    """The servers' pids, from the run directory's processes.txt ("ps 0 pid 1234 log ...")."""
    pids = []
    try:
        with open(os.path.join(run_dir, "processes.txt")) as fh:
            for line in fh:
                words = line.split()
                if len(words) >= 4 and words[0] == "ps" and words[2] == "pid":
                    pids.append(int(words[3]))
    except OSError:
        pass
    return pids


def run(args, name, out):
    run_dir = os.path.join(out, "run-" + name)
    summary = os.path.join(out, name + ".json")
    cmd = [args.launch, "--servers", "2", "--workers", "2", "--model", "dlrm_small", "--dataset",
           "criteo", "--data-dir", args.data_dir, "--batch-size", "128", "--epochs",
           str(args.epochs), "--run-dir", run_dir, "--summary-out", summary]
    cmd += policy_flags(name, args.ttl_steps)
    peaks, done = {}, threading.Event()

    def sample():
        while not done.is_set():
            for pid in server_pids(run_dir):
                rss = peak_rss_mib(pid)
                if rss is not None:
                    peaks[pid] = max(peaks.get(pid, 0.0), rss)
            time.sleep(0.1)

    sampler = threading.Thread(target=sample)
    sampler.start()
    start = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    wall = time.time() - start
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit("table_policy_bench: the %s job failed (exit %d):\n%s"
                         % (name, proc.returncode, proc.stdout[-4000:]))
    with open(summary) as fh:
        s = json.load(fh)
    return {"policy": name, "flags": " ".join(policy_flags(name, args.ttl_steps)) or "-",
            "table_rows": s.get("table_rows", 0), "test_auc": s.get("test_auc"),
            "server_peak_rss_mib": [round(v, 1) for v in sorted(peaks.values())],
            "admitted": s.get("table_rows_admitted", 0),
            "gradients_dropped": s.get("table_gradients_dropped", 0),
            "evicted_ttl": s.get("table_evicted_ttl", 0), "wall_s": round(wall, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--launch", required=True, help="towerps-launch to run")
    ap.add_argument("--data-dir", required=True, help="make_ctr_data.py output (with --drift)")
    ap.add_argument("--policies", default="none,min2,ttl,min2+ttl",
                    help="comma-separated: none, min2, ttl, min2+ttl")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--ttl-steps", type=int, default=300)
    ap.add_argument("--json", action="store_true", help="one JSON object per policy")
    args = ap.parse_args()
    for path in (args.launch, os.path.join(args.data_dir, "answer.json")):
        if not os.path.exists(path):
            ap.error("%s does not exist" % path)
    with open(os.path.join(args.data_dir, "answer.json")) as fh:
        answer = json.load(fh)
    names = [p for p in args.policies.split(",") if p]
    for p in names:
        policy_flags(p, args.ttl_steps)  # refuse a bad name before any job runs
    results = []
    with tempfile.TemporaryDirectory() as out:
        for i, name in enumerate(names):
            print("[%d/%d] %s ..." % (i + 1, len(names), name), file=sys.stderr, flush=True)
            results.append(run(args, name, out))
    if args.json:
        for r in results:
            print(json.dumps(dict(r, bayes_auc=answer.get("bayes_auc"), drift=answer.get("drift"))))
        return 0
    print("Stream: %d training examples, drift %s, Bayes AUC %.4f\n"
          % (answer["train"], answer.get("drift", 0), answer["bayes_auc"]))
    print("| policy | flags | rows held at the end | server peak RSS (MiB) | test AUC | admitted "
          "| gradients dropped | evicted (ttl) | wall (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print("| %s | `%s` | %d | %s | %.4f | %d | %d | %d | %.1f |" % (
            r["policy"], r["flags"], r["table_rows"],
            ", ".join("%.0f" % v for v in r["server_peak_rss_mib"]),
            -1 if r["test_auc"] is None else r["test_auc"],
            r["admitted"], r["gradients_dropped"], r["evicted_ttl"], r["wall_s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
