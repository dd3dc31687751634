"""towerps.torch: any ``torch.nn.Module`` trained against TowerPS's parameter servers.

A script changes a few lines::

    import towerps.torch as tps
    tps.init()                                    # rank, workers, servers, mode: from the launcher
    model = Net()
    opt = tps.DistributedOptimizer(model.named_parameters())
    sampler = tps.DistributedSampler(train_set)   # this rank's share of each epoch
    ...
    loss.backward(); opt.step(loss)               # step() waits for this step's values

and runs under ``towerps-launch --worker-cmd "python3 train.py"``. The servers apply the job's
``--optimizer``, ``--lr`` and schedule in the job's ``--mode`` (sync, async, SSP, softsync, backup
workers), exactly as for native workers; the chief's initial values initialise them. Each
parameter's gradient is handed over from a hook on its gradient accumulator as soon as backward
has produced it. A large one (``bucket_cap_mb``, 0.25 MiB, or more) goes at once, with the pull
of its next value, so that its message overlaps the rest of backward; smaller ones wait in a
bucket that goes once it holds as much (as DistributedDataParallel buckets its all-reduces), the
last with the step's tables, so that a model's many small parameters cost one message per
server, not one each.

Contract: one job per process (``init()`` once); the optimizer's methods are called from the
training thread. Parameters are float32, on the CPU or a CUDA device. A CPU parameter's values
are written in place, and its p.grad is memory of the session (the shared-memory arena's when a
server is on this host): backward accumulates into it and the push lends it to the servers
without a copy, as long as the script zeroes gradients in place (``opt.zero_grad()`` or
``model.zero_grad(set_to_none=False)``). A lent p.grad is the servers' to read from the moment
backward produces it until ``step()`` returns: do not modify it in between (a
``clip_grad_norm_`` there may or may not reach the servers, which read the lent memory when they
take the push, and read it for a NaN themselves for that reason; ``step()`` warns once when a
pushed gradient changed). To clip, give
``DistributedOptimizer(clip_grad_norm=C)``: the pushes then wait for backward's end and leave
scaled as ``torch.nn.utils.clip_grad_norm_(params, C)`` scales them (each worker clips its own
gradient, before the servers combine them). ``DistributedOptimizer(..., copy_gradients=True)``
copies each gradient as it is pushed instead. A CUDA parameter goes through pinned host buffers,
each copy with an event. Errors raise ``ValueError`` for bad input (naming the option or the
parameter), ``TimeoutError`` when a server does not answer within ``--rpc-timeout-ms``,
``RuntimeError`` otherwise; nothing waits without a bound.
"""

import atexit
import ctypes
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
import weakref

import numpy as np
import torch

from . import _towerps
from . import hybrid
from . import nn  # noqa: F401  (tps.nn.Embedding, tps.nn.EmbeddingBag)
from .pipeline import SparsePipeline

__all__ = [
    "init", "rank", "size", "is_chief", "settings", "DistributedOptimizer",
    "DistributedSampler", "finish", "nn", "SparsePipeline",
]

_job = None  # this process's job: set once by init()
_sampler_examples = None  # examples per rank per epoch of the last DistributedSampler made


def init(args=None):
    """Joins the job the launcher started this process for.

    Reads the options towerps-launch gives every worker (TOWERPS_WORKER_ARGS, and the job's
    secret from TOWERPS_SECRET_FILE); ``args``, a list of worker flags, replaces them (tests).
    A bad option raises ValueError naming it, before anything is sent.

    Run on its own (``python3 train.py``, no launcher), the script is a one-worker job: init()
    starts a towerps-server for it on this host (the one next to this package, or on PATH;
    TOWERPS_SERVER_BIN names another), which ends with the script. The job's options are the
    defaults, with a constant learning-rate schedule; TOWERPS_JOB_ARGS adds more
    (``TOWERPS_JOB_ARGS="--optimizer adam --lr 0.002"``; a --lr-schedule there replaces the
    constant one, and --workers or --servers is refused: more of them take the launcher).
    """
    global _job
    if _job is not None:
        raise RuntimeError("towerps.torch.init() was called twice")
    if args is None and "TOWERPS_WORKER_ARGS" not in os.environ:
        args = _standalone_job()
    if args is None:
        args = _towerps.worker_args_from_json(os.environ.get("TOWERPS_WORKER_ARGS", ""))
    _job = _towerps.Options(list(args), os.environ.get("TOWERPS_SECRET_FILE", ""))
    atexit.register(_check_trained)
    previous_hook = sys.excepthook

    def note_failure(*exc):
        global _script_failed
        _script_failed = True
        previous_hook(*exc)

    sys.excepthook = note_failure
    return _job


def _server_binary():
    named = os.environ.get("TOWERPS_SERVER_BIN")
    if named:
        return named if os.access(named, os.X_OK) else None
    here = os.path.dirname(os.path.abspath(__file__))
    for up in (2, 4):  # build/<preset>/python/towerps; <prefix>/lib/python3/dist-packages/towerps
        root = here
        for _ in range(up):
            root = os.path.dirname(root)
        candidate = os.path.join(root, "bin", "towerps-server")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("towerps-server")


