"""A Levanter checkpoint on S3 exported to Hugging Face by `reshard export`, beside the Levanter way,
in the same run against a real S3 server on this machine (SeaweedFS, started and stopped here).

  .venv/bin/python python/bench/bench_levanter.py [--mib 1024] [--processes 4] [--repeat 1] [--json]

Set up (untimed): a --processes-process JAX job (jax.distributed, 4 CPU devices each) saves a
Llama's training state (f32, about --mib MiB: embed 1024, layers as the size asks) to s3:// as
Levanter does (every leaf zarr3 in one OCDBT database at the step folder).

  ours      `mpirun -np N reshard export s3://.../step s3://.../ours --map levanter-llama`: the
            binary hands the job to `python -m reshard.orbax`; each process reads its share of
            the checkpoint and uploads the parts it produced.
  levanter  the Levanter way (marin's fix for multi-host exports): an N-process JAX job
            restores the state onto its training mesh (GlobalAsyncCheckpointManager.deserialize),
            gathers every leaf onto every process with process_allgather, and process 0
            rearranges the tensors into Hugging Face's names and shapes, writes the safetensors
            files (safetensors.numpy.save_file, files of at most --max-shard-size) and uploads
            them with boto3 (its TransferManager defaults).

Each is timed from mpirun's start to its end (process start, imports and MPI or
jax.distributed setup included in both), best of --repeat; peak RSS is each process's
ru_maxrss (bench_storage.py's rank wrapper). The two uploads hold the same tensors (checked,
untimed).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_storage as common  # noqa: E402

MIB = 1 << 20
BUCKET = "reshard-bench-levanter"
STACK = "transformer.layers.stacked"


def llama_shapes(mib: int) -> tuple[dict[str, tuple[int, ...]], dict]:
    """A Llama of about `mib` MiB in f32 (heads of 64, MLP 4x embed) and its config.json."""
    embed = 1024 if mib >= 256 else 256
    vocab = 8 * embed
    per_layer = 16 * embed * embed * 4
    layers = max(1, (mib * MIB - 2 * vocab * embed * 4) // per_layer)
    heads, hd, mlp = embed // 64, 64, 4 * embed
    shapes = {"embeddings.token_embeddings.weight": (vocab, embed), "lm_head.weight": (vocab, embed),
              "transformer.norm.weight": (embed,),
              f"{STACK}.self_attn.q_proj.weight": (layers, heads, 1, hd, embed),
              f"{STACK}.self_attn.k_proj.weight": (layers, heads, hd, embed),
              f"{STACK}.self_attn.v_proj.weight": (layers, heads, hd, embed),
              f"{STACK}.self_attn.o_proj.weight": (layers, embed, heads, hd),
              f"{STACK}.mlp.gate_proj.weight": (layers, mlp, embed),
              f"{STACK}.mlp.up_proj.weight": (layers, mlp, embed),
              f"{STACK}.mlp.down_proj.weight": (layers, embed, mlp),
              f"{STACK}.input_layernorm.weight": (layers, embed),
              f"{STACK}.post_attention_layernorm.weight": (layers, embed)}
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": embed,
              "intermediate_size": mlp, "num_attention_heads": heads, "num_key_value_heads": heads, "head_dim": hd,
              "num_hidden_layers": layers, "vocab_size": vocab, "rms_norm_eps": 1e-5, "torch_dtype": "float32"}
    return shapes, config


def spec_of(step_url: str, name: str) -> dict:
    bucket, key = step_url[len("s3://"):].split("/", 1)
    base = {"driver": "s3", "bucket": bucket, "path": key.rstrip("/") + "/", "aws_credentials": {"type": "environment"},
            "endpoint": os.environ["AWS_ENDPOINT_URL"], "aws_region": os.environ["AWS_REGION"]}
    return {"driver": "zarr3", "kvstore": {"driver": "ocdbt", "base": base, "path": name.replace(".", "/")}}


def say(line: str) -> None:
    print(f"bench levanter: {line}", file=sys.stderr, flush=True)


def jax_job():
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize()
    return jax


def training_shardings(jax, shapes: dict) -> dict:
    """Levanter's FSDP-style layout: each leaf's largest dimension the device count divides, over all devices."""
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()), ("data",))
    out = {}
    for name, shape in shapes.items():
        dims = [d for d in range(len(shape)) if shape[d] % mesh.size == 0]
        spec = [None] * len(shape)
        if dims:
            spec[max(dims, key=lambda d: shape[d])] = "data"
        out[name] = NamedSharding(mesh, P(*spec))
    return out


def save_role(step_url: str, mib: int) -> None:
    jax = jax_job()
    import numpy as np
    from jax.experimental.array_serialization import serialization as jser

    shapes, _ = llama_shapes(mib)
    shardings = training_shardings(jax, shapes)
    arrays, specs = [], []
    for i, (name, shape) in enumerate(shapes.items()):
        def fill(index, shape=shape, seed=i):
            box = tuple(range(*s.indices(n))[0] if s.indices(n)[1] > s.indices(n)[0] else 0
                        for s, n in zip(index, shape))
            local = tuple(len(range(*s.indices(n))) for s, n in zip(index, shape))
            return np.random.default_rng([seed, *box]).standard_normal(local).astype(np.float32)
        arrays.append(jax.make_array_from_callback(shape, shardings[name], fill))
        specs.append(spec_of(step_url, f"model.{name}"))
    def commit() -> None:  # Levanter's metadata.json, once every array is in
        if jax.process_index() == 0:
            import tensorstore as ts

            base = spec_of(step_url, "x")["kvstore"]["base"]
            ts.KvStore.open(base).result().write("metadata.json", json.dumps({"step": 1000})).result()

    manager = jser.GlobalAsyncCheckpointManager()
    manager.serialize(arrays, specs, on_commit_callback=commit)
    manager.wait_until_finished()


def hf_tensors(model: dict, config: dict):
    """(name, numpy array) of the levanter-llama map's outputs, in its order of layers."""
    embed = config["hidden_size"]
    yield "model.embed_tokens.weight", model["embeddings.token_embeddings.weight"]
    for layer in range(config["num_hidden_layers"]):
        for name, value in model.items():
            if name.startswith(STACK):
                module = name[len(STACK) + 1:]
                w = value[layer]
                w = w.reshape(embed, -1) if module.startswith("self_attn.o_proj") else (
                    w.reshape(-1, embed) if w.ndim > 2 else w)
                yield f"model.layers.{layer}.{module}", w
    yield "model.norm.weight", model["transformer.norm.weight"]
    yield "lm_head.weight", model["lm_head.weight"]


