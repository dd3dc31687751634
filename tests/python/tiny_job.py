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
    """`kind`: "torch" (nn.Embedding, a local weight), "bag" (nn.EmbeddingBag, mode sum, one bag
    per example), "tps" and "tps-bag" (their towerps.torch.nn namesakes, no local weight), and
    "tps-unbounded" (tps.nn.Embedding of any int64 id: the ids are hashed first); "ebc" (a
    plain EmbeddingBag per field), "tps-ebc" (tps.nn.EmbeddingBagCollection, its fields one
    table on the servers) and "tps-ebc-apart" (the same with fused=False: a table per field);
    "tps-twice" (one tps.nn.Embedding looked up twice a forward, on overlapping fields) and
    "twice" (the same with a dense-gradient nn.Embedding: the reference)."""

    def __init__(self, sparse=True, kind="torch"):
        super().__init__()
        self.kind = kind
        if "ebc" in kind:  # a table per field: tps's collection, or plain EmbeddingBags
            self.head = torch.nn.Linear(FIELDS * DIM, 2)
            names = ["c%d" % k for k in range(FIELDS)]
            if kind.startswith("tps-ebc"):
                import towerps.torch as tps
                self.emb = tps.nn.EmbeddingBagCollection({n: IDS for n in names}, DIM,
                                                         fused=kind == "tps-ebc")
            else:
                self.emb = torch.nn.ModuleDict(
                    {n: torch.nn.EmbeddingBag(IDS, DIM, mode="sum", sparse=True) for n in names})
            return
        if kind.endswith("twice"):
            self.head = torch.nn.Linear(4 * DIM, 2)
            if kind == "tps-twice":
                import towerps.torch as tps
                self.emb = tps.nn.Embedding(IDS, DIM)
            else:
                self.emb = torch.nn.Embedding(IDS, DIM)
            return
        if kind.startswith("tps"):
            import towerps.torch as tps
            rows = None if kind == "tps-unbounded" else IDS
            make = tps.nn.EmbeddingBag if kind == "tps-bag" else tps.nn.Embedding
        else:
            rows = IDS
            make = torch.nn.EmbeddingBag if kind == "bag" else torch.nn.Embedding
        # The head first: its initial values do not depend on whether the table draws any.
        self.head = torch.nn.Linear(FIELDS * DIM if not kind.endswith("bag") else DIM, 2)
        self.emb = (make(rows, DIM, mode="sum", sparse=sparse) if kind.endswith("bag")
                    else make(rows, DIM, sparse=sparse))

    def forward(self, ids):
        if self.kind.endswith("twice"):
            return self.head(torch.cat([self.emb(ids[:, :2]).reshape(ids.shape[0], -1),
                                        self.emb(ids[:, 1:]).reshape(ids.shape[0], -1)], dim=1))
        if self.kind.startswith("tps-ebc"):
            return self.head(self.emb(ids).reshape(ids.shape[0], -1))
        if self.kind == "ebc":
            return self.head(torch.cat([t(ids[:, k:k + 1]) for k, t in enumerate(self.emb.values())],
                                       dim=1))
        if self.kind.endswith("bag"):
            return self.head(self.emb(ids))  # a bag per example: its fields' rows summed
        if self.kind == "tps-unbounded":
            ids = hashed(ids)
        return self.head(self.emb(ids).reshape(ids.shape[0], -1))


def table_lookups(net, ids):
    """What `net`'s forward looks up for a batch of `ids`, by table module (SparsePipeline's)."""
    if net.kind == "ebc":
        return {t: ids[:, k:k + 1] for k, t in enumerate(net.emb.values())}
    if net.kind.endswith("twice"):  # two lookups of one table, in the forward's order
        return {net.emb: [ids[:, :2], ids[:, 1:]]}
    return {net.emb: hashed(ids) if net.kind == "tps-unbounded" else ids}


def hashed(ids):
    """Ids spread over all of int64 (negative ones too), as a hashing script's are."""
    return ids * -7046029254386353131 + 1442695040888963407


def table_model(seed, sparse=True, kind="torch"):
    torch.manual_seed(seed)
    return TableNet(sparse, kind)


def hybrid_optimizer(net):
    """The dense half of the hybrid tests: AdamW over the head, in two parameter groups (the
    bias without weight decay, at twice the learning rate)."""
    return torch.optim.AdamW([{"params": [net.head.weight]},
                              {"params": [net.head.bias], "weight_decay": 0.0, "lr": 0.02}],
                             lr=0.01, weight_decay=0.1)