def _standalone_job(timeout_s=60):
    """A one-worker job for a script run without the launcher: a towerps-server of its own on
    loopback (it dies with this process, even a killed one), and the worker flags to reach it."""
    server = _server_binary()
    if server is None:
        raise ValueError(
            "TOWERPS_WORKER_ARGS is not set and no towerps-server was found to run this script "
            "as a one-worker job (looked next to the package and on PATH; TOWERPS_SERVER_BIN "
            "names one); or start it with towerps-launch --worker-cmd \"python3 script.py\"")
    user = shlex.split(os.environ.get("TOWERPS_JOB_ARGS", ""))
    named = {a.split("=")[0] for a in user if a.startswith("--")}
    for fixed in ("--workers", "--servers"):
        if fixed in named:
            raise ValueError(
                "TOWERPS_JOB_ARGS sets %s, but a script run without the launcher is a job of one "
                "worker and one server; for more, run it with towerps-launch --workers N "
                "--servers M --worker-cmd \"python3 script.py\"" % fixed)
    job = ["--workers", "1", "--servers", "1"]
    if "--lr-schedule" not in named:  # the script's own schedule, if any, is not the servers'
        job += ["--lr-schedule", "constant"]
    job += user
    run_dir = tempfile.mkdtemp(prefix="towerps-")
    ready, log_path = os.path.join(run_dir, "ps-0.ready"), os.path.join(run_dir, "ps-0.log")

    def die_with_parent():
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    with open(log_path, "w") as log:
        proc = subprocess.Popen([server, "--rank", "0", "--port", "0", "--insecure",
                                 "--ready-file", ready, "--log-level", "warning"] + job,
                                stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=die_with_parent)
    atexit.register(_stop_server, proc, run_dir)
    deadline = time.time() + timeout_s
    while not os.path.exists(ready):
        if proc.poll() is not None or time.time() > deadline:
            _stop_server(proc, None)
            with open(log_path) as f:
                tail = f.read()[-2000:]
            shutil.rmtree(run_dir, ignore_errors=True)  # its log is in the message
            raise ValueError("the one-worker job's towerps-server (%s %s) did not start: %s"
                             % (server, " ".join(job), tail.strip() or "no output"))
        time.sleep(0.02)
    with open(ready) as f:
        endpoint = f.read().strip()
    sys.stderr.write("towerps.torch: no launcher; this script is a one-worker job with its own "
                     "server (%s, log %s)\n" % (endpoint, log_path))
    return ["--rank", "0", "--ps-endpoints", endpoint, "--insecure"] + job


def _stop_server(proc, run_dir):
    """Stops the one-worker job's server; its run directory goes too unless its log (warnings
    and errors only) has something to say, for which it stays where the start-up line said."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if run_dir is None:
        return
    try:
        said_nothing = os.path.getsize(os.path.join(run_dir, "ps-0.log")) == 0
    except OSError:  # the directory is gone already: nothing to keep
        said_nothing = True
    if said_nothing:
        shutil.rmtree(run_dir, ignore_errors=True)


_optimizers_made = 0     # DistributedOptimizers constructed in this process
_script_failed = False   # an uncaught exception ends the script: its own error stands


def _check_trained():
    """At exit after init(): a script that never made a DistributedOptimizer trained nothing on
    the servers, whatever it printed; its exit status says so rather than 0."""
    if _optimizers_made == 0 and not _script_failed:
        sys.stderr.write(
            "towerps.torch: this script called init() but never created a "
            "DistributedOptimizer, so the servers trained nothing (0 gradients, no summary); "
            "create one after the model: opt = tps.DistributedOptimizer(model.named_parameters()"
            ", model=model)\n")
        sys.stderr.flush()
        os._exit(3)


def _note_made(opt):
    """A DistributedOptimizer made: counted (for _check_trained), and told to leave the servers
    at exit if its script never calls finish()."""
    global _optimizers_made
    _optimizers_made += 1
    atexit.register(_leave_unfinished, weakref.ref(opt))


def _leave_unfinished(ref):
    """At exit: a worker whose DistributedOptimizer never got finish() tells the servers it has
    left, after the steps it ended, so that the other workers' next sync step fails at once
    naming it ("worker 1 finished at step 10; ...") rather than at their RPC deadline, blaming a
    server. After an uncaught exception the script's own error stands: the launcher stops the
    job for it."""
    opt = ref()
    if opt is None or opt._finished or _script_failed or not hasattr(opt, "_session"):
        return
    sys.stderr.write("towerps.torch: worker %d exits after step %d without finish(); telling the "
                     "servers it has left (every rank calls optimizer.finish() at the end)\n"
                     % (rank(), opt._session.iteration))
    sys.stderr.flush()
    opt._session.leave()


def _options():
    if _job is None:
        raise RuntimeError("call towerps.torch.init() first")
    return _job


def rank():
    """This worker's rank, 0 to size() - 1."""
    return _options().rank


def size():
    """The number of workers in the job (--workers)."""
    return _options().workers


def is_chief():
    """Whether this worker is the chief (rank 0), which writes the job's summary."""
    return rank() == 0


def settings():
    """The job's options as resolved, by flag name without "--", typed: an int, a float, a bool
    or a string, as the flag is (settings()["epochs"] == 5, settings()["lr"] == 0.05,
    settings()["nesterov"] is False, settings()["mode"] == "sync").

    What a script implements itself, the launcher's options only informing it: the epochs, the
    batch size, --max-steps, skipping the batches a restarted worker's predecessor trained
    (``optimizer.start_step``) and evaluation (``synchronize()``, then ``finish(...)``)."""
    return {name: _typed(value) for name, value in _options().settings.items()}


def _typed(text):
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


