"""Python decides by an error's kind, never by its message's text: every error the library
raises carries its C++ ErrorKind's name as ``kind``, and the export's rewording of two of them
(which argument gives a LoRA config, which chose a part size) follows the kind alone."""

from __future__ import annotations

import re

import numpy as np
import pytest

import reshard
from reshard import _core, errors


def test_a_library_error_carries_its_kind(tmp_path):
    with pytest.raises(errors.ReshardError) as raised:
        reshard.verify(tmp_path / "nothing-here")
    assert raised.value.kind == type(raised.value).code != ""


def test_an_export_without_a_lora_config_names_the_argument(tmp_path):
    from levanter_cases import lora_shapes

    sharding = reshard.NamedSharding(reshard.Mesh(np.arange(1), ("x",)), reshard.P())
    factors = {name: reshard.from_host(np.zeros(shape, np.float32), sharding) for name, shape in lora_shapes().items()}
    with pytest.raises(errors.InvalidArgumentError, match=r"^kind='adapter' needs the LoRA config"):
        reshard.export(factors, tmp_path / "adapter", "levanter-llama", kind="adapter")


def raising(kind: str, message: str):
    def export_checkpoint(*args, **kwargs):
        error = errors.InvalidArgumentError(message)
        error.kind = kind
        raise error
    return export_checkpoint


@pytest.mark.parametrize("message", ["no LoRA config here", "the library words it otherwise now"])
def test_the_lora_config_kind_is_reworded_whatever_its_text(monkeypatch, tmp_path, message):
    monkeypatch.setattr(_core, "_export_checkpoint", raising("no_lora_config", message))
    with pytest.raises(errors.InvalidArgumentError, match=r"^kind='merged' needs the LoRA config"):
        reshard.export(tmp_path / "ckpt", tmp_path / "out", "levanter-llama", kind="merged")


@pytest.mark.parametrize("message", ["a part size of 1.0 MiB is outside", "parts must be 5 MiB or more"])
def test_the_part_size_kind_names_the_argument_whatever_its_text(monkeypatch, tmp_path, message):
    monkeypatch.setattr(_core, "_export_checkpoint", raising("part_size_out_of_range", message))
    with pytest.raises(errors.InvalidArgumentError, match=rf"^part_size='1MiB': {message}$"):
        reshard.export(tmp_path / "ckpt", tmp_path / "out", "levanter-llama", part_size="1MiB")


def test_another_kind_with_the_same_words_passes_through_unchanged(monkeypatch, tmp_path):
    for words in ("no LoRA config (adapter needs r)", "a part size of 1.0 MiB is outside"):
        monkeypatch.setattr(_core, "_export_checkpoint", raising("invalid_argument", words))
        with pytest.raises(errors.InvalidArgumentError, match=rf"^{re.escape(words)}$"):
            reshard.export(tmp_path / "ckpt", tmp_path / "out", "levanter-llama", kind="adapter", part_size="1MiB")
