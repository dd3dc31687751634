"""The click-through-rate models of bench/pytorch_baseline.py (--model dlrm_small, wide_deep), in
PyTorch as a user writes them: nn.EmbeddingBag(sparse=True) tables, Adam on the dense layers and
sparse Adagrad on the tables, BCEWithLogitsLoss; and the Criteo click-log reader they train on,
with DLRM's transform (log(1 + max(x, 0)) of the integers; each field's values mapped to rows).

The architectures, initializations and optimizers are TowerPS's zoo models' (worker/model/zoo.cc)
and defaults: He-normal dense layers with zero biases, Glorot-uniform output layers, rows
uniform in [-0.05, 0.05) (Wide & Deep's weights per id start at 0), Adam (lr 0.001) for the
dense variables (or, with --dense-optimizer momentum, SGD with momentum 0.9, as `towerps-bench
train` updates them) and Adagrad (lr 0.05, accumulators from 0.1) for the tables.
"""
import math
import sys
import time

import numpy as np
import torch
from torch import nn

INTEGERS, CATEGORIES = 13, 26


def read_criteo(paths):
    """Reads Criteo-format files; returns, per file, (dense float32 [N, 13], ids int64 [N, 26],
    labels float32 [N]), ids being row numbers per field over all the files (as TowerPS hashes
    every value of a field to a row of its own)."""
    vocab = [dict() for _ in range(CATEGORIES)]
    out = []
    for path in paths:
        dense, ids, labels = [], [], []
        with open(path) as f:
            for number, line in enumerate(f, 1):
                fields = line.rstrip("\r\n").split("\t")
                if len(fields) != 1 + INTEGERS + CATEGORIES or fields[0] not in ("0", "1"):
                    sys.exit(f"{path}:{number}: not a Criteo line with a label")
                labels.append(float(fields[0]))
                dense.append([math.log1p(max(int(v), 0)) if v else 0.0
                              for v in fields[1:1 + INTEGERS]])
                ids.append([vocab[c].setdefault(v, len(vocab[c]))
                            for c, v in enumerate(fields[1 + INTEGERS:])])
        out.append((np.asarray(dense, np.float32), np.asarray(ids, np.int64),
                    np.asarray(labels, np.float32)))
    return out, [len(v) for v in vocab]


def he_dense(n_in, n_out, glorot=False, zero=False):
    layer = nn.Linear(n_in, n_out)
    if zero:
        nn.init.zeros_(layer.weight)
    elif glorot:
        nn.init.xavier_uniform_(layer.weight)
    else:
        nn.init.normal_(layer.weight, 0.0, math.sqrt(2.0 / n_in))
    nn.init.zeros_(layer.bias)
    return layer


def table(rows, dim, scale=0.05):
    bag = nn.EmbeddingBag(rows, dim, mode="sum", sparse=True)
    nn.init.uniform_(bag.weight, -scale, scale) if scale > 0 else nn.init.zeros_(bag.weight)
    return bag


