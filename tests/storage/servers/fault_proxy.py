#!/usr/bin/env python3
"""An HTTP/1.1 reverse proxy that injects faults, for the object-store tests.

It listens on 127.0.0.1 (a free port), forwards each request to a target base
URL, and applies the first matching rule that still has uses left:

    {"method": "PUT",            # optional; any method when absent
     "path": "partNumber=2",     # optional regex, searched in path+query as sent
     "kind": "status",           # status | reset | stall | delay | truncate
     "times": 1,                 # matches it applies to (default 1; null = always)
     "when": "before",           # before: instead of forwarding; after: the
                                 #   request reaches the server, its reply is lost
     "status": 503,              # status: the code (default 503)
     "retry_after": 2,           # status: adds Retry-After
     "flavor": "auto",           # status: error body s3 (XML) | gcs (JSON) | auto (by path)
     "headers": {"X-A": "b"},    # status: more headers for the answer
     "seconds": 5,               # stall: hold, then close; delay: wait, then forward
     "bytes": 100}               # truncate: relay headers and this many body bytes, then close

Kinds: `status` answers with an S3- or GCS-style error; `reset` closes the
connection with a TCP RST and no answer; `stall` holds the request, then closes
(FIN) without an answer; `delay` forwards late; `truncate` sends the headers and
the first `bytes` of the body, then closes (FIN): a short read for the client.

Control, on the same port (never forwarded, faulted or logged):
    POST /__fault__/rules   a rule or a list of rules, appended
    GET  /__fault__/rules   the rules with their uses left
    GET  /__fault__/log     [{"method", "path", "status", "fault", "bytes_in", "bytes_out"}, ...]
    POST /__fault__/reset   drops the rules and the log

Forwarding keeps the request as sent: the request-target unchanged, and the
Host header too, because S3 Signature V4 signs Host (the client signed for the
proxy's address, and the server checks what it receives). Whole bodies are
read (by Content-Length, or de-chunked) and forwarded with a Content-Length;
answers are relayed with a Content-Length. Each connection is closed after one
answer by default: every request then comes on a fresh connection, so a client
(libcurl) cannot silently retry a fault on a reused one and hide it.

    fault_proxy.py --target http://127.0.0.1:PORT --state FILE [--rules JSON] [--keep-alive]
writes {"url", "pid", "target"} to FILE and runs until SIGTERM or SIGINT.
Importable: FaultProxy(target).start(), .add_rule(...), .log(), .reset(), .stop().
Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import http.server
import json
import os
import re
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse
from pathlib import Path

CONTROL = "/__fault__/"
KINDS = ("status", "reset", "stall", "delay", "truncate")
# Hop-by-hop headers (RFC 9110 7.6.1) end at each hop; Expect is answered here
# (the body is read before forwarding), so the server never sees it.
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
              "te", "trailer", "transfer-encoding", "upgrade", "expect"}
GCS_PATH = re.compile(r"^/(upload/|download/|batch/)?storage/v1/")
_S3_CODES = {503: "SlowDown", 500: "InternalError", 429: "SlowDown", 400: "BadRequest", 403: "AccessDenied",
             404: "NoSuchKey", 408: "RequestTimeout", 409: "OperationAborted", 412: "PreconditionFailed"}
_GCS_REASONS = {503: "backendError", 500: "backendError", 429: "rateLimitExceeded", 400: "badRequest",
                403: "forbidden", 404: "notFound", 408: "requestTimeout", 409: "conflict", 412: "conditionNotMet"}


def _validate(rule: dict) -> dict:
    rule = dict(rule)
    if rule.get("kind") not in KINDS:
        raise ValueError(f"rule kind must be one of {KINDS}: {rule!r}")
    if rule.get("when", "before") not in ("before", "after"):
        raise ValueError(f"rule when must be before or after: {rule!r}")
    re.compile(rule.get("path") or "")
    rule.setdefault("times", 1)
    if rule.get("method"):
        rule["method"] = rule["method"].upper()
    return rule


def error_body(status: int, path: str, flavor: str = "auto") -> tuple[str, bytes]:
    """(content type, body) of an error the way S3 (XML) or GCS (JSON) writes it."""
    if flavor == "auto":
        flavor = "gcs" if GCS_PATH.match(path) else "s3"
    message = f"injected fault: {status} {http.client.responses.get(status, '')}".strip()
    if flavor == "gcs":
        reason = _GCS_REASONS.get(status, "backendError")
        body = {"error": {"code": status, "message": message,
                          "errors": [{"domain": "global", "reason": reason, "message": message}]}}
        return "application/json; charset=UTF-8", json.dumps(body).encode()
    code = _S3_CODES.get(status, "ServiceUnavailable" if status >= 500 else "InvalidRequest")
    resource = urllib.parse.urlsplit(path).path
    return "application/xml", (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
                               f"<Message>{message}</Message><Resource>{resource}</Resource>"
                               f"<RequestId>fault-proxy</RequestId></Error>").encode()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked requests are understood
    server: "_Server"

    def log_message(self, format, *args):  # the fault log is the record; keep stderr quiet
        pass

    def do_GET(self):
        self._handle()

    do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = do_GET

    # ------------------------------------------------------------ request

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _handle(self):
        proxy = self.server.proxy
        if not proxy.keep_alive:
            self.close_connection = True
        body = self._read_body()
        if self.path.startswith(CONTROL):
            return self._control(body)
        # Logged on arrival and filled in before the client hears anything, so
        # a client that has its answer always finds it in the log.
        entry = {"method": self.command, "path": self.path, "status": None, "fault": None,
                 "bytes_in": len(body), "bytes_out": 0, "time": time.time()}
        proxy._record(entry)
        try:
            self._serve(proxy._match(self.command, self.path), body, entry)
        except OSError as e:  # the client left, or the server did
            entry.setdefault("error", repr(e))

    def _serve(self, rule: dict | None, body: bytes, entry: dict) -> None:
        proxy = self.server.proxy
        if rule is not None:
            entry["fault"] = rule["kind"]
            if rule["kind"] == "delay":
                proxy._stopping.wait(float(rule.get("seconds", 1)))
                rule = None  # then forward as usual
            elif rule["kind"] != "truncate" and rule.get("when", "before") == "before":
                return self._fault(rule, entry)
        try:
            status, reason, headers, answer = proxy._forward(self.command, self.path, self.headers, body)
        except OSError as e:
            entry["error"] = f"target: {e!r}"
            status, reason, headers, answer = 502, "Bad Gateway", [("Content-Type", "text/plain")], str(e).encode()
        if rule is not None and rule["kind"] != "truncate":
            entry["target_status"] = status
            return self._fault(rule, entry)  # when=after: the server acted, the client never hears
        cut = int(rule.get("bytes", 0)) if rule is not None else None
        self._reply(status, reason, headers, answer, entry, cut)

    # ------------------------------------------------------------ replies

    def _reply(self, status, reason, headers, answer: bytes, entry: dict, cut: int | None = None) -> None:
        self.send_response_only(status, reason)
        for name, value in headers:
            if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        # A HEAD answer announces the object's length but carries no body;
        # keep the server's header then. 1xx/204/304 carry neither.
        no_body = self.command == "HEAD" or status in (204, 304) or status < 200
        length = dict((k.lower(), v) for k, v in headers).get("content-length") if no_body else None
        if length is not None:
            self.send_header("Content-Length", length)
        elif not no_body:
            self.send_header("Content-Length", str(len(answer)))
        if self.close_connection or cut is not None:
            self.send_header("Connection", "close")
        data = b"" if no_body else answer if cut is None else answer[:cut]
        entry.update(status=status, bytes_out=len(data))
        self.end_headers()
        self.wfile.write(data)
        if cut is not None:
            self._close(reset=False)  # orderly: the client reads the short body, then EOF

    def _fault(self, rule: dict, entry: dict) -> None:
        kind = rule["kind"]
        if kind == "status":
            status = int(rule.get("status", 503))
            content_type, answer = error_body(status, self.path, rule.get("flavor", "auto"))
            headers = [("Content-Type", content_type)]
            if rule.get("retry_after") is not None:
                headers.append(("Retry-After", str(rule["retry_after"])))
            headers += list((rule.get("headers") or {}).items())
            return self._reply(status, http.client.responses.get(status, "Error"), headers, answer, entry)
        if kind == "stall":
            self.server.proxy._stopping.wait(float(rule.get("seconds", 10)))
        self._close(reset=kind == "reset")  # no answer: an RST, or (stall) a plain close

    def _close(self, reset: bool) -> None:
        """Ends the connection now: with a TCP RST (linger 0) or an orderly FIN."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            if reset:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
            self.connection.close()

    # ------------------------------------------------------------ control

    def _control(self, body: bytes) -> None:
        proxy, what = self.server.proxy, self.path[len(CONTROL):].split("?", 1)[0]
        try:
            if self.command == "GET" and what == "log":
                answer = proxy.log()
            elif self.command == "GET" and what == "rules":
                answer = proxy.rules()
            elif self.command == "POST" and what == "rules":
                rules = json.loads(body or b"[]")
                answer = [proxy.add_rule(**r) for r in (rules if isinstance(rules, list) else [rules])]
            elif self.command == "POST" and what == "reset":
                proxy.reset()
                answer = {"ok": True}
            else:
                raise LookupError(f"no control {self.command} {self.path}")
            status = 200
        except (ValueError, TypeError, LookupError, re.error) as e:
            status, answer = (404 if isinstance(e, LookupError) else 400), {"error": str(e)}
        data = json.dumps(answer).encode()
        self._reply(status, None, [("Content-Type", "application/json")], data, {})


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True  # a stalled request never holds up stop()
    proxy: "FaultProxy"


