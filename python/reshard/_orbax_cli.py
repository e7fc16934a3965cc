"""``python -m reshard.orbax``: inspect, export or convert an Orbax, Levanter or JAX checkpoint.

Under mpirun (or srun) every process of the job takes part, as the C++
commands do: each reads only its share of the checkpoint and writes its part.
``reshard export`` / ``inspect`` / ``convert`` hand such a source to this
command with the flags they were given, so the flags are theirs.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import _core

EXAMPLES = """\
examples:
  python -m reshard.orbax inspect run/checkpoints/1000/default
  python -m reshard.orbax inspect gs://bucket/run/checkpoints/step-1000 --json
  mpirun -np 4 python -m reshard.orbax export run/checkpoints/step-1000 hf-out --map levanter-llama \\
      --hf-config config.json --max-shard-size 2GB
  python -m reshard.orbax export lora-run/step-1000 adapter-out --map levanter-llama --adapter-only \\
      --lora-config adapter_config.json
  mpirun -np 4 python -m reshard.orbax export lora-run/step-1000 s3://b/merged --map levanter-llama \\
      --merge-lora --base s3://b/llama-base --lora-config adapter_config.json
  mpirun -np 2 python -m reshard.orbax convert ckpt/1000 reshard-ckpt

PATH is an Orbax item folder (the one with _METADATA) or a step folder with one
item (or --item NAME), a Levanter checkpoint's step folder, or a folder of
arrays JAX's GlobalAsyncCheckpointManager wrote; local, s3:// or gs://. Tensor
names are tree paths with keys joined by dots, under --subtree (a Levanter
checkpoint's default: model).
"""


def _size(text: str) -> int:
    try:
        return _core._parse_byte_size(text)
    except Exception as e:  # a ParseError: argparse reports it as the flag's
        raise argparse.ArgumentTypeError(str(e)) from None


def _source(command: argparse.ArgumentParser) -> None:
    command.add_argument("path")
    command.add_argument("--item", help="the item of an Orbax step folder with several")
    command.add_argument("--subtree", help="read the leaves under this dotted key path, the prefix taken off their "
                                           "names (a Levanter checkpoint's default: model; '' the whole tree)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m reshard.orbax", epilog=EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     description="Read Orbax, Levanter and JAX checkpoints (zarr or zarr3, OCDBT or "
                                                 "not) with reshard, on any number of processes.")
    commands = parser.add_subparsers(dest="command", required=True)
    inspect = commands.add_parser("inspect", help="list the tree paths, shapes, dtypes, chunking and format")
    _source(inspect)
    inspect.add_argument("--json", action="store_true", help="print JSON instead of a table")

    export = commands.add_parser("export", help="export to a Hugging Face folder or PEFT adapter through a map")
    _source(export)
    export.add_argument("out")
    export.add_argument("--map", required=True, help="a preset (levanter-llama), a map file or its JSON")
    kinds = export.add_mutually_exclusive_group()
    kinds.add_argument("--kind", choices=("model", "adapter", "merged"), default=None)
    kinds.add_argument("--adapter-only", action="store_true", help="write the PEFT adapter only")
    kinds.add_argument("--merge-lora", action="store_true", help="merge the LoRA factors into the model")
    export.add_argument("--base", help="a Hugging Face folder: the base model to merge into (--merge-lora, when "
                                       "the checkpoint holds LoRA factors alone) or to check an adapter against")
    export.add_argument("--dtype", help="cast F32/F16/BF16 tensors (f32, bf16, f16)")
    export.add_argument("--max-shard-size", type=_size, default=_core.DEFAULT_MAX_SHARD_SIZE,
                        help="largest weight file (5GB, 500MB, 1.5GiB or bytes; default 5GB)")
    export.add_argument("--part-size", type=_size, help="bytes per uploaded part in a store (64MiB, ...)")
    export.add_argument("--parts-in-flight", type=int, default=4, help="parts each process uploads at once")
    export.add_argument("--hf-config", help="config.json to write beside the model")
    export.add_argument("--lora-config", help="adapter_config.json (r, lora_alpha) for an adapter or a merge")
    export.add_argument("--force", action="store_true", help="replace an existing output")
    export.add_argument("--timeout", type=float, default=0.0, help="seconds a silent peer process is waited for")

    convert = commands.add_parser("convert", help="save as a reshard checkpoint (restore it onto any layout)")
    _source(convert)
    convert.add_argument("out")
    convert.add_argument("--force", action="store_true", help="replace an existing output")
    convert.add_argument("--timeout", type=float, default=0.0, help="seconds a silent peer process is waited for")
    return parser


def _transport(timeout: float):
    import reshard.mpi

    return reshard.mpi.transport(timeout=timeout) if reshard.mpi.launched_by_mpi() else None


def _text(path: str | None, flag: str) -> str | None:
    if path is None:
        return None
    from ._store_paths import path_of
    from .errors import ReshardIOError

    try:
        return path_of(path, flag).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ReshardIOError(f"{flag} {path}: cannot be read: {e}") from e


def _inspect(args: argparse.Namespace, orbax) -> None:
    found = orbax.inspect(args.path, item=args.item, subtree=args.subtree or "")
    if not args.json:
        print(found)
        return
    print(json.dumps({"path": found.path, "kind": found.kind, "step": found.step, "driver": found.driver,
                      "use_ocdbt": found.use_ocdbt,
                      "tensors": {n: {"keys": list(t.keys), "value_type": t.value_type,
                                      "shape": None if t.shape is None else list(t.shape), "dtype": t.dtype,
                                      "chunks": None if t.chunks is None else list(t.chunks), "codec": t.codec}
                                  for n, t in found.tensors.items()}}, indent=1))


def _kind(args: argparse.Namespace) -> str:
    return "adapter" if args.adapter_only else "merged" if args.merge_lora else args.kind or "model"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from reshard import errors
    from reshard import orbax

    try:
        if args.command == "inspect":
            _inspect(args, orbax)
            return 0
        transport = _transport(args.timeout)
        rank = 0 if transport is None else transport.rank
        if args.command == "export":
            options = {} if args.part_size is None else {"part_size": args.part_size}
            result = orbax.export(args.path, args.out, args.map, kind=_kind(args), dtype=args.dtype,
                                  transport=transport, item=args.item, subtree=args.subtree,
                                  max_shard_size=args.max_shard_size, replace=args.force, base=args.base,
                                  hf_config=_text(args.hf_config, "--hf-config"),
                                  lora_config=_text(args.lora_config, "--lora-config"),
                                  parts_in_flight=args.parts_in_flight, **options)
            if rank == 0:
                print(f"exported {result.tensors} tensors ({result.merged} merged) to {args.out}")
        else:
            stats = orbax.convert(args.path, args.out, transport=transport, item=args.item, subtree=args.subtree,
                                  replace=args.force)
            print(f"process {rank}: wrote {stats.bytes_written} B of {args.out}")
        return 0
    except (errors.ReshardError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