class DistributedOptimizer:
    """The servers' optimizer for ``named_parameters`` (a module's ``named_parameters()``).

    On construction the parameters are registered with the servers (every worker must declare
    the same names and shapes, in the same order), the chief's values initialise a fresh job,
    and the parameters are loaded with the values of the step this worker starts at (a restarted
    worker's: where its predecessor stopped; see ``start_step``).

    With ``model`` given, its ``nn.Embedding(sparse=True)`` and ``nn.EmbeddingBag(sparse=True)``
    weights become row-sparse tables on the servers (``--table-optimizer``, ``--table-lr``):
    before each forward of such a module the rows of the ids it looks up are pulled into its
    weight, and after backward its sparse gradient's rows go back, each id once, so no worker
    pulls a whole table. Their rows start as the servers draw them from (--seed, name, id),
    uniform in [-table_init_scale, table_init_scale), not from the module's own initial values.

    ``step(loss=None)`` ends a step: gradients that no hook pushed (parameters this batch did not
    reach) go as zeros, the pushes are awaited, and the parameters are loaded with the next
    step's values. ``loss`` (a float or a 0-d tensor) is checked for NaN and infinity like a
    native worker's (``--on-nonfinite``).

    CPU parameters' gradients are lent to the servers from the session's buffers (see the
    module's contract: p.grad is read-only from backward until step() returns);
    ``copy_gradients=True`` keeps them in PyTorch's own memory and copies each push instead.

    ``bucket_cap_mb`` (0.25): a gradient of this many MiB or more goes alone as backward produces
    it; smaller ones go together in buckets of as much, the last at ``step()`` with the tables.
    0: each goes alone.

    ``clip_grad_norm=C`` clips this worker's gradients to a global 2-norm of at most C, as
    ``torch.nn.utils.clip_grad_norm_`` does, tables' rows included: the pushes wait for the end
    of backward (they no longer overlap it) and ``step()`` sends them scaled.

    ``tables={table: {key: value}}`` declares tables' admission and eviction (README: Embedding
    tables), keyed by the module (``model.emb``), its name (``"emb"``) or its weight's
    (``"emb.weight"``), a fused EmbeddingBagCollection by the collection (``model.tables``,
    ``"tables"``: not by a field), with the keys ``min_count``, ``probability``, ``ttl_steps``,
    ``capacity_rows`` and ``eviction``: ``tables={"emb": {"min_count": 2, "ttl_steps": 1000}}``.
    It is part of the model (every worker must declare the same); the launcher's --table-*
    flags are the defaults under it and its ``--table-policy NAME:KEY=VALUE`` items override it.
    Where the rows live (``storage``, ``memory_mb``, ``placement``) is the launcher's to say. A
    bad key or value raises ValueError naming the table.
    """

    _finished = False  # finish() was called

    def __init__(self, named_parameters, model=None, table_init_scale=0.05,
                 copy_gradients=False, clip_grad_norm=None, sparse_inputs=None, dense="server",
                 optimizer=None, bucket_cap_mb=0.25, tables=None):
        params = list(named_parameters)
        declared = tables  # the name is the sparse tables' below
        server_tables = _server_tables(model)
        _check_arguments(params, server_tables, model, sparse_inputs, clip_grad_norm, dense,
                         optimizer)
        self._clip = None if clip_grad_norm is None else float(clip_grad_norm)
        _note_made(self)
        self._held = []     # with clip_grad_norm: this step's pushes, in backward's order
        self._pushed = {}   # parameter index -> (p.grad, its version) when it was pushed
        self._warned_changed = False
        self._hooks = []
        self._accumulators = []
        tables = _sparse_tables(params, model)
        self._all_params = [p for _, p in params]  # zero_grad's: the tables' weights too
        table_weights = {id(m.weight): name for name, m in tables}
        params = [(n, p) for n, p in params if id(p) not in table_weights]
        _check_dense(params)
        self._dense, dense_params = None, []
        if dense == "allreduce":  # the dense parameters stay here, averaged by all-reduce
            hybrid.check_optimizer(params, optimizer, table_weights)
            dense_params, params = params, []
        self._params = [p for _, p in params]
        self._names = [n for n, _ in params]
        # CUDA parameters go through pinned host buffers: values up, gradients down, each copy
        # with an event; CPU parameters are read and written in place.
        self._staging = [_Staging(p) if p.is_cuda else None for p in self._params]
        initial = [st.host.numpy() if st else p.detach().numpy()
                   for p, st in zip(self._params, self._staging)]
        policies = _declared_policies(declared, tables, server_tables)
        specs = [(name, m.weight.shape[0], m.weight.shape[1], float(table_init_scale),
                  policies.get(name, ""), []) for name, m in tables]
        specs += [(name, m.num_embeddings, m.embedding_dim, float(table_init_scale),
                   policies.get(name, ""),
                   [(n, f.num_embeddings) for n, f in fields])
                  for name, m, fields in server_tables]
        self._init_scale = float(table_init_scale)
        if not specs and not self._params:
            raise ValueError("dense=\"allreduce\" and no table: nothing would be on the "
                             "servers (use torch.nn.parallel.DistributedDataParallel, or give "
                             "the model towerps.torch.nn tables)")
        shapes = [list(p.shape) if p.dim() > 0 else [1] for p in self._params]
        self._session = _towerps.Session(_options(), self._names, shapes, initial, specs,
                                         int(float(bucket_cap_mb) * 2 ** 20))
        if dense == "allreduce":  # before any collective, which the others left long ago
            if self._session.start_iteration > 0:
                raise RuntimeError(
                    "dense=\"allreduce\": this worker restarts at step %d, but the dense values "
                    "and their optimizer's state were the killed worker's own; a hybrid job "
                    "cannot take them back (run it with --max-restarts 0, or dense=\"server\")"
                    % self._session.start_iteration)
            hybrid.process_group(_options(), any(p.is_cuda for _, p in dense_params))
            self._dense = hybrid.DenseAllReduce(dense_params, optimizer, self._after_accumulation)
        self._views = [st.host.numpy() if st else p.data.numpy()
                       for p, st in zip(self._params, self._staging)]
        self._load_values()
        self._lend_gradients(copy_gradients)
        self._table_modules = [module for _, module in tables]
        self._table_modules_named = tables
        for i, p in enumerate(self._params):
            if p.requires_grad:
                self._hook(i, p)
        for t, (name, module) in enumerate(tables):
            self._hook_table(t, name, module)
        # This step's lookups of towerps.torch.nn tables: (table, ids, rows leaf, the table's part
        # of the leaf; a collection's tables share one).
        self._lookups = []
        # A collection's lookups (tables, ids, starts, leaf), in _lookups too, push as one.
        self._blocks = []
        self._ahead = []  # the next step's lookups (SparsePipeline), riding on step()'s pushes
        self._ahead_given = (0, 0)  # the last step's: how many, and looked_up_ahead then
        self._warned_ahead = False
        self._server_tables = server_tables
        self._register_server_tables(first=len(tables))
        if sparse_inputs is not None:
            self._hooks.append(model.register_forward_pre_hook(
                lambda _model, inputs: self.prefetch(sparse_inputs(*inputs))))

    def _register_server_tables(self, first):
        """Gives each towerps.torch.nn table its name, its index in the session (from `first`)
        and this optimizer; a fused collection's fields theirs in it, as its segments."""
        # The modules prefetch() may have given rows: a fused collection's fields among them.
        self._prefetchable = []
        for t, (name, module, fields) in enumerate(self._server_tables, start=first):
            module._name, module._index, module._optimizer = name, t, self
            if isinstance(module, nn._Table):
                self._prefetchable.append(module)
            for (field_name, field), offset in zip(fields, getattr(module, "_offsets", [])):
                field._name, field._index, field._optimizer = field_name, t, self
                field._offset = int(offset)
                self._prefetchable.append(field)

    def _lend_gradients(self, copy_gradients):
        """CPU gradients accumulate in the servers' connection's own memory (the shared-memory
        arena's): backward adds into it and the hook lends it to the push without a copy."""
        self._grad_views = [{} for _ in self._params]  # per parameter: buffer address -> tensor
        self._own_grad = [None] * len(self._params)     # the buffer each p.grad was given
        self._lent = {id(p): i for i, p in enumerate(self._params)
                      if p.requires_grad and not p.is_cuda and not copy_gradients}
        for i in self._lent.values():
            self._give_grad(i, keep_values=False)

    @property
    def optimizer(self):
        """With dense="allreduce": the script's own optimizer (for an LR scheduler:
        ``torch.optim.lr_scheduler.StepLR(opt.optimizer, ...)``); None otherwise."""
        return None if self._dense is None else self._dense.optimizer

    @property
    def param_groups(self):
        """The script's optimizer's param_groups (dense="allreduce"); [] otherwise."""
        return [] if self._dense is None else self._dense.optimizer.param_groups

    def prefetch(self, lookups):
        """Looks up every table of a step at once: ``lookups`` maps each ``towerps.torch.nn``
        module to the ids its next forward takes. Their pulls go together (one in flight per
        table), and each module's forward on the same ids uses its rows (other ids: a lookup of
        their own)."""
        items = list(lookups.items())
        for module, _ in items:
            if not isinstance(module, nn._Table) or module._optimizer is not self:
                raise ValueError("prefetch: %r is not a towerps.torch.nn table of this "
                                 "optimizer's model" % (module,))
        got = self._session.lookup([(m._index, m._session_ids(ids)) for m, ids in items],
                                   torch.is_grad_enabled())
        for (module, ids), rows in zip(items, got):
            module._prefetched = (ids, ids._version, rows)

    def _look_ahead(self, lookups):
        """The next step's lookups, ``{module: ids or [ids, ...]}`` (SparsePipeline's), as the
        session's (table, uint64 ids) in the order the forward feeds them; their pulls ride on
        this step's pushes. None: the next step's are unknown."""
        ahead = []
        old_tables = {id(m): t for t, m in enumerate(self._table_modules)}
        # A module looked up several times a step has a list of ids, one per lookup, in order.
        items = [(m, i) for m, ids in (lookups or {}).items()
                 for i in (ids if isinstance(ids, (list, tuple)) else [ids])]
        for module, ids in items:
            if isinstance(module, nn.EmbeddingBagCollection) and module._optimizer is self:
                ahead.append((module._index, module._joined_ids(ids)))  # fused
            elif isinstance(module, nn.EmbeddingBagCollection) and \
                    next(iter(module.values()))._optimizer is self:
                columns = nn._field_ids(ids)
                ahead += [(f._index, columns[k]) for k, f in enumerate(module.values())]
            elif isinstance(module, nn._Table) and module._optimizer is self:
                ahead.append((module._index, module._session_ids(ids)))
            elif id(module) in old_tables:  # what its pre-hook pulls
                ahead.append((old_tables[id(module)], _unique_ids(ids)[1]))
            else:
                raise ValueError("SparsePipeline's lookups: %r is not a table of this "
                                 "optimizer's model (a towerps.torch.nn table, an "
                                 "EmbeddingBagCollection or an nn.Embedding(sparse=True))"
                                 % (module,))
        self._ahead = ahead

    def _after_accumulation(self, p, fn):
        # PyTorch 1.13 has no post-accumulate-grad hook: hook the gradient accumulator, as
        # Horovod does; it runs once p.grad holds this backward's gradient.
        accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
        self._hooks.append(accumulator.register_hook(lambda *_: fn()))
        self._accumulators.append(accumulator)  # kept alive, or the hook goes with it

    def _hook(self, index, p):
        session, staging = self._session, self._staging[index]

        def push():
            if staging is None:
                session.push(index, p.grad.detach().contiguous().numpy())
            else:
                session.push(index, staging.download(p.grad.detach()))
            self._pushed[index] = (p.grad, p.grad._version)

        self._after_accumulation(p, self._hold_or(push))

    def _hold_or(self, push):
        """`push` now, or with clip_grad_norm at step(), once every gradient is in."""
        if self._clip is None:
            return push
        return lambda: self._held.append(push)

    def _clip_and_push(self):
        """The held pushes, scaled as torch.nn.utils.clip_grad_norm_(params, C) scales them (the
        same operations; a table's sparse gradient is replaced, coalesced and scaled, where
        clip_grad_norm_ would leave it unscaled)."""
        held, self._held = self._held, []
        weights = [p for p in self._params if p.grad is not None]
        weights += [m.weight for m in self._table_modules if m.weight.grad is not None]
        norms = [torch.norm(p.grad.detach(), 2.0) for p in weights]
        norms += self._table_norms()
        leaves = {id(rows): rows for _, _, rows, _ in self._lookups}  # a collection's is shared
        weights += [rows for rows in leaves.values() if rows.grad is not None]
        if weights:
            device = weights[0].grad.device
            total = torch.norm(torch.stack([n.to(device) for n in norms]), 2.0)
            coef = torch.clamp(self._clip / (total + 1e-6), max=1.0)
            for p in weights:
                if p.grad.is_sparse:
                    p.grad = p.grad.detach().coalesce() * coef.to(p.grad.device)
                else:
                    p.grad.detach().mul_(coef.to(p.grad.device))
        for push in held:
            push()

    def _table_norms(self):
        """The 2-norm of each towerps.torch.nn table's gradient this step: the rows of an id
        looked up in several lookups summed first, as the push sums them."""
        blocks = {}
        for t, ids, rows, part in self._lookups:
            if rows.grad is not None:
                blocks.setdefault(t, []).append((ids, rows.grad.detach()[part]))
        norms = []
        for parts in blocks.values():
            if len(parts) == 1:
                norms.append(torch.norm(parts[0][1], 2.0))
                continue
            ids, inverse = np.unique(np.concatenate([i for i, _ in parts]), return_inverse=True)
            grads = torch.cat([g for _, g in parts])
            summed = torch.zeros((len(ids), grads.shape[1]), dtype=grads.dtype,
                                 device=grads.device)
            summed.index_add_(0, torch.from_numpy(inverse).to(grads.device), grads)
            norms.append(torch.norm(summed, 2.0))
        return norms

    def _warn_if_ahead_not_taken(self):
        """Warns once when this step's forward took none of the lookups SparsePipeline gave
        ahead: its lookups function does not say what the forward looks up, and each step then
        pulls its rows twice."""
        given, taken_before = self._ahead_given
        self._ahead_given = (0, 0)
        if given and self._session.looked_up_ahead == taken_before and not self._warned_ahead:
            self._warned_ahead = True
            warnings.warn(
                "SparsePipeline: this step's forward took none of the %d lookups given ahead "
                "(its lookups function gives other ids, another order or other tables than the "
                "forward looks up), so their rows were pulled again; give it exactly the ids "
                "each table's forward takes. (A server's failover also drops them once.) "
                "(Warned once.)" % given, RuntimeWarning, stacklevel=3)

    def _warn_if_pushed_gradients_changed(self):
        pushed, self._pushed = self._pushed, {}
        if self._warned_changed:
            return
        for i, (grad, version) in pushed.items():
            p = self._params[i]
            if p.grad is not grad or (grad is not None and grad._version != version):
                self._warned_changed = True
                warnings.warn(
                    "parameter '%s': its gradient changed after backward pushed it (a "
                    "clip_grad_norm_ or another change between backward() and step()?); the "
                    "servers may have taken it before or after the change. To clip, use "
                    "DistributedOptimizer(clip_grad_norm=...). (Warned once.)" % self._names[i],
                    RuntimeWarning, stacklevel=3)
                return

    def _hook_table(self, index, name, module):
        # Before each forward: the rows of the ids it looks up, pulled into the weight. After
        # backward: the sparse gradient's rows, summed per id, pushed.
        session, weight = self._session, module.weight

        def pull(_module, inputs):
            unique, ids = _unique_ids(inputs[0])
            if unique.numel() and int(unique[0]) < 0:
                raise ValueError("table '%s' got a negative id %d" % (name, int(unique[0])))
            rows = session.pull_rows(index, ids, torch.is_grad_enabled())
            with torch.no_grad():
                weight[unique] = torch.from_numpy(rows).to(weight.device)

        def push():
            grad = weight.grad.detach()
            if not grad.is_sparse:
                raise ValueError("table '%s' got a dense gradient: make it sparse=True" % name)
            grad = grad.coalesce().cpu()
            ids = grad.indices()[0].numpy().astype("uint64")
            session.push_rows(index, ids, grad.values().contiguous().numpy())

        self._hooks.append(module.register_forward_pre_hook(pull))
        self._after_accumulation(weight, self._hold_or(push))

    @property
    def step_count(self):
        """The step this worker computes next (sync: the job's step)."""
        return self._session.iteration

    @property
    def start_step(self):
        """The step this worker started at: 0, or where a killed predecessor stopped. A script
        that must repeat its predecessor's batches skips this many."""
        return self._session.start_iteration

    def _give_grad(self, i, keep_values):
        """Makes parameter i's p.grad its session buffer (one no server still reads), zeroed
        unless `keep_values` (then it holds p.grad's values); memory of its own when servers
        hold every buffer."""
        p = self._params[i]
        array = self._session.gradient_buffer(i, keep_values)
        if array is None:  # servers hold every buffer: memory of its own, which pushes copy
            self._own_grad[i] = None
            if keep_values and p.grad is not None:
                p.grad = p.grad.detach().clone()
            else:
                p.grad = torch.zeros_like(p)
            return
        views = self._grad_views[i]
        grad = views.get(array.ctypes.data)
        if grad is None:
            grad = views[array.ctypes.data] = torch.from_numpy(array).view(p.shape)
        if not keep_values:
            grad.zero_()
        if p.grad is not grad:
            p.grad = grad
        self._own_grad[i] = grad

    def zero_grad(self, set_to_none=None):
        """Zeroes the gradients. CPU parameters keep theirs in the session's buffers (zeroed in
        place), so that the pushes lend them without a copy; ``set_to_none=True`` sets every
        p.grad to None instead (the pushes then copy). Others (CUDA parameters, tables, and all
        with ``copy_gradients=True``) are set to None unless ``set_to_none=False``."""
        for p in self._all_params:
            i = self._lent.get(id(p))
            if i is not None and set_to_none is not True:
                if p.grad is not None and p.grad is self._own_grad[i]:
                    p.grad.zero_()  # no server reads it: step() made sure
                else:
                    self._give_grad(i, keep_values=False)
            elif p.grad is not None:
                if set_to_none is False:
                    p.grad.zero_()
                else:
                    p.grad = None

    def step(self, loss=None):
        if self._finished:
            raise RuntimeError("step() after finish(): this worker has left the job")
        if isinstance(loss, torch.Tensor):
            loss = float(loss.detach())
        if self._clip is not None:
            self._clip_and_push()
        lookups, self._lookups = self._lookups, []
        blocks, self._blocks = self._blocks, []
        ahead, self._ahead = self._ahead, []
        for module in self._prefetchable:
            # A prefetch no forward took is not the next step's. Only when there is one:
            # torch.nn.Module's __setattr__ is slow, and a pipeline leaves them all None.
            if module._prefetched is not None:
                module._prefetched = None
        # In the order the forward looked them up (a table looked up twice sums its blocks in
        # that order); a collection's fields all at once, where its first is.
        blocks = {id(rows): (tables, unique, starts) for tables, unique, starts, rows in blocks}
        pushed = set()
        for t, ids, rows, part in lookups:
            if rows.grad is None or id(rows) in pushed:
                continue
            block = blocks.get(id(rows))
            if block is None:
                self._session.add_rows(t, ids, rows.grad.detach().cpu().numpy()[part])
            else:
                pushed.add(id(rows))
                self._session.add_fields_rows(*block, rows.grad.detach().cpu().numpy())
        self._warn_if_pushed_gradients_changed()
        self._warn_if_ahead_not_taken()
        if self._dense is not None:
            self._dense.step()
        self._session.end_step(loss, ahead)
        self._ahead_given = (len(ahead), self._session.looked_up_ahead)
        self._load_values()
        # A server may still read a gradient it was lent (shared memory): such a p.grad moves to
        # another buffer, with its values, before the script can write it again.
        for i, p in enumerate(self._params):
            if self._own_grad[i] is not None and p.grad is self._own_grad[i]:
                self._give_grad(i, keep_values=True)

    def _load_values(self, pull=None):
        """`pull` (default: this step's values) writes the views; CUDA parameters' host buffers
        are rewritten only once their last upload is done, and uploaded after."""
        for st in self._staging:
            if st:
                st.uploaded.synchronize()
        (pull or self._session.await_values)(self._views)
        for p, st in zip(self._params, self._staging):
            if st:
                st.upload(p)

    def log_eval(self, test_accuracy, test_loss, epoch=None):
        """Records an evaluation at the current step: an "eval" line in --metrics-out and the
        eval/accuracy and eval/loss scalars under --logdir, as native chiefs write them (the
        experiments' time-to-target reads them)."""
        if epoch is not None:
            self._session.set_epoch(int(epoch))
        self._session.log_eval(float(test_accuracy), float(test_loss))

    def log_scalar(self, tag, value):
        """A scalar of the script's own at the current step (TensorBoard tag `tag`)."""
        self._session.log_scalar(str(tag), float(value))

    def set_epoch(self, epoch):
        """The epoch the metrics lines name from now on."""
        self._session.set_epoch(int(epoch))

    def synchronize(self):
        """After the last step: waits until every worker's updates are in (each runs as many
        steps as this one) and loads the final parameters, the ones to evaluate. In sync the
        last step() has loaded them already."""
        self._load_values(self._session.pull_final)

    def model_state_dict(self, model):
        """``model.state_dict()`` with every table as the servers hold it: the whole trained
        model, to save and load into a plain-PyTorch model. A bounded table (an
        ``nn.Embedding(sparse=True)``, or a ``towerps.torch.nn`` one with num_embeddings) is its
        full weight, rows never trained at the initial values the servers would draw; an
        unbounded one is ``<name>.ids`` (int64) and ``<name>.values`` ([n, dim]), never made
        dense. Call synchronize() first; every rank may call it, before finish()."""
        state = model.state_dict()
        exported = self._session.export_tables()
        tables = [(n, m, m.weight.shape[0]) for n, m in self._table_modules_named]
        tables += [(n, m, m.num_embeddings) for n, m, _ in self._server_tables]
        seed = settings()["seed"]
        for (name, module, rows), (ids, values) in zip(tables, exported):
            if isinstance(module, nn.EmbeddingBagCollection):  # fused: each field its segment
                for field, start in zip(module.values(), module._offsets):
                    held = (ids >= start) & (ids < start + np.uint64(field.num_embeddings))
                    state[field._name] = torch.from_numpy(self._full_weight(
                        seed, field._name, field, field.num_embeddings, ids[held] - start,
                        values[held]))
                continue
            if rows == 0:
                state[name + ".ids"] = torch.from_numpy(ids.view("int64").copy())
                state[name + ".values"] = torch.from_numpy(values)
                continue
            state[name] = torch.from_numpy(
                self._full_weight(seed, name, module, rows, ids, values))
        return state

    def _full_weight(self, seed, name, module, rows, ids, values):
        """A bounded table's whole weight: its rows `ids` held as `values`, the others at the
        initial values the servers would draw."""
        dim = values.shape[1] if values.ndim == 2 and values.shape[1] else module.embedding_dim
        untrained = np.setdiff1d(np.arange(rows, dtype=np.uint64), ids)
        weight = np.empty((rows, dim), dtype=np.float32)
        weight[untrained.astype(np.int64)] = _towerps.initial_rows(
            seed, name, self._init_scale, untrained, dim)
        weight[ids.astype(np.int64)] = values
        if isinstance(module, nn._Table) and module.padding_idx is not None:
            weight[module.padding_idx] = 0  # what its forwards read (nn.Embedding's: the row)
        return weight

    def finish(self, test_accuracy=None, test_loss=None, train_loss=None, epochs=None,
               **measures):
        """Ends training; every rank calls it. The chief writes the job's summary
        (``--summary-out``, with the servers' counters and the measures given) and returns it
        as a dict; other workers return None, having told the servers they are done (where the
        chief stops the servers, --mpi, --slurm and --cluster, they wait for every rank's
        finish()). Call synchronize() first when the measures need the final parameters.
        ``epochs`` (the epochs trained) defaults to the steps over a DistributedSampler's
        batches of the job's --batch-size per epoch; without a sampler the summary says null.
        Any other measure, by name (``test_auc=0.79``, ``rmse=...``), goes into the summary's
        "measures" (a test_auc also as its test_auc) and under --logdir as eval/<name>."""
        if self._finished:
            raise RuntimeError("finish() was called already; every rank calls it once")
        self._finished = True
        extra = []
        for name, value in measures.items():
            try:
                extra.append((name, float(value)))
            except (TypeError, ValueError):
                raise ValueError("finish(%s=%r): a measure is a number" % (name, value)) from None
        if epochs is None and _sampler_examples:
            per_epoch = _sampler_examples // settings()["batch-size"]
            epochs = self.step_count / per_epoch if per_epoch > 0 else None
        neg = lambda x: -1.0 if x is None else float(x)
        own = [] if self._dense is None else self._dense.values()
        text = self._session.finish(neg(test_accuracy), neg(test_loss), neg(train_loss),
                                    neg(epochs), extra, own)
        return json.loads(text) if text else None


