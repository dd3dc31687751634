"""The models and data of the PyTorch-worker tests (tiny_worker.py runs them under
towerps-launch, pytorch_workers_test.py in one process as the reference): a small MLP on a
seeded synthetic 4-class problem, whose labels a linear model of the inputs gives; and a model
with a sparse embedding table over 3 categorical fields, whose labels a hidden score per id
gives."""

import torch

FEATURES, CLASSES, EXAMPLES = 20, 4, 4096


def dataset(seed=1234):
    g = torch.Generator()
    g.manual_seed(seed)
    x = torch.randn(EXAMPLES, FEATURES, generator=g)
    w = torch.randn(FEATURES, CLASSES, generator=g)
    return torch.utils.data.TensorDataset(x, (x @ w).argmax(dim=1))


def model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, CLASSES))


def epoch_order(seed, epoch, n=EXAMPLES):
    """The permutation tps.DistributedSampler draws for (seed, epoch)."""
    g = torch.Generator()
    g.manual_seed((seed * 1000003 + epoch) % (2 ** 63))
    return torch.randperm(n, generator=g)


IDS, FIELDS, DIM = 50, 3, 8


def categorical_dataset(seed=99):
    g = torch.Generator()
    g.manual_seed(seed)
    ids = torch.randint(0, IDS, (EXAMPLES, FIELDS), generator=g)
    score = torch.randn(IDS, generator=g)
    return torch.utils.data.TensorDataset(ids, (score[ids].sum(dim=1) > 0).long())


class TableNet(torch.nn.Module):
    def __init__(self, sparse=True):
        super().__init__()
        self.emb = torch.nn.Embedding(IDS, DIM, sparse=sparse)
        self.head = torch.nn.Linear(FIELDS * DIM, 2)

    def forward(self, ids):
        return self.head(self.emb(ids).reshape(ids.shape[0], -1))


def table_model(seed, sparse=True):
    torch.manual_seed(seed)
    return TableNet(sparse)
