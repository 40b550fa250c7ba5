"""torchlight.data: toy 2-D sets, the shipped digits, TensorDataset and DataLoader."""

from __future__ import annotations

import gzip
from importlib import resources

import numpy as np
import pytest

import torchlight as tl
from torchlight.data import (
    TOY_DATASETS,
    DataLoader,
    TensorDataset,
    digits,
    load_digits,
    random_split,
)

RULES = {
    "simple": lambda x: x[:, 0] < 0.5,
    "diag": lambda x: x[:, 0] + x[:, 1] < 0.5,
    "split": lambda x: (x[:, 0] < 0.2) | (x[:, 0] > 0.8),
    "xor": lambda x: (x[:, 0] < 0.5) != (x[:, 1] < 0.5),
    "circle": lambda x: ((x - 0.5) ** 2).sum(axis=1) > 0.1,
}


@pytest.mark.parametrize("name", sorted(RULES))
def test_toy_sets_follow_their_rule_and_are_seeded(name):
    ds = TOY_DATASETS[name](n=300, seed=4)
    x, y = (t.numpy() for t in ds.tensors)
    assert x.shape == (300, 2) and y.shape == (300,) and ds.tensors[1].dtype is tl.int64
    assert ((x >= 0) & (x < 1)).all()
    np.testing.assert_array_equal(y, RULES[name](x).astype(np.int64))
    assert 0 < y.sum() < 300  # both classes present
    again = TOY_DATASETS[name](n=300, seed=4).tensors[0].numpy()
    other = TOY_DATASETS[name](n=300, seed=5).tensors[0].numpy()
    np.testing.assert_array_equal(x, again)
    assert not np.array_equal(x, other)


def test_noise_moves_points_but_not_labels():
    clean = TOY_DATASETS["xor"](n=500, seed=1)
    noisy = TOY_DATASETS["xor"](n=500, noise=0.05, seed=1)
    dx = noisy.tensors[0].numpy() - clean.tensors[0].numpy()
    assert 0.04 < dx.std() < 0.06
    np.testing.assert_array_equal(noisy.tensors[1].numpy(), clean.tensors[1].numpy())
    with pytest.raises(ValueError, match="noise"):
        TOY_DATASETS["xor"](noise=-1.0)
    with pytest.raises(ValueError, match="positive"):
        TOY_DATASETS["simple"](n=0)


def test_spiral_has_two_balanced_interleaved_arms():
    odd = TOY_DATASETS["spiral"](n=201).tensors[1].numpy()
    assert np.bincount(odd).tolist() == [101, 100]
    x, y = (t.numpy() for t in TOY_DATASETS["spiral"](n=200).tensors)
    assert x.shape == (200, 2) and np.bincount(y).tolist() == [100, 100]
    # arm 1 is arm 0 turned by pi around the centre
    np.testing.assert_allclose(x[y == 1] - 0.5, -(x[y == 0] - 0.5), atol=1e-12)
    assert TOY_DATASETS["spiral"](n=10, dtype=tl.float32).tensors[0].dtype is tl.float32


def test_digits_file_license_and_contents():
    files = resources.files("torchlight.data")
    license_text = files.joinpath("DIGITS_LICENSE.txt").read_text()
    assert "CC BY 4.0" in license_text and "Alpaydin" in license_text and "Kaynak" in license_text
    raw = gzip.decompress(files.joinpath("digits.csv.gz").read_bytes())
    assert raw.count(b"\n") == 1797
    pixels, labels = load_digits()
    assert pixels.shape == (1797, 64) and labels.shape == (1797,)
    assert pixels.min() == 0 and pixels.max() == 16
    assert sorted(set(labels.tolist())) == list(range(10))
    assert np.bincount(labels).min() >= 170  # about 180 images of each digit


def test_digits_split_is_disjoint_seeded_and_scaled():
    train, test = digits(True), digits(False)
    assert len(train) == 1437 and len(test) == 360
    xtr, xte = train.tensors[0].numpy(), test.tensors[0].numpy()
    assert xtr.min() == 0.0 and xtr.max() == 1.0
    pixels, _ = load_digits()
    both = np.concatenate([xtr, xte]) * 16
    # together the two parts are exactly the 1797 images, each once
    assert sorted(map(bytes, both.astype(np.int64))) == sorted(map(bytes, pixels.astype(np.int64)))
    np.testing.assert_array_equal(digits(True).tensors[1].numpy(), train.tensors[1].numpy())
    assert not np.array_equal(digits(True, seed=1).tensors[1].numpy(), train.tensors[1].numpy())
    images = digits(False, images=True, dtype=tl.float32)
    assert images.tensors[0].shape == (360, 1, 8, 8) and images.tensors[0].dtype is tl.float32


