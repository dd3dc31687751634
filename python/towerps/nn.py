"""towerps.torch.nn: embedding tables whose rows live only on the parameter servers.

``Embedding`` and ``EmbeddingBag`` take the constructor and forward arguments of their
``torch.nn`` namesakes, and hold no weight: a forward pulls the rows of the distinct ids it looks
up into a small ``[unique, dim]`` tensor, computes from it, and autograd's gradient of that
tensor is what ``DistributedOptimizer.step()`` sends back, each id once. A worker's memory grows
with its batch, never with the table. ``num_embeddings=None`` makes a table unbounded: any int64
is an id (a hash, say), and the servers create a row when it is first looked up, from
(--seed, the table's name, the id), uniform in [-table_init_scale, table_init_scale).

A table is named as plain PyTorch names its weight (``"emb.weight"`` for ``model.emb``), a fused
``EmbeddingBagCollection`` as the module (``"tables"``), and is registered by ``DistributedOptimizer(model.named_parameters(), model=model)``; a forward before
that raises. Every table of a step can be looked up at once, one pull per table in flight
together, with ``DistributedOptimizer.prefetch({module: ids, ...})`` before the forward, or
``DistributedOptimizer(..., sparse_inputs=fn)``, which does it from the model's inputs. An
``EmbeddingBagCollection`` does it itself, and computes all its tables in one operation.

Contract: modules of the training thread. ``max_norm`` and ``_weight`` are refused (the rows are
the servers'); ``sparse`` is accepted and ignored (the gradient is always by row). A padding id's
row is zero and gets no gradient, as in PyTorch. Ids are int64: a bounded table refuses one
outside [0, num_embeddings), naming the table.
"""

import numpy as np
import torch
import torch.nn.functional as F

from . import _towerps

__all__ = ["Embedding", "EmbeddingBag", "EmbeddingBagCollection"]


class _Table(torch.nn.Module):
    """What both modules share: the checks, and the rows of a forward's ids."""

    def __init__(self, kind, num_embeddings, embedding_dim, padding_idx, max_norm, _weight,
                 dtype):
        super().__init__()
        if num_embeddings is None:
            num_embeddings = 0
        if not isinstance(num_embeddings, int) or num_embeddings < 0:
            raise ValueError("%s: num_embeddings=%r: give the number of rows, or None for an "
                             "unbounded table (any int64 id)" % (kind, num_embeddings))
        if not isinstance(embedding_dim, int) or embedding_dim <= 0:
            raise ValueError("%s: embedding_dim=%r: give a positive int"
                             % (kind, embedding_dim))
        if max_norm is not None:
            raise ValueError("%s: max_norm is not supported: the rows live on the servers, "
                             "which would have to renormalise them" % kind)
        if _weight is not None:
            raise ValueError("%s: _weight is not supported: the rows start on the servers "
                             "(DistributedOptimizer's table_init_scale)" % kind)
        if dtype is not None and dtype != torch.float32:
            raise ValueError("%s: dtype=%s: TowerPS tables are float32" % (kind, dtype))
        if padding_idx is not None and num_embeddings > 0:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError("%s: padding_idx=%d is outside the %d rows"
                                 % (kind, padding_idx, num_embeddings))
            padding_idx %= num_embeddings
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self._kind = kind
        self._name = None       # the table's name, once registered
        self._optimizer = None  # the DistributedOptimizer that registered it
        self._index = None      # its table index in the session
        self._offset = None     # a fused collection's field: its first row in the joined table
        self._prefetched = None  # (ids tensor, lookup result) from prefetch()

    def extra_repr(self):
        rows = self.num_embeddings or "unbounded"
        return "%s, %d, on the servers as %r" % (rows, self.embedding_dim, self._name)

    def _rows(self, input):
        """The rows of `input`'s distinct ids as a leaf tensor, and each id's index into it."""
        if self._optimizer is None:
            raise RuntimeError("%s: its rows are on the servers; register the model first with "
                               "tps.DistributedOptimizer(model.named_parameters(), model=model)"
                               % self._kind)
        if input.dtype not in (torch.int64, torch.int32):
            raise ValueError("table '%s' got ids of %s: give int64 ids" % (self._name, input.dtype))
        got = self._take_prefetched(input)
        if got is None:  # without autograd (an evaluation) the rows are not the step's
            got = self._optimizer._session.lookup([(self._index, self._session_ids(input))],
                                                  torch.is_grad_enabled())[0]
        ids, rows, inverse = got
        rows = torch.from_numpy(rows)
        pad = None
        if self.padding_idx is not None:
            padding = self.padding_idx + (self._offset or 0)
            found = np.flatnonzero(ids == np.uint64(padding & 0xFFFFFFFFFFFFFFFF))
            if found.size:
                pad = int(found[0])
                rows[pad] = 0
        if input.device.type != "cpu":
            rows = rows.to(input.device)
        if torch.is_grad_enabled():
            rows.requires_grad_()
            self._optimizer._lookups.append((self._index, ids, rows, slice(None)))
        return rows, torch.from_numpy(inverse).to(input.device).view(input.shape), pad

    def _session_ids(self, input):
        """`input` as the session's uint64 ids of this module's table: a fused collection's
        field checks its own bound and adds its offset into the joined table."""
        ids = _ids(input)
        if self._offset is None:
            return ids
        _check_bounds(ids.reshape(-1, 1), [self])
        return ids + np.uint64(self._offset)

    def _take_prefetched(self, input):
        if self._prefetched is None:
            return None
        ids, version, got = self._prefetched
        self._prefetched = None
        if ids.data_ptr() == input.data_ptr() and ids.shape == input.shape and \
                ids.stride() == input.stride() and input._version == version:
            return got  # the same tensor, unchanged since
        return got if torch.equal(ids.cpu(), input.cpu()) else None