def levanter_role(step_url: str, out_url: str, mib: int, max_shard: int, scratch: str) -> None:
    jax = jax_job()
    import boto3
    import numpy as np
    import safetensors.numpy
    from jax.experimental import multihost_utils
    from jax.experimental.array_serialization import serialization as jser

    shapes, config = llama_shapes(mib)
    shardings = training_shardings(jax, shapes)
    names = list(shapes)
    restored = jser.GlobalAsyncCheckpointManager().deserialize([shardings[n] for n in names],
                                                              [spec_of(step_url, f"model.{n}") for n in names])
    model = {n: np.asarray(multihost_utils.process_allgather(x, tiled=True)) for n, x in zip(names, restored)}
    if jax.process_index() != 0:
        return
    files, current, size = [], {}, 0
    for name, value in hf_tensors(model, config):
        if current and size + value.nbytes > max_shard:
            files.append(current)
            current, size = {}, 0
        current[name] = np.ascontiguousarray(value)
        size += value.nbytes
    files.append(current)
    folder = pathlib.Path(scratch)
    folder.mkdir(parents=True, exist_ok=True)
    bucket, prefix = out_url[len("s3://"):].split("/", 1)
    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=os.environ["AWS_REGION"])
    index = {}
    for i, tensors in enumerate(files):
        name = f"model-{i + 1:05d}-of-{len(files):05d}.safetensors"
        safetensors.numpy.save_file(tensors, str(folder / name), metadata={"format": "pt"})
        client.upload_file(str(folder / name), bucket, f"{prefix}/{name}")
        index.update({t: name for t in tensors})
    client.put_object(Bucket=bucket, Key=f"{prefix}/model.safetensors.index.json",
                      Body=json.dumps({"metadata": {}, "weight_map": index}).encode())
    client.put_object(Bucket=bucket, Key=f"{prefix}/config.json", Body=json.dumps(config).encode())