def finish(optimizer, **measures):
    """``optimizer.finish(**measures)``."""
    return optimizer.finish(**measures)


def _check_arguments(params, server_tables, model, sparse_inputs, clip_grad_norm, dense,
                     optimizer):
    if not params and not server_tables:
        raise ValueError("DistributedOptimizer got no parameters")
    if sparse_inputs is not None and model is None:
        raise ValueError("sparse_inputs needs model=model: it runs before the model's "
                         "forward")
    if clip_grad_norm is not None and not float(clip_grad_norm) > 0:
        raise ValueError("clip_grad_norm=%r: give the largest gradient norm to allow, a "
                         "positive number (or None not to clip)" % (clip_grad_norm,))
    if dense not in ("server", "allreduce"):
        raise ValueError("dense=%r: \"server\" (the servers train the dense parameters) or "
                         "\"allreduce\" (the workers average their gradients and apply "
                         "optimizer=)" % (dense,))
    if dense == "server" and optimizer is not None:
        raise ValueError("optimizer= is the dense parameters' optimizer of dense=\"allreduce\"; "
                         "with dense=\"server\" the servers apply --optimizer")
    if dense == "allreduce" and clip_grad_norm is not None:
        raise ValueError("with dense=\"allreduce\", clip with torch.nn.utils.clip_grad_norm_ "
                         "after backward() (the dense gradients are averaged by then), not "
                         "clip_grad_norm=")
    if dense == "allreduce" and model is None:
        raise ValueError("dense=\"allreduce\" needs model=model: its tables stay on the "
                         "servers")


