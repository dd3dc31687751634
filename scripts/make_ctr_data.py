#!/usr/bin/env python3
"""Writes click-through-rate data in the Criteo format from a hidden model whose answer is known,
for `towerps-launch --dataset criteo --data-dir OUT` and the tests.

  scripts/make_ctr_data.py --out D [--train 100000] [--test 20000] [--seed 1]
                           [--signal 1.0] [--shuffle-labels] [--drift 0]

D/train.txt and D/test.txt hold one example a line, tab-separated, as Criteo's click logs do: a
0/1 label, 13 integer features (counts, some empty, a few negative) and 26 categorical features
(8 hex digits, some empty). The label of each example is drawn from a hidden logistic model:

  logit = bias + sum_j w_j (log(1 + max(I_j, 0)) - m_j)       the dense features, as DLRM sees them
        + sum_f e_f[C_f]                                       a score per category of each field
        + sum_(f,g) <v_f[C_f], v_g[C_g]>                       a few pairs of fields interacting

with category ids drawn from a Zipf law over each field's vocabulary (a few popular values and a
long tail, as in click logs). Each example's true click probability is known, so the script
prints the Bayes-optimal AUC and log loss of the test split: the ceiling no model can pass on
those labels. It prints one JSON line and writes it to D/answer.json as well:

  {"train": 100000, "test": 20000, "positive_rate": 0.27, "bayes_auc": 0.80, "bayes_logloss": 0.47}

--drift D makes the ids drift as real traffic does: the Zipf law's ranks are shifted along the
stream (train, then test, in file order), so that by the stream's end each field's popular
values have moved D vocabularies on. New ids keep appearing, peak and fade, and most are seen
only for a while; a category keeps its hidden score whenever it is seen, so the Bayes AUC is
still known. The test split is the stream's latest part. D = 0: no drift.

--signal S scales every term but the bias, so that S < 1 gives weak-signal data (S = 0.3: a
Bayes AUC near 0.65, as hard click logs have). --shuffle-labels then shuffles the labels over
the examples of each split: no feature says anything of its label, and no model passes AUC 0.5.

The output is a pure function of the arguments. Only the Python standard library is needed.
"""
import argparse
import json
import math
import os
import random
import sys

INTEGERS, CATEGORIES = 13, 26
LATENT = 4                                # dimension of the interacting pairs' vectors
PAIRS = [(0, 1), (2, 5), (3, 9), (7, 8)]  # fields whose values interact


def vocabularies(vocab_max):
    """Each field's vocabulary: from a handful of values to vocab_max, as Criteo's fields span."""
    return [max(3, round(vocab_max ** (0.25 + 0.75 * ((f * 7) % 26) / 25))) for f in range(26)]


def category_hex(field, k):
    """The value written for category k of `field`: 8 hex digits, distinct within the field
    (an odd multiplier is a bijection modulo 2^32)."""
    return "%08x" % ((k * 2654435761 + field * 40503 + 0x9E3779B9) & 0xFFFFFFFF)


class HiddenModel:
    def __init__(self, seed, vocab_max, zipf):
        rng = random.Random(f"ctr-model/{seed}")
        self.seed = seed
        self.vocab = vocabularies(vocab_max)
        self.bias = -1.6
        # Dense: log-normal counts around e^m_j, some fields often empty, I2 sometimes negative.
        self.m = [rng.uniform(0.5, 4.0) for _ in range(INTEGERS)]
        self.w = [rng.gauss(0.0, 0.35) for _ in range(INTEGERS)]
        self.dense_missing = [rng.choice([0.0, 0.05, 0.2, 0.4]) for _ in range(INTEGERS)]
        self.cat_missing = [rng.choice([0.0, 0.0, 0.03, 0.3]) for _ in range(CATEGORIES)]
        self.cat_scale = [rng.uniform(0.1, 0.45) for _ in range(CATEGORIES)]
        self.cum = []
        for v in self.vocab:
            total, cum = 0.0, []
            for k in range(v):
                total += 1.0 / (k + 1) ** zipf
                cum.append(total)
            self.cum.append(cum)
        self.effects = [dict() for _ in range(CATEGORIES)]
        self.vectors = [dict() for _ in range(CATEGORIES)]

    def _draw(self, kind, field, k):
        return random.Random(f"ctr-{kind}/{self.seed}/{field}/{k}")

    def effect(self, field, k):
        e = self.effects[field].get(k)
        if e is None:
            e = 0.0 if k < 0 else self._draw("effect", field, k).gauss(0.0, self.cat_scale[field])
            self.effects[field][k] = e
        return e

    def vector(self, field, k):
        v = self.vectors[field].get(k)
        if v is None:
            r = self._draw("vector", field, k)
            v = [0.0] * LATENT if k < 0 else [r.gauss(0.0, 0.4) for _ in range(LATENT)]
            self.vectors[field][k] = v
        return v


