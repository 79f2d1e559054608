"""The project's digits data set (data/digits.csv.gz: 1,797 8x8 images, labels 0..9) for the
PyTorch example: a fixed train/test split and the shards data-parallel workers train on.
Everything depends only on seeds, so every worker computes the same split and shards."""

import gzip
import os

import numpy
import torch

DEFAULT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data",
                            "digits.csv.gz")
TEST_SIZE = 450
SPLIT_SEED = 20261121


class Digits:
    """Images (N, 1, 8, 8) float32 in [0, 1] and labels (N,) int64."""

    def __init__(self, images, labels):
        self.images, self.labels = images, labels

    def __len__(self):
        return len(self.labels)


def load(path=DEFAULT_PATH):
    """The train and test sets."""
    with gzip.open(path, "rt") as f:
        rows = numpy.loadtxt(f, delimiter=",", dtype=numpy.int64)
    if rows.ndim != 2 or rows.shape[1] != 65:
        raise ValueError(f"{path}: expected 64 pixels and a label per line")
    order = numpy.random.default_rng(SPLIT_SEED).permutation(len(rows))
    rows = rows[order]
    images = torch.from_numpy(rows[:, :64].astype(numpy.float32) / 16.0).reshape(-1, 1, 8, 8)
    labels = torch.from_numpy(rows[:, 64])
    train = Digits(images[:-TEST_SIZE], labels[:-TEST_SIZE])
    test = Digits(images[-TEST_SIZE:], labels[-TEST_SIZE:])
    return train, test


def shard(n_samples, world_size, rank, seed):
    """Rank `rank`'s indices of a seeded permutation cut into world_size equal shards."""
    order = numpy.random.default_rng(seed).permutation(n_samples)
    per = n_samples // world_size
    return order[rank * per:(rank + 1) * per]


def steps_per_epoch(n_samples, world_size, batch):
    return (n_samples // world_size) // batch


def batch_indices(indices, data_epoch, batch_index, batch, seed, rank):
    """The `batch_index`-th minibatch of a shard in pass `data_epoch` (reshuffled per pass)."""
    order = numpy.random.default_rng([seed, data_epoch, rank]).permutation(len(indices))
    return indices[order[batch_index * batch:(batch_index + 1) * batch]]
