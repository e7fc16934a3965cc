"""reshard's Python API on s3:// and gs:// URLs, against real servers (SeaweedFS for S3,
fake-gcs-server for GCS, started by tests/storage/servers/store_servers.py): exports equal to
the local ones byte for byte, read back by the stores' own clients and the safetensors
package; inspect, verify and the readers on objects; reshard.orbax reading Orbax checkpoints
in both stores; each store failure as its typed error, never printing a secret; and a URL
never taken for a local folder named "s3:".

The C++ store clients are per process and read the environment once, so every case that
needs other credentials runs in a subprocess."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import boto3
import numpy as np
import pytest
import safetensors.numpy
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage as gcs

import reshard
import reshard.hf
import reshard.safetensors
from reshard import P, errors
from test_export_import import MAP, TOPOLOGY, framework_model, layout

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "storage" / "servers"))
import store_servers  # noqa: E402
from capability import import_or_skip  # noqa: E402
from conftest import SEED  # noqa: E402
from mpi_launch import needs_mpirun, ranks_that_said, run  # noqa: E402
from test_bench_storage import needs_binary, reshard_binary  # noqa: E402

S3_BUCKET = "reshard-py"
GCS_BUCKET = "reshard-py-gcs"
HF_CONFIG = {"model_type": "llama", "hidden_size": 4}
# Variables that would take the clients elsewhere than the test servers.
_CLEARED = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE",
            "AWS_SHARED_CREDENTIALS_FILE", "GOOGLE_APPLICATION_CREDENTIALS", "TENSORSTORE_GCS_HTTP_URL",
            "RESHARD_S3_ADDRESSING")


def server_env(state: dict) -> dict[str, str]:
    s3 = state["s3"]
    return {"AWS_ACCESS_KEY_ID": s3["access_key"], "AWS_SECRET_ACCESS_KEY": s3["secret_key"],
            "AWS_REGION": s3["region"], "AWS_ENDPOINT_URL": s3["endpoint"], "AWS_EC2_METADATA_DISABLED": "true",
            "STORAGE_EMULATOR_HOST": state["gcs"]["endpoint"]}


@pytest.fixture(scope="module")
def stores():
    """The servers, and the environment pointing reshard (and TensorStore) at them for the module."""
    with store_servers.running_servers(s3_buckets=[S3_BUCKET], gcs_buckets=[GCS_BUCKET]) as state:
        with pytest.MonkeyPatch.context() as env:
            for name in _CLEARED:
                env.setenv(name, "")  # recorded, so that the variable is restored (or removed) after
                env.delenv(name)
            for name, value in server_env(state).items():
                env.setenv(name, value)
            yield state  # reshard.orbax sets TENSORSTORE_GCS_HTTP_URL: removed with the rest


def s3_client(state: dict):
    s3 = state["s3"]
    return boto3.client("s3", endpoint_url=s3["endpoint"], region_name=s3["region"],
                        aws_access_key_id=s3["access_key"], aws_secret_access_key=s3["secret_key"])


def gcs_bucket(state: dict):
    client = gcs.Client(project="reshard-test", credentials=AnonymousCredentials(),
                        client_options={"api_endpoint": state["gcs"]["endpoint"]})
    return client.bucket(GCS_BUCKET)


def objects(state: dict, url: str) -> dict[str, bytes]:
    """{name under the prefix: bytes} of every object under `url`, read by the store's own client."""
    scheme, rest = url.split("://", 1)
    bucket, _, prefix = rest.partition("/")
    prefix = prefix.rstrip("/") + "/"
    if scheme == "s3":
        s3 = s3_client(state)
        keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
                for o in page.get("Contents", [])]
        return {k[len(prefix):]: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}
    return {b.name[len(prefix):]: b.download_as_bytes() for b in gcs_bucket(state).list_blobs(prefix=prefix)}


