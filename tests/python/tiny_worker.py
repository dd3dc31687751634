"""A PyTorch worker for the tests: trains tiny_job's model for --steps steps of the job's
--batch-size and writes its per-step losses (and the chief's summary) to --out as JSON.

    towerps-launch --worker-cmd "python3 tiny_worker.py --steps 100 --out DIR" ...

--fail-at STEP raises at that step (the launcher must report the traceback's last line);
--extra-param adds a parameter on rank 1 (a model that differs between workers);
--kill-at STEP makes rank 1 SIGKILL itself after that step's backward, once (--kill-marker);
--bad-gradient pushes a gradient of the wrong size at step 3;
--tables trains tiny_job's model with a sparse embedding table (a table on the servers);
--device cuda trains on the GPU (parameters staged through pinned memory);
--set-to-none zeroes gradients with zero_grad(set_to_none=True) (the pushes copy them);
--kill-server-at STEP makes rank 0 SIGKILL server --kill-server (default 1) after that step's
backward (--kill-server-before-forward: before that step's forward, whose table lookups then
meet the failover), once (its pid from OUT/run/processes.txt; --kill-marker);
--kill-rank R makes --kill-at kill rank R rather than 1; --step-sleep S sleeps S seconds a step;
--no-optimizer ends after init() (a script that trains nothing); --dense-tables gives the table
model's embedding sparse=False;
--clip C clips with DistributedOptimizer(clip_grad_norm=C); --clip-in-script C calls
torch.nn.utils.clip_grad_norm_ between backward() and step() (too late: step() warns);
--table-kind K trains tiny_job's table model with TableNet's kind K (tps: no local weight);
--prefetch looks the table up before the forward (DistributedOptimizer's sparse_inputs);
--declare-policy KEY=VALUE,... declares every embedding's policy (DistributedOptimizer's tables=);
--pipeline iterates the batches through tps.SparsePipeline (each step's rows pulled with the
step before's pushes);
--hybrid trains the dense parameters by all-reduce (dense="allreduce") with AdamW in two
parameter groups, --lr-step N halving their learning rates every N steps (StepLR);
the chief saves opt.model_state_dict(net) to OUT/model.pt, and its table's local weight right
after synchronize() (before the evaluation's lookups) to OUT/local.pt, and gives the summary a
test_auc of its own (finish(**measures))."""

import argparse
import json
import os
import signal
import sys
import time

import numpy as np

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_job  # noqa: E402
import towerps.torch as tps  # noqa: E402


