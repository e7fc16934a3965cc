"""Hugging Face folders read by reshard.hf, checked against the safetensors package's loader."""

from __future__ import annotations

import json

import numpy as np
import pytest
import safetensors.numpy

import reshard
from reshard import errors


def write_indexed(folder, files: dict[str, dict[str, np.ndarray]]) -> None:
    weight_map = {}
    for file_name, tensors in files.items():
        safetensors.numpy.save_file(tensors, str(folder / file_name), {"format": "np"})
        weight_map.update({name: file_name for name in tensors})
    total = sum(a.nbytes for t in files.values() for a in t.values())
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2, sort_keys=True)
    )


def test_an_indexed_folder_reads_as_its_files(tmp_path, rng):
    gen = np.random.default_rng(rng.randrange(2**32))
    files = {
        "model-00001-of-00002.safetensors": {"a.w": gen.standard_normal((4, 8)).astype(np.float32),
                                             "a.b": gen.integers(0, 9, (8,), dtype=np.int64)},
        "model-00002-of-00002.safetensors": {"z.w": gen.standard_normal((3,)).astype(np.float16)},
    }
    write_indexed(tmp_path, files)
    for mode in ("mmap", "pread"):
        folder = reshard.hf.open_folder(tmp_path, mode)
        assert folder.kind == "indexed"
        assert folder.file_names == sorted(files)
        assert sorted(folder.keys()) == ["a.b", "a.w", "z.w"] and len(folder) == 3 and "a.w" in folder
        assert folder.metadata() == {"format": "np"}
        for file_name, tensors in files.items():
            reference = safetensors.numpy.load_file(str(tmp_path / file_name))
            for name, array in tensors.items():
                assert folder.file_of(name) == file_name
                np.testing.assert_array_equal(folder[name], reference[name])
                assert folder[name].dtype == array.dtype
        loaded = reshard.hf.load_folder(tmp_path, mode)
        assert loaded.keys() == set(folder.keys())
        with pytest.raises(errors.MissingTensorError):
            folder["nope"]


def test_a_single_file_folder_and_a_peft_adapter(tmp_path):
    model, adapter = tmp_path / "model", tmp_path / "adapter"
    model.mkdir()
    adapter.mkdir()
    safetensors.numpy.save_file({"w": np.arange(6, dtype=np.int32)}, str(model / "model.safetensors"))
    safetensors.numpy.save_file({"lora_A": np.ones((2, 2), np.float32)}, str(adapter / "adapter_model.safetensors"))
    (adapter / "adapter_config.json").write_text("{}")
    assert reshard.hf.open_folder(model).kind == "single_file"
    np.testing.assert_array_equal(reshard.hf.load_folder(model)["w"], np.arange(6))
    peft = reshard.hf.open_folder(adapter)
    assert peft.kind == "peft_adapter" and peft.keys() == ["lora_A"]


def test_an_index_that_disagrees_with_its_files_is_refused(tmp_path):
    write_indexed(tmp_path, {"model-00001-of-00001.safetensors": {"w": np.zeros(2, np.float32)}})
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    index["weight_map"]["ghost"] = "model-00001-of-00001.safetensors"
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(errors.MissingTensorError, match="ghost"):
        reshard.hf.open_folder(tmp_path)
    with pytest.raises(errors.UnsupportedError):
        reshard.hf.open_folder(tmp_path / "..")