def upload(state: dict, folder: pathlib.Path, url: str) -> None:
    """Every file under `folder` as an object under `url`, byte for byte."""
    scheme, rest = url.split("://", 1)
    _, _, prefix = rest.partition("/")
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        key = f"{prefix}/{path.relative_to(folder).as_posix()}"
        if scheme == "s3":
            s3_client(state).put_object(Bucket=S3_BUCKET, Key=key, Body=path.read_bytes())
        else:
            gcs_bucket(state).blob(key).upload_from_string(path.read_bytes())


def files(folder: pathlib.Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def sharded(values: dict[str, np.ndarray]) -> dict[str, reshard.ShardedArray]:
    return {n: reshard.from_host(v, layout()[n], TOPOLOGY) for n, v in values.items()}


def big_values(rng) -> dict[str, np.ndarray]:
    """12 MiB of weights: a file of three 5 MiB parts."""
    gen = np.random.default_rng(rng.randrange(2**32))
    return {"stacked.w": gen.standard_normal((3, 1024, 1024)).astype(np.float32),
            "embed": gen.standard_normal((8, 4)).astype(np.float32)}


@pytest.fixture(params=["s3", "gs"])
def scheme(request) -> str:
    return request.param


def url_of(scheme: str, key: str) -> str:
    return f"{scheme}://{S3_BUCKET if scheme == 's3' else GCS_BUCKET}/{key}"


# ---------------------------------------------------------------- exports


def test_export_of_a_checkpoint_equals_the_local_export(stores, scheme, tmp_path, rng, request):
    values = framework_model(rng)
    reshard.save_checkpoint(sharded(values), tmp_path / "ckpt")
    reshard.export(tmp_path / "ckpt", tmp_path / "hf", MAP, hf_config=HF_CONFIG)
    url = url_of(scheme, f"{request.node.name}/hf")
    result = reshard.export(str(tmp_path / "ckpt"), url, MAP, hf_config=HF_CONFIG)
    assert result.tensors == 4 and result.files == 1 and result.bytes_written == result.bytes
    stored = objects(stores, url)
    assert stored == files(tmp_path / "hf")
    theirs = safetensors.numpy.load(stored["model.safetensors"])
    for i in range(3):
        np.testing.assert_array_equal(theirs[f"model.layers.{i}.w"], values["stacked.w"][i].T)
    np.testing.assert_array_equal(theirs["model.embed.weight"], values["embed"])
    assert json.loads(stored["config.json"]) == HF_CONFIG

    # An existing output is refused unless replaced, as locally.
    with pytest.raises(errors.AlreadyExistsError):
        reshard.export(tmp_path / "ckpt", url, MAP, hf_config=HF_CONFIG)
    reshard.export(tmp_path / "ckpt", url, MAP, hf_config=HF_CONFIG, replace=True)
    assert objects(stores, url) == stored


def test_export_of_arrays_in_parts_equals_the_local_export(stores, scheme, tmp_path, rng, request):
    values = big_values(rng)
    arrays = sharded(values)
    reshard.export(arrays, tmp_path / "hf", MAP, hf_config=HF_CONFIG, max_shard_size="8MiB")
    url = url_of(scheme, f"{request.node.name}/hf")
    result = reshard.export(arrays, url, MAP, hf_config=HF_CONFIG, max_shard_size="8MiB", part_size="5MiB",
                            parts_in_flight=2)
    assert result.files == 2
    assert objects(stores, url) == files(tmp_path / "hf")
    # The readers take the URL: the index and every file, read by ranges.
    folder = reshard.hf.load_folder(url)
    np.testing.assert_array_equal(folder["model.layers.2.w"], values["stacked.w"][2].T)
    assert sorted(folder) == sorted(reshard.hf.load_folder(tmp_path / "hf"))


def test_export_without_a_config_to_a_store_warns(stores, tmp_path, rng, request):
    arrays = sharded(framework_model(rng))
    with pytest.warns(errors.MissingConfigWarning, match="no config.json"):
        reshard.export(arrays, url_of("s3", f"{request.node.name}/hf"), MAP)


def test_part_options_are_checked_by_argument_name(stores, rng, request):
    arrays = sharded(framework_model(rng))
    url = url_of("s3", f"{request.node.name}/hf")
    with pytest.raises(errors.InvalidArgumentError, match=r"^part_size='1MiB': .*a part size of 1\.0 MiB is outside"):
        reshard.export(arrays, url, MAP, hf_config=HF_CONFIG, part_size="1MiB")
    with pytest.raises(errors.ParseError, match="part_size"):
        reshard.export(arrays, url, MAP, hf_config=HF_CONFIG, part_size="lots")
    with pytest.raises(errors.ArgumentTypeError, match="part_size"):
        reshard.export(arrays, url, MAP, hf_config=HF_CONFIG, part_size=5.5)
    with pytest.raises(errors.InvalidArgumentError, match="parts_in_flight: 0"):
        reshard.export(arrays, url, MAP, hf_config=HF_CONFIG, parts_in_flight=0)
    with pytest.raises(errors.ArgumentTypeError, match="parts_in_flight"):
        reshard.export(arrays, url, MAP, hf_config=HF_CONFIG, parts_in_flight="2")
    assert objects(stores, url) == {}


# ---------------------------------------------------------------- reading objects


def test_inspect_verify_and_the_readers_take_urls(stores, scheme, tmp_path, rng, request):
    values = framework_model(rng)
    reshard.export(sharded(values), tmp_path / "hf", MAP, hf_config=HF_CONFIG)
    url = url_of(scheme, f"{request.node.name}/hf")
    upload(stores, tmp_path / "hf", url)

    assert reshard.inspect(url) == reshard.inspect(tmp_path / "hf")
    assert reshard.verify(url) == reshard.verify(tmp_path / "hf")
    assert reshard.inspect(f"{url}/model.safetensors") == reshard.inspect(tmp_path / "hf" / "model.safetensors")

    with reshard.safetensors.safe_open(f"{url}/model.safetensors") as f:
        assert f.path == f"{url}/model.safetensors" and f.mode == "pread"
        np.testing.assert_array_equal(f.get_tensor("model.embed.weight"), values["embed"])
        np.testing.assert_array_equal(f.get_slice("model.layers.1.w", (slice(1, 3), slice(None))),
                                      values["stacked.w"][1].T[1:3])
    ours = reshard.safetensors.load_file(f"{url}/model.safetensors")
    theirs = safetensors.numpy.load_file(str(tmp_path / "hf" / "model.safetensors"))
    assert sorted(ours) == sorted(theirs)
    for name in theirs:
        assert ours[name].tobytes() == theirs[name].tobytes()
    folder = reshard.hf.open_folder(url)
    assert folder.kind == "single_file" and folder._folder.folder == url


def test_damage_in_an_object_is_found_by_verify(stores, tmp_path, rng, request):
    reshard.export(sharded(framework_model(rng)), tmp_path / "hf", MAP, hf_config=HF_CONFIG)
    data = bytearray((tmp_path / "hf" / "model.safetensors").read_bytes())
    url = url_of("s3", f"{request.node.name}/model.safetensors")
    s3_client(stores).put_object(Bucket=S3_BUCKET, Key=url.split("/", 3)[3], Body=bytes(data[:-5]))
    with pytest.raises(errors.InvalidFileError):
        reshard.verify(url)


def pending_uploads(state: dict, url: str) -> list[str]:
    """The keys of the S3 multipart uploads started and not finished under `url`."""
    prefix = url.split("/", 3)[3].rstrip("/") + "/"
    found = s3_client(state).list_multipart_uploads(Bucket=S3_BUCKET, Prefix=prefix)
    return [u["Key"] for u in found.get("Uploads", [])]


@needs_binary
def test_a_convert_killed_mid_upload_is_cleaned_up_by_the_next(stores, tmp_path, request):
    """`reshard convert` to S3 killed (SIGKILL) while its multipart upload is pending; the same
    command again succeeds, and nothing is left pending under the destination."""
    source = tmp_path / "hf"
    source.mkdir()
    # Two 48 MiB shards in 5 MiB parts: long enough to be caught with an upload pending.
    reshard.safetensors.save_file({f"w{i}": np.full((3 << 20,), i, np.float32) for i in range(8)},
                                  source / "model.safetensors")
    url = url_of("s3", f"{request.node.name}/out")
    command = [reshard_binary(), "convert", str(source), url, "--max-shard-size", "48MiB", "--part-size", "5MiB"]
    writer = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not pending_uploads(stores, url) and writer.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    # Stopped first, then killed only with its upload still pending: killed mid-upload, not after.
    writer.send_signal(signal.SIGSTOP)
    caught = pending_uploads(stores, url)
    writer.kill()
    writer.wait(timeout=30)
    assert caught and writer.returncode == -signal.SIGKILL, (
        f"the command ended before it could be killed mid-upload: {writer.stderr.read().decode()[-2000:]}")
    # A reader points out what it left (on stderr: the path holds no model yet).
    checked = subprocess.run([reshard_binary(), "verify", url], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 1 and "note: " in checked.stderr, checked.stderr
    assert all(key in checked.stderr for key in caught), checked.stderr
    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert pending_uploads(stores, url) == []
    written = objects(stores, url)
    assert sorted(written) == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                               "model.safetensors.index.json"], sorted(written)
    loaded = reshard.safetensors.load_file(f"{url}/model-00002-of-00002.safetensors")
    assert all((array == int(name[1:])).all() for name, array in loaded.items())


# ---------------------------------------------------------------- errors


def test_the_storage_error_classes():
    assert issubclass(errors.StorageError, errors.ReshardIOError) and "code" not in vars(errors.StorageError)
    expected = {"object_not_found": (errors.ObjectNotFoundError, FileNotFoundError),
                "bucket_not_found": (errors.BucketNotFoundError, FileNotFoundError),
                "access_denied": (errors.AccessDeniedError, PermissionError),
                "store_unreachable": (errors.StoreUnreachableError, ConnectionError),
                "store_error": (errors.StoreError, OSError)}
    for code, (cls, builtin) in expected.items():
        assert errors._BY_CODE[code] is cls and cls.code == code
        assert issubclass(cls, errors.StorageError) and issubclass(cls, builtin) and issubclass(cls, OSError)
    assert set(expected) <= set(reshard._core._error_code_names())


def test_a_missing_object_or_bucket_is_a_file_not_found_error(stores, scheme):
    missing = url_of(scheme, "no/such/model.safetensors")
    with pytest.raises(errors.ObjectNotFoundError, match="no/such/model.safetensors") as e:
        reshard.safetensors.safe_open(missing)
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, errors.ReshardIOError)
    with pytest.raises(FileNotFoundError):
        reshard.inspect(url_of(scheme, "no/such/folder"))
    with pytest.raises(errors.BucketNotFoundError, match="no-such-bucket") as e:
        reshard.safetensors.safe_open(f"{scheme}://no-such-bucket/model.safetensors")
    assert isinstance(e.value, FileNotFoundError)


