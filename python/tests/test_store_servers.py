"""The object-store test servers and the fault proxy (tests/storage/servers/) themselves.

The storage tests take these as their ground truth, so this checks that they
behave like the real stores where it matters: S3 enforces Signature V4 and
multipart rules, GCS answers the JSON API its client uses, the proxy forwards
signed requests unchanged and injects exactly the faults asked for, and
nothing is left running or on disk after stop.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import boto3
import botocore.exceptions
import psutil
import pytest
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from google.api_core import exceptions as gexc
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "storage" / "servers"))
import fault_proxy  # noqa: E402
import store_servers  # noqa: E402

MiB = 1 << 20
S3_BUCKETS = ["reshard-a", "reshard-b"]
GCS_BUCKET = "reshard-g"


@pytest.fixture(scope="module")
def servers():
    with store_servers.running_servers(s3_buckets=S3_BUCKETS, gcs_buckets=[GCS_BUCKET]) as state:
        yield state


@pytest.fixture
def clean(servers):
    store_servers.reset_servers(servers)
    return servers


def s3_client(state, endpoint=None, key=None, secret=None, **config):
    """boto3 without retries, so a test sees every answer the server gives."""
    s3 = state["s3"]
    return boto3.client(
        "s3", endpoint_url=endpoint or s3["endpoint"], region_name=s3["region"],
        aws_access_key_id=key or s3["access_key"], aws_secret_access_key=secret or s3["secret_key"],
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}, **config))


def gcs_client(endpoint):
    return storage.Client(project="reshard-test", credentials=AnonymousCredentials(),
                          client_options={"api_endpoint": endpoint})


def error_of(excinfo):
    response = excinfo.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def raw(method, url, body=None, headers=None):
    """(status, headers, body) of one plain (unsigned) request."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with store_servers._DIRECT.open(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def listening(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


# ---------------------------------------------------------------- the servers


def test_servers_listen_on_loopback_only(servers):
    for kind in ("s3", "gcs"):
        process = psutil.Process(servers[kind]["pid"])
        listen = [c.laddr for c in process.net_connections("inet") if c.status == psutil.CONN_LISTEN]
        assert listen and {a.ip for a in listen} == {"127.0.0.1"}, (kind, listen)
        assert Path(servers[kind]["dir"]).is_dir()
    # Every port weed was told to use is its own (no default port, so two runs never clash).
    weed_ports = {a.port for a in (c.laddr for c in psutil.Process(servers["s3"]["pid"]).net_connections("inet"))
                  if a.ip == "127.0.0.1"}
    told = set(servers["s3"]["ports"].values()) - {servers["s3"]["ports"]["admin"]}
    assert told <= weed_ports
    assert raw("GET", servers["s3"]["endpoint"] + "/healthz")[0] == 200


def test_s3_put_get_and_signature_v4_enforced(clean):
    s3, bucket = s3_client(clean), S3_BUCKETS[0]
    s3.put_object(Bucket=bucket, Key="dir/obj", Body=b"hello world")
    assert s3.get_object(Bucket=bucket, Key="dir/obj")["Body"].read() == b"hello world"
    assert s3.get_object(Bucket=bucket, Key="dir/obj", Range="bytes=6-")["Body"].read() == b"world"

    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3_client(clean, secret="wrong-secret").get_object(Bucket=bucket, Key="dir/obj")
    assert error_of(e) == (403, "SignatureDoesNotMatch")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3_client(clean, key="no-such-key").put_object(Bucket=bucket, Key="x", Body=b"x")
    assert error_of(e) == (403, "InvalidAccessKeyId")
    status, _, body = raw("GET", f"{clean['s3']['endpoint']}/{bucket}/dir/obj")
    assert status == 403 and b"<Code>AccessDenied</Code>" in body

    # A missing bucket is an error, never created on the fly.
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.put_object(Bucket="reshard-missing", Key="k", Body=b"1")
    assert error_of(e) == (404, "NoSuchBucket")
    assert "reshard-missing" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.get_object(Bucket=bucket, Key="missing")
    assert error_of(e) == (404, "NoSuchKey")


UPLOAD_PART = """
import sys, boto3
endpoint, key_id, secret, bucket, key, upload_id, number, size = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id=key_id, aws_secret_access_key=secret)
body = bytes([int(number)]) * int(size)
print(s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=int(number), Body=body)["ETag"])
"""


