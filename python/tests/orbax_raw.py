"""Arrays as raw files (values.json naming each one's file, dtype and shape), so processes
without JAX or Orbax can check the bytes an Orbax checkpoint was saved from."""

from __future__ import annotations

import json
import pathlib

import numpy as np

import reshard


def write_raw(folder: pathlib.Path, flat: dict[str, np.ndarray]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    meta = {}
    for i, (name, v) in enumerate(flat.items()):
        (folder / f"{i}.bin").write_bytes(np.ascontiguousarray(v).tobytes())
        meta[name] = {"file": f"{i}.bin", "dtype": reshard.dtype_name(v.dtype), "shape": list(v.shape)}
    (folder / "values.json").write_text(json.dumps(meta))


def read_raw(folder: pathlib.Path) -> dict[str, np.ndarray]:
    meta = json.loads((folder / "values.json").read_text())
    return {name: np.frombuffer((folder / m["file"]).read_bytes(), reshard.numpy_dtype(m["dtype"]))
            .reshape(m["shape"]) for name, m in meta.items()}