def server_pid(out, rank):
    """ps `rank`'s current pid, from the launcher's processes.txt ("ps 1 pid 123 ...")."""
    pid = None
    with open(os.path.join(out, "run", "processes.txt")) as f:
        for line in f:
            words = line.split()
            if words[:2] == ["ps", str(rank)] and words[2] == "pid":
                pid = int(words[3])
    return pid


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--out", required=True)
    ap.add_argument("--fail-at", type=int, default=-1)
    ap.add_argument("--extra-param", action="store_true")
    ap.add_argument("--kill-at", type=int, default=-1)
    ap.add_argument("--kill-marker", default="")
    ap.add_argument("--bad-gradient", action="store_true")
    ap.add_argument("--tables", action="store_true")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--set-to-none", action="store_true")
    ap.add_argument("--clip", type=float, default=None)
    ap.add_argument("--kill-rank", type=int, default=1)
    ap.add_argument("--kill-server-at", type=int, default=-1)
    ap.add_argument("--kill-server", type=int, default=1)
    ap.add_argument("--kill-server-before-forward", action="store_true")
    ap.add_argument("--step-sleep", type=float, default=0)
    ap.add_argument("--no-optimizer", action="store_true")
    ap.add_argument("--dense-tables", action="store_true")
    ap.add_argument("--clip-in-script", type=float, default=None)
    ap.add_argument("--table-kind", default="")
    ap.add_argument("--prefetch", action="store_true")
    ap.add_argument("--declare-policy", default="",
                    help="KEY=VALUE,...: DistributedOptimizer(tables=) for each embedding")
    ap.add_argument("--hybrid", action="store_true")
    ap.add_argument("--pipeline", action="store_true")
    ap.add_argument("--pipeline-wrong", action="store_true",
                    help="give the pipeline other ids than the forward looks up")
    ap.add_argument("--lr-step", type=int, default=0)
    ap.add_argument("--start-rank1", type=float, default=0,
                    help="rank 1 sleeps this long before it joins (a slow data load)")
    ap.add_argument("--steps-rank1", type=int, default=-1,
                    help="rank 1 stops after this many steps (uneven steps)")
    ap.add_argument("--exit-rank1", type=int, default=-1,
                    help="rank 1 exits (code 0, no finish()) before this step")
    ap.add_argument("--late-rank1", type=float, default=0,
                    help="rank 1 sleeps this long before synchronize()")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tps.init()
    if args.no_optimizer:
        return
    if tps.rank() == 1 and args.steps_rank1 >= 0:
        args.steps = args.steps_rank1
    if tps.rank() == 1 and args.start_rank1:
        time.sleep(args.start_rank1)
    seed = tps.settings()["seed"]
    batch = tps.settings()["batch-size"]
    assert isinstance(seed, int) and isinstance(tps.settings()["lr"], float), tps.settings()
    args.tables = args.tables or bool(args.table_kind)
    data = tiny_job.categorical_dataset() if args.tables else tiny_job.dataset()
    net = (tiny_job.table_model(seed, sparse=not args.dense_tables,
                                kind=args.table_kind or "torch") if args.tables
           else tiny_job.model(seed))
    net = net.to(args.device)
    if args.extra_param and tps.rank() == 1:
        net.register_parameter("extra", torch.nn.Parameter(torch.zeros(3)))
    prefetch = None
    if args.prefetch:
        prefetch = lambda ids: {net.emb: tiny_job.hashed(ids) if args.table_kind ==  # noqa: E731
                                "tps-unbounded" else ids}
    hybrid, scheduler = {}, None
    if args.hybrid:
        hybrid = dict(dense="allreduce", optimizer=tiny_job.hybrid_optimizer(net))
    if args.declare_policy:
        policy = {k: int(v) if v.lstrip("-").isdigit() else v
                  for k, v in (item.split("=") for item in args.declare_policy.split(","))}
        hybrid["tables"] = {m: policy for m in net.modules()
                            if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag))}
    opt = tps.DistributedOptimizer(net.named_parameters(), model=net, clip_grad_norm=args.clip,
                                   sparse_inputs=prefetch, **hybrid)
    if args.lr_step:
        scheduler = torch.optim.lr_scheduler.StepLR(opt.optimizer, args.lr_step, gamma=0.5)
    sampler = tps.DistributedSampler(data)
    loader = torch.utils.data.DataLoader(data, batch_size=batch, sampler=sampler, drop_last=True)
    if args.pipeline or args.pipeline_wrong:
        shift = 1 if args.pipeline_wrong else 0
        loader = tps.SparsePipeline(
            loader, opt, lambda batch: tiny_job.table_lookups(net, (batch[0] + shift) % tiny_job.IDS))
    losses = {}
    step, epoch = 0, 0
    while step < args.steps:
        sampler.set_epoch(epoch)
        for x, y in loader:
            if step >= args.steps:
                break
            if step < opt.start_step:  # a restarted worker: its predecessor trained these
                step += 1
                continue
            if step == args.exit_rank1 and tps.rank() == 1:
                sys.exit(0)
            if step == args.fail_at:
                raise RuntimeError("failing at step %d as asked" % step)
            opt.zero_grad(set_to_none=True if args.set_to_none else None)
            x, y = x.to(args.device), y.to(args.device)
            if (step == args.kill_server_at and args.kill_server_before_forward
                    and tps.rank() == 0 and not os.path.exists(args.kill_marker)):
                open(args.kill_marker, "w").close()
                os.kill(server_pid(args.out, args.kill_server), signal.SIGKILL)
            loss = torch.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            if args.step_sleep:
                time.sleep(args.step_sleep)
            if (step == args.kill_at and tps.rank() == args.kill_rank
                    and not os.path.exists(args.kill_marker)):
                open(args.kill_marker, "w").close()
                os.kill(os.getpid(), signal.SIGKILL)  # its pushes of this step are out
            if (step == args.kill_server_at and tps.rank() == 0
                    and not os.path.exists(args.kill_marker)):
                open(args.kill_marker, "w").close()
                os.kill(server_pid(args.out, args.kill_server), signal.SIGKILL)
            if args.clip_in_script is not None:
                torch.nn.utils.clip_grad_norm_(net.parameters(), args.clip_in_script)
            if step == 3 and args.bad_gradient:
                opt._session.push(0, np.zeros(3, dtype=np.float32))
            opt.step(loss)
            if scheduler is not None:
                scheduler.step()
            losses[step] = float(loss)
            step += 1
        epoch += 1
    if tps.rank() == 1 and args.late_rank1:
        time.sleep(args.late_rank1)
    opt.synchronize()
    if args.tables and tps.is_chief():
        torch.save(opt.model_state_dict(net), os.path.join(args.out, "model.pt"))
        if hasattr(net.emb, "weight"):
            torch.save(net.emb.weight.detach().clone(), os.path.join(args.out, "local.pt"))
    x, y = (t.to(args.device) for t in data.tensors)
    with torch.no_grad():
        out = net(x)
        accuracy = float((out.argmax(dim=1) == y).float().mean())
        test_loss = float(torch.nn.functional.cross_entropy(out, y))
    opt.log_scalar("custom/final_accuracy", accuracy)
    summary = opt.finish(test_accuracy=accuracy, test_loss=test_loss, test_auc=accuracy / 2,
                         custom_measure=7)
    params = {n: p.detach().cpu().flatten().tolist() for n, p in net.named_parameters()}
    with open(os.path.join(args.out, "worker-%d.json" % tps.rank()), "w") as f:
        json.dump({"losses": losses, "summary": summary, "params": params,
                   "start_step": opt.start_step,
                   "copied_pushes": opt._session.copied_pushes,
                   "looked_up_ahead": opt._session.looked_up_ahead}, f)


if __name__ == "__main__":
    main()
