#!/usr/bin/env python3
"""PyTorch recommendation models' speed and memory: a DLRM-style script (26 hashed
EmbeddingBag(32768, 8) fields, 13 dense features, a small MLP, SGD, one thread a process) run by
plain PyTorch in one process at the global batch G, and on TowerPS by 1 server and W PyTorch
workers at G/W each, in alternating rounds of one invocation, so that the ratio is not the
machine's mood. TowerPS runs it two ways:
  - "nn":  the script's nn.EmbeddingBag(sparse=True), each worker keeping every table's full
           weight and pulling its rows into it per table in the forward;
  - "tps": towerps.torch.nn.EmbeddingBag (no local weight), every table looked up at once
           before the forward (DistributedOptimizer's sparse_inputs);
  - "ebc": towerps.torch.nn.EmbeddingBagCollection, the 26 fields looked up and computed as one,
           and one table on the server (fused);
  - "pipe":  "ebc" with its batches through towerps.torch.SparsePipeline (each step's rows pulled
           with the step before's pushes);
  - "apart": "pipe" with the collection's fields a table each on the server (fused=False);
  - "hybrid": "ebc" with the dense layers by all-reduce among the workers (dense="allreduce",
           torch.optim.SGD), only the tables on the server.
It reports examples per second (the job's, all workers), the ratio to plain PyTorch, each
process's peak RSS (VmHWM, read from /proc by this process while it runs), and for TowerPS the
step's parts as the script times them: lookups, forward+backward, step (the pushes and the next
values).

    PYTHONPATH=build/release/python python3 bench/pytorch_rec_bench.py \\
        --launch build/release/bin/towerps-launch [--workers 2] [--steps 300] [--rounds 3]

With --memory it measures instead the peak RSS of one worker training an unbounded table of
dim 32 that sees --ids distinct int64 ids (20 million by default; plain PyTorch would hold
them in a 2.4 GiB weight):

    PYTHONPATH=build/release/python python3 bench/pytorch_rec_bench.py \
        --launch build/release/bin/towerps-launch --memory [--ids 20000000]

The same file is the timed script (--run plain|nn|tps|ebc|pipe|apart|hybrid, --run-memory)."""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

from same_blas import towerps_bench, use_towerps_kernels

FIELDS, DENSE, ROWS, DIM = int(os.environ.get("BENCH_FIELDS", 26)), 13, 32768, 8
VARIANTS = ["plain", "nn", "tps", "ebc", "pipe", "apart", "hybrid"]


def model(kind):
    import torch
    import torch.nn as nn

    class Dlrm(nn.Module):
        def __init__(self):
            super().__init__()
            self.bottom = nn.Sequential(nn.Linear(DENSE, 64), nn.ReLU(), nn.Linear(64, DIM),
                                        nn.ReLU())
            if kind in ("tps", "ebc", "pipe", "apart", "hybrid"):
                import towerps.torch as tps
                bag = lambda: tps.nn.EmbeddingBag(ROWS, DIM, mode="sum")  # noqa: E731
            else:
                bag = lambda: nn.EmbeddingBag(ROWS, DIM, mode="sum", sparse=True)  # noqa: E731
            if kind in ("ebc", "pipe", "apart", "hybrid"):
                self.tables = tps.nn.EmbeddingBagCollection(
                    {"c%d" % i: ROWS for i in range(FIELDS)}, DIM, fused=kind != "apart")
            else:
                self.tables = nn.ModuleList([bag() for _ in range(FIELDS)])
            self.top = nn.Sequential(nn.Linear(DIM * (FIELDS + 1), 64), nn.ReLU(),
                                     nn.Linear(64, 1))

        def forward(self, dense, sparse):
            parts = [self.bottom(dense)]
            if kind in ("ebc", "pipe", "apart", "hybrid"):
                parts.append(self.tables(sparse).reshape(sparse.shape[0], -1))
            else:
                parts += [t(sparse[:, i:i + 1]) for i, t in enumerate(self.tables)]
            return self.top(torch.cat(parts, dim=1)).squeeze(1)

    torch.manual_seed(1)
    return Dlrm()


def batches(batch, rank, count=32):
    """`count` batches of Zipf-like hashed ids (a few hot rows per field, a long tail)."""
    import torch
    g = torch.Generator()
    g.manual_seed(100 + rank)
    out = []
    for _ in range(count):
        dense = torch.randn(batch, DENSE, generator=g)
        u = torch.rand(batch, FIELDS, generator=g)
        sparse = (ROWS * u ** 3).long().clamp(max=ROWS - 1)
        label = (torch.rand(batch, generator=g) < 0.3).float()
        out.append((dense, sparse, label))
    return out