class _GatherRows(torch.autograd.Function):
    """``F.embedding(inverse, rows)`` for CPU tensors, whose backward sums each row's gradients
    in C++ (``_towerps.sum_rows``): the same additions in the same order, so the same bits,
    without F.embedding's dispatch of one addition per looked-up id (6.8% of a PyTorch worker's
    training thread with bench/pytorch_rec_bench.py's collection; docs/PERFORMANCE.md)."""

    @staticmethod
    def forward(ctx, rows, inverse):
        ctx.save_for_backward(inverse)
        ctx.rows = rows.shape[0]
        return rows.index_select(0, inverse.reshape(-1)).view(*inverse.shape, rows.shape[1])

    @staticmethod
    def backward(ctx, grad):
        inverse, = ctx.saved_tensors
        sums = _towerps.sum_rows(inverse.reshape(-1).numpy(),
                                 grad.detach().reshape(-1, grad.shape[-1]).contiguous().numpy(),
                                 ctx.rows)
        return torch.from_numpy(sums), None


def _gather(rows, inverse):
    """Each looked-up id's row: ``rows[inverse]``, differentiable in ``rows``."""
    if rows.device.type == "cpu" and rows.dtype == torch.float32 and \
            inverse.dtype == torch.int64:
        return _GatherRows.apply(rows, inverse)
    return F.embedding(inverse, rows)


def _ids(input):
    """`input` as the uint64 ids the session takes: int64's bits, without a copy when it can."""
    return input.detach().to("cpu", torch.int64).contiguous().numpy().reshape(-1).view(np.uint64)


def _check_bounds(ids, fields):
    """Raises, naming the field, for an id of uint64 ``ids[:, k]`` outside ``fields[k]``'s
    rows (a negative int64 is a large uint64)."""
    bounds = np.array([f.num_embeddings for f in fields], dtype=np.uint64)
    bad = ids >= bounds
    if bad.any():
        b, k = np.argwhere(bad)[0]
        raise ValueError("table '%s' has %d rows, and got id %d: give ids in [0, %d)"
                         % (fields[k]._name, bounds[k], ids[b, k].view(np.int64), bounds[k]))