def test_s3_multipart_parts_from_separate_processes(clean):
    s3, bucket, info = s3_client(clean), S3_BUCKETS[1], clean["s3"]
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="big")["UploadId"]
    sizes = {1: 5 * MiB, 2: 5 * MiB, 3: 123}  # all but the last at S3's 5 MiB minimum
    workers = {n: subprocess.Popen([sys.executable, "-c", UPLOAD_PART, info["endpoint"], info["access_key"],
                                    info["secret_key"], bucket, "big", upload_id, str(n), str(size)],
                                   stdout=subprocess.PIPE, text=True)
               for n, size in sizes.items()}
    etags = {n: w.communicate(timeout=60)[0].strip() for n, w in workers.items()}
    assert all(w.returncode == 0 for w in workers.values())
    s3.complete_multipart_upload(Bucket=bucket, Key="big", UploadId=upload_id, MultipartUpload={
        "Parts": [{"PartNumber": n, "ETag": etags[n]} for n in sorted(sizes)]})
    data = s3.get_object(Bucket=bucket, Key="big")["Body"].read()
    assert data == b"".join(bytes([n]) * size for n, size in sorted(sizes.items()))

    # Like S3, a part under 5 MiB that is not the last fails the completion.
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="small")["UploadId"]
    parts = [{"PartNumber": n, "ETag": s3.upload_part(Bucket=bucket, Key="small", UploadId=upload_id,
                                                      PartNumber=n, Body=b"x" * 1024)["ETag"]} for n in (1, 2)]
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="small", UploadId=upload_id,
                                     MultipartUpload={"Parts": parts})
    assert error_of(e) == (400, "EntityTooSmall")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.upload_part(Bucket=bucket, Key="small", UploadId="no-such-upload", PartNumber=1, Body=b"x")
    assert error_of(e) == (404, "NoSuchUpload")


def test_gcs_put_get_compose_and_preconditions(clean):
    bucket = gcs_client(clean["gcs"]["endpoint"]).bucket(GCS_BUCKET)
    bucket.blob("a").upload_from_string(b"hello ")
    bucket.blob("b").upload_from_string(b"world")
    assert bucket.blob("a").download_as_bytes(start=1, end=3) == b"ell"
    joined = bucket.blob("joined")
    joined.compose([bucket.blob("a"), bucket.blob("b")])
    assert joined.download_as_bytes() == b"hello world"

    # ifGenerationMatch: 0 means "only if absent", a generation means "only if unchanged".
    with pytest.raises(gexc.PreconditionFailed):
        bucket.blob("a").upload_from_string(b"again", if_generation_match=0)
    generation = bucket.get_blob("a").generation
    bucket.blob("a").upload_from_string(b"again", if_generation_match=generation)
    with pytest.raises(gexc.PreconditionFailed):
        bucket.blob("a").upload_from_string(b"stale", if_generation_match=generation)
    with pytest.raises(gexc.NotFound):
        bucket.blob("missing").download_as_bytes()


def test_reset_empties_every_bucket(clean):
    s3 = s3_client(clean)
    for bucket in S3_BUCKETS:
        s3.put_object(Bucket=bucket, Key="some dir/ünïcode+key", Body=b"1")
    s3.create_multipart_upload(Bucket=S3_BUCKETS[0], Key="unfinished")
    gcs = gcs_client(clean["gcs"]["endpoint"]).bucket(GCS_BUCKET)
    gcs.blob("some dir/key").upload_from_string(b"1")

    store_servers.reset_servers(clean)
    for bucket in S3_BUCKETS:
        assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0
    assert not s3.list_multipart_uploads(Bucket=S3_BUCKETS[0]).get("Uploads")
    assert list(gcs.list_blobs()) == []


