#!/usr/bin/env python3
"""scripts/make_ctr_data.py --drift: the ids of a drifting stream appear, peak and fade. The
stream's last part (the test split) has popular ids the first part never saw, the first part's
popular ids have faded from it, --drift 0 writes the files of no --drift at all, and the Bayes
AUC is still reported.

  ctr_drift_test.py MAKE_CTR_DATA"""
import collections
import json
import os
import subprocess
import sys
import tempfile


def fields(path, field):
    with open(path) as fh:
        return [line.rstrip("\n").split("\t")[14 + field] for line in fh]


def run(script, out, *extra):
    subprocess.run([sys.executable, script, "--out", out, "--train", "6000", "--test", "2000",
                    "--seed", "5"] + list(extra), check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "answer.json")) as fh:
        return json.load(fh)


def main():
    script = sys.argv[1]
    with tempfile.TemporaryDirectory() as plain, tempfile.TemporaryDirectory() as zero, \
            tempfile.TemporaryDirectory() as drift:
        run(script, plain)
        run(script, zero, "--drift", "0")
        answer = run(script, drift, "--drift", "2")
        for name in ("train.txt", "test.txt"):
            with open(os.path.join(plain, name), "rb") as a, open(os.path.join(zero, name), "rb") as b:
                assert a.read() == b.read(), "--drift 0 changed " + name
        assert 0.5 < answer["bayes_auc"] <= 1.0 and answer["drift"] == 2.0, answer
        field = 25  # the largest vocabulary's field
        train = fields(os.path.join(drift, "train.txt"), field)
        early = collections.Counter(v for v in train[:1500] if v)
        late = collections.Counter(v for v in fields(os.path.join(drift, "test.txt"), field) if v)
        top_early = {v for v, _ in early.most_common(20)}
        top_late = {v for v, _ in late.most_common(20)}
        assert not top_early & top_late, "the popular ids did not move"
        assert sum(late[v] for v in top_early) < 0.01 * sum(late.values()), "early ids did not fade"
        plain_test = set(fields(os.path.join(plain, "test.txt"), field))
        plain_train = set(fields(os.path.join(plain, "train.txt"), field))
        new = set(late) - set(train)
        assert len(new) > 5 * len(plain_test - plain_train), "no new ids appeared"
    print("ctr_drift_test: ok")


if __name__ == "__main__":
    main()