def test_tensor_dataset():
    ds = TensorDataset(tl.arange(12.0).reshape(6, 2), tl.arange(6))
    assert len(ds) == 6
    x, y = ds[2]
    assert x.tolist() == [4.0, 5.0] and y.item() == 2
    assert "6 samples" in repr(ds)
    with pytest.raises(ValueError, match="same first dimension"):
        TensorDataset(tl.zeros(3, 2), tl.zeros(4))


def test_dataloader_batches_in_order_without_shuffle():
    ds = TensorDataset(tl.arange(10.0), tl.arange(10))
    batches = [y.tolist() for _, y in DataLoader(ds, batch_size=4)]
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert len(DataLoader(ds, batch_size=4)) == 3
    dropped = [y.tolist() for _, y in DataLoader(ds, batch_size=4, drop_last=True)]
    assert (
        dropped == [[0, 1, 2, 3], [4, 5, 6, 7]]
        and len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    )


def test_dataloader_shuffle_is_seeded_covers_everything_and_changes_per_epoch():
    ds = TensorDataset(tl.arange(50))
    loader = DataLoader(ds, batch_size=8, shuffle=True, seed=3)
    first = np.concatenate([b.numpy() for (b,) in loader])
    second = np.concatenate([b.numpy() for (b,) in loader])
    assert sorted(first) == list(range(50)) and sorted(second) == list(range(50))
    assert not np.array_equal(first, second) and not np.array_equal(first, np.arange(50))
    replay = DataLoader(ds, batch_size=8, shuffle=True, seed=3)
    np.testing.assert_array_equal(np.concatenate([b.numpy() for (b,) in replay]), first)
    # without a seed, the order comes from tl.manual_seed
    tl.manual_seed(1)
    a = np.concatenate([b.numpy() for (b,) in DataLoader(ds, batch_size=8, shuffle=True)])
    tl.manual_seed(1)
    b = np.concatenate([b.numpy() for (b,) in DataLoader(ds, batch_size=8, shuffle=True)])
    np.testing.assert_array_equal(a, b)
    # an explicit numpy generator, whose state can be saved and restored
    gen = np.random.default_rng(3)
    np.testing.assert_array_equal(
        np.concatenate([b.numpy() for (b,) in DataLoader(ds, 8, True, generator=gen)]), first
    )
    with pytest.raises(ValueError, match="not both"):
        DataLoader(ds, 8, True, seed=1, generator=gen)


def test_dataloader_stacks_samples_of_a_generic_dataset():
    class Squares:
        def __len__(self) -> int:
            return 5

        def __getitem__(self, i: int):
            return tl.tensor([float(i), float(i * i)]), tl.tensor(i % 2)

    batches = list(DataLoader(Squares(), batch_size=2))
    assert [tuple(x.shape) for x, _ in batches] == [(2, 2), (2, 2), (1, 2)]
    assert batches[1][0].tolist() == [[2.0, 4.0], [3.0, 9.0]] and batches[1][1].tolist() == [0, 1]
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(Squares(), batch_size=0)


# --------------------------------------------------------------------------- PyTorch's Dataset API
class OneTensor(tl.data.Dataset):
    """A Dataset whose samples are single tensors (no tuple), as in many PyTorch tutorials."""

    def __len__(self):
        return 5

    def __getitem__(self, i):
        return tl.tensor([float(i), 10.0 * i, 100.0 * i])


def test_a_dataset_returning_one_tensor_gives_batches_of_samples():
    # Before the fix the loader zipped over each tensor's elements: a tuple of 3 tensors of shape
    # (2,) instead of one batch of shape (2, 3).
    batches = list(DataLoader(OneTensor(), batch_size=2))
    assert [type(b) for b in batches] == [tl.Tensor] * 3
    assert [b.shape for b in batches] == [(2, 3), (2, 3), (1, 3)]
    np.testing.assert_array_equal(batches[1].numpy(), [[2, 20, 200], [3, 30, 300]])