def run(kind, steps, warmup, batch, out):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    with open(os.path.join(out, "pid-%d" % os.getpid()), "w"):
        pass
    net = model(kind)
    rank = 0
    if kind == "plain":
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
    else:
        import towerps.torch as tps
        tps.init()
        rank = tps.rank()
        ahead = None
        if kind == "tps":
            ahead = lambda dense, sparse: {  # noqa: E731
                t: sparse[:, i:i + 1] for i, t in enumerate(net.tables)}
        hybrid = {}
        if kind == "hybrid":
            hybrid = dict(dense="allreduce", optimizer=torch.optim.SGD(net.parameters(), lr=0.1))
        opt = tps.DistributedOptimizer(net.named_parameters(), model=net, sparse_inputs=ahead,
                                       **hybrid)
    data = batches(batch, rank)
    parts = {"forward_backward": 0.0, "step": 0.0}
    loop = (data[step % len(data)] for step in range(warmup + steps))
    if kind in ("pipe", "apart"):
        loop = tps.SparsePipeline(loop, opt, lambda b: {net.tables: b[1]})
    for step, (dense, sparse, label) in enumerate(loop):
        if step == warmup:
            start, cpu = time.perf_counter(), time.process_time()
            parts = {k: 0.0 for k in parts}
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(net(dense, sparse), label)
        loss.backward()
        t1 = time.perf_counter()
        opt.step()
        parts["forward_backward"] += t1 - t0
        parts["step"] += time.perf_counter() - t1
    seconds = time.perf_counter() - start
    parts["cpu"] = time.process_time() - cpu  # every thread of the process
    with open(os.path.join(out, "result-%d.json" % rank), "w") as f:
        json.dump({"examples_per_sec": steps * batch / seconds, "steps": steps,
                   "ms": {k: 1000 * v / steps for k, v in parts.items()}}, f)
    if kind != "plain":
        opt.finish()