def test_other_schemes_are_refused_naming_the_argument(stores, rng, tmp_path):
    arrays = sharded(framework_model(rng))
    with pytest.raises(errors.InvalidArgumentError, match=r"^path: hf://org/model: .*hf://"):
        reshard.inspect("hf://org/model")
    with pytest.raises(errors.InvalidArgumentError, match=r"^out: http://example\.com/m: "):
        reshard.export(arrays, "http://example.com/m", MAP)
    with pytest.raises(errors.InvalidArgumentError, match=r"^path: hf://x/y\.safetensors"):
        reshard.safetensors.safe_open("hf://x/y.safetensors")
    with pytest.raises(errors.InvalidArgumentError, match=r"^src: hf://org/model"):
        reshard.convert("hf://org/model", tmp_path / "out")
    # pathlib folds "s3://" to "s3:/": refused, never a local folder named "s3:".
    with pytest.raises(errors.InvalidArgumentError, match=r"^out: s3:/b/k: .*s3://"):
        reshard.export(arrays, pathlib.Path("s3://b/k"), MAP)


def test_every_operation_takes_urls(stores, rng, tmp_path, monkeypatch):
    """Every operation taking a path takes a URL, parsed (never a local folder named "s3:"): what is
    written there reads back as from a local path, and what is missing there is the store's error."""
    monkeypatch.chdir(tmp_path)
    values = framework_model(rng)
    arrays = sharded(values)
    reshard.export(arrays, tmp_path / "hf", MAP, hf_config=HF_CONFIG)
    mesh = reshard.Mesh(np.arange(4), ("x",))
    s3 = url_of("s3", "every-operation")
    reshard.save_checkpoint(arrays, f"{s3}/ckpt")
    restored = reshard.restore_checkpoint(f"{s3}/ckpt", layout(), TOPOLOGY)
    for name, array in restored.items():
        assert reshard.to_host(array).tobytes() == values[name].tobytes(), name
    reshard.convert(tmp_path / "hf", f"{s3}/converted")
    assert objects(stores, f"{s3}/converted") == files(tmp_path / "hf")
    imported = reshard.import_model(f"{s3}/converted", MAP, mesh, best_effort="x")
    for name, array in imported.items():
        assert reshard.to_host(array).tobytes() == values[name].tobytes(), name
    reshard.safetensors.save_file({"x": np.arange(3, dtype=np.float32)}, f"{s3}/x.safetensors")
    np.testing.assert_array_equal(reshard.safetensors.load_file(f"{s3}/x.safetensors")["x"], np.arange(3))
    missing = {
        "path": lambda: reshard.restore_checkpoint(f"{s3}/no-ckpt", layout(), TOPOLOGY),
        "src": lambda: reshard.convert(f"{s3}/no-hf", tmp_path / "converted"),
        "hf_dir": lambda: reshard.import_model(f"{s3}/no-hf", MAP, mesh, best_effort="x"),
        "source": lambda: reshard.export(f"{s3}/no-ckpt", tmp_path / "hf2", MAP),
    }
    for argument, attempt in missing.items():
        with pytest.raises(errors.ReshardError) as caught:
            attempt()
        assert f"{s3}/no-" in str(caught.value), (argument, str(caught.value))
        assert not isinstance(caught.value, errors.UnsupportedError), (argument, str(caught.value))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]


