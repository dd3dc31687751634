"""Fashion-MNIST with a small CNN, in the style of pytorch/examples' mnist/main.py.
train_plain.py is plain PyTorch in one process; train.py is the same script with six lines
changed, trained against TowerPS's parameter servers (see README.md)."""

import argparse
import gzip
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

DATA = "/usr/share/datasets/fashion-mnist"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.fc1 = nn.Linear(64 * 5 * 5, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


def load(data_dir, split):
    """A split of the IDX files as a dataset: images scaled to [0, 1] and standardized."""
    def read(name):
        with gzip.open(os.path.join(data_dir, name + ".gz")) as f:
            data = f.read()
        dims = data[3]
        shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
        return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)
    images = read(split + "-images-idx3-ubyte").astype(np.float32) / 255.0
    labels = read(split + "-labels-idx1-ubyte").astype(np.int64)
    x = (torch.from_numpy(images).unsqueeze(1) - 0.2860) / 0.3530
    return TensorDataset(x, torch.from_numpy(labels))


def train(args, model, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print("Train Epoch: {} [{}/{}]\tLoss: {:.6f}".format(
                epoch, batch_idx * len(data), len(train_loader) * len(data), loss.item()))


def test(model, test_loader):
    model.eval()
    loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data)
            loss += F.cross_entropy(output, target, reduction="sum").item()
            correct += (output.argmax(dim=1) == target).sum().item()
    n = len(test_loader.dataset)
    print("Test set: Average loss: {:.4f}, Accuracy: {}/{} ({:.4f})".format(
        loss / n, correct, n, correct / n))
    return correct / n


def main():
    parser = argparse.ArgumentParser(description="Fashion-MNIST CNN")
    parser.add_argument("--batch-size", type=int, default=64)
    # 100, not the PyTorch MNIST example's 1000: a batch of 1000 makes 100 MB activations, which
    # the allocator maps and unmaps every batch; its page faults tripled the run's time.
    parser.add_argument("--test-batch-size", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.002)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=100)
    parser.add_argument("--max-steps", type=int, default=0, help="stop each epoch after this")
    parser.add_argument("--data-dir", default=DATA)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))

    train_set, test_set = load(args.data_dir, "train"), load(args.data_dir, "t10k")
    if args.max_steps:
        train_set = torch.utils.data.Subset(train_set, range(args.max_steps * args.batch_size))
    model = Net()
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(test_set, batch_size=args.test_batch_size)
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    for epoch in range(1, args.epochs + 1):
        train(args, model, train_loader, optimizer, epoch)
    accuracy = test(model, test_loader)


if __name__ == "__main__":
    main()
