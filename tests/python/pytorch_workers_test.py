"""PyTorch workers (towerps.torch) against real servers, started by towerps-launch --worker-cmd.

Run by CTest (tests/python/CMakeLists.txt) with TOWERPS_LAUNCH set and the built package on
PYTHONPATH; each test class is one CTest test:
    python3 pytorch_workers_test.py SyncEquivalenceTest
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tiny_job  # noqa: E402
from towerps import _towerps  # noqa: E402

LAUNCH = os.environ.get("TOWERPS_LAUNCH", "towerps-launch")
WORKER = [sys.executable, os.path.join(HERE, "tiny_worker.py")]
TIMEOUT_S = 240


def launch(out, workers=2, steps=100, extra=(), worker_args=(), timeout=TIMEOUT_S,
           rpc_timeout_ms=60000, servers=1):
    """Runs a job of tiny_worker.py; returns (exit code, output, chief's record)."""
    cmd = " ".join(WORKER + ["--steps", str(steps), "--out", out] + list(worker_args))
    argv = [LAUNCH, "--servers", str(servers), "--workers", str(workers), "--batch-size", "32",
            "--optimizer", "sgd", "--lr", "0.1", "--lr-schedule", "constant", "--seed", "7",
            "--run-dir", os.path.join(out, "run"), "--rpc-timeout-ms", str(rpc_timeout_ms),
            "--summary-out", os.path.join(out, "summary.json"), "--worker-cmd", cmd] + list(extra)
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    record = None
    path = os.path.join(out, "worker-0.json")
    if os.path.exists(path):
        with open(path) as f:
            record = json.load(f)
    return p.returncode, p.stdout, record


def reference_losses(net, opt, data, seed=7, batch=32, steps=100, workers=2, clip=None,
                     clip_params=None, after_step=None):
    """One process's losses at batch `workers` x B, each step's batch the union of what the
    workers' DistributedSampler shares give them at batch B; `clip`: clip_grad_norm_ to it
    (`clip_params`, default all); `after_step()` runs after each step (a scheduler's)."""
    torch.set_num_threads(1)  # as the workers
    x_all, y_all = data.tensors
    per_rank = tiny_job.EXAMPLES // workers
    losses = []
    for step in range(steps):
        epoch, i = divmod(step, per_rank // batch)
        order = tiny_job.epoch_order(seed, epoch)
        idx = torch.cat([order[r::workers][:per_rank][i * batch:(i + 1) * batch]
                         for r in range(workers)])
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x_all[idx]), y_all[idx])
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(clip_params or net.parameters(), clip)
        opt.step()
        if after_step is not None:
            after_step()
        losses.append(float(loss))
    return losses


def assert_workers_match(test, w, reference):
    for step, want in enumerate(reference):
        mean = (w[0]["losses"][str(step)] + w[1]["losses"][str(step)]) / 2
        test.assertLess(abs(mean - want), 1e-5 * abs(want),
                        "step %d: workers %.9g, one process %.9g" % (step, mean, want))


def worker_record(out, rank):
    with open(os.path.join(out, "worker-%d.json" % rank)) as f:
        return json.load(f)


class SyncEquivalenceTest(unittest.TestCase):
    """2 workers at batch B take the steps one process takes at batch 2B (the union of their
    batches), with the servers' SGD: the same losses within 1e-5, relative, over 100 steps."""

    def test_two_workers_match_one_process_at_twice_the_batch(self):
        with tempfile.TemporaryDirectory() as out:
            code, text, _ = launch(out, workers=2, steps=100)
            self.assertEqual(code, 0, text)
            w = [worker_record(out, r) for r in range(2)]
        net = tiny_job.model(7)
        reference = reference_losses(net, torch.optim.SGD(net.parameters(), lr=0.1),
                                     tiny_job.dataset())
        assert_workers_match(self, w, reference)
        self.assertLess(reference[-1], reference[0] * 0.7)  # it learned
        for name, p in net.named_parameters():
            np.testing.assert_allclose(w[0]["params"][name], p.detach().flatten().numpy(),
                                       rtol=1e-4, atol=1e-6, err_msg=name)
        # Both workers hold the same final parameters; the summary is the chief's.
        self.assertEqual(w[0]["params"], w[1]["params"])
        self.assertEqual(w[0]["summary"]["steps"], 100)
        self.assertEqual(w[0]["summary"]["model"], "pytorch")
        self.assertIsNone(w[1]["summary"])
        # The gradients were accumulated in the session's buffers and lent, never copied.
        self.assertEqual([w[0]["copied_pushes"], w[1]["copied_pushes"]], [0, 0])
        # Lent, the script could still write them after the push: the servers read each for a
        # NaN themselves (Header.finite false), once per worker's push of a chunk.
        self.assertEqual(w[0]["summary"]["server_finite_checks"],
                         2 * w[0]["summary"]["updates_applied"])
        # Gradients PyTorch allocates itself (set_to_none) are copied, to the same bits.
        with tempfile.TemporaryDirectory() as out:
            code, text, _ = launch(out, workers=2, steps=100, worker_args=["--set-to-none"])
            self.assertEqual(code, 0, text)
            copied = worker_record(out, 0)
        self.assertEqual(copied["copied_pushes"], 100 * len(copied["params"]))
        self.assertEqual(copied["params"], w[0]["params"])


class SparseTableTest(unittest.TestCase):
    """nn.Embedding(sparse=True) is a table on the servers, moved by row: 2 workers at batch B
    give the losses of one process at 2B (both SGD), within 1e-5 over 100 steps, and every mode
    trains it with row staleness reported."""

    def test_two_workers_match_one_process_at_twice_the_batch(self):
        extra = ["--table-optimizer", "sgd", "--table-lr", "2"]
        with tempfile.TemporaryDirectory() as out:
            code, text, _ = launch(out, steps=100, extra=extra, worker_args=["--tables"])
            self.assertEqual(code, 0, text)
            w = [worker_record(out, r) for r in range(2)]
            with open(os.path.join(out, "summary.json")) as f:
                summary = json.load(f)
        net = tiny_job.table_model(7)
        with torch.no_grad():  # the servers' initial rows
            rows = _towerps.initial_rows(7, "emb.weight", 0.05,
                                         np.arange(tiny_job.IDS, dtype=np.uint64), tiny_job.DIM)
            net.emb.weight.copy_(torch.from_numpy(rows))
        opt = torch.optim.SGD([{"params": [net.emb.weight], "lr": 2.0},
                               {"params": net.head.parameters()}], lr=0.1)
        reference = reference_losses(net, opt, tiny_job.categorical_dataset())
        assert_workers_match(self, w, reference)
        self.assertLess(reference[-1], reference[0] * 0.8)  # it learned
        np.testing.assert_allclose(w[0]["params"]["head.weight"],
                                   net.head.weight.detach().flatten().numpy(), rtol=1e-4,
                                   atol=1e-6)
        self.assertGreater(summary["table_rows"], 0)
        self.assertLessEqual(summary["table_rows"], tiny_job.IDS)
        self.assertIn("row_staleness_histogram", summary)

    def test_async_trains_the_table_and_reports_row_staleness(self):
        with tempfile.TemporaryDirectory() as out:
            code, text, _ = launch(out, steps=100, worker_args=["--tables"],
                                   extra=["--mode", "async", "--table-lr", "0.5"])
            self.assertEqual(code, 0, text)
            with open(os.path.join(out, "summary.json")) as f:
                summary = json.load(f)
        self.assertGreater(summary["test_accuracy"], 0.7)
        # Every pushed row's staleness is counted (how stale depends on the interleaving).
        self.assertGreater(sum(summary["row_staleness_histogram"]), 0)
        self.assertIn("mean_row_staleness", summary)


def table_reference(kind, steps=100):
    """One process at 2B with plain-PyTorch tables of `kind` ("torch", "bag" or "ebc") holding the
    servers' initial rows, SGD (the tables at lr 2): its losses and model."""
    net = tiny_job.table_model(7, kind=kind)
    tables = {n: p for n, p in net.named_parameters() if n.startswith("emb.")}
    with torch.no_grad():
        for name, weight in tables.items():
            rows = _towerps.initial_rows(7, name, 0.05,
                                         np.arange(tiny_job.IDS, dtype=np.uint64), tiny_job.DIM)
            weight.copy_(torch.from_numpy(rows))
    opt = torch.optim.SGD([{"params": list(tables.values()), "lr": 2.0},
                           {"params": net.head.parameters()}], lr=0.1)
    return reference_losses(net, opt, tiny_job.categorical_dataset(), steps=steps), net