def _check_dense(params):
    for name, p in params:
        if not isinstance(p, torch.Tensor):
            raise ValueError("parameter '%s' is not a tensor" % name)
        if p.dtype != torch.float32 or p.device.type not in ("cpu", "cuda"):
            raise ValueError("parameter '%s' is %s on %s: TowerPS trains float32 "
                             "parameters on the CPU or a CUDA device"
                             % (name, p.dtype, p.device))
        if not p.is_contiguous():
            raise ValueError("parameter '%s' is not contiguous" % name)


class _Staging:
    """A CUDA parameter's pinned host buffers: its values on the way up, its gradient on the way
    down, each copy ordered on the current stream and marked by an event."""

    def __init__(self, p):
        self.host = torch.empty(p.shape, dtype=torch.float32, pin_memory=True)
        self.host.copy_(p.detach())
        self.grad = torch.empty(p.shape, dtype=torch.float32, pin_memory=True)
        self.uploaded = torch.cuda.Event()
        self.uploaded.record()

    def upload(self, p):
        with torch.no_grad():
            p.copy_(self.host, non_blocking=True)
        self.uploaded.record()

    def download(self, grad):
        """The gradient in host memory, once its copy's event has fired (the push copies it)."""
        self.grad.copy_(grad, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        done.synchronize()
        return self.grad.numpy()


def _unique_ids(ids):
    """An nn.Embedding(sparse=True)'s lookup as its pre-hook pulls it: the distinct ids, sorted
    (the smallest first), as a tensor and as the session's uint64 array (SparsePipeline gives
    the same ahead)."""
    unique = torch.unique(ids.detach())
    return unique, unique.cpu().numpy().astype("uint64")


def _declared_policies(declared, tables, server_tables):
    """tables=: each declared table's policy text ("min_count=2,ttl_steps=100"), by its table
    name; `tables` are the model's sparse nn tables (name, module) and `server_tables` its
    _server_tables (a fused collection's fields are refused). The servers check the keys and
    values."""
    if declared is None:
        return {}
    if not isinstance(declared, dict):
        raise ValueError("tables=%r: give a dict of table -> {key: value}, e.g. "
                         "tables={\"emb\": {\"ttl_steps\": 1000}}" % (declared,))
    names, fields = {}, {}
    tables = tables + [(name, module) for name, module, _ in server_tables]
    for name, module in tables:
        names[name] = names[id(module)] = name
        if name.endswith(".weight"):
            names[name[:-len(".weight")]] = name
    for name, _, joined in server_tables:
        for field_name, field in joined:
            fields[field_name] = fields[field_name[:-len(".weight")]] = fields[id(field)] = name
    out = {}
    for key, policy in declared.items():
        name = names.get(id(key) if isinstance(key, torch.nn.Module) else key)
        field_of = fields.get(id(key) if isinstance(key, torch.nn.Module) else key)
        if name is None and field_of is not None:
            raise ValueError("tables=: %r is a field of the fused collection '%s', one table on "
                             "the servers: declare the policy for '%s', or make the collection "
                             "EmbeddingBagCollection(..., fused=False)" % (key, field_of, field_of))
        if name is None:
            raise ValueError("tables=: %r is not one of this model's tables (%s)"
                             % (key, ", ".join(n for n, _ in tables) or "it has none: give "
                                "DistributedOptimizer model=, with sparse embeddings"))
        if not isinstance(policy, dict) or not policy:
            raise ValueError("tables=: table '%s': give its policy as {key: value}, e.g. "
                             "{\"ttl_steps\": 1000}, not %r" % (name, policy))
        out[name] = ",".join("%s=%s" % (k, v) for k, v in policy.items())
    return out


def _server_tables(model):
    """The (table name, module, fields) of each towerps.torch.nn table of `model`, named as
    plain PyTorch names the weight it stands for. A fused EmbeddingBagCollection is one table,
    named as the collection ("collection" at the model's root), and its fields, (name, module)
    each named as plain PyTorch names an EmbeddingBag's weight in a ModuleDict, are the joined
    table's segments; a table's fields are []."""
    if model is None:
        return []
    modules = list(model.named_modules())
    joined = {id(f) for _, m in modules if isinstance(m, nn.EmbeddingBagCollection) and m.fused
              for f in m.values()}
    tables = []
    for qualname, module in modules:
        if isinstance(module, nn.EmbeddingBagCollection) and module.fused:
            module._join()
            prefix = qualname + "." if qualname else ""
            tables.append((qualname or "collection", module,
                           [(prefix + key + ".weight", f) for key, f in module.items()]))
        elif isinstance(module, nn._Table) and id(module) not in joined:
            tables.append(((qualname + ".weight") if qualname else "weight", module, []))
    return tables


def _sparse_tables(params, model):
    """The (parameter name, module) of each nn.Embedding or nn.EmbeddingBag of `model` with
    sparse=True whose weight is among `params`: the tables the servers keep by row. One without
    sparse=True is a dense variable, every step moving the whole table: warned about, naming it
    and the bytes per step."""
    if model is None:
        return []
    names = {id(p): n for n, p in params}
    tables = []
    for module_name, module in model.named_modules():
        name = names.get(id(getattr(module, "weight", None)))
        if name is None or not isinstance(module, (torch.nn.Embedding, torch.nn.EmbeddingBag)):
            continue
        if module.sparse:
            tables.append((name, module))
            continue
        mib = 2 * module.weight.numel() * 4 / 2 ** 20
        warnings.warn(
            "%s '%s' (%d x %d) has sparse=False: it trains as a dense variable, every step "
            "moving the whole table (%.1f MiB pushed and pulled per worker per step); give it "
            "sparse=True to keep it on the servers by row and move only the rows looked up"
            % (type(module).__name__, module_name or name, module.weight.shape[0],
               module.weight.shape[1], mib), RuntimeWarning, stacklevel=3)
    return tables


class DistributedSampler(torch.utils.data.Sampler):
    """This rank's share of ``dataset`` for each epoch: an equal share for every rank (the
    remainder of len(dataset) / size() is left out, so every worker runs the same number of
    steps), of one permutation per epoch seeded by (the job's --seed, the epoch). Each pass over
    it is the next epoch, as with ``shuffle=True``; ``set_epoch(e)`` says which one comes next
    (a restarted worker's, say)."""

    def __init__(self, dataset, shuffle=True, seed=None):
        global _sampler_examples
        self._n = len(dataset)
        self._rank, self._size = rank(), size()
        self._per_rank = self._n // self._size
        if self._per_rank == 0:
            raise ValueError("the dataset has %d examples, fewer than the %d workers"
                             % (self._n, self._size))
        _sampler_examples = self._per_rank  # finish()'s epochs
        self._shuffle = shuffle
        self._seed = settings()["seed"] if seed is None else int(seed)
        self._epoch = 0

    def set_epoch(self, epoch):
        self._epoch = int(epoch)

    def __len__(self):
        return self._per_rank

    def __iter__(self):
        if self._shuffle:
            g = torch.Generator()
            g.manual_seed((self._seed * 1000003 + self._epoch) % (2 ** 63))
            order = torch.randperm(self._n, generator=g)
        else:
            order = torch.arange(self._n)
        self._epoch += 1
        return iter(order[self._rank::self._size][: self._per_rank].tolist())
