"""`reshard bench storage`: a checkpoint exported to S3 from every process at once, beside the
ways it is done without reshard, all measured in the same run against a real S3 server on
this machine (SeaweedFS, started and stopped here by tests/storage/servers/store_servers.py).

  .venv/bin/python python/bench/bench_storage.py [--mib 1024] [--tensors 300] [--processes 4]
                                                 [--repeat 3] [--json] [--reshard BIN]

The model: --tensors tensors of a Llama-shaped model (f16 matrices, f32 norms, names without
dots, about --mib MiB), converted once into a checkpoint laid out over --processes devices
(`reshard convert model.safetensors CKPT --mesh data=N --best-effort data`) and exported with an
identity map. Every weight file is at most --max-shard-size (default: an even share of the
model plus its largest tensor, which makes one file per process, the files boto3 (a) can
spread best over its processes). What is timed, each as --processes processes:

  ours  `mpirun -np N reshard export CKPT s3://BUCKET/PREFIX --part-size P --parts-in-flight F`:
        each process reads its share of the checkpoint and uploads the parts it produced.
  (a)   boto3: the files the local export (c) wrote, uploaded by N Python processes, each its
        files (largest first to the least loaded) through one TransferManager with
        TransferConfig(multipart_chunksize=P, multipart_threshold=P, max_concurrency=F):
        N x F parts in flight, as ours. boto3's defaults otherwise (SHA-256 payload signing
        over http, CRC32 checksums).
  (b)   the Levanter way, emulated without JAX: Levanter's HF export gathers the whole model on
        every process (process_allgather), then process 0 alone writes the safetensors files
        (save_pretrained) and uploads the folder. Here N Python processes each read every chunk
        of the checkpoint into whole numpy arrays (the memory and copying a gather costs; the
        network all-gather itself is not emulated, reading page-cached files is cheaper), then
        process 0 writes the same files the export writes with safetensors.numpy.save_file and
        uploads them with boto3 at N x F threads (more than one process of (a) has).
  (c)   the same export to a local folder (`reshard export CKPT DIR`, fsynced).
  import  `mpirun -np N reshard import s3://... CKPT2 --map MAP --mesh data=N` (or, failing that,
        `reshard convert s3://... CKPT2 --mesh data=N`) of the local export uploaded once, beside
        boto3 downloading the same files to a local folder in N processes (each its files, as
        (a) uploads them); where this reshard cannot read from stores yet, the report says so.

Times: ours is the export's own time, as `reshard export --json` reports it (process 0's,
which ends once every process's parts are in and the index is written); a baseline's runs
from one start signal to its processes (after imports and client setup) to the last one's
end. The import is timed from the first of its processes starting to the last one's exit (so
it carries process start and MPI setup that the download does not). Every run starts after
sync(), writes a prefix (or folder) of its own, and its output is removed untimed; the runs
take turns in rotating order (round r starts at run r), best of --repeat.

Peak RSS: the kernel's high-water mark of each process's resident set over its whole life
(process start, MPI and imports included), the largest over the rounds: for reshard its
ru_maxrss, read with wait4 by a small wrapper that mpirun starts in its place; for a Python
worker its own VmHWM at the end of its work. Ours is set beside the bound the export sets
itself: blocks in flight x block size plus parts in flight x part size (ExportOptions'
2 x 64 MiB, and F x P).

The first S3 export's objects are downloaded and compared byte for byte with the local
export's files (untimed). --json prints one JSON document (`reshard bench --json`'s shape,
with the raw measures under "details"); the smaller sizes are for a quick check
(python/tests/test_bench_storage.py).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
MIB = 1 << 20
GIB = 1 << 30
BUCKET = "reshard-bench"
# ExportOptions' defaults (include/reshard/pipelines/export_model.h): what bounds an export's memory.
BLOCK_BYTES = 64 * MIB
BLOCKS_IN_FLIGHT = 2


# ---------------------------------------------------------------- the model


def model_shapes(mib: int, tensors: int) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, numpy dtype) of a Llama-shaped model of about `mib` MiB in about `tensors` tensors."""
    layers = max(1, (tensors - 3) // 9)

    def shapes(hidden: int) -> list[tuple[str, tuple[int, ...], str]]:
        ff, vocab = (hidden * 11 // 4 + 31) // 32 * 32, 8 * hidden
        out = [("embed_tokens_weight", (vocab, hidden), "float16")]
        for layer in range(layers):
            p = f"layers_{layer:03d}_"
            out.append((p + "input_layernorm_weight", (hidden,), "float32"))
            out += [(p + f"self_attn_{n}_proj_weight", (hidden, hidden), "float16") for n in "qkvo"]
            out.append((p + "post_attention_layernorm_weight", (hidden,), "float32"))
            out += [(p + f"mlp_{n}_proj_weight", (ff, hidden), "float16") for n in ("gate", "up")]
            out.append((p + "mlp_down_proj_weight", (hidden, ff), "float16"))
        out += [("norm_weight", (hidden,), "float32"), ("lm_head_weight", (vocab, hidden), "float16")]
        return out

    hidden = 32
    while total_bytes(shapes(hidden + 32)) <= mib * MIB:
        hidden += 32
    return shapes(hidden)


def tensor_bytes(shape: tuple[int, ...], dtype: str) -> int:
    n = 2 if dtype == "float16" else 4
    for d in shape:
        n *= d
    return n


def total_bytes(shapes) -> int:
    return sum(tensor_bytes(s, d) for _, s, d in shapes)


def write_model(path: pathlib.Path, shapes) -> None:
    import numpy as np
    import safetensors.numpy

    gen = np.random.default_rng(0)
    tensors = {name: gen.integers(0, 1 << 16, size=tensor_bytes(shape, dtype) // 2, dtype=np.uint16)
               .view(dtype).reshape(shape) for name, shape, dtype in shapes}
    safetensors.numpy.save_file(tensors, str(path))


# ---------------------------------------------------------------- processes


def mpi_env() -> dict[str, str]:
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def run_checked(argv: list[str], env: dict[str, str] | None = None, what: str = "") -> str:
    done = subprocess.run(argv, capture_output=True, text=True, env=env or mpi_env())
    if done.returncode != 0:
        raise SystemExit(f"bench storage: {what or argv[0]} failed (exit {done.returncode}):\n"
                         f"{' '.join(argv)}\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
    return done.stdout


def under_mpirun(processes: int, stamps: pathlib.Path, argv: list[str]) -> list[str]:
    """`argv` as an N-process MPI job, each process under this script's `_rank` wrapper, which
    writes its peak RSS and start/end times to `stamps`/rank-R.json."""
    return ["mpirun", "-np", str(processes), "--oversubscribe", "--bind-to", "none",
            sys.executable, str(pathlib.Path(__file__).resolve()), "_rank", str(stamps), "--", *argv]


def rank_wrapper(stamps: str, argv: list[str]) -> int:
    """Runs `argv` (an MPI process: it finds its job from the environment mpirun gave this one)
    and records its ru_maxrss and when it ran. The kernel starts a child's ru_maxrss from its
    parent's peak (the memory it shares until exec), so this wrapper stays small: a few MiB of
    Python, below any export's own peak."""
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
    start = time.monotonic()
    child = subprocess.Popen(argv)
    _, status, usage = os.wait4(child.pid, 0)
    end = time.monotonic()
    child.returncode = os.waitstatus_to_exitcode(status)
    record = {"rank": rank, "start": start, "end": end, "max_rss": usage.ru_maxrss * 1024}
    pathlib.Path(stamps, f"rank-{rank}.json").write_text(json.dumps(record))
    return child.returncode


def read_stamps(stamps: pathlib.Path, processes: int) -> tuple[float, list[int]]:
    """The ranks' wall time (first start to last end) and each one's peak RSS."""
    records = sorted((json.loads(p.read_text()) for p in stamps.glob("rank-*.json")), key=lambda r: r["rank"])
    if len(records) != processes:
        raise SystemExit(f"bench storage: {len(records)} of {processes} processes reported")
    return (max(r["end"] for r in records) - min(r["start"] for r in records), [r["max_rss"] for r in records])


class Workers:
    """N Python processes of this script's `_worker` mode, started and set up, then told to go at
    once; the time runs from that signal until the last one says it is done."""

    def __init__(self, roles: list[dict]) -> None:
        script = str(pathlib.Path(__file__).resolve())
        self.procs = [subprocess.Popen([sys.executable, script, "_worker", json.dumps(role)], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True) for role in roles]

    def run(self) -> tuple[float, list[dict], list[int]]:
        try:
            for p in self.procs:
                if p.stdout.readline().strip() != "ready":
                    raise SystemExit("bench storage: a worker failed to start")
            start = time.perf_counter()
            for p in self.procs:
                p.stdin.write("go\n")
                p.stdin.flush()
            results = []
            for p in self.procs:
                line = p.stdout.readline()
                if not line:
                    raise SystemExit("bench storage: a worker failed")
                results.append(json.loads(line))
            seconds = time.perf_counter() - start
            for p in self.procs:
                p.stdin.close()
                if p.wait() != 0:
                    raise SystemExit(f"bench storage: a worker exited with {p.returncode}")
            return seconds, results, [r["max_rss"] for r in results]
        finally:
            for p in self.procs:
                if p.returncode is None:
                    p.kill()
                    p.wait()


# ---------------------------------------------------------------- the workers (baselines)


def s3_client(role: dict, threads: int):
    import boto3
    import botocore.config

    return boto3.client("s3", endpoint_url=role["endpoint"], region_name=role["region"],
                        aws_access_key_id=role["access_key"], aws_secret_access_key=role["secret_key"],
                        config=botocore.config.Config(max_pool_connections=max(10, threads + 2)))


def transfer_manager(client, role: dict, threads: int):
    from boto3.s3.transfer import TransferConfig, create_transfer_manager

    config = TransferConfig(multipart_threshold=role["part_bytes"], multipart_chunksize=role["part_bytes"],
                            max_concurrency=threads, use_threads=True)
    return create_transfer_manager(client, config)


def upload_files(client, role: dict, folder: str, names: list[str], threads: int) -> int:
    with transfer_manager(client, role, threads) as manager:
        futures = [manager.upload(os.path.join(folder, n), role["bucket"], f"{role['prefix']}/{n}") for n in names]
        for f in futures:
            f.result()
    return sum(os.path.getsize(os.path.join(folder, n)) for n in names)


def gather_checkpoint(checkpoint: str) -> dict:
    """Every tensor of a reshard checkpoint, whole, in this process: what each process holds
    after a process_allgather of the model."""
    import numpy as np

    manifest = json.loads(pathlib.Path(checkpoint, "manifest.json").read_text())["manifest"]
    dtypes = {"F16": np.float16, "F32": np.float32, "BF16": np.uint16, "F64": np.float64}
    files, out = {}, {}
    try:
        for tensor in manifest["tensors"]:
            dtype = np.dtype(dtypes[tensor["dtype"]])
            whole = np.empty(tensor["shape"], dtype)
            seen = set()
            for chunk in tensor["chunks"]:
                box = tuple(tuple(b) for b in chunk["box"])
                if box in seen:  # a replica
                    continue
                seen.add(box)
                if chunk["file"] not in files:
                    files[chunk["file"]] = os.open(os.path.join(checkpoint, chunk["file"]), os.O_RDONLY)
                data = os.pread(files[chunk["file"]], chunk["length"], chunk["offset"])
                shape = [hi - lo for lo, hi in box]
                whole[tuple(slice(lo, hi) for lo, hi in box)] = np.frombuffer(data, dtype).reshape(shape)
            out[tensor["name"]] = whole
    finally:
        for fd in files.values():
            os.close(fd)
    return out


def levanter_way(role: dict, client) -> int:
    """The whole model here; process 0 writes the export's files with safetensors and uploads them."""
    import safetensors.numpy

    model = gather_checkpoint(role["checkpoint"])
    if role["rank"] != 0:
        return 0
    folder = role["scratch"]
    os.makedirs(folder)
    index = json.loads(pathlib.Path(role["reference"], role["index"]).read_text())
    by_file: dict[str, list[str]] = {}
    for name, file in index["weight_map"].items():
        by_file.setdefault(file, []).append(name)
    for file, names in by_file.items():
        safetensors.numpy.save_file({n: model[n] for n in names}, os.path.join(folder, file),
                                    metadata={"format": "pt"})
    shutil.copy(os.path.join(role["reference"], role["index"]), folder)
    return upload_files(client, role, folder, sorted(by_file) + [role["index"]], role["threads"])


def download_files(client, role: dict) -> int:
    with transfer_manager(client, role, role["threads"]) as manager:
        futures = [manager.download(role["bucket"], f"{role['source']}/{n}", os.path.join(role["scratch"], n))
                   for n in role["files"]]
        for f in futures:
            f.result()
    return sum(os.path.getsize(os.path.join(role["scratch"], n)) for n in role["files"])


def worker(role: dict) -> None:
    client = s3_client(role, role["threads"])
    if role["kind"] == "levanter":
        import numpy  # noqa: F401  (imported before the start, as the uploads' modules are)
        import safetensors.numpy  # noqa: F401
    transfer_manager(client, role, role["threads"]).shutdown()  # its imports, before the start
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    if role["kind"] == "upload":
        done = upload_files(client, role, role["reference"], role["files"], role["threads"])
    elif role["kind"] == "download":
        os.makedirs(role["scratch"], exist_ok=True)
        done = download_files(client, role)
    else:
        done = levanter_way(role, client)
    print(json.dumps({"bytes": done, "max_rss": own_peak_rss()}), flush=True)


def own_peak_rss() -> int:
    """This process's VmHWM, in bytes: its own peak since exec. (Its ru_maxrss, as its parent
    reads it, would start from the parent's peak: a child shares or copies the parent's memory
    until exec, and the kernel keeps that high-water mark.)"""
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


# ---------------------------------------------------------------- the bench


def share_files(sizes: dict[str, int], processes: int) -> list[list[str]]:
    """Files to processes, largest first to the least loaded."""
    shares: list[list[str]] = [[] for _ in range(processes)]
    load = [0] * processes
    for name in sorted(sizes, key=lambda n: (-sizes[n], n)):
        p = load.index(min(load))
        shares[p].append(name)
        load[p] += sizes[name]
    return shares


def gib_s(nbytes: int, seconds: float) -> float:
    return nbytes / GIB / seconds if seconds > 0 else 0.0


def figure(name, unit, value, baseline_name, baseline, ratio, target_ratio=None, target_value=None,
           higher_is_better=True) -> dict:
    met = (target_ratio is None or ratio >= target_ratio) and (
        target_value is None or (value >= target_value if higher_is_better else value <= target_value))
    return {"name": name, "unit": unit, "value": value, "baseline_name": baseline_name, "baseline": baseline,
            "ratio": ratio, "met": met, "target_ratio": target_ratio, "target_value": target_value,
            "higher_is_better": higher_is_better}


def print_report(figures: list[dict]) -> None:
    """As `reshard bench` prints its reports (src/cli/bench_command.cpp)."""
    print("== bench storage ==")
    for f in figures:
        target = f"  target ratio >= {f['target_ratio']:.2f}" if f["target_ratio"] is not None else ""
        if f["target_value"] is not None:
            target += f"  target {'>=' if f['higher_is_better'] else '<='} {f['target_value']:.3g} {f['unit']}"
        print(f"  {f['name']:<44} {f['value']:>10.3f} {f['unit']:<6} | {f['baseline_name']:<34} "
              f"{f['baseline']:>10.3f} | ratio {f['ratio']:6.3f}{target}{'' if f['met'] else '  (NOT MET)'}")
    sys.stdout.flush()


def say(line: str) -> None:
    print(f"bench storage: {line}", file=sys.stderr, flush=True)


def find_reshard(given: str | None) -> str:
    for candidate in (given, os.environ.get("RESHARD_BIN"), os.path.join(os.path.dirname(sys.executable), "reshard"),
                      shutil.which("reshard")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit("bench storage: no reshard binary: pass --reshard, set RESHARD_BIN, or put reshard on PATH")


def store_servers():
    sys.path.insert(0, str(REPO / "tests" / "storage" / "servers"))
    import store_servers as servers

    return servers


class Bench:
    def __init__(self, args, reshard: str, scratch: pathlib.Path, s3: dict) -> None:
        import boto3

        self.args, self.reshard, self.scratch, self.s3 = args, reshard, scratch, s3
        self.n = args.processes
        self.part_bytes = args.part_mib * MIB
        self.client = boto3.client("s3", endpoint_url=s3["endpoint"], region_name=s3["region"],
                                   aws_access_key_id=s3["access_key"], aws_secret_access_key=s3["secret_key"])
        self.env = mpi_env()
        self.env.update(AWS_ACCESS_KEY_ID=s3["access_key"], AWS_SECRET_ACCESS_KEY=s3["secret_key"],
                        AWS_REGION=s3["region"], AWS_ENDPOINT_URL=s3["endpoint"])
        for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
            self.env.pop(key, None)
        self.runs = 0

    # -- setup

    def prepare(self) -> None:
        args = self.args
        shapes = model_shapes(args.mib, args.tensors)
        self.bytes = total_bytes(shapes)
        self.tensors = len(shapes)
        largest = max(tensor_bytes(s, d) for _, s, d in shapes)
        self.max_shard = args.max_shard_size or str(-(-self.bytes // self.n) + largest)
        say(f"model: {self.tensors} tensors, {self.bytes / MIB:.1f} MiB; converting to a checkpoint over "
            f"{self.n} devices")
        model = self.scratch / "model.safetensors"
        write_model(model, shapes)
        self.checkpoint = self.scratch / "ckpt"
        run_checked([self.reshard, "convert", str(model), str(self.checkpoint), "--mesh", f"data={self.n}",
                     "--best-effort", "data"], what="reshard convert")
        model.unlink()
        self.map = self.scratch / "identity.json"
        self.map.write_text(json.dumps({"rules": [{"from": "{name}", "to": "{name}"}]}))
        # The local export (c), untimed: the files (a) uploads and the upload is checked against.
        self.reference = self.scratch / "reference"
        result = self.export(str(self.reference), self.scratch / "stamps-reference")
        self.files = {p.name: p.stat().st_size for p in sorted(self.reference.iterdir()) if p.is_file()}
        self.index = next((n for n in self.files if n.endswith(".index.json")), None)
        self.weight_files = sorted(n for n in self.files if n.endswith(".safetensors"))
        sizes = ", ".join(f"{self.files[n] / MIB:.0f}" for n in self.weight_files)
        say(f"export: {result['files']} weight files ({sizes} MiB), {len(self.files)} files in all")

    def export_argv(self, out: str) -> list[str]:
        return [self.reshard, "export", str(self.checkpoint), out, "--map", str(self.map), "--max-shard-size",
                self.max_shard, "--part-size", f"{self.args.part_mib}MiB", "--parts-in-flight",
                str(self.args.parts_in_flight), "--json"]

    def export(self, out: str, stamps: pathlib.Path) -> dict:
        stamps.mkdir()
        stdout = run_checked(under_mpirun(self.n, stamps, self.export_argv(out)), self.env, "reshard export")
        result = json.loads(stdout[stdout.index("{"):])
        if len(result["processes"]) != self.n:
            raise SystemExit(f"bench storage: reshard export ran as {len(result['processes'])} process(es), not "
                             f"{self.n}: is {self.reshard} built with MPI?")
        result["wall"], result["max_rss"] = read_stamps(stamps, self.n)
        shutil.rmtree(stamps)
        return result

    def role(self, kind: str, prefix: str, **extra) -> dict:
        return {"kind": kind, "endpoint": self.s3["endpoint"], "region": self.s3["region"],
                "access_key": self.s3["access_key"], "secret_key": self.s3["secret_key"], "bucket": BUCKET,
                "prefix": prefix, "part_bytes": self.part_bytes, "threads": self.args.parts_in_flight,
                "reference": str(self.reference), **extra}

    def fresh(self, label: str) -> str:
        self.runs += 1
        return f"{label}-{self.runs}"

    def remove_prefix(self, prefix: str) -> None:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/")
        for page in pages:
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                self.client.delete_objects(Bucket=BUCKET, Delete={"Objects": keys})

    # -- the runs: each returns {"seconds", "max_rss": per process, "bytes": per process}

    def ours(self) -> dict:
        prefix = self.fresh("ours")
        os.sync()
        result = self.export(f"s3://{BUCKET}/{prefix}", self.scratch / f"stamps-{prefix}")
        if not hasattr(self, "verified"):
            self.verified = self.verify(prefix)
        self.remove_prefix(prefix)
        return {"seconds": result["seconds"], "wall": result["wall"], "max_rss": result["max_rss"],
                "bytes": [p["bytes_written"] for p in result["processes"]]}

    def local(self) -> dict:
        out = self.scratch / self.fresh("local")
        os.sync()
        result = self.export(str(out), self.scratch / f"stamps-{out.name}")
        shutil.rmtree(out)
        return {"seconds": result["seconds"], "wall": result["wall"], "max_rss": result["max_rss"],
                "bytes": [p["bytes_written"] for p in result["processes"]]}

    def boto3_upload(self) -> dict:
        prefix = self.fresh("boto3")
        shares = share_files({n: self.files[n] for n in self.weight_files}, self.n)
        if self.index:
            shares[0].append(self.index)
        workers = Workers([self.role("upload", prefix, files=share) for share in shares])
        os.sync()
        seconds, results, peaks = workers.run()
        self.remove_prefix(prefix)
        return {"seconds": seconds, "max_rss": peaks, "bytes": [r["bytes"] for r in results]}

    def levanter(self) -> dict:
        prefix = self.fresh("levanter")
        folder = self.scratch / prefix
        roles = [self.role("levanter", prefix, rank=r, checkpoint=str(self.checkpoint), index=self.index,
                           scratch=str(folder)) for r in range(self.n)]
        for role in roles:
            role["threads"] = self.n * self.args.parts_in_flight  # process 0 alone uploads: all the threads
        workers = Workers(roles)
        os.sync()
        seconds, results, peaks = workers.run()
        shutil.rmtree(folder, ignore_errors=True)
        self.remove_prefix(prefix)
        return {"seconds": seconds, "max_rss": peaks, "bytes": [r["bytes"] for r in results]}

    def source_for_import(self) -> str:
        """The local export, uploaded once (untimed) for the imports and downloads to read."""
        source = "source"
        for name in self.files:
            self.client.upload_file(str(self.reference / name), BUCKET, f"{source}/{name}")
        return source

    def import_argv(self, out: pathlib.Path, how: str) -> list[str]:
        src = f"s3://{BUCKET}/{self.source}"
        layout = ["--mesh", f"data={self.n}", "--best-effort", "data"]
        if how == "import":
            return [self.reshard, "import", src, str(out), "--map", str(self.map), *layout]
        return [self.reshard, "convert", src, str(out), *layout]

    def probe_import(self) -> str | None:
        """`reshard import` (or convert) from s3://, once: None when it works, else why not."""
        self.source = self.source_for_import()
        reasons = []
        for how in ("import", "convert"):
            out, stamps = self.scratch / f"probe-{how}", self.scratch / f"stamps-probe-{how}"
            stamps.mkdir()
            done = subprocess.run(under_mpirun(self.n, stamps, self.import_argv(out, how)), capture_output=True,
                                  text=True, env=self.env)
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(stamps, ignore_errors=True)
            if done.returncode == 0:
                self.import_how = how
                return None
            lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()
                     and not line.startswith(("---", "Primary job", "mpirun", "process", "--"))]
            reasons.append(f"reshard {how}: {lines[0] if lines else f'exit {done.returncode}'}")
        return "; ".join(reasons)

    def imported(self) -> dict:
        out = self.scratch / self.fresh("import")
        stamps = self.scratch / f"stamps-{out.name}"
        stamps.mkdir()
        os.sync()
        said = run_checked(under_mpirun(self.n, stamps, self.import_argv(out, self.import_how)), self.env,
                           f"reshard {self.import_how}")
        wall, peaks = read_stamps(stamps, self.n)
        shutil.rmtree(stamps)
        shutil.rmtree(out)
        # Only process 0's bytes read are printed ("process 0 of N read B bytes of ...").
        read = re.search(r"process 0 of \d+ read (\d+) bytes", said)
        return {"seconds": wall, "max_rss": peaks, "bytes": [int(read.group(1)) if read else None]}

    def boto3_download(self) -> dict:
        folder = self.scratch / self.fresh("download")
        shares = share_files(self.files, self.n)
        workers = Workers([self.role("download", "", source=self.source, files=share, scratch=str(folder))
                           for share in shares])
        os.sync()
        seconds, results, peaks = workers.run()
        shutil.rmtree(folder)
        return {"seconds": seconds, "max_rss": peaks, "bytes": [r["bytes"] for r in results]}

    def verify(self, prefix: str) -> dict:
        """Each object of an S3 export against the local export's file of the same name: names and bytes."""
        objects = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/"):
            for o in page.get("Contents", []):
                body = self.client.get_object(Bucket=BUCKET, Key=o["Key"])["Body"]
                digest = hashlib.sha256()
                for chunk in iter(lambda: body.read(8 * MIB), b""):
                    digest.update(chunk)
                objects[o["Key"][len(prefix) + 1:]] = digest.hexdigest()
        local = {}
        for name in self.files:
            digest = hashlib.sha256()
            with open(self.reference / name, "rb") as f:
                for chunk in iter(lambda: f.read(8 * MIB), b""):
                    digest.update(chunk)
            local[name] = digest.hexdigest()
        equal = objects == local
        say(f"the S3 export's {len(objects)} objects {'equal' if equal else 'DIFFER FROM'} the local export's "
            f"{len(local)} files")
        if not equal:
            raise SystemExit(f"bench storage: uploaded objects {sorted(objects)} differ from the local export "
                             f"{sorted(local)}")
        return {"equal": equal, "objects": objects, "local": local}


def rotate(runs: dict, rounds: int) -> dict:
    """Round r runs them from run r on, in turn; each run's best time and its processes' largest peaks."""
    names = list(runs)
    best: dict[str, dict] = {}
    for r in range(rounds):
        for i in range(len(names)):
            name = names[(r + i) % len(names)]
            result = runs[name]()
            say(f"round {r + 1}: {name}: {result['seconds']:.3f} s, peak RSS "
                f"{', '.join(f'{m / MIB:.0f}' for m in result['max_rss'])} MiB")
            if name not in best:
                best[name] = dict(result)
            else:
                kept = best[name]
                if result["seconds"] < kept["seconds"]:
                    kept.update(seconds=result["seconds"], bytes=result["bytes"], wall=result.get("wall"))
                kept["max_rss"] = [max(a, b) for a, b in zip(kept["max_rss"], result["max_rss"])]
    return best


def figures_of(bench: Bench, best: dict, import_note: str | None) -> list[dict]:
    n, size = bench.n, bench.bytes
    what = f"{size / GIB:.2f} GiB, {n} processes"
    ours = gib_s(size, best["ours"]["seconds"])
    threads = f"{n}x{bench.args.parts_in_flight}"
    out = [
        figure(f"export to s3 ({what})", "GiB/s", ours, f"(a) boto3 upload of its files, {threads}",
               gib_s(size, best["boto3"]["seconds"]), best["boto3"]["seconds"] / best["ours"]["seconds"], 0.9),
        figure(f"export to s3 ({what})", "GiB/s", ours, "(b) Levanter way (gather, p0 uploads)",
               gib_s(size, best["levanter"]["seconds"]), best["levanter"]["seconds"] / best["ours"]["seconds"], 2.0),
        figure(f"export to s3 ({what})", "GiB/s", ours, "(c) export to a local folder",
               gib_s(size, best["local"]["seconds"]), best["local"]["seconds"] / best["ours"]["seconds"]),
    ]
    if import_note is None:
        out.append(figure(f"reshard {bench.import_how} from s3, process start incl.", "GiB/s",
                          gib_s(size, best["import"]["seconds"]),
                          f"boto3 download of its files, {threads}", gib_s(size, best["download"]["seconds"]),
                          best["download"]["seconds"] / best["import"]["seconds"]))
    bound = BLOCKS_IN_FLIGHT * BLOCK_BYTES + bench.args.parts_in_flight * bench.part_bytes
    bound_name = f"bound: {BLOCKS_IN_FLIGHT} blocks + {bench.args.parts_in_flight} parts, 64 MiB"
    if bench.part_bytes != 64 * MIB:
        bound_name = f"bound: {BLOCKS_IN_FLIGHT}x64 MiB + {bench.args.parts_in_flight}x{bench.args.part_mib} MiB"
    for rank, peak in enumerate(best["ours"]["max_rss"]):
        out.append(figure(f"export to s3: peak RSS, process {rank}", "MiB", peak / MIB, bound_name, bound / MIB,
                          bound / peak, target_value=bound / MIB, higher_is_better=False))
    mine = max(best["ours"]["max_rss"])
    for label, key in (("(a) boto3 upload", "boto3"), ("(b) Levanter way", "levanter")):
        theirs = max(best[key]["max_rss"])
        out.append(figure("export to s3: peak RSS, largest process", "MiB", mine / MIB,
                          f"{label}, largest process", theirs / MIB, theirs / mine, higher_is_better=False))
    for rank, sent in enumerate(best["ours"]["bytes"]):
        theirs = best["boto3"]["bytes"][rank]
        out.append(figure(f"export to s3: uploaded by process {rank}", "MiB", sent / MIB,
                          f"(a) boto3: uploaded by process {rank}", theirs / MIB, theirs / sent if sent else 0.0,
                          higher_is_better=False))
    return out


def bench_main(args) -> int:
    reshard = find_reshard(args.reshard)
    servers = store_servers()
    # A SIGTERM unwinds like Ctrl-C, so the server is stopped and the scratch folder removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="reshard-bench-storage-", dir=args.workdir))
    state: dict = {}
    try:
        state = servers.start_servers(s3_buckets=[BUCKET], only="s3", workdir=args.workdir)
        say(f"S3 server (SeaweedFS) at {state['s3']['endpoint']}")
        bench = Bench(args, reshard, scratch, state["s3"])
        bench.prepare()
        import_note = bench.probe_import()
        runs = {"boto3": bench.boto3_upload, "ours": bench.ours, "levanter": bench.levanter, "local": bench.local}
        if import_note is None:
            runs.update({"import": bench.imported, "download": bench.boto3_download})
        else:
            say(f"import from s3 is not measurable yet: {import_note}")
        best = rotate(runs, args.repeat)
        figures = figures_of(bench, best, import_note)
    finally:
        try:
            servers.stop_servers(state)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    details = {
        "bytes": bench.bytes, "tensors": bench.tensors, "processes": bench.n, "files": bench.files,
        "max_shard_size": bench.max_shard, "part_bytes": bench.part_bytes,
        "parts_in_flight": args.parts_in_flight, "repeat": args.repeat,
        "runs": {name: {"seconds": r["seconds"], "wall_seconds": r.get("wall"), "max_rss": r["max_rss"],
                        "bytes": r["bytes"]} for name, r in best.items()},
        "import": (f"measured: reshard {bench.import_how}" if import_note is None
                   else f"not measurable yet: {import_note}"),
        "verified": bench.verified,
    }
    for name, r in best.items():
        say(f"{name:>8}: best {r['seconds']:.3f} s"
            + (f" (its processes ran {r['wall']:.3f} s, start and MPI setup included)" if r.get("wall") else "")
            + f"; peak RSS per process {', '.join(f'{m / MIB:.0f}' for m in r['max_rss'])} MiB"
            + f"; bytes per process {', '.join('?' if b is None else f'{b / MIB:.1f}' for b in r['bytes'])} MiB")
    if import_note is not None:
        say(f"import from s3: not measurable yet ({import_note})")
    if args.json:
        print(json.dumps([{"benchmark": "storage", "figures": figures, "details": details}], indent=2))
    else:
        print_report(figures)
    return 0 if all(f["met"] for f in figures) or not args.strict else 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_rank"]:
        return rank_wrapper(argv[1], argv[argv.index("--") + 1:])
    if argv[:1] == ["_worker"]:
        worker(json.loads(argv[1]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=1024, help="the model's size")
    parser.add_argument("--tensors", type=int, default=300, help="about this many tensors")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3, help="rounds; each run's best counts")
    parser.add_argument("--part-mib", type=int, default=64, help="multipart part size, MiB")
    parser.add_argument("--parts-in-flight", type=int, default=4, help="parts each process uploads at once")
    parser.add_argument("--max-shard-size", help="largest weight file (default: a share of the model per process)")
    parser.add_argument("--reshard", help="the reshard binary (default: $RESHARD_BIN, beside python, PATH)")
    parser.add_argument("--workdir", help="folder for the scratch files and the server's data (default: temp)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is not met")
    return bench_main(parser.parse_args(argv))


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
