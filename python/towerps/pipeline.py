"""A loader that looks one batch ahead, so that each step's table rows come with the step before.

``SparsePipeline(loader, optimizer, lookups)`` yields ``loader``'s batches unchanged. While the
script computes batch t, it already holds batch t+1, and ``lookups(batch)`` says which ids each
table will look up in it; ``optimizer.step()`` then sends the pulls of those rows with step t's
pushes (in the spirit of TorchRec's TrainPipelineSparseDist), and batch t+1's forward finds them
there: one exchange with the servers per step instead of two.

Nothing about the result changes. The rows are pulled at step t+1's version, so in sync the
servers answer once step t's update is in, exactly as a lookup in the forward would be: the same
bits. A forward that looks up other ids than ``lookups`` said pulls those as usual (slower,
never wrong); a rejoin after a server's failover forgets the rows pulled ahead.

Contract: ``lookups(batch)`` returns ``{module: ids}``, the ids each table's forward will take
for ``batch``, as the forward gets them: a ``towerps.torch.nn.Embedding`` or ``EmbeddingBag``'s
input, an ``EmbeddingBagCollection``'s ``[batch, fields]`` ids, an ``nn.Embedding(sparse=True)``
or ``nn.EmbeddingBag(sparse=True)``'s input; for a table the forward looks up several times, a
list of ids, one per lookup, in the forward's order. Iterate the pipeline once per epoch, calling
``optimizer.step()`` once per batch. Lookups that are not the forward's change nothing but the
speed, and ``step()`` warns once when none of them was taken.
"""

_END = object()


class SparsePipeline:
    def __init__(self, loader, optimizer, lookups):
        if not callable(lookups):
            raise ValueError("SparsePipeline: lookups is %r; give a function of a batch that "
                             "returns {table module: ids}" % (lookups,))
        self._loader = loader
        self._optimizer = optimizer
        self._lookups = lookups

    def __len__(self):
        return len(self._loader)

    def __iter__(self):
        batches = iter(self._loader)
        upcoming = next(batches, _END)
        while upcoming is not _END:
            batch, upcoming = upcoming, next(batches, _END)
            self._optimizer._look_ahead(
                None if upcoming is _END else self._lookups(upcoming))
            yield batch