def test_default_collate_follows_pytorch():
    from torchlight.data import default_collate

    x, y = default_collate([(tl.zeros(2), 1), (tl.ones(2), 0)])
    assert x.shape == (2, 2) and y.dtype is tl.int64 and y.tolist() == [1, 0]
    assert default_collate([0.5, 1.5]).dtype is tl.float64
    d = default_collate([{"a": np.zeros(3), "s": "x"}, {"a": np.ones(3), "s": "y"}])
    assert d["a"].shape == (2, 3) and d["s"] == ["x", "y"]
    with pytest.raises(TypeError, match="collate_fn"):
        default_collate([object()])


def test_collate_fn_is_used_for_every_batch_also_on_a_tensor_dataset():
    ds = TensorDataset(tl.arange(6.0), tl.tensor([0, 1, 0, 1, 0, 1]))
    seen = []

    def collate(samples):
        seen.append(len(samples))
        return sum(float(x.item()) for x, _ in samples)

    assert list(DataLoader(ds, batch_size=4, collate_fn=collate)) == [6.0, 9.0]
    assert seen == [4, 2]


def test_subset_concat_and_random_split():
    from torchlight.data import ConcatDataset, Subset, random_split

    ds = TensorDataset(tl.arange(10.0))
    sub = Subset(ds, [7, 2, 5])
    assert len(sub) == 3 and sub[1][0].item() == 2.0
    assert [float(b.sum()) for (b,) in DataLoader(sub, batch_size=2)] == [9.0, 5.0]
    both = ConcatDataset([sub, OneTensor()])
    assert len(both) == 8 and both[3].tolist() == [0.0, 0.0, 0.0] and both[-1][0] == 4.0
    assert len(sub + sub) == 6

    parts = random_split(ds, [6, 3, 1], generator=np.random.default_rng(0))
    assert [len(p) for p in parts] == [6, 3, 1]
    assert sorted(i for p in parts for i in p.indices) == list(range(10))  # disjoint, complete
    again = random_split(ds, [6, 3, 1], generator=np.random.default_rng(0))
    assert [p.indices for p in parts] == [p.indices for p in again]
    # fractions: floor(n * f) each, the remainder one by one to the first subsets (PyTorch's rule)
    assert [len(p) for p in random_split(TensorDataset(tl.arange(11.0)), [0.5, 0.3, 0.2])] == [
        6, 3, 2,
    ]  # fmt: skip
    with pytest.raises(ValueError, match="add up"):
        random_split(ds, [5, 3])


# ---------------------------------------------------------------- issue 37, finding 5: one of each
def test_one_dataloader_one_random_split_one_randint():
    import torchlight.creation
    import torchlight.data
    import torchlight.utils.data

    for name in ("DataLoader", "Dataset", "TensorDataset", "Subset", "ConcatDataset",
                 "random_split", "default_collate"):  # fmt: skip
        assert getattr(torchlight.data, name) is getattr(torchlight.utils.data, name), name
    assert not hasattr(torchlight.creation, "randint") and tl.randint is tl.random.randint


def test_the_one_dataloader_keeps_the_course_orders_and_takes_both_generators():
    ds = TensorDataset(tl.arange(23.0))
    rng = np.random.default_rng(3)  # by hand: seed=3 is one permutation of this generator per epoch
    expected = [rng.permutation(23).tolist() for _ in range(3)]
    loader = DataLoader(ds, batch_size=5, shuffle=True, seed=3)
    assert [sum((b.tolist() for (b,) in loader), []) for _ in range(3)] == [
        [float(i) for i in e] for e in expected
    ]
    with_workers = DataLoader(ds, batch_size=5, shuffle=True, seed=3, num_workers=2)
    assert sum((b.tolist() for (b,) in with_workers), []) == [float(i) for i in expected[0]]
    g1, g2 = tl.Generator().manual_seed(7), tl.Generator().manual_seed(7)
    first = [b.tolist() for (b,) in DataLoader(ds, batch_size=5, shuffle=True, generator=g1)]
    assert first == [
        b.tolist() for (b,) in DataLoader(ds, batch_size=5, shuffle=True, generator=g2)
    ]
    in_order = next(iter(DataLoader(ds, batch_size=5)))[0]
    in_order.add_(0)  # (a view of the data set's tensor, as before: in-order batches are slices)
    assert in_order.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    parts = random_split(ds, [0.5, 0.5], generator=tl.Generator().manual_seed(0))
    again = random_split(ds, [0.5, 0.5], generator=tl.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [12, 11] and parts[0].indices == again[0].indices
    numpy_parts = random_split(ds, [12, 11], generator=np.random.default_rng(0))
    assert sorted(numpy_parts[0].indices + numpy_parts[1].indices) == list(range(23))