def _field_ids(ids):
    """A collection's ``[batch, fields]`` ids as uint64 ``[fields, batch]``: each field's ids one
    contiguous row, with one copy for them all."""
    return ids.detach().to("cpu", torch.int64).t().contiguous().numpy().view(np.uint64)


class Embedding(_Table):
    """``torch.nn.Embedding`` with its rows on the servers (see the module's docstring)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=True, _weight=None,
                 device=None, dtype=None):
        super().__init__("Embedding", num_embeddings, embedding_dim, padding_idx, max_norm,
                         _weight, dtype)
        self.scale_grad_by_freq = scale_grad_by_freq

    def forward(self, input):
        rows, inverse, pad = self._rows(input)
        if pad is None and not self.scale_grad_by_freq:
            return _gather(rows, inverse)
        return F.embedding(inverse, rows, padding_idx=pad,
                           scale_grad_by_freq=self.scale_grad_by_freq)


class EmbeddingBag(_Table):
    """``torch.nn.EmbeddingBag`` with its rows on the servers (see the module's docstring)."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=True, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None):
        super().__init__("EmbeddingBag", num_embeddings, embedding_dim, padding_idx, max_norm,
                         _weight, dtype)
        if mode not in ("sum", "mean", "max"):
            raise ValueError("EmbeddingBag: mode=%r: give 'sum', 'mean' or 'max'" % (mode,))
        self.mode = mode
        self.scale_grad_by_freq = scale_grad_by_freq
        self.include_last_offset = include_last_offset

    def forward(self, input, offsets=None, per_sample_weights=None):
        rows, inverse, pad = self._rows(input)
        if offsets is not None:
            offsets = offsets.to(torch.int64)
        return F.embedding_bag(inverse, rows, offsets, scale_grad_by_freq=self.scale_grad_by_freq,
                               mode=self.mode, per_sample_weights=per_sample_weights,
                               include_last_offset=self.include_last_offset, padding_idx=pad)


class EmbeddingBagCollection(torch.nn.ModuleDict):
    """Many tables of one width looked up together, as a click model's categorical fields are
    (in the spirit of TorchRec's EmbeddingBagCollection): ``tables`` maps each field's name to its
    number of rows (None: unbounded). ``forward(ids)`` takes one id per field and example, an
    int64 ``[batch, fields]`` tensor in ``tables``' order, and returns ``[batch, fields, dim]``.

    Each field is an ``EmbeddingBag`` of the collection (``coll["c0"]``), saved as
    ``<collection>.<name>.weight``, the names a ``torch.nn.ModuleDict`` of plain EmbeddingBags
    has. A forward looks every field up in one exchange with the servers and computes them all
    from one tensor of rows, so a model's cost per step does not grow with its fields' count as
    a module per field does.

    ``fused`` (the default when every field is bounded): the fields are one table on the
    servers, named as the collection (``"tables"`` for ``model.tables``), field k's ids offset
    by the rows of the fields before it, as TorchRec fuses tables. A step then moves and
    updates one table instead of one per field (docs/PERFORMANCE.md: 1.3-1.5x the examples/s
    of 26 fields apart), and every row still starts and trains, bit for bit, as its field's own
    table's would (job/variable.h's segments). The state_dict, ``--export-npz`` and a field's
    own forward see the fields apart. It is one table to the servers' budgets: a policy
    (``tables=``, ``--table-policy``) is the collection's, by its name, and so are
    ``--table-capacity-rows`` and ``--table-memory-mb``; a non-finite gradient in one field
    refuses the worker's push of them all; ``clip_grad_norm`` sums its rows' squares as one
    table's (the same norm up to rounding). ``fused=False``: a table per field, for unbounded
    fields, to place fields on different servers whole (``--table-placement whole``), or to
    resume a job checkpointed before collections were fused."""

    def __init__(self, tables, embedding_dim, fused=None):
        super().__init__({name: EmbeddingBag(rows, embedding_dim, mode="sum")
                          for name, rows in dict(tables).items()})
        if not len(self):
            raise ValueError("EmbeddingBagCollection: give at least one table")
        self.embedding_dim = embedding_dim
        self._fused = None if fused is None else bool(fused)
        # Fused: each field's first row in the joined table (_join), and the joined table's
        # registration, as a _Table's.
        self._offsets = None
        self._name = self._optimizer = self._index = self._prefetched = None
        if self.fused:
            self._join()

    @property
    def fused(self):
        """Whether the fields are one table on the servers: as given, or when all are bounded."""
        if self._fused is None:
            return all(f.num_embeddings for f in self.values())
        return self._fused

    @property
    def num_embeddings(self):
        """A fused collection's rows, its fields' together; None when it is not fused."""
        return sum(f.num_embeddings for f in self.values()) if self.fused else None

    def _join(self):
        """Each field's first row in the joined table, from the fields as they are now (the
        DistributedOptimizer calls it again when it registers the model)."""
        bounds = [f.num_embeddings for f in self.values()]
        if not all(bounds):
            raise ValueError("EmbeddingBagCollection: fused=True, but field '%s' is unbounded: "
                             "a fused collection's fields need rows (or give fused=False)"
                             % list(self.keys())[bounds.index(0)])
        self._offsets = np.cumsum([0] + bounds[:-1]).astype(np.uint64)

    def _fields_of(self, ids):
        """The fields, once ``ids`` is checked to be ``[batch, fields]``."""
        fields = list(self.values())
        if ids.dim() != 2 or ids.shape[1] != len(fields):
            raise ValueError("EmbeddingBagCollection: ids of shape %s; give [batch, %d], one id "
                             "per field" % (tuple(ids.shape), len(fields)))
        return fields

    def _joined_ids(self, ids):
        """A fused collection's ``[batch, fields]`` int64 ids as the joined table's uint64 ids,
        ``[batch * fields]``, each checked against its field's rows."""
        fields = self._fields_of(ids)
        if ids.dtype not in (torch.int64, torch.int32):
            raise ValueError("EmbeddingBagCollection '%s' got ids of %s: give int64 ids"
                             % (self._name, ids.dtype))
        joined = ids.detach().to("cpu", torch.int64).contiguous().numpy().view(np.uint64)
        _check_bounds(joined, fields)
        return (joined + self._offsets).reshape(-1)

    def forward(self, ids):
        if self.fused:
            return self._forward_fused(ids)
        fields = self._fields_of(ids)
        optimizer = fields[0]._optimizer
        if optimizer is None:
            fields[0]._rows(ids[:, 0])  # raises, saying how to register the model
        tables = [f._index for f in fields]
        unique, rows, starts, inverse = optimizer._session.lookup_fields(
            tables, _field_ids(ids), torch.is_grad_enabled())
        rows, inverse = torch.from_numpy(rows), torch.from_numpy(inverse)
        if ids.device.type != "cpu":
            rows, inverse = rows.to(ids.device), inverse.to(ids.device)
        if torch.is_grad_enabled():
            rows.requires_grad_()
            bounds = starts.tolist()
            for k, t in enumerate(tables):
                part = slice(bounds[k], bounds[k + 1])
                optimizer._lookups.append((t, unique[part], rows, part))
            optimizer._blocks.append((tables, unique, starts, rows))
        return _gather(rows, inverse)

    def _forward_fused(self, ids):
        if self._optimizer is None:
            raise RuntimeError("EmbeddingBagCollection: its rows are on the servers; register "
                               "the model first with tps.DistributedOptimizer("
                               "model.named_parameters(), model=model)")
        joined = self._joined_ids(ids)
        unique, rows, inverse = self._optimizer._session.lookup(
            [(self._index, joined)], torch.is_grad_enabled())[0]
        rows, inverse = torch.from_numpy(rows), torch.from_numpy(inverse).view(ids.shape)
        if ids.device.type != "cpu":
            rows, inverse = rows.to(ids.device), inverse.to(ids.device)
        if torch.is_grad_enabled():
            rows.requires_grad_()
            self._optimizer._lookups.append((self._index, unique, rows, slice(None)))
        return _gather(rows, inverse)