class DlrmSmall(nn.Module):
    """Bottom MLP 13-64-16, 26 tables of dim 16, dot interaction (27 vectors: the bottom output
    and the 351 pairs i > j, row by row), top MLP 367-64-1."""

    def __init__(self, vocab):
        super().__init__()
        self.bottom = nn.Sequential(he_dense(13, 64), nn.ReLU(), he_dense(64, 16), nn.ReLU())
        self.tables = nn.ModuleList(table(v, 16) for v in vocab)
        k = CATEGORIES + 1
        self.li, self.lj = zip(*[(i, j) for i in range(k) for j in range(i)])
        self.top = nn.Sequential(he_dense(16 + k * (k - 1) // 2, 64), nn.ReLU(),
                                 he_dense(64, 1, glorot=True))

    def forward(self, dense, ids, offsets):
        x = self.bottom(dense)
        rows = [t(ids[:, f], offsets) for f, t in enumerate(self.tables)]
        v = torch.stack([x] + rows, dim=1)  # [B, 27, 16]
        z = torch.bmm(v, v.transpose(1, 2))[:, self.li, self.lj]
        return self.top(torch.cat([x, z], dim=1)).squeeze(1)


class WideDeep(nn.Module):
    """A weight per id and the dense features, linear, added to a 429-256-128-1 MLP on 16-dim
    rows of the same fields and the dense features."""

    def __init__(self, vocab):
        super().__init__()
        self.wide_tables = nn.ModuleList(table(v, 1, scale=0.0) for v in vocab)
        self.deep_tables = nn.ModuleList(table(v, 16) for v in vocab)
        self.linear = he_dense(CATEGORIES + INTEGERS, 1, zero=True)
        self.deep = nn.Sequential(he_dense(CATEGORIES * 16 + INTEGERS, 256), nn.ReLU(),
                                  he_dense(256, 128), nn.ReLU(), he_dense(128, 1, glorot=True))

    def forward(self, dense, ids, offsets):
        wide = [t(ids[:, f], offsets) for f, t in enumerate(self.wide_tables)]
        deep = [t(ids[:, f], offsets) for f, t in enumerate(self.deep_tables)]
        return (self.linear(torch.cat(wide + [dense], dim=1)) +
                self.deep(torch.cat(deep + [dense], dim=1))).squeeze(1)


MODELS = {"dlrm_small": DlrmSmall, "wide_deep": WideDeep}


def auc(scores, labels):
    """ROC AUC, ties counting half."""
    order = np.argsort(scores, kind="mergesort")
    s, y = scores[order], labels[order]
    ranks = np.empty(len(s))
    i = 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        ranks[i:j] = (i + 1 + j) / 2.0
        i = j
    pos = y.sum()
    neg = len(y) - pos
    return float((ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))


def run(a):
    """Trains --model on --data-dir's train.txt for --epochs and evaluates test.txt (AUC, log
    loss), or, without --epochs, measures training examples per second for --seconds."""
    torch.manual_seed(a.seed)
    (train, test), vocab = read_criteo([a.data_dir + "/train.txt", a.data_dir + "/test.txt"])
    model = MODELS[a.model](vocab)
    sparse = [p for n, p in model.named_parameters() if "tables" in n]
    dense = [p for n, p in model.named_parameters() if "tables" not in n]
    opt_dense = (torch.optim.Adam(dense, lr=a.lr) if a.dense_optimizer == "adam" else
                 torch.optim.SGD(dense, lr=a.lr, momentum=0.9))
    opt_sparse = torch.optim.Adagrad(sparse, lr=a.table_lr, initial_accumulator_value=0.1)
    loss_fn = nn.BCEWithLogitsLoss()
    xd, xi, y = (torch.from_numpy(t) for t in train)
    n = len(y)
    steps_per_epoch = n // a.batch
    offsets = torch.arange(a.batch)
    gen = torch.Generator().manual_seed(a.seed)

    def step(idx):
        opt_dense.zero_grad(set_to_none=True)
        opt_sparse.zero_grad(set_to_none=True)
        loss = loss_fn(model(xd[idx], xi[idx], offsets), y[idx])
        loss.backward()
        opt_dense.step()
        opt_sparse.step()
        return float(loss)

    if a.epochs > 0:
        start = time.perf_counter()
        for epoch in range(a.epochs):
            perm = torch.randperm(n, generator=gen)
            for s in range(steps_per_epoch):
                step(perm[s * a.batch:(s + 1) * a.batch])
        secs = time.perf_counter() - start
        with torch.no_grad():
            td, ti, ty = test
            logits = model(torch.from_numpy(td), torch.from_numpy(ti),
                           torch.arange(len(ty))).numpy().astype(np.float64)
        p = 1 / (1 + np.exp(-logits))
        logloss = float(np.mean(np.logaddexp(0, -logits) * ty + np.logaddexp(0, logits) * (1 - ty)))
        return {"test_auc": round(auc(p, ty), 6), "test_logloss": round(logloss, 6),
                "epochs": a.epochs, "steps": a.epochs * steps_per_epoch,
                "train_seconds": round(secs, 3),
                "examples_per_sec": round(a.epochs * steps_per_epoch * a.batch / secs, 1)}
    perm = torch.randperm(n, generator=gen)
    for s in range(a.warmup_steps):
        step(perm[(s % steps_per_epoch) * a.batch:(s % steps_per_epoch + 1) * a.batch])
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < a.seconds:
        s = steps % steps_per_epoch
        if s == 0:
            perm = torch.randperm(n, generator=gen)
        step(perm[s * a.batch:(s + 1) * a.batch])
        steps += 1
    secs = time.perf_counter() - start
    return {"steps": steps, "seconds": round(secs, 3),
            "examples_per_sec": round(steps * a.batch / secs, 1)}