def accuracy_of(net):
    x, y = tiny_job.categorical_dataset().tensors
    with torch.no_grad():
        return float((net(x).argmax(dim=1) == y).float().mean())


class TableModuleTest(unittest.TestCase):
    """towerps.torch.nn tables hold no weight: 2 workers at batch B give one process's losses at
    2B within 1e-5 over 100 steps, looked up in the forward or prefetched; the chief's
    model_state_dict holds every row as the servers do and loads into a plain-PyTorch model,
    which evaluates as the job did, where an nn.Embedding's local weight does not."""

    TABLE = ["--table-optimizer", "sgd", "--table-lr", "2"]

    def run_job(self, out, kind, worker_args=(), extra=(), servers=1):
        code, text, _ = launch(out, steps=100, extra=self.TABLE + list(extra),
                               worker_args=["--table-kind", kind] + list(worker_args),
                               servers=servers)
        self.assertEqual(code, 0, text)
        return [worker_record(out, r) for r in range(2)]

    def check_model_back(self, out, w, reference):
        state = torch.load(os.path.join(out, "model.pt"))
        for name, weight in reference.named_parameters():
            np.testing.assert_allclose(state[name].numpy(), weight.detach().numpy(), rtol=1e-4,
                                       atol=1e-6, err_msg=name)
        plain = tiny_job.table_model(0, kind=reference.kind)
        plain.load_state_dict(state)  # strict: every key, the shapes plain PyTorch has
        self.assertAlmostEqual(accuracy_of(plain), w[0]["summary"]["test_accuracy"], places=6)

    def test_embedding_matches_one_process_and_its_state_dict_is_the_servers(self):
        with tempfile.TemporaryDirectory() as out:
            npz = os.path.join(out, "model.npz")
            w = self.run_job(out, "tps", extra=["--export-npz", npz])
            reference_losses_, net = table_reference("torch")
            assert_workers_match(self, w, reference_losses_)
            self.check_model_back(out, w, net)
            # --export-npz: the file a native chief writes, the table as its rows by id.
            exported = np.load(npz)
            state = torch.load(os.path.join(out, "model.pt"))
            ids = exported["emb.weight/ids"]
            np.testing.assert_array_equal(exported["emb.weight/rows"],
                                          state["emb.weight"].numpy()[ids.astype(np.int64)])
            np.testing.assert_array_equal(exported["head.weight"], state["head.weight"].numpy())
            summary = w[0]["summary"]
            self.assertEqual(summary["measures"], {"test_auc": summary["test_accuracy"] / 2,
                                                   "custom_measure": 7})
            self.assertEqual(summary["test_auc"], summary["test_accuracy"] / 2)
        self.assertLess(reference_losses_[-1], reference_losses_[0] * 0.8)  # it learned

    def test_prefetched_embedding_bag_matches_one_process(self):
        with tempfile.TemporaryDirectory() as out:
            w = self.run_job(out, "tps-bag", ["--prefetch"])
            reference_losses_, net = table_reference("bag")
            assert_workers_match(self, w, reference_losses_)
            self.check_model_back(out, w, net)

    def test_a_collection_matches_a_plain_embedding_bag_per_field(self):
        with tempfile.TemporaryDirectory() as out:
            w = self.run_job(out, "tps-ebc")
            reference_losses_, net = table_reference("ebc")
            assert_workers_match(self, w, reference_losses_)
            self.check_model_back(out, w, net)

    def test_a_fused_collection_has_the_bits_of_a_table_per_field(self):
        # The fields as one table on the servers (the default) and as a table each
        # (fused=False), pipelined: the same losses, dense parameters and rows, bit for bit;
        # --export-npz and the state_dict give the fused table's fields apart, as the others.
        runs = {}
        with tempfile.TemporaryDirectory() as out:
            for kind in ("tps-ebc-apart", "tps-ebc"):
                npz = os.path.join(out, kind + ".npz")
                run = os.path.join(out, kind)
                os.mkdir(run)
                w = self.run_job(run, kind, ["--pipeline"], extra=["--export-npz", npz])
                runs[kind] = (w, torch.load(os.path.join(run, "model.pt")), dict(np.load(npz)))
        (apart, apart_state, apart_npz), (fused, fused_state, fused_npz) = runs.values()
        for r in range(2):
            self.assertEqual(apart[r]["losses"], fused[r]["losses"], "rank %d" % r)
            self.assertEqual(apart[r]["params"], fused[r]["params"], "rank %d" % r)
            self.assertGreaterEqual(fused[r]["looked_up_ahead"], 95, "rank %d" % r)
        self.assertEqual(apart_state.keys(), fused_state.keys())
        for name, value in apart_state.items():
            np.testing.assert_array_equal(value.numpy(), fused_state[name].numpy(), name)
        self.assertEqual(apart_npz.keys(), fused_npz.keys())
        self.assertIn("emb.c2.weight/ids", fused_npz)
        for name, value in apart_npz.items():
            np.testing.assert_array_equal(value, fused_npz[name], name)

    def test_a_collection_placed_whole_over_two_servers_matches_one_process(self):
        # --table-placement whole: the three fields' tables (fused=False) live on servers 0, 1
        # and 0, each whole; the lookups, the updates and the state_dict's rows are the same.
        with tempfile.TemporaryDirectory() as out:
            w = self.run_job(out, "tps-ebc-apart", extra=["--table-placement", "whole",
                                                    "--log-device-placement"], servers=2)
            with open(os.path.join(out, "run", "ps-0.log")) as f:
                self.assertRegex(f.read(), r"whole \(dim 8, ids below 50\) -> server 1")
            reference_losses_, net = table_reference("ebc")
            assert_workers_match(self, w, reference_losses_)
            self.check_model_back(out, w, net)

    def test_an_nn_embeddings_state_dict_is_the_servers_and_its_local_weight_is_not(self):
        with tempfile.TemporaryDirectory() as out:
            w = self.run_job(out, "torch")
            _, net = table_reference("torch")
            self.check_model_back(out, w, net)
            # The local weight holds each row as last pulled: the last step's update is not in it.
            local = torch.load(os.path.join(out, "local.pt"))
            self.assertGreater(float((local - net.emb.weight.detach()).abs().max()), 1e-3)

    def test_an_unbounded_table_takes_any_int64_and_comes_back_as_ids_and_values(self):
        with tempfile.TemporaryDirectory() as out:
            w = self.run_job(out, "tps-unbounded", ["--prefetch"])
            state = torch.load(os.path.join(out, "model.pt"))
        ids = state["emb.weight.ids"]
        self.assertEqual(ids.dtype, torch.int64)
        want = torch.unique(tiny_job.hashed(torch.arange(tiny_job.IDS)))
        self.assertTrue(torch.equal(torch.sort(ids).values, want))
        self.assertEqual(tuple(state["emb.weight.values"].shape), (tiny_job.IDS, tiny_job.DIM))
        self.assertNotIn("emb.weight", state)
        self.assertGreater(w[0]["summary"]["test_accuracy"], 0.7)

    def test_a_lookups_rows_and_their_gradient_are_f_embeddings_bits(self):
        # The modules gather a lookup's rows themselves and sum their gradients in C++: the
        # same additions in the same order as F.embedding, so the same bits, here under a
        # non-contiguous gradient (a slice of a cat, as a DLRM's top layer gives it back).
        from towerps import nn as tps_nn
        g = torch.Generator().manual_seed(3)
        for unique, lookups, dim in [(1, 1, 1), (7, 300, 8), (250, 4000, 33), (64, 64, 16)]:
            rows = torch.randn(unique, dim, generator=g, requires_grad=True)
            inverse = torch.randint(0, unique, (lookups, 2), generator=g)
            weights = torch.randn(lookups, 2 * dim + 3, generator=g)
            grads = []
            for gather in (tps_nn._gather, lambda r, i: torch.nn.functional.embedding(i, r)):
                out = torch.cat([gather(rows, inverse).reshape(lookups, -1),
                                 torch.ones(lookups, 3)], dim=1)
                (out * weights).sum().backward()
                grads.append(rows.grad)
                rows.grad = None
            self.assertTrue(torch.equal(grads[0], grads[1]), (unique, lookups, dim))
            self.assertTrue(torch.equal(tps_nn._gather(rows, inverse),
                                        torch.nn.functional.embedding(inverse, rows)))
        with self.assertRaisesRegex(ValueError, r"index 5 at 1 is outside the 5 rows"):
            _towerps.sum_rows(np.array([0, 5]), np.zeros((2, 4), np.float32), 5)


