"""``python -m reshard.orbax``: inspect, export or convert an Orbax checkpoint.

Under mpirun (or srun) every process of the job takes part, as the C++
commands do: each reads only its share of the checkpoint and writes its part.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from . import _core

EXAMPLES = """\
examples:
  python -m reshard.orbax inspect run/checkpoints/1000/default
  python -m reshard.orbax inspect run/checkpoints/1000 --json
  mpirun -np 4 python -m reshard.orbax export run/checkpoints/1000 hf-out --map levanter-llama \\
      --hf-config config.json
  python -m reshard.orbax export ckpt/1000 adapter-out --map levanter-llama --kind adapter \\
      --lora-config adapter_config.json
  mpirun -np 2 python -m reshard.orbax convert ckpt/1000 reshard-ckpt

PATH is an Orbax item folder (the one with _METADATA) or a step folder with one
item (or --item NAME). Tensor names are tree paths with keys joined by dots.
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m reshard.orbax", epilog=EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     description="Read Orbax PyTree checkpoints (zarr or zarr3, OCDBT or not) "
                                                 "with reshard, on any number of processes.")
    commands = parser.add_subparsers(dest="command", required=True)
    inspect = commands.add_parser("inspect", help="list the tree paths, shapes, dtypes, chunking and format")
    inspect.add_argument("path")
    inspect.add_argument("--item", help="the item of a step folder with several")
    inspect.add_argument("--json", action="store_true", help="print JSON instead of a table")

    export = commands.add_parser("export", help="export to a Hugging Face folder or PEFT adapter through a map")
    export.add_argument("path")
    export.add_argument("out")
    export.add_argument("--map", required=True, help="a preset (levanter-llama), a map file or its JSON")
    export.add_argument("--kind", choices=("model", "adapter", "merged"), default="model")
    export.add_argument("--dtype", help="cast F32/F16/BF16 tensors (f32, bf16, f16)")
    export.add_argument("--max-shard-size", type=int, default=_core.DEFAULT_MAX_SHARD_SIZE,
                        help=f"bytes per file (default {_core.DEFAULT_MAX_SHARD_SIZE:,})")
    export.add_argument("--hf-config", type=pathlib.Path, help="config.json to write beside the model")
    export.add_argument("--lora-config", type=pathlib.Path, help="adapter_config.json for --kind adapter")
    export.add_argument("--item", help="the item of a step folder with several")
    export.add_argument("--force", action="store_true", help="replace an existing output")

    convert = commands.add_parser("convert", help="save as a reshard checkpoint (restore it onto any layout)")
    convert.add_argument("path")
    convert.add_argument("out")
    convert.add_argument("--item", help="the item of a step folder with several")
    convert.add_argument("--force", action="store_true", help="replace an existing output")
    return parser


def _transport():
    import reshard.mpi

    return reshard.mpi.transport() if reshard.mpi.launched_by_mpi() else None


def _text(path: pathlib.Path | None) -> str | None:
    return None if path is None else path.read_text()


def _inspect(args: argparse.Namespace, orbax) -> None:
    found = orbax.inspect(args.path, item=args.item)
    if not args.json:
        print(found)
        return
    print(json.dumps({"path": found.path, "driver": found.driver, "use_ocdbt": found.use_ocdbt,
                      "tensors": {n: {"keys": list(t.keys), "value_type": t.value_type,
                                      "shape": None if t.shape is None else list(t.shape), "dtype": t.dtype,
                                      "chunks": None if t.chunks is None else list(t.chunks), "codec": t.codec}
                                  for n, t in found.tensors.items()}}, indent=1))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from reshard import errors
    from reshard import orbax

    try:
        if args.command == "inspect":
            _inspect(args, orbax)
            return 0
        transport = _transport()
        rank = 0 if transport is None else transport.rank
        if args.command == "export":
            result = orbax.export(args.path, args.out, args.map, kind=args.kind, dtype=args.dtype,
                                  transport=transport, item=args.item, max_shard_size=args.max_shard_size,
                                  replace=args.force, hf_config=_text(args.hf_config),
                                  lora_config=_text(args.lora_config))
            if rank == 0:
                print(f"exported {result.tensors} tensors to {args.out}")
        else:
            stats = orbax.convert(args.path, args.out, transport=transport, item=args.item, replace=args.force)
            print(f"process {rank}: wrote {stats.bytes_written} B of {args.out}")
        return 0
    except (errors.ReshardError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
