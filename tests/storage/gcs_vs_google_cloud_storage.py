#!/usr/bin/env python3
"""reshard's GCS driver judged by Google's own client, google-cloud-storage.

Against the fake-gcs-server of the storage_servers fixture (the state file
RESHARD_TEST_STORE_STATE names): what reshard writes (a 70-part parallel
upload composed in a tree, and a plain write) google-cloud-storage reads back
byte for byte, with no temporary component left in the bucket; what
google-cloud-storage writes (names with spaces and non-ASCII letters) reshard
reads whole and by ranges and lists with the same names and sizes.

    gcs_vs_google_cloud_storage.py PATH/TO/gcs_tool
RESHARD_SEED replays a run.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from google.auth.credentials import AnonymousCredentials
from google.cloud import storage


def tool(binary: str, *args: str) -> str:
    done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"gcs_tool {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def main() -> int:
    binary = sys.argv[1]
    state = json.loads(Path(os.environ["RESHARD_TEST_STORE_STATE"]).read_text())["gcs"]
    os.environ["STORAGE_EMULATOR_HOST"] = state["endpoint"]
    seed = int(os.environ.get("RESHARD_SEED") or random.randrange(2**63))
    print(f"RESHARD_SEED={seed}")
    rng = random.Random(seed)
    client = storage.Client(project="reshard-test", credentials=AnonymousCredentials())
    bucket_name = state["buckets"][0]
    bucket = client.bucket(bucket_name)
    prefix = f"gcs-vs-google-{rng.randrange(10**9)}"
    failures = []

    def check(ok: bool, what: str) -> None:
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        # reshard writes, Google reads.
        data = rng.randbytes(70 * 4096 - 123)
        (Path(tmp) / "in").write_bytes(data)
        tool(binary, "put", f"gs://{bucket_name}/{prefix}/parallel/weights.bin", str(Path(tmp) / "in"), "4096", "4")
        blob = bucket.get_blob(f"{prefix}/parallel/weights.bin")
        check(blob is not None and blob.size == len(data), "the parallel upload has the right size")
        check(blob is not None and blob.download_as_bytes() == data, "Google reads the parallel upload byte-exact")
        small = rng.randbytes(1000)
        (Path(tmp) / "small").write_bytes(small)
        tool(binary, "write", f"gs://{bucket_name}/{prefix}/parallel/small.bin", str(Path(tmp) / "small"))
        check(bucket.blob(f"{prefix}/parallel/small.bin").download_as_bytes() == small, "Google reads write_all")
        names = sorted(b.name for b in client.list_blobs(bucket_name, prefix=f"{prefix}/"))
        check(names == [f"{prefix}/parallel/small.bin", f"{prefix}/parallel/weights.bin"],
              f"no temporary components are left: {names}")

        # Google writes, reshard reads.
        written = {}
        for name in ["plain.bin", "with space/ünïcode+plus.bin", "deep/a/b/c.bin"]:
            payload = rng.randbytes(rng.randrange(1, 50_000))
            bucket.blob(f"{prefix}/google/{name}").upload_from_string(payload)
            written[name] = payload
        listed = json.loads(tool(binary, "list", f"gs://{bucket_name}/{prefix}/google"))
        check(listed == sorted([name, len(p)] for name, p in written.items()), f"reshard lists {listed}")
        for name, payload in written.items():
            out = Path(tmp) / "out"
            tool(binary, "get", f"gs://{bucket_name}/{prefix}/google/{name}", str(out))
            check(out.read_bytes() == payload, f"reshard reads {name!r} whole")
            out.write_bytes(b"\0" * len(payload))
            tool(binary, "ranges", f"gs://{bucket_name}/{prefix}/google/{name}", str(out))
            check(out.read_bytes() == payload, f"reshard reads {name!r} by ranges")

    for blob in client.list_blobs(bucket_name, prefix=f"{prefix}/"):
        blob.delete()
    if failures:
        print(f"{len(failures)} checks failed (RESHARD_SEED={seed})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