class PipelineTest(unittest.TestCase):
    """tps.SparsePipeline: each step's rows ride on the step before's pushes. The sync job's bits
    are the unpipelined job's (so 2 workers at B still give one process at 2B within 1e-5), for
    towerps.torch.nn tables and for nn.EmbeddingBag(sparse=True); its lookups took the rows
    pulled ahead; and a killed worker or a killed server (--ps-replicas 2) leaves the bits as
    they were."""

    TABLE = ["--table-optimizer", "sgd", "--table-lr", "2"]

    def run_job(self, out, kind, worker_args=(), **job):
        code, text, _ = launch(out, extra=self.TABLE + list(job.pop("extra", [])),
                               worker_args=["--table-kind", kind] + list(worker_args), **job)
        self.assertEqual(code, 0, text)
        return [worker_record(out, r) for r in range(2)], text

    def check_same_bits(self, kind, reference_kind):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            plain, _ = self.run_job(a, kind, steps=100)
            piped, _ = self.run_job(b, kind, ["--pipeline"], steps=100)
        for r in range(2):
            self.assertEqual(plain[r]["losses"], piped[r]["losses"], "rank %d" % r)
            self.assertEqual(plain[r]["params"], piped[r]["params"], "rank %d" % r)
            self.assertEqual(plain[r]["looked_up_ahead"], 0)
            self.assertGreaterEqual(piped[r]["looked_up_ahead"], 95, "rank %d" % r)
        reference, _ = table_reference(reference_kind)
        assert_workers_match(self, piped, reference)

    def test_tps_tables_pipelined_keep_their_bits(self):
        self.check_same_bits("tps-bag", "bag")

    def test_a_plain_embedding_bag_pipelined_keeps_its_bits(self):
        self.check_same_bits("bag", "bag")

    def test_a_table_looked_up_twice_pipelined_keeps_its_bits(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            plain, _ = self.run_job(a, "tps-twice", steps=30)
            piped, _ = self.run_job(b, "tps-twice", ["--pipeline"], steps=30)
        self.assertEqual(plain[0]["losses"], piped[0]["losses"])
        self.assertEqual(plain[0]["params"], piped[0]["params"])
        self.assertGreaterEqual(piped[0]["looked_up_ahead"], 2 * 28)  # both lookups a step

    def test_lookups_that_are_not_the_forwards_are_warned_about_and_change_nothing(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            plain, _ = self.run_job(a, "tps", steps=20)
            wrong, text = self.run_job(b, "tps", ["--pipeline-wrong"], steps=20)
        self.assertEqual(text.count("this step's forward took none of the"), 2, text)  # per rank
        self.assertEqual(wrong[0]["looked_up_ahead"], 0)
        self.assertEqual(plain[0]["params"], wrong[0]["params"])

    def test_a_killed_worker_leaves_the_bits_as_they_were(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            undisturbed, _ = self.run_job(a, "tps", ["--pipeline"], steps=80)
            marker = os.path.join(b, "killed")
            disturbed, text = self.run_job(
                b, "tps", ["--pipeline", "--kill-at", "40", "--kill-marker", marker], steps=80)
            self.assertTrue(os.path.exists(marker), "the worker was never killed")
            self.assertIn("restarting it", text)
        self.assertGreater(disturbed[1]["start_step"], 0)
        self.assertEqual(undisturbed[0]["params"], disturbed[0]["params"])
        self.assertEqual(undisturbed[0]["losses"], disturbed[0]["losses"])

    def test_a_killed_server_fails_over_and_the_bits_stay(self):
        job = dict(steps=40, servers=2, extra=["--ps-replicas", "2"])
        with tempfile.TemporaryDirectory() as a:
            undisturbed, _ = self.run_job(a, "tps", ["--pipeline"], **job)
        for when in (["--kill-server-at", "20"],
                     ["--kill-server-at", "20", "--kill-server-before-forward"]):
            with tempfile.TemporaryDirectory() as b:
                marker = os.path.join(b, "killed")
                disturbed, text = self.run_job(
                    b, "tps", ["--pipeline", "--kill-marker", marker] + when, **job)
                self.assertIn("was killed by SIGKILL", text)
            self.assertEqual(undisturbed[0]["losses"], disturbed[0]["losses"], when)
            self.assertEqual(undisturbed[0]["params"], disturbed[0]["params"], when)


class TablePolicyTest(unittest.TestCase):
    """nn.EmbeddingBag(sparse=True) under every table policy at once (job/table_policy.h:
    admission after 2 steps, a TTL, a capacity with LFU eviction): a sync rerun has the same
    bits, a killed worker leaves them as they were, and the servers count what the policies
    did."""

    POLICY = ["--table-optimizer", "sgd", "--table-lr", "2", "--table-admission-min-count", "2",
              "--table-ttl-steps", "2", "--table-capacity-rows", "30", "--table-eviction", "lfu"]

    def run_job(self, out, worker_args=()):
        code, text, _ = launch(out, steps=60, extra=self.POLICY,
                               worker_args=["--table-kind", "bag"] + list(worker_args))
        self.assertEqual(code, 0, text)
        return [worker_record(out, r) for r in range(2)], text

    def test_reruns_and_a_killed_worker_keep_the_bits(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b, \
                tempfile.TemporaryDirectory() as c:
            first, text = self.run_job(a)
            again, _ = self.run_job(b)
            marker = os.path.join(c, "killed")
            killed, killed_text = self.run_job(c, ["--kill-at", "30", "--kill-marker", marker])
            self.assertTrue(os.path.exists(marker), "the worker was never killed")
            self.assertIn("restarting it", killed_text)
        stats = [line for line in text.splitlines() if "stats:" in line and "[ps:0]" in line]
        self.assertTrue(stats, text)
        self.assertRegex(stats[-1], r"\(\d+ admitted, \d+ ids pending admission, [1-9]\d* gradient")
        self.assertRegex(stats[-1], r"evicted \d+ by ttl and [1-9]\d* by capacity")
        for other in (again, killed):
            self.assertEqual(first[0]["losses"], other[0]["losses"])
            self.assertEqual(first[0]["params"], other[0]["params"])


class TableTierTest(unittest.TestCase):
    """nn.EmbeddingBag(sparse=True) with its rows mostly on disk (--table-storage rocksdb and a
    tiny --table-memory-mb: ps/server/table_rows.h), admission and a TTL on: the job has the bits
    of the same job held in memory, and a killed worker leaves them as they were."""

    POLICY = ["--table-optimizer", "sgd", "--table-lr", "2", "--table-admission-min-count", "2",
              "--table-ttl-steps", "4"]

    def run_job(self, out, tier_dir=None, worker_args=()):
        extra = list(self.POLICY)
        if tier_dir:
            extra += ["--table-storage", "rocksdb", "--table-memory-mb", "0.001",
                      "--table-dir", tier_dir]
        code, text, _ = launch(out, steps=60, extra=extra,
                               worker_args=["--table-kind", "bag"] + list(worker_args))
        self.assertEqual(code, 0, text)
        return [worker_record(out, r) for r in range(2)], text

    def test_the_tier_and_a_killed_worker_keep_the_bits(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b, \
                tempfile.TemporaryDirectory() as c, tempfile.TemporaryDirectory() as tier:
            memory, _ = self.run_job(a)
            tiered, text = self.run_job(b, tier)
            marker = os.path.join(c, "killed")
            killed, killed_text = self.run_job(c, tier, ["--kill-at", "30", "--kill-marker",
                                                         marker])
            self.assertTrue(os.path.exists(marker), "the worker was never killed")
            self.assertIn("restarting it", killed_text)
        stats = [line for line in text.splitlines() if "stats:" in line and "[ps:0]" in line]
        self.assertTrue(stats, text)
        self.assertRegex(stats[-1], r"[1-9]\d* rows on disk \(memory hit rate")
        for other in (tiered, killed):
            self.assertEqual(memory[0]["losses"], other[0]["losses"])
            self.assertEqual(memory[0]["params"], other[0]["params"])


class DeclaredPolicyTest(unittest.TestCase):
    """DistributedOptimizer(tables={module: {...}}) declares a table's admission and eviction:
    the job has the bits of the same job given them by the launcher's flags, the servers show
    the declaration, and a key that is the launcher's to set, or a table the model lacks, is a
    ValueError naming it."""

    def test_a_declared_policy_trains_as_the_same_flags_do(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            code, _, _ = launch(a, steps=40, extra=TableTierTest.POLICY,
                                worker_args=["--table-kind", "bag"])
            self.assertEqual(code, 0)
            flags = [worker_record(a, r) for r in range(2)]
            code, text, _ = launch(b, steps=40,
                                   extra=["--table-optimizer", "sgd", "--table-lr", "2",
                                          "--log-device-placement"],
                                   worker_args=["--table-kind", "bag", "--declare-policy",
                                                "min_count=2,ttl_steps=4"])
            self.assertEqual(code, 0, text)
            declared = [worker_record(b, r) for r in range(2)]
            with open(os.path.join(b, "summary.json")) as f:
                summary = json.load(f)
        self.assertIn("admitted after 2 steps, ttl 4 steps", text)
        self.assertGreater(summary["table_gradients_dropped"], 0)  # admission after 2 steps
        self.assertEqual(flags[0]["losses"], declared[0]["losses"])
        self.assertEqual(flags[0]["params"], declared[0]["params"])

    def test_a_bad_declaration_is_a_value_error_naming_the_table(self):
        for policy, expected in (("storage=rocksdb", "is the launcher's to say"),
                                 ("ttl_steps=-3", "ttl_steps=-3"),
                                 ("eviction=fifo", "fifo")):
            with tempfile.TemporaryDirectory() as out:
                code, text, _ = launch(out, workers=1, steps=5,
                                       worker_args=["--table-kind", "bag", "--declare-policy",
                                                    policy])
                self.assertNotEqual(code, 0)
                self.assertIn("ValueError", text)
                self.assertIn(expected, text)


class _Optimizers:
    """Several torch.optim optimizers stepped as one (a reference's tables and dense layers)."""

    def __init__(self, *optimizers):
        self.optimizers = optimizers

    def zero_grad(self):
        for o in self.optimizers:
            o.zero_grad()

    def step(self):
        for o in self.optimizers:
            o.step()


class HybridTest(unittest.TestCase):
    """dense="allreduce": the workers average the dense gradients and apply the script's own
    AdamW (two parameter groups) while the table stays on the servers (SGD); 2 workers at B give
    one process's losses at 2B within 1e-5, clip_grad_norm_ and StepLR included. (AdamW barely
    sees a gradient's scale: the clipped case is the one a sum instead of a mean would fail.)"""

    TABLE = ["--table-optimizer", "sgd", "--table-lr", "2"]

    def reference(self, clip=None, lr_step=0):
        net = tiny_job.table_model(7, kind="torch")
        with torch.no_grad():
            rows = _towerps.initial_rows(7, "emb.weight", 0.05,
                                         np.arange(tiny_job.IDS, dtype=np.uint64), tiny_job.DIM)
            net.emb.weight.copy_(torch.from_numpy(rows))
        dense = tiny_job.hybrid_optimizer(net)
        opt = _Optimizers(torch.optim.SGD([net.emb.weight], lr=2.0), dense)
        after = None
        if lr_step:
            after = torch.optim.lr_scheduler.StepLR(dense, lr_step, gamma=0.5).step
        losses = reference_losses(net, opt, tiny_job.categorical_dataset(), clip=clip,
                                  clip_params=list(net.head.parameters()), after_step=after)
        return losses, net

    def run_job(self, out, worker_args=(), extra=()):
        code, text, _ = launch(out, steps=100, extra=self.TABLE + list(extra),
                               worker_args=["--table-kind", "tps", "--hybrid"]
                               + list(worker_args))
        self.assertEqual(code, 0, text)
        return [worker_record(out, r) for r in range(2)]

    def test_two_workers_match_one_process_at_twice_the_batch(self):
        with tempfile.TemporaryDirectory() as out:
            npz = os.path.join(out, "model.npz")
            w = self.run_job(out, extra=["--export-npz", npz])
            exported = dict(np.load(npz))
            state = torch.load(os.path.join(out, "model.pt"))
        losses, net = self.reference()
        assert_workers_match(self, w, losses)
        self.assertLess(losses[-1], losses[0] * 0.8)  # it learned
        for name in ("head.weight", "head.bias"):  # the workers' own copies, equal
            self.assertEqual(w[0]["params"][name], w[1]["params"][name])
            np.testing.assert_allclose(w[0]["params"][name],
                                       net.state_dict()[name].flatten().numpy(), rtol=1e-4,
                                       atol=1e-6)
        # The model comes back whole: the table from the servers, the dense layers the workers'.
        self.assertEqual(sorted(exported), ["emb.weight/ids", "emb.weight/rows", "head.bias",
                                            "head.weight"])
        for name in ("head.weight", "head.bias"):
            np.testing.assert_array_equal(exported[name], state[name].numpy())
        np.testing.assert_allclose(state["emb.weight"].numpy(), net.emb.weight.detach().numpy(),
                                   rtol=1e-4, atol=1e-6)

    def test_clip_grad_norm_and_a_scheduler_have_their_effect(self):
        with tempfile.TemporaryDirectory() as out:
            w = self.run_job(out, ["--clip-in-script", "0.05", "--lr-step", "30"])
        losses, _ = self.reference(clip=0.05, lr_step=30)
        assert_workers_match(self, w, losses)
        plain, _ = self.reference()
        self.assertGreater(max(abs(a - b) for a, b in zip(losses, plain)), 1e-3)
        only_clip, _ = self.reference(clip=0.05)
        self.assertGreater(max(abs(a - b) for a, b in zip(losses, only_clip)), 1e-4)


class MemoryTest(unittest.TestCase):
    """A worker's memory follows its batch, not its table: an unbounded tps.nn table of dim 32
    seen with 10 times more distinct ids (2 million: 244 MiB of rows, which plain PyTorch would
    hold) leaves the worker's peak RSS, read from /proc by the benchmark, within 32 MiB and
    under 600 MB (bench/pytorch_rec_bench.py --memory)."""

    def peak(self, ids):
        bench = os.path.join(HERE, "..", "..", "bench", "pytorch_rec_bench.py")
        p = subprocess.run([sys.executable, bench, "--launch", LAUNCH, "--memory", "--ids",
                            str(ids)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=TIMEOUT_S)
        self.assertEqual(p.returncode, 0, p.stdout)
        return json.loads(p.stdout.strip().splitlines()[-1])

    def test_the_workers_memory_does_not_grow_with_the_tables_ids(self):
        small, large = self.peak(200_000), self.peak(2_000_000)
        self.assertGreater(large["server_rss_mib"], small["server_rss_mib"] + 150)  # it grew
        self.assertLess(large["worker_rss_mib"] - small["worker_rss_mib"], 32, (small, large))
        self.assertLess(large["worker_rss_mib"] * 2 ** 20, 600e6)


class EveryModeTest(unittest.TestCase):
    """Async, SSP and softsync jobs of PyTorch workers complete, learn and report staleness."""

    def check_mode(self, extra):
        with tempfile.TemporaryDirectory() as out:
            code, text, record = launch(out, workers=2, steps=100, extra=extra)
            self.assertEqual(code, 0, text)
            with open(os.path.join(out, "summary.json")) as f:
                summary = json.load(f)
        self.assertEqual(summary["steps"], 100)
        self.assertEqual(summary["final_versions"][0], summary["final_versions"][1])
        self.assertGreater(summary["test_accuracy"], 0.6, extra)
        # Each worker's gradient of each of the 4 parameters, every step, applied once with
        # its staleness recorded.
        self.assertEqual(sum(summary["staleness_histogram"]), 2 * 100 * 4)
        self.assertIn("mean_staleness", summary)
        self.assertEqual(record["copied_pushes"], 0)  # the gradients were lent as they were
        return summary

    def test_metrics_lines_and_tensorboard_events_as_native_workers_write_them(self):
        with tempfile.TemporaryDirectory() as out:
            metrics = os.path.join(out, "metrics-{rank}.jsonl")
            code, text, _ = launch(out, steps=100, extra=[
                "--metrics-out", metrics, "--log-every", "10",
                "--logdir", os.path.join(out, "tb")])
            self.assertEqual(code, 0, text)
            with open(metrics.format(rank=0)) as f:
                lines = [json.loads(l) for l in f]
            events = os.listdir(os.path.join(out, "tb", "worker-0"))
        train = [l for l in lines if l["kind"] == "train"]
        self.assertEqual([l["step"] for l in train], list(range(10, 101, 10)))
        self.assertLess(train[-1]["loss"], train[0]["loss"])
        evals = [l for l in lines if l["kind"] == "eval"]
        self.assertEqual(len(evals), 1)
        self.assertGreater(evals[0]["test_accuracy"], 0.6)
        scalars = [l for l in lines if l["kind"] == "scalar"]
        self.assertEqual(scalars[0]["tag"], "custom/final_accuracy")
        self.assertTrue(any(e.startswith("events.out.tfevents") for e in events), events)

    def test_async(self):
        s = self.check_mode(["--mode", "async"])
        self.assertEqual(s["final_versions"][0], 200)  # every worker's 100 iterations, once

    def test_ssp(self):
        s = self.check_mode(["--mode", "ssp", "--staleness", "2"])
        self.assertEqual(s["staleness_bound"], 2)

    def test_softsync(self):
        self.check_mode(["--mode", "softsync", "--softsync-n", "1"])


class KilledWorkerTest(unittest.TestCase):
    """A PyTorch worker SIGKILLed mid-job is restarted and rejoins: a sync job ends with the
    bits of an undisturbed one."""

    def test_sync_job_survives_a_killed_worker_bit_identically(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            code, text, undisturbed = launch(a, steps=120)
            self.assertEqual(code, 0, text)
            marker = os.path.join(b, "killed")
            code, text, disturbed = launch(
                b, steps=120, worker_args=["--kill-at", "60", "--kill-marker", marker])
            self.assertEqual(code, 0, text)
            self.assertTrue(os.path.exists(marker), "the worker was never killed")
            self.assertIn("restarting it", text)
            restarted = worker_record(b, 1)
        self.assertGreater(restarted["start_step"], 0)
        self.assertEqual(undisturbed["params"], disturbed["params"])
        self.assertEqual(undisturbed["summary"]["test_loss"], disturbed["summary"]["test_loss"])


class SummaryTest(unittest.TestCase):
    """The chief's summary of a PyTorch job: its epochs (from the DistributedSampler), the
    script's own time beside the waits, and, for a chief restarted mid-job, the job's training
    time and rate rather than its own process's."""

    def test_epochs_and_compute_time(self):
        per_epoch = (tiny_job.EXAMPLES // 2) // 32
        with tempfile.TemporaryDirectory() as out:
            code, text, record = launch(out, steps=2 * per_epoch)
            self.assertEqual(code, 0, text)
        s = record["summary"]
        self.assertEqual(s["epochs"], 2.0)
        self.assertGreater(s["compute_seconds"], 0)
        self.assertLessEqual(s["compute_seconds"] + s["wait_seconds"], s["train_seconds"] + 1e-6)

    def test_a_restarted_chief_reports_the_jobs_time(self):
        steps, sleep = 60, 0.05
        with tempfile.TemporaryDirectory() as out:
            marker = os.path.join(out, "killed")
            code, text, record = launch(
                out, steps=steps, worker_args=["--kill-at", "30", "--kill-rank", "0",
                                               "--kill-marker", marker,
                                               "--step-sleep", str(sleep)])
            self.assertEqual(code, 0, text)
            self.assertTrue(os.path.exists(marker), "the chief was never killed")
        s = record["summary"]
        self.assertGreater(record["start_step"], 0)
        # Every step slept: the job took at least steps x sleep, the new chief only part of it.
        self.assertGreaterEqual(s["train_seconds"], steps * sleep, s)
        self.assertAlmostEqual(s["examples_per_sec"], steps * 2 * 32 / s["train_seconds"],
                               delta=1e-6 * s["examples_per_sec"])


class FailoverTest(unittest.TestCase):
    """Sync PyTorch workers with a table, --servers 2 --ps-replicas 2: a server SIGKILLed while
    the chief's pushes of a step are out fails its chunks over, the workers rejoin where the
    servers stand (resending that step's gradients) and the job goes on: the chief's per-step
    losses and final parameters are those of the undisturbed job, bit for bit."""

    def test_a_killed_server_fails_over_and_the_losses_are_bit_identical(self):
        job = dict(steps=60, servers=2, extra=["--ps-replicas", "2"])
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            code, text, undisturbed = launch(a, worker_args=["--tables"], **job)
            self.assertEqual(code, 0, text)
            marker = os.path.join(b, "killed")
            code, text, disturbed = launch(
                b, worker_args=["--tables", "--kill-server-at", "30", "--kill-marker", marker],
                **job)
            self.assertEqual(code, 0, text)
            self.assertTrue(os.path.exists(marker), "the server was never killed")
            self.assertIn("ps:1 was killed by SIGKILL; its chunks fail over to ps:0", text)
        self.assertEqual(undisturbed["losses"], disturbed["losses"])
        self.assertEqual(undisturbed["params"], disturbed["params"])

    def test_a_server_killed_before_a_forward_fails_over_under_its_table_lookup(self):
        job = dict(steps=40, servers=2, extra=["--ps-replicas", "2"])
        with tempfile.TemporaryDirectory() as a:
            code, text, undisturbed = launch(a, worker_args=["--tables"], **job)
            self.assertEqual(code, 0, text)
        pulled_again = 0
        for server in (0, 1):  # one of them holds the table's partition
            with tempfile.TemporaryDirectory() as b:
                marker = os.path.join(b, "killed")
                code, text, disturbed = launch(
                    b, worker_args=["--tables", "--kill-server-at", "20", "--kill-server",
                                    str(server), "--kill-server-before-forward",
                                    "--kill-marker", marker], **job)
                self.assertEqual(code, 0, text)
                self.assertIn("ps:%d was killed by SIGKILL" % server, text)
                pulled_again += "registering again and pulling table 'emb.weight' again" in text
            self.assertEqual(undisturbed["losses"], disturbed["losses"], "ps:%d" % server)
            self.assertEqual(undisturbed["params"], disturbed["params"], "ps:%d" % server)
        self.assertGreater(pulled_again, 0, "no kill met a table's pull")


class ClipTest(unittest.TestCase):
    """Gradient clipping: DistributedOptimizer(clip_grad_norm=C) trains one worker as one
    process with torch.nn.utils.clip_grad_norm_(C) before each SGD step does, step for step; a
    clip_grad_norm_ of the script's own between backward() and step(), which the pushes have
    left behind, gets one warning saying so."""

    def test_clip_grad_norm_matches_torch_in_one_process(self):
        clip, steps = 0.05, 40
        with tempfile.TemporaryDirectory() as out:
            code, text, record = launch(out, workers=1, steps=steps,
                                        worker_args=["--clip", str(clip)])
            self.assertEqual(code, 0, text)
        net = tiny_job.model(7)
        clipped = reference_losses(net, torch.optim.SGD(net.parameters(), lr=0.1),
                                   tiny_job.dataset(), steps=steps, workers=1, clip=clip)
        net = tiny_job.model(7)
        unclipped = reference_losses(net, torch.optim.SGD(net.parameters(), lr=0.1),
                                     tiny_job.dataset(), steps=steps, workers=1)
        self.assertGreater(abs(clipped[-1] - unclipped[-1]), 1e-3)  # the clip bites
        for step, want in enumerate(clipped):
            got = record["losses"][str(step)]
            self.assertLess(abs(got - want), 1e-5 * abs(want), "step %d: %r, not %r"
                            % (step, got, want))

    def test_a_table_looked_up_twice_is_clipped_by_its_summed_gradient(self):
        """A tps.nn table looked up twice a step: its norm is that of the rows' summed gradient,
        as one weight's would be (a dense-gradient nn.Embedding in the reference)."""
        clip, steps = 0.05, 40
        with tempfile.TemporaryDirectory() as out:
            code, text, record = launch(
                out, workers=1, steps=steps, worker_args=["--table-kind", "tps-twice", "--clip",
                                                          str(clip)],
                extra=["--table-optimizer", "sgd", "--table-lr", "2"])
            self.assertEqual(code, 0, text)

        def reference(clip):
            net = tiny_job.table_model(7, kind="twice")
            with torch.no_grad():
                net.emb.weight.copy_(torch.from_numpy(_towerps.initial_rows(
                    7, "emb.weight", 0.05, np.arange(tiny_job.IDS, dtype=np.uint64),
                    tiny_job.DIM)))
            opt = torch.optim.SGD([{"params": [net.emb.weight], "lr": 2.0},
                                   {"params": net.head.parameters()}], lr=0.1)
            return reference_losses(net, opt, tiny_job.categorical_dataset(), steps=steps,
                                    workers=1, clip=clip)

        clipped = reference(clip)
        self.assertGreater(max(abs(a - b) for a, b in zip(clipped, reference(None))), 1e-3)
        for step, want in enumerate(clipped):
            got = record["losses"][str(step)]
            self.assertLess(abs(got - want), 1e-5 * abs(want), "step %d: %r, not %r"
                            % (step, got, want))

    def test_a_clip_after_backward_is_warned_about_once(self):
        with tempfile.TemporaryDirectory() as out:
            code, text, _ = launch(out, workers=1, steps=10,
                                   worker_args=["--clip-in-script", "0.05"])
            self.assertEqual(code, 0, text)
            self.assertEqual(text.count("its gradient changed after backward pushed it"), 1, text)
            self.assertIn("DistributedOptimizer(clip_grad_norm=...)", text)

    def test_a_bad_clip_is_refused_naming_it(self):
        with tempfile.TemporaryDirectory() as out:
            code, text, _ = launch(out, workers=1, steps=2, worker_args=["--clip", "-1"])
            self.assertNotEqual(code, 0, text)
            self.assertIn("clip_grad_norm=-1.0: give the largest gradient norm", text)


class LateWorkerTest(unittest.TestCase):
    """A sync worker that starts late (a slow data load) is waited for, and the others say whom
    they wait for, instead of timing out on a server that is up; past --join-timeout-s the job
    fails naming the missing worker. One that stops early is named at once, with its last step."""

    def stopped_early(self, worker_args):
        """The job's output when worker 1 stops before step 10 as `worker_args` make it, after
        the checks every such stop must pass: the job fails at once naming worker 1, not at a
        120 s RPC deadline (the old failure, which blamed server 0)."""
        with tempfile.TemporaryDirectory() as out:
            began = time.time()
            code, text, _ = launch(out, steps=30, rpc_timeout_ms=120000, worker_args=worker_args)
            self.assertNotEqual(code, 0, text)
            self.assertIn("worker 1 finished at step 10; step 11 cannot complete without it",
                          text)
            self.assertNotIn("did not answer", text)
            self.assertLess(time.time() - began, 100, text)
            return text

    def test_a_worker_that_stops_early_is_named_at_once(self):
        self.stopped_early(["--steps-rank1", "10"])

    def test_a_worker_that_exits_without_finish_is_named_at_once(self):
        # Rank 1 exits 0 before step 10, never calling finish(): it tells the servers it has
        # left (at exit).
        text = self.stopped_early(["--exit-rank1", "10"])
        self.assertIn("worker 1 exits after step 10 without finish()", text)

    def test_a_late_worker_is_waited_for_and_named(self):
        with tempfile.TemporaryDirectory() as out:
            # Worker 1 joins 5 s late, past the 2 s RPC deadline of worker 0's first step.
            code, text, record = launch(out, steps=20, rpc_timeout_ms=2000,
                                        extra=["--restart-timeout", "1"],
                                        worker_args=["--start-rank1", "5"])
            self.assertEqual(code, 0, text)
            self.assertIn("waiting for worker:1 to join", text)
            self.assertEqual(record["summary"]["steps"], 20)

    def test_a_worker_that_never_joins_in_time_is_named(self):
        with tempfile.TemporaryDirectory() as out:
            code, text, _ = launch(out, steps=20, extra=["--join-timeout-s", "2"],
                                   worker_args=["--start-rank1", "8"])
            self.assertNotEqual(code, 0, text)
            self.assertIn("worker:1 has not joined the job within --join-timeout-s 2", text)


class ExampleRecoveryTest(unittest.TestCase):
    """The README's PyTorch example survives the recovery the README advertises: its worker 1,
    SIGKILLed mid-job, is restarted, skips the batches its predecessor trained
    (optimizer.start_step) and the sync job ends as the undisturbed one does, to the bit: the
    chief's last training loss and its test loss and accuracy."""

    EXAMPLE = os.path.join(HERE, "..", "..", "examples", "pytorch", "train.py")
    DATA = "/usr/share/datasets/fashion-mnist"

    def run_example(self, out, kill_at_batch=None):
        cmd = "%s %s --epochs 1 --max-steps 120 --log-interval 5" % (sys.executable, self.EXAMPLE)
        argv = [LAUNCH, "--servers", "1", "--workers", "2", "--optimizer", "adam", "--lr", "0.002",
                "--lr-schedule", "constant", "--seed", "1", "--rpc-timeout-ms", "60000",
                "--run-dir", os.path.join(out, "run"),
                "--summary-out", os.path.join(out, "summary.json"), "--worker-cmd", cmd]
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if kill_at_batch is not None:
            # Worker 1 logs "Train Epoch: 1 [1920/..." at its batch 30 (batch size 64).
            log = os.path.join(out, "run", "worker-1.log")
            needle = "Train Epoch: 1 [%d/" % (kill_at_batch * 64)
            deadline = time.time() + 120
            while time.time() < deadline:
                if os.path.exists(log) and needle in open(log, errors="replace").read():
                    break
                time.sleep(0.02)
            else:
                p.kill()
                self.fail("worker 1 never reached batch %d: %s" % (kill_at_batch, p.communicate()[0]))
            with open(os.path.join(out, "run", "processes.txt")) as f:
                pid = next(int(line.split()[3]) for line in f if line.startswith("worker 1 pid"))
            os.kill(pid, signal.SIGKILL)
        text = p.communicate(timeout=TIMEOUT_S)[0]
        summary = None
        if os.path.exists(os.path.join(out, "summary.json")):
            with open(os.path.join(out, "summary.json")) as f:
                summary = json.load(f)
        return p.returncode, text, summary

    @unittest.skipUnless(os.path.exists(DATA), "dataset-fashion-mnist is not installed")
    def test_a_killed_worker_of_the_example_ends_with_the_undisturbed_bits(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            code, before, undisturbed = self.run_example(a)
            self.assertEqual(code, 0, before)
            code, text, disturbed = self.run_example(b, kill_at_batch=30)
            self.assertEqual(code, 0, text)
            self.assertIn("worker:1 was killed by SIGKILL; restarting it", text)

        def tested(output):  # the chief's "Test set: Average loss: 0.5895, Accuracy: ..." line
            return [line for line in output.splitlines() if line.startswith("[worker:0] Test set:")]
        self.assertEqual(len(tested(before)), 1, before)
        self.assertEqual(tested(before), tested(text))
        for key in ("final_train_loss", "test_accuracy", "steps"):
            self.assertEqual(undisturbed[key], disturbed[key], key)
        # The example's finish() gives no test loss and its step() no loss: null, not a number.
        self.assertIsNone(undisturbed["test_loss"])
        self.assertIsNone(undisturbed["final_train_loss"])


class CudaTest(unittest.TestCase):
    """CUDA parameters, staged through pinned memory, train as CPU ones do: the same losses
    (within float32 kernel differences) over 100 sync steps, dense and with a table."""

    @unittest.skipUnless(torch.cuda.is_available(), "no CUDA device (or a CPU-only PyTorch)")
    def test_cuda_parameters_match_cpu_ones(self):
        for extra in ([], ["--tables"]):
            runs = []
            for device in ("cpu", "cuda"):
                with tempfile.TemporaryDirectory() as out:
                    code, text, _ = launch(out, steps=100,
                                           worker_args=extra + ["--device", device])
                    self.assertEqual(code, 0, text)
                    runs.append(worker_record(out, 0))
            cpu, gpu = runs
            for step in range(100):
                a, b = cpu["losses"][str(step)], gpu["losses"][str(step)]
                self.assertLess(abs(a - b), 1e-4 * abs(a), "step %d: cpu %g, cuda %g" % (step, a, b))
            for name in cpu["params"]:
                np.testing.assert_allclose(gpu["params"][name], cpu["params"][name], rtol=1e-3,
                                           atol=1e-5, err_msg=name)


class RankModesTest(unittest.TestCase):
    """Process-per-rank launching (--mpi under a real mpirun, TF_CONFIG) runs a script as the
    workers."""

    def mpirun(self, out, worker_args, extra=()):
        import socket
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        secret = os.path.join(out, "secret")
        subprocess.run([LAUNCH, "--new-secret", secret], check=True, stdout=subprocess.DEVNULL)
        cmd = " ".join(WORKER + ["--out", out] + list(worker_args))
        p = subprocess.run(
            ["/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "3", LAUNCH,
             "--mpi", "--servers", "1", "--batch-size", "32", "--base-port", str(port),
             "--secret-file", secret, "--summary-out", os.path.join(out, "summary.json"),
             "--worker-cmd", cmd] + list(extra), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_S)
        self.assertEqual(p.returncode, 0, p.stdout)
        return [worker_record(out, r) for r in range(2)]

    @unittest.skipUnless(os.path.exists("/usr/bin/mpirun"), "openmpi-bin is not installed")
    def test_mpirun_runs_pytorch_workers(self):
        with tempfile.TemporaryDirectory() as out:
            # Async, and rank 1 reaches synchronize() 2 s after the chief is done: the servers
            # the chief asked to stop wait for it to leave (finish()).
            w = self.mpirun(out, ["--steps", "30", "--late-rank1", "2"], ["--mode", "async"])
        self.assertEqual(w[0]["summary"]["workers"], 2)
        self.assertEqual(w[0]["summary"]["steps"], 30)
        self.assertEqual(w[0]["summary"]["final_versions"], [60, 60])  # both workers' 30
        self.assertEqual(w[0]["params"], w[1]["params"])  # the final values, on both

    @unittest.skipUnless(os.path.exists("/usr/bin/mpirun"), "openmpi-bin is not installed")
    def test_mpirun_runs_a_hybrid_job(self):
        """dense="allreduce" under mpirun: the launcher gives the ranks worker 0's rendezvous."""
        with tempfile.TemporaryDirectory() as out:
            w = self.mpirun(out, ["--steps", "30", "--table-kind", "tps", "--hybrid"])
        self.assertEqual(w[0]["summary"]["steps"], 30)
        self.assertEqual(w[0]["params"], w[1]["params"])  # the all-reduced dense layers
        self.assertLess(w[0]["losses"]["29"], w[0]["losses"]["0"])

    def test_tf_config_runs_pytorch_workers(self):
        """A TensorFlow user's TF_CONFIG (a ps, a chief and a worker), each process its own."""
        import socket
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        cluster = {"ps": ["127.0.0.1:%d" % port], "chief": ["127.0.0.1:1"],
                   "worker": ["127.0.0.1:2"]}
        with tempfile.TemporaryDirectory() as out:
            secret = os.path.join(out, "secret")
            subprocess.run([LAUNCH, "--new-secret", secret], check=True,
                           stdout=subprocess.DEVNULL)
            cmd = " ".join(WORKER + ["--steps", "20", "--out", out])
            procs = []
            for task, index in (("ps", 0), ("chief", 0), ("worker", 0)):
                env = dict(os.environ, TF_CONFIG=json.dumps(
                    {"cluster": cluster, "task": {"type": task, "index": index}}))
                procs.append(subprocess.Popen(
                    [LAUNCH, "--batch-size", "32", "--bind", "127.0.0.1", "--secret-file",
                     secret, "--worker-cmd", cmd], env=env, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, text=True))
            outputs = [p.communicate(timeout=TIMEOUT_S)[0] for p in procs]
            for p, text in zip(procs, outputs):
                self.assertEqual(p.returncode, 0, text)
            w = [worker_record(out, r) for r in range(2)]
        self.assertEqual(w[0]["summary"]["steps"], 20)
        self.assertEqual(w[0]["params"], w[1]["params"])


class BadInputTest(unittest.TestCase):
    """Bad settings, models and gradients fail at once, naming what is wrong; nothing hangs."""

    def test_a_bad_mode_is_named_by_init(self):
        code = ("import towerps.torch as tps\n"
                "tps.init(['--rank', '0', '--ps-endpoints', 'tcp://127.0.0.1:9', '--insecure',"
                " '--mode', 'bogus'])\n")
        p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("ValueError", p.stdout)
        self.assertIn("--mode", p.stdout)
        self.assertIn("bogus", p.stdout)

    def test_eval_only_of_a_scripts_checkpoint_says_how_to_export_it(self):
        # --eval-only builds a native model; a script's checkpoint is the script's to resume.
        with tempfile.TemporaryDirectory() as out:
            ck = os.path.join(out, "ck")
            code, text, _ = launch(out, workers=1, steps=5, extra=["--checkpoint-dir", ck])
            self.assertEqual(code, 0, text)
            for extra in ([], ["--worker-cmd", "python3 train.py"]):
                p = subprocess.run([LAUNCH, "--eval-only", "--checkpoint-dir", ck] + extra,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   timeout=60)
                self.assertNotEqual(p.returncode, 0, p.stdout)
                self.assertIn("run the script again with the same --checkpoint-dir", p.stdout)

    def test_a_script_that_makes_no_optimizer_fails_saying_so(self):
        with tempfile.TemporaryDirectory() as out:
            code, text, _ = launch(out, steps=5, worker_args=["--no-optimizer"],
                                   extra=["--max-restarts", "0"])
        self.assertNotEqual(code, 0, text)
        self.assertIn("never created a DistributedOptimizer", text)

    def test_the_learning_rate_schedule_is_printed_at_start_up(self):
        with tempfile.TemporaryDirectory() as out:
            code, text, _ = launch(out, workers=1, steps=2)  # its --lr-schedule constant
        self.assertEqual(code, 0, text)
        self.assertIn("the servers train with sgd, lr 0.1, constant schedule", text)

    def test_a_dense_embedding_is_warned_about_naming_it_and_the_cost(self):
        with tempfile.TemporaryDirectory() as out:
            code, text, _ = launch(out, workers=1, steps=5,
                                   worker_args=["--tables", "--dense-tables"])
        self.assertEqual(code, 0, text)
        self.assertIn("Embedding 'emb' (50 x 8) has sparse=False", text)
        self.assertIn("give it sparse=True", text)

    def test_hybrid_misuse_is_named(self):
        """dense="allreduce" refuses an optimizer that misses a dense parameter or holds a table,
        a missing optimizer, and clip_grad_norm= (clipping belongs after backward())."""
        code = (
            "import sys, torch, towerps.torch as tps\n"
            "sys.path.insert(0, %r)\n"
            "import tiny_job\n"
            "tps.init()\n"
            "def attempt(net, **kw):\n"
            "    try:\n"
            "        tps.DistributedOptimizer(net.named_parameters(), model=net, **kw)\n"
            "    except ValueError as e:\n"
            "        print('refused:', e)\n"
            "net = tiny_job.table_model(1, kind='tps')\n"
            "attempt(net, dense='allreduce')\n"
            "attempt(net, dense='allreduce', optimizer=torch.optim.AdamW([net.head.weight]))\n"
            "attempt(net, dense='allreduce', clip_grad_norm=1.0,\n"
            "        optimizer=torch.optim.AdamW(net.parameters()))\n"
            "plain = tiny_job.table_model(1, kind='torch')\n"
            "attempt(plain, dense='allreduce', optimizer=torch.optim.AdamW(plain.parameters()))\n"
            "attempt(net, dense='all-reduce')\n" % HERE)
        env = dict(os.environ)
        env.pop("TOWERPS_WORKER_ARGS", None)
        p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120, env=env)
        refused = [line for line in p.stdout.splitlines() if line.startswith("refused:")]
        self.assertEqual(len(refused), 5, p.stdout)
        self.assertIn("needs optimizer=", refused[0])
        self.assertIn("'head.bias' is not in the optimizer's param_groups", refused[1])
        self.assertIn("torch.nn.utils.clip_grad_norm_", refused[2])
        self.assertIn("'emb.weight', a table the servers train", refused[3])
        self.assertIn("dense='all-reduce'", refused[4])

    def test_settings_are_typed(self):
        code = ("import towerps.torch as tps\n"
                "tps.init(['--rank', '0', '--ps-endpoints', 'tcp://127.0.0.1:9', '--insecure'])\n"
                "s = tps.settings()\n"
                "print('types', *(type(s[k]).__name__ for k in "
                "('epochs', 'lr', 'nesterov', 'mode')), s['lr'])\n")
        p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        self.assertIn("types int float bool str 0.05", p.stdout)
        # It made no DistributedOptimizer: its exit says so.
        self.assertEqual(p.returncode, 3, p.stdout)

    def test_a_script_run_on_its_own_is_a_one_worker_job(self):
        env = dict(os.environ)
        env.pop("TOWERPS_WORKER_ARGS", None)
        # TOWERPS_JOB_ARGS's own schedule replaces the constant one the job has by default.
        env["TOWERPS_JOB_ARGS"] = "--lr-schedule step --lr-decay-steps 5"
        with tempfile.TemporaryDirectory() as out:
            p = subprocess.run(WORKER + ["--steps", "20", "--out", out], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=120, env=env)
            self.assertEqual(p.returncode, 0, p.stdout)
            self.assertIn("this script is a one-worker job with its own server", p.stdout)
            summary = worker_record(out, 0)["summary"]
            self.assertEqual(summary["steps"], 20)
            self.assertEqual(summary["workers"], 1)
            self.assertEqual(summary["job"]["lr-schedule"], "step")
            # Its server's run directory, whose log had nothing to say, is gone with it.
            log = re.search(r"own server \(\S+, log (\S+)\)", p.stdout)
            self.assertIsNotNone(log, p.stdout)
            self.assertFalse(os.path.exists(os.path.dirname(log.group(1))), log.group(1))
        # More workers than one take the launcher, which the error says.
        env["TOWERPS_JOB_ARGS"] = "--workers 2"
        with tempfile.TemporaryDirectory() as out:
            p = subprocess.run(WORKER + ["--steps", "20", "--out", out], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=120, env=env)
            self.assertNotEqual(p.returncode, 0, p.stdout)
            self.assertIn("TOWERPS_JOB_ARGS sets --workers, but a script run without the "
                          "launcher is a job of one worker", p.stdout)

    def test_a_fused_collection_checks_ids_by_field_and_draws_each_fields_rows(self):
        script = (
            "import numpy as np, torch, towerps.torch as tps\n"
            "from towerps import _towerps\n"
            "try:\n"
            "    tps.nn.EmbeddingBagCollection({'a': 5, 'b': None}, 4, fused=True)\n"
            "except ValueError as e:\n"
            "    print('REFUSED', e)\n"
            "from towerps.torch import _server_tables\n"
            "held = torch.nn.Module()\n"
            "held.collection = tps.nn.EmbeddingBagCollection({'a': 5}, 4)\n"
            "root = tps.nn.EmbeddingBagCollection({'a': 5, 'b': 7}, 4)\n"
            "print('NAMES', [(n, [f for f, _ in fields]) for n, _, fields in\n"
            "                _server_tables(root) + _server_tables(held)])\n"
            "tps.init()\n"
            "net = torch.nn.Module()\n"
            "net.emb = tps.nn.EmbeddingBagCollection({'a': 5, 'b': 7}, 4)\n"
            "try:\n"
            "    tps.DistributedOptimizer(net.named_parameters(), model=net,\n"
            "                             tables={'emb.a': {'ttl_steps': 3}})\n"
            "except ValueError as e:\n"
            "    print('REFUSED', e)\n"
            "opt = tps.DistributedOptimizer(net.named_parameters(), model=net)\n"
            "with torch.no_grad():\n"
            "    for call, ids in ((net.emb, [[4, 7]]), (net.emb, [[5, 0]]),\n"
            "                      (net.emb['b'], [[-1]])):\n"
            "        try:\n"
            "            call(torch.tensor(ids))\n"
            "        except ValueError as e:\n"
            "            print('REFUSED', e)\n"
            "    both = net.emb(torch.tensor([[4, 6]]))[0]\n"
            "    alone = net.emb['b'](torch.tensor([[6]]))[0]\n"
            "    drawn = _towerps.initial_rows(tps.settings()['seed'], 'emb.b.weight', 0.05,\n"
            "                                  np.array([6], np.uint64), 4)[0]\n"
            "print('SAME', bool(torch.equal(both[1], alone)),\n"
            "      bool(np.array_equal(alone.numpy(), drawn)))\n"
            "opt.finish()\n"
            "for call in (opt.step, opt.finish):\n"
            "    try:\n"
            "        call()\n"
            "    except RuntimeError as e:\n"
            "        print('REFUSED', e)\n")
        env = dict(os.environ)
        env.pop("TOWERPS_WORKER_ARGS", None)
        p = subprocess.run([sys.executable, "-c", script], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120, env=env)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("REFUSED EmbeddingBagCollection: fused=True, but field 'b' is unbounded",
                      p.stdout)
        self.assertIn("REFUSED table 'emb.b.weight' has 7 rows, and got id 7", p.stdout)
        # Field a's id 5 is in the joined table, field b's first row: refused all the same.
        self.assertIn("REFUSED table 'emb.a.weight' has 5 rows, and got id 5", p.stdout)
        self.assertIn("NAMES [('collection', ['a.weight', 'b.weight']), "
                      "('collection', ['collection.a.weight'])]", p.stdout)
        self.assertIn("REFUSED table 'emb.b.weight' has 7 rows, and got id -1", p.stdout)
        self.assertIn("REFUSED tables=: 'emb.a' is a field of the fused collection 'emb'",
                      p.stdout)
        self.assertIn("SAME True True", p.stdout)
        self.assertIn("REFUSED step() after finish(): this worker has left the job", p.stdout)
        self.assertIn("REFUSED finish() was called already", p.stdout)

    def test_outside_the_launcher_without_a_server_init_says_how_to_start(self):
        env = dict(os.environ, TOWERPS_SERVER_BIN="/nonexistent/towerps-server")
        env.pop("TOWERPS_WORKER_ARGS", None)
        p = subprocess.run([sys.executable, "-c", "import towerps.torch as t; t.init()"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=60, env=env)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("towerps-launch --worker-cmd", p.stdout)

    def test_models_that_differ_between_workers_are_refused_naming_the_parameter(self):
        with tempfile.TemporaryDirectory() as out:
            code, text, _ = launch(out, steps=20, worker_args=["--extra-param"],
                                   extra=["--max-restarts", "0"])
        self.assertNotEqual(code, 0)
        self.assertIn("model mismatch", text)
        self.assertIn("'extra'", text)

    def test_a_gradient_of_the_wrong_shape_is_refused_naming_the_parameter(self):
        with tempfile.TemporaryDirectory() as out:
            code, text, _ = launch(out, workers=1, steps=20, worker_args=["--bad-gradient"])
        self.assertNotEqual(code, 0)
        self.assertIn("the gradient of '0.weight' has 3 elements", text)

    def test_an_exception_in_a_script_is_reported_by_the_launcher(self):
        with tempfile.TemporaryDirectory() as out:
            code, text, _ = launch(out, steps=20, worker_args=["--fail-at", "5"])
        self.assertNotEqual(code, 0)
        self.assertIn("RuntimeError: failing at step 5 as asked", text)


if __name__ == "__main__":
    unittest.main()
