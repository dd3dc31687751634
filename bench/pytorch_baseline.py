#!/usr/bin/python3
"""PyTorch training-throughput baseline for `towerps-bench train`, on CPU or a GPU.

Runs the same model, batch size, optimizer (SGD, lr 0.01, momentum 0.9), data (Fashion-MNIST,
normalized with mean 0.2860 / std 0.3530, reshuffled each epoch; for cifar10, synthetic 3x24x24
images, and for resnet20 3x32x32 ones, as `towerps-bench train` uses) and thread count as
`towerps-bench train`, warms up, then measures whole training steps for --seconds.

  bench/pytorch_baseline.py --model cnn --batch 64 --threads 2 [--seconds 10] [--json]
  bench/pytorch_baseline.py --model cifar10 --batch 128 --device cuda:0 --json
  bench/pytorch_baseline.py --model dlrm_small --data-dir D --batch 256 --epochs 2 --json
  bench/pytorch_baseline.py --model dlrm_small --data-dir D --batch 128 --threads 1 --json

The click-through-rate models (dlrm_small, wide_deep; bench/pytorch_ctr.py) read Criteo-format
train.txt and test.txt in --data-dir (scripts/make_ctr_data.py writes them). With --epochs E they
train E epochs and report the test AUC and log loss; otherwise they measure throughput as above.

On a GPU the batches go host-to-device from pinned memory each step (as TowerPS stages them),
PyTorch runs eagerly (what users run instead of TowerPS), and the clock is read after
torch.cuda.synchronize(). cifar10 is TensorFlow's CIFAR-10 tutorial model, as in TowerPS's zoo;
PyTorch pads its 3x3/2 poolings symmetrically where TensorFlow's 'same' pads at the end, which
changes no shape and no FLOP count.

Thread count: torch.set_num_threads(T) limits PyTorch's own (OpenMP) threads, but Debian's torch
calls OpenBLAS for Linear layers, and OpenBLAS starts one thread per core unless
OPENBLAS_NUM_THREADS is set before it loads. So by default this script also sets
OPENBLAS_NUM_THREADS=T (--blas-threads T); --blas-threads 0 leaves OpenBLAS at its default, which
is what a plain torch.set_num_threads(T) script gets.

Needs Debian's python3-torch (apt-get install -y python3-torch).
"""
import argparse
import gzip
import json
import os
import sys
import time

import numpy as np

MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0 or data[2] != 8:
        sys.exit(f"{path}: not an unsigned-byte IDX file")
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def find(data_dir, base):
    for name in (base + ".gz", base):
        path = os.path.join(data_dir, name)
        if os.path.exists(path):
            return path
    sys.exit(f"{data_dir}: neither {base}.gz nor {base}")