WRONG_SECRET = "not-the-secret-0123456789"
IN_A_SUBPROCESS = """
import json, sys
import numpy as np
import reshard, reshard.safetensors
from reshard import errors

def outcome(call):
    try:
        call()
    except Exception as e:
        return {"type": type(e).__name__, "mro": [c.__name__ for c in type(e).__mro__], "message": str(e)}
    return {"type": None}

arrays = {"w": reshard.from_host(np.ones((4, 4), np.float32),
                                 reshard.NamedSharding(reshard.Mesh([0], ("x",)), reshard.P()),
                                 reshard.Topology.uniform(1, 1))}
out = {"export": outcome(lambda: reshard.export(arrays, sys.argv[1] + "/hf", '{"rules": [{"from": "w", "to": "w"}]}',
                                                hf_config={})),
       "read": outcome(lambda: reshard.safetensors.safe_open(sys.argv[1] + "/model.safetensors"))}
if len(sys.argv) > 2:
    import reshard.orbax
    out["orbax"] = outcome(lambda: reshard.orbax.inspect(sys.argv[2]))
print(json.dumps(out))
"""


def run_with_env(env: dict[str, str], *args: str) -> dict:
    environment = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    environment.update(env)
    done = subprocess.run([sys.executable, "-c", IN_A_SUBPROCESS, *args], capture_output=True, text=True,
                          timeout=240, env=environment)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_wrong_credentials_are_access_denied_without_the_secret(stores, tmp_path, rng, request):
    reshard.export(sharded(framework_model(rng)), tmp_path / "hf", MAP, hf_config=HF_CONFIG)
    url = url_of("s3", request.node.name)
    upload(stores, tmp_path / "hf", url)
    orbax_url = url_of("s3", f"{request.node.name}/orbax")
    seen = run_with_env({**server_env(stores), "AWS_SECRET_ACCESS_KEY": WRONG_SECRET}, url, orbax_url)
    for what in ("export", "read", "orbax"):
        assert seen[what]["type"] == "AccessDeniedError", seen[what]
        assert "PermissionError" in seen[what]["mro"] and "StorageError" in seen[what]["mro"]
        message = seen[what]["message"]
        assert WRONG_SECRET not in message and stores["s3"]["secret_key"] not in message, message
    assert "AWS_SECRET_ACCESS_KEY" in seen["export"]["message"]  # where the credentials came from, by name
    assert not objects(stores, f"{url}/hf")  # nothing written