class FaultProxy:
    """The proxy in this process: FaultProxy(target).start(); .url; .add_rule(...); .log(); .stop()."""

    def __init__(self, target: str, port: int = 0, keep_alive: bool = False, timeout: float = 120.0):
        parts = urllib.parse.urlsplit(target)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"target must be http://HOST:PORT, not {target!r}")
        self.target = target.rstrip("/")
        self._target_host, self._target_port = parts.hostname, parts.port or 80
        self._target_prefix = parts.path.rstrip("/")
        self.keep_alive, self.timeout, self._port = keep_alive, timeout, port
        self._lock = threading.Lock()
        self._rules: list[dict] = []
        self._log: list[dict] = []
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> "FaultProxy":
        self._stopping.clear()
        self._server = _Server(("127.0.0.1", self._port), _Handler)
        self._server.proxy = self
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes stalls and delays
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FaultProxy":
        return self.start() if self._server is None else self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------ rules and log

    def add_rule(self, kind: str, method: str | None = None, path: str | None = None, times: int | None = 1,
                 **options) -> int:
        """Appends a rule (see the module doc); returns its index."""
        rule = _validate(dict(options, kind=kind, method=method, path=path, times=times))
        with self._lock:
            self._rules.append(rule)
            return len(self._rules) - 1

    def rules(self) -> list[dict]:
        with self._lock:
            return [dict(r) for r in self._rules]

    def log(self) -> list[dict]:
        with self._lock:
            return [dict(e) for e in self._log]

    def reset(self) -> None:
        with self._lock:
            self._rules.clear()
            self._log.clear()

    def _match(self, method: str, path: str) -> dict | None:
        with self._lock:
            for rule in self._rules:
                if rule["times"] is not None and rule["times"] <= 0:
                    continue
                if rule.get("method") and rule["method"] != method:
                    continue
                if rule.get("path") and not re.search(rule["path"], path):
                    continue
                if rule["times"] is not None:
                    rule["times"] -= 1
                return dict(rule)
        return None

    def _record(self, entry: dict) -> None:
        with self._lock:
            self._log.append(entry)

    # ------------------------------------------------------------ forwarding

    def _forward(self, method: str, path: str, headers, body: bytes):
        """One request to the target, headers as received (Host included); the whole answer."""
        conn = http.client.HTTPConnection(self._target_host, self._target_port, timeout=self.timeout)
        try:
            conn.putrequest(method, self._target_prefix + path, skip_host=True, skip_accept_encoding=True)
            for name, value in headers.items():
                if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                    conn.putheader(name, value)
            if body or method in ("POST", "PUT", "PATCH") or "content-length" in (k.lower() for k in headers):
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body or None)
            resp = conn.getresponse()
            answer = resp.read()
            out_headers = [(k, self._rewrite_location(v) if k.lower() == "location" else v)
                           for k, v in resp.getheaders()]
            return resp.status, resp.reason, out_headers, answer
        finally:
            conn.close()

    def _rewrite_location(self, value: str) -> str:
        """Location pointing at the target now points here: fake-gcs-server's resumable
        upload sessions come back as its own URL, and the next chunks must pass here too."""
        if self._server is not None and value.startswith(self.target):
            return self.url + value[len(self.target):]
        return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, help="base URL to forward to, http://127.0.0.1:PORT")
    parser.add_argument("--state", required=True, help='JSON file to write {"url", "pid", "target"} to')
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    parser.add_argument("--rules", default="[]", help="initial rules, a JSON list")
    parser.add_argument("--keep-alive", action="store_true", help="keep client connections open")
    args = parser.parse_args(argv)
    proxy = FaultProxy(args.target, args.port, args.keep_alive)
    for rule in json.loads(args.rules):
        proxy.add_rule(**rule)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    proxy.start()
    tmp = Path(f"{args.state}.tmp{os.getpid()}")
    tmp.write_text(json.dumps({"url": proxy.url, "pid": os.getpid(), "target": proxy.target}) + "\n")
    os.replace(tmp, args.state)
    try:
        done.wait()
    finally:
        proxy.stop()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(args.state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