def timed(argv: list[str], processes: int, env: dict, scratch: pathlib.Path, run: int) -> tuple[float, list[int]]:
    stamps = scratch / f"stamps-{run}"
    stamps.mkdir()
    start = time.perf_counter()
    done = subprocess.run(common.under_mpirun(processes, stamps, argv), env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench levanter: {' '.join(argv[:4])} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return seconds, common.read_stamps(stamps, processes)[1]


def tensors_of(client, url: str) -> dict:
    import safetensors.numpy

    bucket, prefix = url[len("s3://"):].split("/", 1)
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for o in page.get("Contents", []):
            if o["Key"].endswith(".safetensors"):
                out.update(safetensors.numpy.load(client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()))
    return out


def bench_main(args) -> int:
    import boto3

    servers = common.store_servers()
    reshard = common.find_reshard(args.reshard)
    shapes, config = llama_shapes(args.mib)
    import numpy as np

    model_bytes = sum(int(np.prod(s)) * 4 for s in shapes.values())
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp, \
            servers.running_servers(s3_buckets=[BUCKET], only="s3", workdir=args.workdir) as state:
        scratch = pathlib.Path(tmp)
        s3 = state["s3"]
        env = common.mpi_env()
        env.update(AWS_ACCESS_KEY_ID=s3["access_key"], AWS_SECRET_ACCESS_KEY=s3["secret_key"], AWS_REGION=s3["region"],
                   AWS_ENDPOINT_URL=s3["endpoint"], AWS_EC2_METADATA_DISABLED="true",
                   RESHARD_PYTHON=sys.executable)
        for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "XLA_FLAGS", "JAX_PLATFORMS", "JAX_ENABLE_X64"):
            env.pop(key, None)
        step = f"s3://{BUCKET}/run/step-1000"
        (scratch / "config.json").write_text(json.dumps(config))
        script = str(pathlib.Path(__file__).resolve())
        say(f"saving a {model_bytes / MIB:.0f} MiB state from {args.processes} JAX processes")
        timed([sys.executable, script, "_save", step, str(args.mib)], args.processes, env, scratch, 0)
        max_shard = args.max_shard_size or max(model_bytes // args.processes, 1)
        runs = {"ours": lambda r: [reshard, "export", step, f"s3://{BUCKET}/ours-{r}", "--map", "levanter-llama",
                                   "--hf-config", str(scratch / "config.json"), "--max-shard-size", str(max_shard)],
                "levanter": lambda r: [sys.executable, script, "_levanter", step, f"s3://{BUCKET}/levanter-{r}",
                                       str(args.mib), str(max_shard), str(scratch / f"levanter-files-{r}")]}
        best: dict[str, tuple[float, list[int]]] = {}
        n = 1
        for r in range(args.repeat):
            for name in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
                say(f"round {r}: {name}")
                seconds, rss = timed(runs[name](r), args.processes, env, scratch, n)
                n += 1
                if name not in best or seconds < best[name][0]:
                    best[name] = (seconds, rss if name not in best else [max(a, b) for a, b in zip(rss, best[name][1])])
        client = boto3.client("s3", endpoint_url=s3["endpoint"], region_name=s3["region"],
                              aws_access_key_id=s3["access_key"], aws_secret_access_key=s3["secret_key"])
        ours, theirs = tensors_of(client, f"s3://{BUCKET}/ours-0"), tensors_of(client, f"s3://{BUCKET}/levanter-0")
        same = sorted(ours) == sorted(theirs) and all(ours[k].tobytes() == theirs[k].tobytes() for k in ours)
    (t_ours, rss_ours), (t_lev, rss_lev) = best["ours"], best["levanter"]
    report = {"model_bytes": model_bytes, "processes": args.processes, "same_tensors": same,
              "ours": {"seconds": t_ours, "peak_rss": rss_ours}, "levanter": {"seconds": t_lev, "peak_rss": rss_lev},
              "speedup": t_lev / t_ours, "rss_ratio": max(rss_lev) / max(rss_ours)}
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print("== bench levanter ==")
        print(f"  model {model_bytes / MIB:.0f} MiB, {args.processes} processes, same tensors: {same}")
        print(f"  ours (mpirun reshard export)   {t_ours:8.2f} s   peak RSS/process MiB "
              f"{[round(x / MIB) for x in rss_ours]}")
        print(f"  Levanter way (allgather + p0)  {t_lev:8.2f} s   peak RSS/process MiB "
              f"{[round(x / MIB) for x in rss_lev]}")
        print(f"  speedup {report['speedup']:.2f}x, largest peak RSS ratio {report['rss_ratio']:.2f}x")
    return 0 if same else 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_save"]:
        save_role(argv[1], int(argv[2]))
        return 0
    if argv[:1] == ["_levanter"]:
        levanter_role(argv[1], argv[2], int(argv[3]), int(argv[4]), argv[5])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=1024, help="the state's size")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=1, help="rounds; each run's best counts")
    parser.add_argument("--max-shard-size", type=int, help="largest weight file, bytes (default: a share per process)")
    parser.add_argument("--reshard", help="the reshard binary (default: $RESHARD_BIN, beside python, PATH)")
    parser.add_argument("--workdir", help="folder for the scratch files and the server's data (default: temp)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    return bench_main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