def test_cli_start_env_stop_leaves_nothing(tmp_path):
    script = Path(store_servers.__file__)
    state_file = tmp_path / "state.json"

    def cli(*args):
        # Pipes: start must return while its servers run on, holding none of them.
        return subprocess.run([sys.executable, str(script), *args, "--state", str(state_file)],
                              capture_output=True, text=True, timeout=60)

    started = cli("start", "--s3-bucket", "cli-bucket", "--gcs-bucket", "cli-bucket", "--workdir", str(tmp_path))
    assert started.returncode == 0, started.stderr
    state = json.loads(state_file.read_text())
    exports = dict(line.removeprefix("export ").split("=", 1) for line in cli("env").stdout.splitlines())
    assert exports["AWS_ENDPOINT_URL"] == state["s3"]["endpoint"]
    assert exports["STORAGE_EMULATOR_HOST"] == state["gcs"]["endpoint"]
    assert exports["RESHARD_TEST_S3_BUCKET"] == exports["RESHARD_TEST_GCS_BUCKET"] == "cli-bucket"
    s3_client(state).put_object(Bucket="cli-bucket", Key="k", Body=b"v")

    assert cli("stop").returncode == 0
    for kind in ("s3", "gcs"):
        assert not psutil.pid_exists(state[kind]["pid"]) or \
            psutil.Process(state[kind]["pid"]).status() == psutil.STATUS_ZOMBIE
        assert not Path(state[kind]["dir"]).exists()
        assert not any(listening(p) for name, p in state[kind]["ports"].items() if name != "admin")
    assert not state_file.exists()
    assert cli("stop").returncode == 0  # idempotent
    assert list(tmp_path.iterdir()) == []


def test_failed_start_leaves_nothing_running(tmp_path):
    with pytest.raises(store_servers.StartError, match="not ready in time"):
        store_servers.start_servers(only="s3", timeout=0.2, workdir=str(tmp_path))
    for process in psutil.process_iter(["cmdline", "status"]):
        if process.info["status"] != psutil.STATUS_ZOMBIE:
            assert str(tmp_path) not in " ".join(process.info["cmdline"] or [])
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(store_servers.StartError, match="invalid S3 bucket name"):
        store_servers.start_servers(s3_buckets=["No_Such"], workdir=str(tmp_path))


# ---------------------------------------------------------------- the fault proxy


@pytest.fixture
def s3_proxy(clean):
    with fault_proxy.FaultProxy(clean["s3"]["endpoint"]) as proxy:
        yield proxy


def test_proxy_forwards_signed_requests_and_large_bodies(clean, s3_proxy):
    # The client signs for the proxy's host:port; the proxy keeps Host, so weed's check passes.
    s3, bucket = s3_client(clean, endpoint=s3_proxy.url), S3_BUCKETS[0]
    big = os.urandom(24 * MiB + 7)
    s3.put_object(Bucket=bucket, Key="big", Body=big)
    assert s3.get_object(Bucket=bucket, Key="big")["Body"].read() == big
    s3.upload_fileobj(io.BytesIO(big[:11 * MiB]), bucket, "multi",
                      Config=TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB))
    assert s3.get_object(Bucket=bucket, Key="multi")["Body"].read() == big[:11 * MiB]
    log = s3_proxy.log()
    assert [(e["method"], e["status"], e["fault"]) for e in log[:2]] == [("PUT", 200, None), ("GET", 200, None)]
    assert log[0]["bytes_in"] == len(big) and log[1]["bytes_out"] == len(big)
    assert sum(1 for e in log if "partNumber=" in e["path"]) == 3
    with pytest.raises(botocore.exceptions.ClientError) as e:  # and a wrong signature still fails
        s3_client(clean, endpoint=s3_proxy.url, secret="wrong").get_object(Bucket=bucket, Key="big")
    assert error_of(e) == (403, "SignatureDoesNotMatch")


def test_proxy_status_fault_applies_times_then_passes(clean, s3_proxy):
    s3, bucket = s3_client(clean, endpoint=s3_proxy.url), S3_BUCKETS[0]
    s3_proxy.add_rule("status", method="PUT", path=r"/flaky$", times=2, status=503, retry_after=3)
    for _ in range(2):
        with pytest.raises(botocore.exceptions.ClientError) as e:
            s3.put_object(Bucket=bucket, Key="flaky", Body=b"x")
        assert error_of(e) == (503, "SlowDown")
        assert e.value.response["ResponseMetadata"]["HTTPHeaders"]["retry-after"] == "3"
    s3.put_object(Bucket=bucket, Key="flaky", Body=b"x")
    assert [(e["status"], e["fault"]) for e in s3_proxy.log()] == [(503, "status"), (503, "status"), (200, None)]

    # when=after: the server stores the object, the client only hears the 500.
    s3_proxy.add_rule("status", method="PUT", path=r"/landed$", status=500, when="after")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.put_object(Bucket=bucket, Key="landed", Body=b"y")
    assert error_of(e) == (500, "InternalError")
    assert s3.get_object(Bucket=bucket, Key="landed")["Body"].read() == b"y"


