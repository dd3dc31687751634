#!/usr/bin/env python3
"""PyTorch workers' speed: the cnn at batch 64 on the CPU, stepped by plain PyTorch (SGD) and by
one PyTorch worker against one TowerPS server (towerps-launch --worker-cmd, the servers' SGD),
in turns in one invocation, so the ratio is not the machine's mood. The worker runs twice: with
its gradients in the session's buffers, lent to the server (opt.zero_grad(), "towerps"), and
with PyTorch's own, copied into them by each push (zero_grad(set_to_none=True), "towerps-copy").
Each run times its steps after a warm-up inside the script; the report is the median ms/step of
each and their ratios to plain PyTorch.

    PYTHONPATH=build/release/python python3 bench/pytorch_worker_bench.py \\
        --launch build/release/bin/towerps-launch [--steps 400] [--rounds 3] [--device cuda]

With --device cuda the model, its data and plain PyTorch's SGD are on the GPU; the worker's
parameters are too, and the session stages their gradients and values through pinned memory.
Each timed span then starts and ends with torch.cuda.synchronize().

The same file is the timed script (--run plain|towerps)."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from same_blas import towerps_bench, use_towerps_kernels


def net():
    import torch.nn as nn
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 5 * 5, 128),
                         nn.ReLU(), nn.Linear(128, 10))


MODES = ["plain", "towerps", "towerps-copy"]


def run(mode, steps, warmup, batch, out, device):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = net().to(device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    if mode.startswith("towerps"):
        import towerps.torch as tps
        tps.init()
        opt = tps.DistributedOptimizer(model.named_parameters())
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator()
    g.manual_seed(2)
    x = torch.randn(16, batch, 1, 28, 28, generator=g).to(device)
    y = torch.randint(0, 10, (16, batch), generator=g).to(device)
    for step in range(warmup + steps):
        if step == warmup:
            sync()
            start = time.perf_counter()
        opt.zero_grad(**({"set_to_none": True} if mode == "towerps-copy" else {}))
        loss = F.cross_entropy(model(x[step % 16]), y[step % 16])
        loss.backward()
        opt.step()
    sync()
    ms = (time.perf_counter() - start) * 1000 / steps
    with open(out, "w") as f:
        json.dump({"ms_per_step": ms}, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--launch", default="towerps-launch")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda[:N] for the model and data")
    a = ap.parse_args()
    if a.run:
        return run(a.run, a.steps, a.warmup, a.batch, a.out, a.device)
    print("both sides: OpenBLAS's %s" % use_towerps_kernels(towerps_bench(a.launch)),
          file=sys.stderr)
    me = [sys.executable, os.path.abspath(__file__), "--steps", str(a.steps), "--warmup",
          str(a.warmup), "--batch", str(a.batch), "--device", a.device]
    times = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for mode in MODES:
                out = os.path.join(tmp, "%s-%d.json" % (mode, r))
                cmd = me + ["--run", mode, "--out", out]
                if mode != "plain":
                    cmd = [a.launch, "--servers", "1", "--workers", "1", "--optimizer", "sgd",
                           "--lr", "0.01", "--lr-schedule", "constant", "--batch-size",
                           str(a.batch), "--run-dir", os.path.join(tmp, "run-%d" % r),
                           "--worker-cmd", " ".join(cmd)]
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
                if p.returncode != 0:
                    sys.exit("pytorch_worker_bench: %s failed (exit %d):\n%s"
                             % (mode, p.returncode, p.stdout[-4000:]))
                with open(out) as f:
                    times[mode].append(json.load(f)["ms_per_step"])
                print("round %d %-12s %.3f ms/step" % (r, mode, times[mode][-1]), flush=True)
    plain = statistics.median(times["plain"])
    for mode in MODES[1:]:
        ms = statistics.median(times[mode])
        print("median on %s: plain PyTorch %.3f ms/step, 1 server + 1 PyTorch worker (%s) %.3f "
              "ms/step: %.3fx the plain speed" % (a.device, plain, mode, ms, plain / ms))

if __name__ == "__main__":
    main()