def run_memory(ids, batch, out):
    """One worker's training of an unbounded table of dim 32 that sees `ids` distinct int64 ids,
    `batch` new ones a step (hashed, spread over all of int64)."""
    import torch
    import towerps.torch as tps
    torch.set_num_threads(1)
    with open(os.path.join(out, "pid-%d" % os.getpid()), "w"):
        pass
    tps.init()

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = tps.nn.EmbeddingBag(None, 32, mode="sum")
            self.head = torch.nn.Linear(32, 1)

        def forward(self, x):
            return self.head(self.table(x)).squeeze(1)

    net = Model()
    opt = tps.DistributedOptimizer(net.named_parameters(), model=net)
    steps = max(1, ids // batch)
    for step in range(steps):
        x = (torch.arange(batch, dtype=torch.int64) + step * batch) * -7046029254386353131
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            net(x.view(batch // 8, 8)), torch.ones(batch // 8))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            print("step %d of %d" % (step, steps), file=sys.stderr, flush=True)
    opt.finish()
    time.sleep(0.25)  # for the sampler: a reading after the peak, however short the run


def memory(args):
    """--memory: the worker's and the server's peak RSS for --ids distinct ids."""
    with tempfile.TemporaryDirectory() as out:
        me = [sys.executable, os.path.abspath(__file__), "--run-memory", "--ids", str(args.ids),
              "--batch", str(args.memory_batch), "--out", out]
        cmd = [args.launch, "--servers", "1", "--workers", "1", "--optimizer", "sgd",
               "--table-optimizer", "sgd", "--run-dir", os.path.join(out, "run"),
               "--log-level", "warning", "--worker-cmd", " ".join(me)]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        peaks = {}
        while proc.poll() is None:
            pids = [int(n[4:]) for n in os.listdir(out) if n.startswith("pid-")]
            for pid, mib in peak_rss_mib(pids + server_pids(out)).items():
                peaks[pid] = max(peaks.get(pid, 0), mib)
            time.sleep(0.05)
        text = proc.stdout.read()
        if proc.returncode != 0:
            sys.exit("the memory run failed (exit %d):\n%s" % (proc.returncode, text[-3000:]))
        servers = set(server_pids(out))
    report = {"distinct_ids": args.ids, "dim": 32, "seconds": time.perf_counter() - start,
              "worker_rss_mib": max([v for p, v in peaks.items() if p not in servers] or [0]),
              "server_rss_mib": max([v for p, v in peaks.items() if p in servers] or [0]),
              "plain_weight_mib": args.ids * 32 * 4 / 2 ** 20}
    print(json.dumps(report))


def peak_rss_mib(pids):
    """VmHWM of each pid still alive, in MiB."""
    peaks = {}
    for pid in pids:
        try:
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peaks[pid] = int(line.split()[1]) / 1024
        except OSError:
            pass
    return peaks


def timed(kind, args, global_batch):
    """One run of `kind`: the job's examples/s, the ms per step's parts, peak RSS per process."""
    with tempfile.TemporaryDirectory() as out:
        me = [sys.executable, os.path.abspath(__file__), "--run", kind, "--steps",
              str(args.steps), "--warmup", str(args.warmup), "--out", out]
        if kind == "plain":
            cmd = me + ["--batch", str(global_batch)]
        else:
            per = global_batch // args.workers
            cmd = [args.launch, "--servers", "1", "--workers", str(args.workers), "--batch-size",
                   str(per), "--optimizer", "sgd", "--lr", "0.1", "--lr-schedule", "constant",
                   "--table-optimizer", "sgd", "--table-lr", "0.1", "--run-dir",
                   os.path.join(out, "run"), "--log-level", "warning", "--worker-cmd",
                   " ".join(me + ["--batch", str(per)])] + shlex.split(args.launch_flags)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        peaks, server_cpu = {}, {}
        while proc.poll() is None:
            pids = [int(n[4:]) for n in os.listdir(out) if n.startswith("pid-")]
            for pid, mib in peak_rss_mib(pids + server_pids(out)).items():
                peaks[pid] = max(peaks.get(pid, 0), mib)
            server_cpu.update(cpu_seconds(server_pids(out)))
            time.sleep(0.05)
        text = proc.stdout.read()
        if proc.returncode != 0:
            sys.exit("%s failed (exit %d):\n%s" % (kind, proc.returncode, text[-3000:]))
        results = [json.load(open(os.path.join(out, n))) for n in sorted(os.listdir(out))
                   if n.startswith("result-")]
        servers = set(server_pids(out))
    eps = sum(r["examples_per_sec"] for r in results)
    ms = {k: statistics.mean(r["ms"][k] for r in results) for k in results[0]["ms"]}
    # The servers' CPU over the whole job (start-up and warm-up too) per timed step: an upper
    # bound of what a step costs them.
    ms["server_cpu"] = 1000 * sum(server_cpu.values()) / results[0]["steps"]
    workers = [v for p, v in peaks.items() if p not in servers]
    return {"examples_per_sec": eps, "ms": ms, "worker_rss_mib": max(workers or [0]),
            "server_rss_mib": max([v for p, v in peaks.items() if p in servers] or [0])}


def cpu_seconds(pids):
    """utime + stime of each pid still alive."""
    ticks = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[pid] = (int(fields[11]) + int(fields[12])) / ticks
        except (OSError, IndexError, ValueError):
            pass
    return out


def server_pids(out):
    """The servers' pids, from the launcher's processes.txt ("ps 0 pid 123 ...")."""
    try:
        with open(os.path.join(out, "run", "processes.txt")) as f:
            return [int(w[3]) for w in (line.split() for line in f) if w[:1] == ["ps"]]
    except (OSError, ValueError, IndexError):
        return []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--launch", default="towerps-launch")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--global-batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--launch-flags", default="",
                    help="more towerps-launch flags for the TowerPS runs, as one string: "
                         "--launch-flags=--bind-cores")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--memory", action="store_true",
                    help="measure the peak RSS of a worker whose unbounded table (dim 32) sees "
                         "--ids distinct ids, --memory-batch new ones a step; prints JSON")
    ap.add_argument("--ids", type=int, default=20_000_000)
    ap.add_argument("--memory-batch", type=int, default=20480)
    ap.add_argument("--run-memory", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--run", choices=VARIANTS, help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.run:
        return run(args.run, args.steps, args.warmup, args.batch, args.out)
    if args.run_memory:
        return run_memory(args.ids, args.batch, args.out)
    if args.memory:
        return memory(args)
    kernels = use_towerps_kernels(towerps_bench(args.launch))
    variants = args.variants.split(",")
    for v in variants:
        if v not in VARIANTS:
            sys.exit("--variants: %r is not one of %s" % (v, ", ".join(VARIANTS)))
    rounds = {v: [] for v in variants}
    for r in range(args.rounds):
        for v in variants:
            rounds[v].append(timed(v, args, args.global_batch))
            print("round %d %-5s %8.0f examples/s" % (r + 1, v, rounds[v][-1]["examples_per_sec"]),
                  file=sys.stderr, flush=True)
    plain = [x["examples_per_sec"] for x in rounds.get("plain", [])]
    report = {}
    for v, runs in rounds.items():
        eps = [x["examples_per_sec"] for x in runs]
        report[v] = {
            "examples_per_sec": statistics.median(eps),
            "ratio_to_plain": ([e / p for e, p in zip(eps, plain)] if plain else None),
            "worker_rss_mib": max(x["worker_rss_mib"] for x in runs),
            "server_rss_mib": max(x["server_rss_mib"] for x in runs),
            "ms_per_step": {k: statistics.median(x["ms"][k] for x in runs) for k in runs[0]["ms"]},
        }
    if args.json:
        report["openblas"] = kernels
        print(json.dumps(report, indent=1))
        return
    print("global batch %d, %d workers (TowerPS), %d steps, %d rounds; both sides: OpenBLAS's %s"
          % (args.global_batch, args.workers, args.steps, args.rounds, kernels))
    for v, r in report.items():
        ratio = ("  ratio %s" % " ".join("%.2f" % x for x in r["ratio_to_plain"])
                 if r["ratio_to_plain"] and v != "plain" else "")
        print("%-5s %8.0f examples/s%s  worker peak RSS %.0f MiB  server %.0f MiB  ms/step %s"
              % (v, r["examples_per_sec"], ratio, r["worker_rss_mib"], r["server_rss_mib"],
                 json.dumps({k: round(x, 2) for k, x in r["ms_per_step"].items()})))


if __name__ == "__main__":
    main()