def build(model):
    if model == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                             nn.ReLU(), nn.Linear(128, 10))
    if model == "cnn":  # 'valid' convolutions, as in TowerPS's zoo: 28-26-13-11-5
        return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3),
                             nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 5 * 5, 128),
                             nn.ReLU(), nn.Linear(128, 10))
    if model == "cifar10":
        lrn = dict(size=9, alpha=0.001, beta=0.75, k=1.0)  # TF's alpha 0.001/9 times the size
        return nn.Sequential(
            nn.Conv2d(3, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2, padding=1),
            nn.LocalResponseNorm(**lrn),
            nn.Conv2d(64, 64, 5, padding=2), nn.ReLU(), nn.LocalResponseNorm(**lrn),
            nn.MaxPool2d(3, 2, padding=1), nn.Flatten(),
            nn.Linear(64 * 6 * 6, 384), nn.ReLU(), nn.Linear(384, 192), nn.ReLU(),
            nn.Linear(192, 10))
    if model == "resnet20":  # as TowerPS's zoo: convolutions with biases, 1x1 projections
        class Residual(nn.Module):
            def __init__(self, main, shortcut):
                super().__init__()
                self.main, self.shortcut = main, shortcut

            def forward(self, x):
                return self.main(x) + self.shortcut(x)

        def block(cin, cout, stride):
            main = nn.Sequential(
                nn.Conv2d(cin, cout, 3, stride, 1), nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1),
                nn.ReLU(), nn.Conv2d(cout, cout, 3, 1, 1),
                nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1))
            short = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride),
                                   nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1))
                     if stride != 1 or cin != cout else nn.Identity())
            return Residual(main, short)

        layers = [nn.Conv2d(3, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU()]
        cin = 16
        for stage in range(3):
            cout = 16 << stage
            for b in range(3):
                layers += [block(cin, cout, 2 if stage > 0 and b == 0 else 1), nn.ReLU()]
                cin = cout
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
        return nn.Sequential(*layers)
    sys.exit(f"unknown model '{model}' (mlp, cnn, cifar10 or resnet20)")


def _load_data(a, gpu):
    """The images and labels of --model's task: random CIFAR-sized images, or Fashion-MNIST."""
    if a.model in ("cifar10", "resnet20"):
        side = 24 if a.model == "cifar10" else 32
        gen_data = torch.Generator().manual_seed(2)
        x_all = torch.rand(10000, 3, side, side, generator=gen_data) * 4.0 - 2.0
        y_all = torch.randint(0, 10, (10000,), generator=gen_data)
    else:
        images = read_idx(find(a.data_dir, "train-images-idx3-ubyte"))
        labels = read_idx(find(a.data_dir, "train-labels-idx1-ubyte"))
        x_all = (torch.from_numpy(images.astype(np.float32)) / 255.0 - MEAN) / STD
        x_all = x_all.reshape(-1, 1, 28, 28).contiguous()
        y_all = torch.from_numpy(labels.astype(np.int64))
    if gpu:
        x_all, y_all = x_all.pin_memory(), y_all.pin_memory()
    return x_all, y_all


def _time_steps(a, step, sync):
    """--warmup-steps, then steps for --seconds, with progress on stderr every 2 s: (steps,
    seconds, the last loss)."""
    for _ in range(a.warmup_steps):
        step()
    sync()
    steps, start = 0, time.perf_counter()
    last = start
    while True:
        loss = step()
        steps += 1
        if steps % 20 == 0:
            sync()  # bounds the queue, so the clock sees the GPU's work
        now = time.perf_counter()
        if now - start >= a.seconds:
            break
        if now - last >= 2.0:
            last = now
            print(f"  {now - start:.0f} s: {steps} steps, {steps * a.batch / (now - start):.0f} "
                  f"examples/s", file=sys.stderr)
    sync()
    secs = time.perf_counter() - start
    return steps, secs, loss


def _parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="mlp")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--warmup-steps", type=int, default=30)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--blas-threads", type=int, default=-1,
                   help="OPENBLAS_NUM_THREADS (default: --threads; 0: OpenBLAS's own default)")
    p.add_argument("--device", default="cpu", help="cpu, or cuda:N")
    p.add_argument("--tf32", choices=["default", "on", "off"], default="default",
                   help="TF32 on a GPU: PyTorch's default (cuDNN convolutions in TF32, matmuls "
                        "in float32), or all on, or all off (strict float32, as TowerPS)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--epochs", type=int, default=0,
                   help="dlrm_small, wide_deep: train this many epochs and report test AUC")
    p.add_argument("--lr", type=float, default=0.001,
                   help="dlrm_small, wide_deep: the dense optimizer's rate")
    p.add_argument("--dense-optimizer", choices=["adam", "momentum"], default="adam",
                   help="dlrm_small, wide_deep: Adam, or SGD with momentum 0.9 (as towerps-bench "
                        "train)")
    p.add_argument("--table-lr", type=float, default=0.05,
                   help="dlrm_small, wide_deep: the tables' Adagrad rate")
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def main():
    a = _parse_args()
    blas = a.threads if a.blas_threads < 0 else a.blas_threads
    if blas > 0:
        os.environ["OPENBLAS_NUM_THREADS"] = str(blas)  # read when OpenBLAS loads, with torch
    global torch, nn
    import torch
    from torch import nn

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    if a.model in ("dlrm_small", "wide_deep"):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import pytorch_ctr
        if not os.path.exists(os.path.join(a.data_dir, "train.txt")):
            sys.exit(f"--model {a.model} needs --data-dir with Criteo-format train.txt and "
                     "test.txt (scripts/make_ctr_data.py writes them)")
        r = pytorch_ctr.run(a)
        r.update({"bench": "train", "impl": "pytorch", "torch": torch.__version__,
                  "model": a.model, "batch": a.batch, "threads": a.threads})
        print(json.dumps(r) if a.json else
              " ".join(f"{k}={v}" for k, v in r.items()))
        return
    device = torch.device(a.device)
    gpu = device.type == "cuda"
    if gpu and not torch.cuda.is_available():
        sys.exit(f"--device {a.device}: this PyTorch sees no CUDA device")
    if gpu and a.tf32 != "default":
        torch.backends.cudnn.allow_tf32 = a.tf32 == "on"
        torch.backends.cuda.matmul.allow_tf32 = a.tf32 == "on"
    x_all, y_all = _load_data(a, gpu)
    model = build(a.model).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    n = x_all.shape[0]
    steps_per_epoch = n // a.batch
    gen = torch.Generator().manual_seed(1)
    state = {"perm": torch.randperm(n, generator=gen), "i": 0}

    def step():
        if state["i"] >= steps_per_epoch:
            state["perm"], state["i"] = torch.randperm(n, generator=gen), 0
        idx = state["perm"][state["i"] * a.batch:(state["i"] + 1) * a.batch]
        state["i"] += 1
        x, y = x_all.index_select(0, idx), y_all.index_select(0, idx)
        if gpu:
            x = x.pin_memory().to(device, non_blocking=True)
            y = y.pin_memory().to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    sync = torch.cuda.synchronize if gpu else (lambda: None)
    steps, secs, loss = _time_steps(a, step, sync)
    eps = steps * a.batch / secs
    if a.json:
        print(json.dumps({"bench": "train", "impl": "pytorch", "torch": torch.__version__,
                          "model": a.model, "batch": a.batch, "threads": a.threads,
                          "device": a.device, "tf32": a.tf32,
                          "openblas_threads": blas if blas > 0 else "default",
                          "steps": steps, "seconds": round(secs, 3),
                          "examples_per_sec": round(eps, 1), "final_loss": float(loss)}))
    else:
        print(f"pytorch {torch.__version__} {a.model}: {eps:.1f} examples/s ({steps} steps in "
              f"{secs:.2f} s), final loss {float(loss):.4f}")


if __name__ == "__main__":
    main()