def test_proxy_reset_and_stall_and_delay(clean, s3_proxy):
    s3, bucket = s3_client(clean, endpoint=s3_proxy.url, read_timeout=5), S3_BUCKETS[0]
    s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    s3_proxy.add_rule("reset", method="GET")
    with pytest.raises(botocore.exceptions.HTTPClientError):
        s3.get_object(Bucket=bucket, Key="k")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"

    s3_proxy.add_rule("stall", method="GET", seconds=0.6)
    start = time.monotonic()
    with pytest.raises(botocore.exceptions.HTTPClientError):
        s3.get_object(Bucket=bucket, Key="k")
    assert time.monotonic() - start >= 0.5
    s3_proxy.add_rule("stall", method="GET", seconds=30)  # a client timeout fires first
    with pytest.raises(botocore.exceptions.ReadTimeoutError):
        s3_client(clean, endpoint=s3_proxy.url, read_timeout=0.3).get_object(Bucket=bucket, Key="k")

    s3_proxy.reset()
    s3_proxy.add_rule("delay", method="GET", seconds=0.4)
    start = time.monotonic()
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"
    assert time.monotonic() - start >= 0.35
    assert [(e["status"], e["fault"]) for e in s3_proxy.log()] == [(200, "delay")]


def test_proxy_gcs_faults_and_resumable_uploads(clean):
    with fault_proxy.FaultProxy(clean["gcs"]["endpoint"]) as proxy:
        bucket = gcs_client(proxy.url).bucket(GCS_BUCKET)
        data = os.urandom(9 * MiB + 5)  # over 8 MiB, the client uploads in resumable chunks
        # Resumable upload sessions come back as the server's URL; the proxy
        # rewrites Location so the chunks pass through it too.
        bucket.blob("resumable", chunk_size=4 * MiB).upload_from_string(data)
        chunks = [e["status"] for e in proxy.log() if e["method"] == "PUT" and "upload_id=" in e["path"]]
        assert chunks == [308, 308, 200]

        # A 503 with a GCS JSON body: the client's own retry rides over it.
        proxy.add_rule("status", method="GET", path=r"/o/resumable\?.*alt=media", status=503)
        assert bucket.blob("resumable").download_as_bytes() == data
        downloads = [(e["status"], e["fault"]) for e in proxy.log() if "alt=media" in e["path"]]
        assert downloads[0] == (503, "status") and downloads[-1][0] == 200

        # A body cut short after 10 bytes.
        proxy.add_rule("truncate", method="GET", path="alt=media", bytes=10)
        host, port = proxy.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", f"/download/storage/v1/b/{GCS_BUCKET}/o/resumable?alt=media")
        response = conn.getresponse()
        assert response.status == 200
        with pytest.raises(http.client.IncompleteRead):
            response.read()
        conn.close()


def test_proxy_control_endpoint_and_cli(clean, tmp_path):
    state_file = tmp_path / "proxy.json"
    rules = json.dumps([{"kind": "status", "status": 429, "path": "^/only-this", "flavor": "gcs"}])
    process = subprocess.Popen([sys.executable, fault_proxy.__file__, "--target", clean["gcs"]["endpoint"],
                                "--state", str(state_file), "--rules", rules])
    try:
        deadline = time.monotonic() + 10
        while not state_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        url = json.loads(state_file.read_text())["url"]
        status, headers, body = raw("GET", url + "/only-this")
        assert status == 429 and json.loads(body)["error"]["errors"][0]["reason"] == "rateLimitExceeded"
        status, _, body = raw("POST", url + "/__fault__/rules", json.dumps(
            {"kind": "status", "status": 503, "method": "GET", "path": "/storage/v1/b$", "times": 1}).encode())
        assert status == 200 and json.loads(body) == [1]
        assert raw("GET", url + "/storage/v1/b")[0] == 503
        assert raw("GET", url + "/storage/v1/b")[0] == 200
        status, _, body = raw("GET", url + "/__fault__/log")
        assert [(e["path"], e["status"], e["fault"]) for e in json.loads(body)] == [
            ("/only-this", 429, "status"), ("/storage/v1/b", 503, "status"), ("/storage/v1/b", 200, None)]
        assert raw("POST", url + "/__fault__/rules", b'{"kind": "explode"}')[0] == 400
        assert raw("POST", url + "/__fault__/reset", b"")[0] == 200
        assert json.loads(raw("GET", url + "/__fault__/log")[2]) == []
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0
    assert not state_file.exists()
