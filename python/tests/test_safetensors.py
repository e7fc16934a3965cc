"""reshard.safetensors against the safetensors package's numpy loader and writer."""

from __future__ import annotations

import gc
import os
import random

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy

import reshard
from reshard import errors
from reshard import safetensors as rst

# Every dtype the safetensors package's numpy side knows.
REFERENCE_DTYPES = (np.float64, np.float32, np.float16, np.int64, np.uint64, np.int32, np.uint32,
                    np.int16, np.uint16, np.int8, np.uint8, np.bool_, np.complex64)
# And those only reshard reads (through ml_dtypes).
EXTRA_DTYPES = (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2)


def random_array(rng: random.Random, dtype) -> np.ndarray:
    shape = tuple(rng.choice((0, 1, 2, 3, 5, 8)) for _ in range(rng.randint(0, 3)))
    bits = np.random.default_rng(rng.randrange(2**32)).integers(0, 256, size=int(np.prod(shape)) * np.dtype(dtype).itemsize, dtype=np.uint8)
    array = bits.view(dtype).reshape(shape) if np.dtype(dtype) != np.bool_ else (bits % 2).astype(np.bool_).reshape(shape)
    return array


def random_tensors(rng: random.Random, dtypes) -> dict[str, np.ndarray]:
    return {f"t{i}.{rng.choice('abcxyz')}": random_array(rng, rng.choice(dtypes)) for i in range(rng.randint(1, 8))}


def assert_same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


def test_files_reshard_writes_are_byte_identical_to_the_reference_writers(rng, tmp_path):
    for i in range(30):
        tensors = random_tensors(rng, REFERENCE_DTYPES)
        # One key at most: the reference writes metadata in its hash map's order.
        metadata = {"format": "np"} if rng.random() < 0.5 else None
        ours, theirs = tmp_path / f"ours{i}.safetensors", tmp_path / f"theirs{i}.safetensors"
        rst.save_file(tensors, ours, metadata)
        safetensors.numpy.save_file(tensors, str(theirs), metadata)
        assert ours.read_bytes() == theirs.read_bytes()
        loaded = safetensors.numpy.load_file(str(ours))
        assert loaded.keys() == tensors.keys()
        for name, array in tensors.items():
            assert_same_bits(loaded[name], array)


def test_metadata_reaches_the_reference_reader(tmp_path):
    path = tmp_path / "m.safetensors"
    metadata = {"format": "np", "step": "7", "note": "é \" quoted"}
    rst.save_file({"w": np.ones(3, np.float32)}, path, metadata)
    with safetensors.safe_open(str(path), framework="np") as f:
        assert f.metadata() == metadata
    assert rst.safe_open(path).metadata() == metadata


@pytest.mark.parametrize("mode", ["mmap", "pread"])
def test_reading_agrees_with_the_reference_loader(rng, tmp_path, mode):
    for i in range(20):
        tensors = random_tensors(rng, REFERENCE_DTYPES)
        path = tmp_path / f"f{i}.safetensors"
        safetensors.numpy.save_file(tensors, str(path), {"who": "reference"})
        expected = safetensors.numpy.load_file(str(path))
        ours = rst.load_file(path, mode=mode)
        assert ours.keys() == expected.keys()
        for name in expected:
            assert_same_bits(ours[name], expected[name])
        with rst.safe_open(path, mode=mode) as f:
            assert f.metadata() == {"who": "reference"}
            assert sorted(f.keys()) == sorted(tensors) and len(f) == len(tensors)
            for name, array in tensors.items():
                info = f.info(name)
                assert info.shape == array.shape and reshard.numpy_dtype(info.dtype) == array.dtype
                assert info.nbytes == array.nbytes


