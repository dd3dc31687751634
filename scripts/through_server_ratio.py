#!/usr/bin/env python3
"""The GPU issue's figure from scripts/gpu_verify.sh step 5's files: a model's step through one
server and one worker (towerps-launch summaries, ratio-MODEL-ROUND-THREADS.json in WORK) against
the same worker alone (towerps-bench train --json lines in JSONL), best of each; PASS at 0.9x or
more. Also the job's --profile-steps critical path and the servers' update time per step for
each --server-threads value.

    through_server_ratio.py JSONL WORK BATCH MODEL...
"""

import glob
import json
import os
import sys


def main():
    if len(sys.argv) < 5 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) > 1 else 2
    jsonl, work, batch, models = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    alone = {}
    with open(jsonl) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            model = r.get("model")
            alone[model] = max(alone.get(model, 0), r.get("examples_per_sec", 0))
    for model in models:
        best = {}  # --server-threads value -> the fastest job's summary
        for path in glob.glob(os.path.join(work, "ratio-%s-*.json" % model)):
            threads = os.path.basename(path)[:-5].rsplit("-", 1)[1]
            with open(path) as f:
                s = json.load(f)
            if s.get("steps", 0) <= 0:
                continue
            if threads not in best or s["train_seconds"] / s["steps"] < \
                    best[threads]["train_seconds"] / best[threads]["steps"]:
                best[threads] = s
        s = best.get("auto")
        if not alone.get(model) or s is None:
            print("FAIL %s b%d through 1 server vs alone: no figures (see ratio-*.log)"
                  % (model, batch))
            continue
        alone_ms = 1000.0 * batch / alone[model]
        through_ms = 1000.0 * s["train_seconds"] / s["steps"]
        ratio = alone_ms / through_ms
        print("%s %s b%d through 1 server vs alone: %.2f vs %.2f ms/step, ratio %.2f"
              % ("PASS" if ratio >= 0.9 else "FAIL", model, batch, through_ms, alone_ms, ratio))
        p = s.get("profile") or {}
        c = p.get("critical_path") or {}
        print("INFO %s profile: step %.2f ms, compute %.2f ms, %.0f%% of pushes before compute "
              "ended; critical path through %s: gradient at %.2f, push +%.2f, answer +%.2f, "
              "loading +%.2f ms"
              % (model, p.get("step_ms", 0), p.get("compute_ms", 0),
                 100 * p.get("pushes_before_compute_end", 0), c.get("variable"),
                 c.get("to_gradient_ms", 0), c.get("to_push_ms", 0), c.get("round_trip_ms", 0),
                 c.get("loading_ms", 0)))
        for threads in sorted(best):
            t = best[threads]
            print("INFO %s --server-threads %s: updates %.3f ms/step wall-clock, %.3f summed "
                  "over threads" % (model, threads, 1000 * t["server_update_wall_seconds"] /
                                    t["steps"], 1000 * t["server_update_seconds"] / t["steps"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
