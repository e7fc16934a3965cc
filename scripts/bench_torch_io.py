#!/usr/bin/env python3
"""torch.save / torch.load of the state dict `reshard bench io` writes.

The baseline for reshard's safetensors writer and reader: the same tensors
(N float32 tensors of ROWS x COLS), saved with torch.save and flushed to disk
with fsync, then loaded back with torch.load. Prints one JSON object:
{"bytes": ..., "save_seconds": ..., "load_seconds": ...}. Needs python3-torch.
"""

import argparse
import json
import os
import tempfile
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensors", type=int, default=64)
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=2048)
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the temporary file goes")
    args = parser.parse_args()

    state = {
        f"model.layers.{i}.mlp.up_proj.weight": torch.full((args.rows, args.cols), 1.5, dtype=torch.float32)
        for i in range(args.tensors)
    }
    path = os.path.join(args.dir, f"reshard-bench-torch-{os.getpid()}.pt")
    try:
        start = time.perf_counter()
        with open(path, "wb") as out:
            torch.save(state, out)
            out.flush()
            os.fsync(out.fileno())
        save_seconds = time.perf_counter() - start

        start = time.perf_counter()
        loaded = torch.load(path)
        load_seconds = time.perf_counter() - start
        assert len(loaded) == args.tensors
    finally:
        if os.path.exists(path):
            os.remove(path)

    total = args.tensors * args.rows * args.cols * 4
    print(json.dumps({"bytes": total, "save_seconds": save_seconds, "load_seconds": load_seconds}))


if __name__ == "__main__":
    main()