def write_split(model, path, n, rng, signal=1.0, shuffle=False, drift=None):
    """Writes n examples to path; returns their (true probability, label) pairs. `signal` scales
    every term but the bias; `shuffle` permutes the labels over the examples; `drift` (D, first,
    total): example i is at position (first + i) / total of a stream whose ranks shift by D
    vocabularies from its start to its end."""
    cats = []
    for f in range(CATEGORIES):
        ks = rng.choices(range(model.vocab[f]), cum_weights=model.cum[f], k=n)
        for i in range(n):
            if rng.random() < model.cat_missing[f]:
                ks[i] = -1  # empty
            elif drift is not None and drift[0] > 0:
                d, first, total = drift
                ks[i] += int(d * model.vocab[f] * (first + i) / total)
        cats.append(ks)
    out, lines = [], []
    with open(path + ".tmp", "w") as fh:
        for i in range(n):
            logit = model.bias
            fields = []
            for j in range(INTEGERS):
                if rng.random() < model.dense_missing[j]:
                    fields.append("")
                    continue
                if j == 1 and rng.random() < 0.05:
                    x = -rng.randint(1, 3)  # Criteo's I2 has a few negatives; DLRM clamps them
                else:
                    x = int(math.exp(rng.gauss(model.m[j], 1.0))) - 1
                fields.append(str(x))
                logit += signal * (model.w[j] * (math.log1p(max(x, 0)) - model.m[j]))
            for f in range(CATEGORIES):
                k = cats[f][i]
                fields.append("" if k < 0 else category_hex(f, k))
                logit += signal * model.effect(f, k)
            for f, g in PAIRS:
                a, b = model.vector(f, cats[f][i]), model.vector(g, cats[g][i])
                logit += signal * sum(x * y for x, y in zip(a, b))
            p = 1.0 / (1.0 + math.exp(-logit))
            label = 1 if rng.random() < p else 0
            if shuffle:
                lines.append(fields)
            else:
                fh.write(str(label) + "\t" + "\t".join(fields) + "\n")
            out.append((p, label))
        if shuffle:
            labels = [label for _, label in out]
            rng.shuffle(labels)
            rate = sum(labels) / max(len(labels), 1)
            out = [(rate, label) for label in labels]  # the best guess knows only the rate
            for fields, label in zip(lines, labels):
                fh.write(str(label) + "\t" + "\t".join(fields) + "\n")
    os.replace(path + ".tmp", path)
    return out


def auc(pairs):
    """ROC AUC of (score, label) pairs, ties counting half."""
    pairs = sorted(pairs)
    rank_sum, positives, i = 0.0, 0, 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        mean_rank = (i + 1 + j) / 2.0
        for _, label in pairs[i:j]:
            if label:
                rank_sum += mean_rank
                positives += 1
        i = j
    negatives = len(pairs) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    return (rank_sum - positives * (positives + 1) / 2.0) / (positives * negatives)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for train.txt, test.txt, answer.json")
    ap.add_argument("--train", type=int, default=100000, help="training examples (default 100000)")
    ap.add_argument("--test", type=int, default=20000, help="test examples (default 20000)")
    ap.add_argument("--seed", type=int, default=1, help="the hidden model's and the draws' seed")
    ap.add_argument("--vocab-max", type=int, default=20000,
                    help="the largest field's vocabulary (default 20000)")
    ap.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent of the ids (1.1)")
    ap.add_argument("--signal", type=float, default=1.0,
                    help="scales every term of the hidden model but the bias (1.0; 0.3: weak)")
    ap.add_argument("--drift", type=float, default=0.0,
                    help="vocabularies the popular ids move on over the stream (0: none)")
    ap.add_argument("--shuffle-labels", action="store_true",
                    help="shuffle the labels over each split's examples (AUC 0.5 at best)")
    a = ap.parse_args()
    for name in ("train", "test", "vocab_max"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1, not {getattr(a, name)}")
    if a.zipf <= 0:
        ap.error(f"--zipf must be positive, not {a.zipf}")
    if not 0 <= a.signal <= 10:
        ap.error(f"--signal must be in [0, 10], not {a.signal}")
    if not 0 <= a.drift <= 1000:
        ap.error(f"--drift must be in [0, 1000], not {a.drift}")
    os.makedirs(a.out, exist_ok=True)
    model = HiddenModel(a.seed, a.vocab_max, a.zipf)
    total = a.train + a.test
    write_split(model, os.path.join(a.out, "train.txt"), a.train, random.Random(f"train/{a.seed}"),
                a.signal, a.shuffle_labels, (a.drift, 0, total))
    test = write_split(model, os.path.join(a.out, "test.txt"), a.test,
                       random.Random(f"test/{a.seed}"), a.signal, a.shuffle_labels,
                       (a.drift, a.train, total))
    eps = 1e-15
    answer = {
        "train": a.train,
        "test": a.test,
        "positive_rate": round(sum(l for _, l in test) / len(test), 6),
        "bayes_auc": round(auc(test), 6),
        "drift": a.drift,
        "bayes_logloss": round(-sum(math.log(max(p if l else 1 - p, eps)) for p, l in test)
                               / len(test), 6),
    }
    with open(os.path.join(a.out, "answer.json"), "w") as fh:
        fh.write(json.dumps(answer) + "\n")
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
