"""Hybrid training: the dense parameters by all-reduce among the workers, the tables on the servers.

``DistributedOptimizer(model.named_parameters(), model=model, dense="allreduce",
optimizer=torch.optim.AdamW(model.parameters(), ...))`` keeps only the tables on the servers.
The dense parameters stay the workers' own, as under ``DistributedDataParallel``: at the end of
each backward their gradients are averaged over the workers with ``torch.distributed`` (gloo on
the CPU, NCCL for CUDA parameters), so that ``clip_grad_norm_`` after ``backward()`` sees the
job's gradient, and ``step()`` applies the script's own optimizer to them. Parameter groups,
AdamW, LR schedulers (on ``opt.optimizer``) and gradient clipping work as in plain PyTorch.

Contract: one ``DenseAllReduce`` per DistributedOptimizer. Every worker reduces exactly once per
step, in ``step()`` if no backward reached a dense parameter, so that the collectives pair up.
The process group is made from the launcher's ``--dist-endpoint`` (worker 0 keeps the
rendezvous) unless the script made one. A peer that stopped fails the reduce at once (gloo
closes the connection); one that is silent fails it after ``--join-timeout-s``. The dense
values and the optimizer's state exist only on the workers, so a restarted worker cannot take
them back (DistributedOptimizer refuses one, before any collective), and the final values are
every worker's equal copy.
"""

import datetime
import os

import torch
import torch.distributed as dist


def process_group(options, cuda):
    """torch.distributed's default group over the job's workers: the script's own when it made
    one (it must have the job's size and this worker's rank), else a new one, rendezvous at
    ``--dist-endpoint`` (gloo; NCCL when the parameters are on a GPU and NCCL is there)."""
    world, rank = options.workers, options.rank
    if dist.is_initialized():
        if dist.get_world_size() != world or dist.get_rank() != rank:
            raise ValueError(
                "dense=\"allreduce\": the script's torch.distributed group has rank %d of %d, "
                "the job has this worker as rank %d of %d; let DistributedOptimizer make it"
                % (dist.get_rank(), dist.get_world_size(), rank, world))
        return
    timeout = datetime.timedelta(seconds=options.join_timeout_s)
    endpoint = options.dist_endpoint
    if not endpoint:
        if world > 1:
            raise ValueError(
                "dense=\"allreduce\" needs the workers' rendezvous (--dist-endpoint "
                "tcp://HOST:PORT, where worker 0 listens), which towerps-launch gives every "
                "--worker-cmd job; this worker has none")
        store = dist.HashStore()
    else:
        host, port = endpoint[len("tcp://"):].rsplit(":", 1)
        store = dist.TCPStore(host.strip("[]"), int(port), world, rank == 0, timeout)
    backend = "nccl" if cuda and dist.is_nccl_available() else "gloo"
    if backend == "nccl":  # a dead or silent peer fails the collective after the timeout
        os.environ.setdefault("NCCL_ASYNC_ERROR_HANDLING", "1")
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout)


class DenseAllReduce:
    """The dense half of a hybrid DistributedOptimizer: `params` (name, tensor) averaged over the
    workers once per step and applied by `optimizer` (check_optimizer's: over exactly them), in
    the default process group. `after_accumulation(p, fn)` runs fn once p.grad holds backward's
    gradient."""

    def __init__(self, params, optimizer, after_accumulation):
        self.optimizer = optimizer
        self._names = [n for n, _ in params]
        self._params = [p for _, p in params]
        self._world = dist.get_world_size()
        self._pending = False   # a backward's reduce is queued
        self._reduced = False   # this step's reduce is done
        self._steps = 0
        with torch.no_grad():   # every worker starts from the chief's values
            flat = torch.cat([p.detach().reshape(-1) for p in self._params])
            dist.broadcast(flat, 0)
            for p, v in self._slices(flat):
                p.copy_(v)
        for p in self._params:
            if p.requires_grad:
                after_accumulation(p, self._queue)

    def _queue(self):
        """From an accumulator's hook: the reduce runs once backward has produced every
        gradient (the engine's callback, as DistributedDataParallel's reducer does)."""
        if self._pending:
            return
        if self._reduced:
            raise RuntimeError(
                "dense=\"allreduce\" averages the dense gradients at the end of each backward: "
                "a second backward before step() is not supported (sum the losses into one)")
        self._pending = True
        torch.autograd.Variable._execution_engine.queue_callback(self._reduce)

    def _reduce(self):
        """Averages every dense p.grad over the workers: one flat bucket, with a count per
        parameter of the workers whose backward reached it (none: p.grad stays None)."""
        self._pending, self._reduced = False, True
        parts, used = [], []
        for name, p in zip(self._names, self._params):
            if p.grad is not None and p.grad.is_sparse:
                raise ValueError("parameter '%s' has a sparse gradient: a table belongs on the "
                                 "servers (pass model=model)" % name)
            used.append(0.0 if p.grad is None else 1.0)
            parts.append(torch.zeros_like(p).reshape(-1) if p.grad is None
                         else p.grad.detach().reshape(-1))
        flat = torch.cat(parts + [torch.tensor(used, device=parts[0].device)])
        try:
            dist.all_reduce(flat)
        except RuntimeError as e:
            raise RuntimeError("the dense gradients' all-reduce of step %d failed (a worker "
                               "stopped, or did not answer within --join-timeout-s): %s"
                               % (self._steps, e)) from None
        n = sum(p.numel() for p in self._params)
        counts, grads = flat[n:], flat[:n].div_(self._world)
        for i, (p, g) in enumerate(self._slices(grads)):
            if counts[i] == 0:
                continue
            if p.grad is None:
                p.grad = g.clone()
            else:
                p.grad.detach().copy_(g)

    def step(self):
        """Ends a step: the reduce if no backward ran it (the collectives must pair up), then
        the optimizer's step."""
        if not self._reduced:
            self._reduce()
        self._reduced = False
        self._steps += 1
        self.optimizer.step()

    def values(self):
        """(name, float32 array) of every dense parameter, for --export-npz."""
        return [(n, p.detach().cpu().numpy()) for n, p in zip(self._names, self._params)]

    def _slices(self, flat):
        offset = 0
        for p in self._params:
            yield p, flat[offset:offset + p.numel()].view_as(p)
            offset += p.numel()


def check_optimizer(params, optimizer, table_weights):
    """`optimizer` is a torch.optim optimizer over exactly the dense parameters `params`: none
    left out (it would never change), no table (`table_weights`, id -> name: the servers train
    those) and nothing else (it would not be averaged). ValueError naming what is wrong."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError("dense=\"allreduce\" needs optimizer=, the script's own torch.optim "
                         "optimizer over the dense parameters (got %r)" % (optimizer,))
    mine = {id(p) for group in optimizer.param_groups for p in group["params"]}
    dense = {id(p) for _, p in params}
    for name, p in params:
        if p.requires_grad and id(p) not in mine:
            raise ValueError("dense=\"allreduce\": parameter '%s' is not in the optimizer's "
                             "param_groups, so it would never be trained; give the optimizer "
                             "every dense parameter" % name)
    for i in mine - dense:
        if i in table_weights:
            raise ValueError("dense=\"allreduce\": the optimizer holds '%s', a table the "
                             "servers train; give it the dense parameters only"
                             % table_weights[i])
        raise ValueError("dense=\"allreduce\": the optimizer holds a tensor that is not among "
                         "the named parameters, so it would not be averaged; give it the "
                         "dense parameters only")
