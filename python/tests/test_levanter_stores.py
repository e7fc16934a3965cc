"""Levanter checkpoints saved straight to s3:// and gs:// (the local SeaweedFS and fake-gcs-server,
through the kvstore Levanter builds) and read back by reshard.orbax from there: inspect, restore,
and exports to the store equal to the local exports of the same state, byte for byte."""

from __future__ import annotations

import numpy as np
import pytest

import levanter_cases as lc
import reshard
import reshard.orbax as ro
from test_store_urls import files, objects, scheme, stores, url_of  # noqa: F401 - fixtures


@pytest.mark.parametrize("layout", lc.LAYOUTS)
def test_levanter_checkpoints_in_a_store(stores, scheme, layout, tmp_path, rng, request):  # noqa: F811
    gen = np.random.default_rng(rng.randrange(2**32))
    base = url_of(scheme, request.node.name)
    full, lora = lc.state_values("full", gen), lc.state_values("lora", gen)
    lc.save(f"{base}/full/step-1000", full, layout)
    lc.save(f"{base}/lora/step-1000", lora, layout)
    lc.save(str(tmp_path / "full"), full, layout)
    lc.save(str(tmp_path / "lora"), lora, layout)

    found = ro.inspect(f"{base}/full/step-1000")
    assert (found.kind, found.step, sorted(found.tensors)) == ("levanter", 1000, sorted(full))
    arrays, stats = ro.restore_with_result(f"{base}/full/step-1000", reshard.Mesh(np.arange(4), ("x",)),
                                           best_effort="x")
    assert stats.bytes_read > 0
    assert all(reshard.to_host(a).tobytes() == full[f"model.{n}"].tobytes() for n, a in arrays.items())

    # The model, the adapter, and the merge into a base in the store: each equal to the local export.
    ro.export(tmp_path / "full", tmp_path / "hf", "levanter-llama", hf_config=lc.HF_CONFIG)
    ro.export(f"{base}/full/step-1000", f"{base}/hf", "levanter-llama", hf_config=lc.HF_CONFIG)
    assert objects(stores, f"{base}/hf") == files(tmp_path / "hf")
    ro.export(tmp_path / "lora", tmp_path / "adapter", "levanter-llama", kind="adapter", lora_config=lc.LORA_CONFIG)
    ro.export(f"{base}/lora/step-1000", f"{base}/adapter", "levanter-llama", kind="adapter",
              lora_config=lc.LORA_CONFIG)
    assert objects(stores, f"{base}/adapter") == files(tmp_path / "adapter")
    ro.export(tmp_path / "lora", tmp_path / "merged", "levanter-llama", kind="merged", base=tmp_path / "hf",
              lora_config=lc.LORA_CONFIG)
    ro.export(f"{base}/lora/step-1000", f"{base}/merged", "levanter-llama", kind="merged", base=tmp_path / "hf",
              lora_config=lc.LORA_CONFIG)
    assert objects(stores, f"{base}/merged") == files(tmp_path / "merged")
    # A base in the store too: read from there, the same files.
    ro.export(f"{base}/lora/step-1000", f"{base}/merged2", "levanter-llama", kind="merged", base=f"{base}/hf",
              lora_config=lc.LORA_CONFIG)
    assert objects(stores, f"{base}/merged2") == files(tmp_path / "merged")