# ---------------------------------------------------------------- reshard.orbax


def test_orbax_checkpoints_in_a_store(stores, scheme, tmp_path_factory, rng, request):
    orbax_cases = import_or_skip("orbax_cases", "Orbax (orbax_cases imports it)")
    import reshard.orbax as ro

    folder = tmp_path_factory.mktemp("orbax")
    values, paths = orbax_cases.write_all(folder, rng.randrange(2**32))
    base = url_of(scheme, f"{request.node.name}/orbax")
    upload(stores, folder, base)
    mesh = reshard.Mesh(np.arange(4), ("x",))
    for form, path in paths.items():
        url = f"{base}/{form}"
        assert ro.inspect(url).tensors == ro.inspect(path).tensors, form
        arrays, stats = ro.restore_with_result(url, mesh, best_effort="x")
        assert stats.bytes_read > 0
        for name, array in arrays.items():
            assert reshard.to_host(array).tobytes() == values[name].tobytes(), (form, name)

    # Exported from the store to the store, equal to the export of the local folder to a local one.
    tree_map = json.dumps({"rules": [{"from": p, "to": p, "optional": True}
                                     for p in ("{a}", "{a}.{b}", "{a}.{b}.{c}.{d}")]})
    local = tmp_path_factory.mktemp("hf") / "hf"
    ro.export(paths["standard"], local, tree_map, hf_config=HF_CONFIG)
    out = url_of(scheme, f"{request.node.name}/hf")
    ro.export(f"{base}/standard", out, tree_map, hf_config=HF_CONFIG, part_size="5MiB")
    assert objects(stores, out) == files(local)
    np.testing.assert_array_equal(reshard.hf.load_folder(out)["params.embed"], values["params.embed"])

    # Saved as a reshard checkpoint in the store.
    ro.convert(f"{base}/standard", url_of(scheme, f"{request.node.name}/ckpt"))
    assert reshard.inspect(url_of(scheme, f"{request.node.name}/ckpt"))["format"] == "checkpoint"

    with pytest.raises(errors.NotOrbaxCheckpointError):
        ro.inspect(f"{base}/raw")
    with pytest.raises(errors.ObjectNotFoundError, match="no such folder"):
        ro.inspect(f"{base}/missing")
    with pytest.raises(errors.BucketNotFoundError if scheme == "s3" else errors.ObjectNotFoundError):
        ro.inspect(f"{scheme}://no-such-bucket/ckpt")
    with pytest.raises(errors.InvalidArgumentError, match="^path: hf://"):
        ro.inspect("hf://org/ckpt")
    with pytest.raises(errors.InvalidArgumentError, match="^out: hf://"):
        ro.export(f"{base}/standard", "hf://x/y", tree_map)


# ---------------------------------------------------------------- a multi-process JAX job


@needs_mpirun
def test_a_two_process_jax_job_exports_to_stores_as_to_a_local_folder(stores, tmp_path, request):
    urls = [url_of(scheme, f"{request.node.name}/hf") for scheme in ("s3", "gs")]
    done = run(pathlib.Path(__file__).with_name("jax_store_job.py"), str(SEED), str(tmp_path / "hf"), *urls,
               ranks=2, env=server_env(stores), timeout=300)
    report = f"RESHARD_SEED={SEED}\n{done.stdout}\n{done.stderr[-4000:]}"
    assert done.returncode == 0 and ranks_that_said(done.stdout, "ok") == [0, 1], report
    local = files(tmp_path / "hf")
    assert sorted(local) == ["config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                             "model.safetensors.index.json"]
    for url in urls:
        assert objects(stores, url) == local, url