def test_extra_dtypes_round_trip(rng, tmp_path):
    for i in range(10):
        tensors = random_tensors(rng, EXTRA_DTYPES + REFERENCE_DTYPES)
        path = tmp_path / f"x{i}.safetensors"
        rst.save_file(tensors, path)
        for mode in ("mmap", "pread"):
            loaded = rst.load_file(path, mode=mode)
            for name, array in tensors.items():
                assert_same_bits(loaded[name], array)


def test_mmap_views_share_the_mapping_and_outlive_the_file_object(tmp_path):
    path = tmp_path / "w.safetensors"
    weights = np.arange(1024, dtype=np.float32).reshape(32, 32)
    safetensors.numpy.save_file({"w": weights}, str(path))
    f = rst.safe_open(path)
    a, b = f.get_tensor("w"), f["w"]
    assert not a.flags.writeable
    assert a.__array_interface__["data"][0] == b.__array_interface__["data"][0]  # no copy: one mapping
    assert np.shares_memory(a, b)
    # The map is shared with the file: a write to the file shows through the view.
    offset = f.data_start + f.info("w").data_offsets[0]
    with open(path, "r+b") as raw:
        raw.seek(offset)
        raw.write(np.float32(-7.0).tobytes())
    assert a[0, 0] == -7.0
    del f, b
    gc.collect()
    assert a[31, 31] == 1023.0  # the mapping lives as long as a view
    copied = rst.safe_open(path).get_tensor("w", copy=True)
    assert copied.flags.writeable and not np.shares_memory(copied, a)
    pread = rst.safe_open(path, mode="pread").get_tensor("w")
    assert pread.flags.writeable and pread[0, 0] == -7.0


def test_get_slice_reads_the_box(rng, tmp_path):
    path = tmp_path / "s.safetensors"
    array = np.arange(6 * 7 * 5, dtype=np.int16).reshape(6, 7, 5)
    rst.save_file({"a": array}, path)
    f = rst.safe_open(path, mode="pread")
    for _ in range(50):
        index = tuple(slice(*sorted(rng.sample(range(n + 1), 2))) for n in array.shape[: rng.randint(1, 3)])
        np.testing.assert_array_equal(f.get_slice("a", index), array[index])
    np.testing.assert_array_equal(f.get_slice("a", 2), array[2:3])
    with pytest.raises(errors.UnsupportedError):
        f.get_slice("a", slice(0, 6, 2))


def test_broken_files_raise_typed_errors(tmp_path):
    with pytest.raises(errors.ReshardIOError) as missing:
        rst.safe_open(tmp_path / "absent.safetensors")
    assert isinstance(missing.value, OSError) and "absent.safetensors" in str(missing.value)

    path = tmp_path / "t.safetensors"
    safetensors.numpy.save_file({"w": np.zeros((4, 4), np.float32)}, str(path))
    data = path.read_bytes()
    (tmp_path / "short.safetensors").write_bytes(data[:5])
    with pytest.raises(errors.HeaderTooSmallError):
        rst.safe_open(tmp_path / "short.safetensors")
    (tmp_path / "cut.safetensors").write_bytes(data[:-4])
    with pytest.raises(errors.FormatError) as cut:
        rst.safe_open(tmp_path / "cut.safetensors")
    assert isinstance(cut.value, ValueError) and "cut.safetensors" in str(cut.value)

    f = rst.safe_open(path)
    with pytest.raises(errors.MissingTensorError) as lookup:
        f["nope"]
    assert isinstance(lookup.value, KeyError) and "nope" in str(lookup.value)
    assert "nope" not in f and "w" in f
    with pytest.raises(errors.InvalidArgumentError):
        rst.safe_open(path, mode="psychic")


def test_writer_refuses_what_the_format_cannot_hold(tmp_path):
    with pytest.raises(errors.InvalidArgumentError):
        rst.save_file({"__metadata__": np.zeros(2)}, tmp_path / "m.safetensors")
    with pytest.raises(errors.UnsupportedError):
        rst.save_file({"o": np.array([object()])}, tmp_path / "o.safetensors")
    assert not os.path.exists(tmp_path / "m.safetensors")
