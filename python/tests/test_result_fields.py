"""Fields of the results that the C++ library fills and Python shows: the most bytes a save or a
conversion into a checkpoint held staged, and where an export's time went."""

from __future__ import annotations

import numpy as np
import pytest
import safetensors.numpy

import reshard
from reshard import P


def one_device(shape, gen) -> reshard.ShardedArray:
    sharding = reshard.NamedSharding(reshard.Mesh(np.arange(1), ("x",)), P())
    return reshard.from_host(gen.standard_normal(shape).astype(np.float32), sharding)


def test_an_async_save_reports_the_most_bytes_it_staged(tmp_path, rng):
    gen = np.random.default_rng(rng.randrange(2**32))
    arrays = {"a": one_device((64, 32), gen), "b": one_device((16,), gen)}
    result = reshard.save_checkpoint_async(arrays, tmp_path / "ckpt").wait()
    # Both arrays fit the default staging budget: staged together, once.
    assert result.peak_staged_bytes == (64 * 32 + 16) * 4
    assert "peak_staged_bytes" in dir(result)


def test_a_conversion_into_a_checkpoint_reports_the_most_bytes_it_staged(tmp_path, rng):
    gen = np.random.default_rng(rng.randrange(2**32))
    safetensors.numpy.save_file({"w": gen.standard_normal((32, 8)).astype(np.float32)}, str(tmp_path / "w.safetensors"))
    result = reshard.convert(tmp_path / "w.safetensors", tmp_path / "ckpt", mesh=reshard.Mesh(np.arange(1), ("x",)))
    assert 0 < result.peak_staged_bytes <= 32 * 8 * 4
    assert reshard.convert(tmp_path / "ckpt", tmp_path / "w2.safetensors").peak_staged_bytes == 0  # not a checkpoint


def test_an_export_says_where_its_time_went(tmp_path, rng):
    from levanter_cases import model_shapes

    gen = np.random.default_rng(rng.randrange(2**32))
    model = {name: one_device(shape, gen) for name, shape in model_shapes().items()}
    result = reshard.export(model, tmp_path / "hf", "levanter-llama", hf_config={"model_type": "llama"})
    seconds = result.seconds
    assert isinstance(seconds, reshard.pipelines.ExportTimes)
    assert seconds.total > 0
    for phase in (seconds.read, seconds.produce, seconds.write, seconds.sync, seconds.commit):
        assert 0 <= phase <= seconds.total
    assert repr(seconds).startswith("ExportTimes(read=")


def test_an_export_says_whether_it_wrote_config_json(tmp_path, rng):
    from levanter_cases import model_shapes

    gen = np.random.default_rng(rng.randrange(2**32))
    model = {name: one_device(shape, gen) for name, shape in model_shapes().items()}
    assert reshard.export(model, tmp_path / "with", "levanter-llama", hf_config={"model_type": "llama"}).wrote_config_json
    with pytest.warns(reshard.errors.MissingConfigWarning, match="no config.json written"):
        result = reshard.export(model, tmp_path / "without", "levanter-llama")
    assert not result.wrote_config_json
    assert not (tmp_path / "without" / "config.json").exists()
