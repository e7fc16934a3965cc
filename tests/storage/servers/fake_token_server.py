#!/usr/bin/env python3
"""A stand-in for Google's OAuth 2.0 token endpoint, for the GCS credential tests.

It listens on 127.0.0.1 (a free port) and answers POST /token the way
https://oauth2.googleapis.com/token does, after checking the request as
strictly as Google would:

  grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer (a service account):
    the assertion must be an RS256 JWT that verifies with --public-key, whose
    header has kid = --key-id, and whose claims have iss = --client-email,
    aud = this server's /token URL, scope = --scope, iat within a minute of
    now and exp = iat + 3600;
  grant_type=refresh_token (an authorized user): client_id, client_secret and
    refresh_token must equal --client-id, --client-secret, --refresh-token.

A good request gets {"access_token", "expires_in": --expires-in, "token_type":
"Bearer"} with a new token each time; a bad one gets 400 {"error":
"invalid_grant", "error_description": why}. GET /__log__ lists every request:
[{"grant_type", "ok", "why", "access_token", "header", "claims"}, ...].

    fake_token_server.py --state FILE [options]
writes {"url", "token_uri", "pid"} to FILE and runs until SIGTERM or SIGINT.
Needs PyJWT and cryptography (python/requirements.txt).
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import os
import secrets
import signal
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import jwt  # PyJWT

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


class Refused(Exception):
    pass


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, format, *args):
        pass

    def _answer(self, status: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def do_GET(self):
        if self.path == "/__log__":
            with self.server.lock:
                return self._answer(200, list(self.server.log))
        self._answer(404, {"error": "not_found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        form = urllib.parse.parse_qs(self.rfile.read(length).decode(), keep_blank_values=True)
        field = lambda name: (form.get(name) or [""])[0]  # noqa: E731
        entry = {"grant_type": field("grant_type"), "ok": False, "why": None, "access_token": None,
                 "header": None, "claims": None,
                 "content_type": self.headers.get("Content-Type")}
        try:
            if self.path != "/token":
                raise Refused(f"no endpoint {self.path}")
            if entry["grant_type"] == JWT_BEARER:
                entry["header"], entry["claims"] = self.server.check_assertion(field("assertion"))
            elif entry["grant_type"] == "refresh_token":
                self.server.check_refresh(field("client_id"), field("client_secret"), field("refresh_token"))
            else:
                raise Refused(f"unsupported grant_type {entry['grant_type']!r}")
        except Refused as e:
            entry["why"] = str(e)
            with self.server.lock:
                self.server.log.append(entry)
            return self._answer(400, {"error": "invalid_grant", "error_description": str(e)})
        token = f"ya29.fake-{len(self.server.log)}-{secrets.token_hex(8)}"
        entry.update(ok=True, access_token=token)
        with self.server.lock:
            self.server.log.append(entry)
        self._answer(200, {"access_token": token, "expires_in": self.server.args.expires_in, "token_type": "Bearer"})


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, args):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.args = args
        self.lock = threading.Lock()
        self.log: list[dict] = []
        self.public_key = Path(args.public_key).read_text() if args.public_key else None

    @property
    def token_uri(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/token"

    def check_assertion(self, assertion: str):
        if self.public_key is None:
            raise Refused("this server takes no service-account assertions")
        try:
            header = jwt.get_unverified_header(assertion)
            claims = jwt.decode(assertion, self.public_key, algorithms=["RS256"], audience=self.token_uri,
                                issuer=self.args.client_email, options={"require": ["exp", "iat", "iss", "aud"]})
        except jwt.PyJWTError as e:
            raise Refused(f"the assertion does not verify: {e}") from None
        if header.get("typ") != "JWT" or header.get("alg") != "RS256":
            raise Refused(f"bad JWT header {header}")
        if self.args.key_id is not None and header.get("kid") != self.args.key_id:
            raise Refused(f"kid {header.get('kid')!r} is not {self.args.key_id!r}")
        if claims.get("scope") != self.args.scope:
            raise Refused(f"scope {claims.get('scope')!r} is not {self.args.scope!r}")
        if abs(claims["iat"] - time.time()) > 60 or claims["exp"] - claims["iat"] != 3600:
            raise Refused(f"iat {claims['iat']} / exp {claims['exp']} are not now / now + 3600")
        return header, claims

    def check_refresh(self, client_id: str, client_secret: str, refresh_token: str) -> None:
        expected = (self.args.client_id, self.args.client_secret, self.args.refresh_token)
        if None in expected:
            raise Refused("this server takes no refresh tokens")
        if (client_id, client_secret, refresh_token) != expected:
            raise Refused("wrong client id, client secret or refresh token")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state", required=True, help='JSON file to write {"url", "token_uri", "pid"} to')
    parser.add_argument("--public-key", help="PEM public key that service-account assertions verify with")
    parser.add_argument("--client-email", help="the assertion's expected iss")
    parser.add_argument("--key-id", help="the assertion header's expected kid")
    parser.add_argument("--scope", default="https://www.googleapis.com/auth/devstorage.read_write")
    parser.add_argument("--client-id")
    parser.add_argument("--client-secret")
    parser.add_argument("--refresh-token")
    parser.add_argument("--expires-in", type=int, default=3600, help="lifetime of the tokens handed out")
    args = parser.parse_args(argv)
    server = _Server(args)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    tmp = Path(f"{args.state}.tmp{os.getpid()}")
    tmp.write_text(json.dumps({"url": f"http://127.0.0.1:{server.server_address[1]}",
                               "token_uri": server.token_uri, "pid": os.getpid()}) + "\n")
    os.replace(tmp, args.state)
    try:
        done.wait()
    finally:
        server.shutdown()
        server.server_close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(args.state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
