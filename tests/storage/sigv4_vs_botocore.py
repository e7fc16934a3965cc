#!/usr/bin/env python3
"""reshard's S3 Signature V4 against botocore's, on a few hundred random requests.

    sigv4_vs_botocore.py PATH/TO/s3_sign_tool [--count N]

Random methods, keys with odd characters (spaces, '+', '=', '~', '%', unicode,
"//", "../"), query parameters (some without values), headers (mixed case,
runs of spaces), bodies, with and without a session token, path-style and
virtual-hosted URLs, are signed by botocore.auth.S3SigV4Auth at a fixed time
and by reshard (the s3_sign_tool program); Authorization, X-Amz-Date,
X-Amz-Content-SHA256, X-Amz-Security-Token, the Host and the URL must agree
exactly. Seeded: prints its seed, takes RESHARD_SEED.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import re
import string
import subprocess
import sys
from urllib.parse import urlsplit

import botocore.auth
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.utils import percent_encode

KEY_CHARS = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
             + list(" !\"#$%&'()*+,-.:;<=>?@[\\]^_`{|}~") + ["/", "/", "é", "ü", "日本", "😀", "Ω", "\u00a0"])
QUERY_NAMES = ["uploadId", "partNumber", "prefix", "continuation-token", "list-type", "uploads", "delimiter",
               "encoding-type", "max-keys", "key-marker", "upload-id-marker", "versionId", "response-content-type",
               "start-after", "x-id"]
HEADERS = ["Range", "Content-Type", "If-None-Match", "If-Match", "x-amz-meta-Note", "X-Amz-Storage-Class",
           "x-amz-acl", "Content-Disposition", "Cache-Control", "x-amz-checksum-crc32"]
ENDPOINTS = ["http://127.0.0.1:8333", "http://localhost:80", "https://s3.eu-west-2.amazonaws.com",
             "https://minio.example.com:443", "http://LocalHost:9000", "https://store.example.com:9443/base"]
BUCKETS = ["examplebucket", "reshard-test", "my.dotted.bucket", "b-1"]
REGIONS = ["us-east-1", "eu-west-2", "ap-southeast-1"]


def random_text(rng: random.Random, chars: list[str], low: int, high: int) -> str:
    return "".join(rng.choice(chars) for _ in range(rng.randint(low, high)))


def random_header_value(rng: random.Random) -> str:
    words = [random_text(rng, list("abcXYZ019-_.=*\"/;,:"), 1, 8) for _ in range(rng.randint(1, 4))]
    value = "".join(w + " " * rng.choice([1, 1, 2, 3]) for w in words)
    return " " * rng.randint(0, 2) + value.rstrip() + " " * rng.randint(0, 2)


def dns_label(bucket: str) -> bool:
    return re.fullmatch(r"[a-z0-9][a-z0-9-]{0,61}[a-z0-9]|[a-z0-9]", bucket) is not None


def random_request(rng: random.Random) -> dict:
    endpoint = rng.choice(ENDPOINTS)
    request = {
        "method": rng.choice(["GET", "PUT", "POST", "DELETE", "HEAD"]),
        "endpoint": endpoint,
        "path_style": rng.random() < 0.5,
        "bucket": rng.choice(BUCKETS),
        "key": "" if rng.random() < 0.1 else random_text(rng, KEY_CHARS, 1, 40),
        "query": [],
        "headers": [],
        "body_hex": bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 0, 1, 17, 300, 2000]))).hex(),
        "access_key": "AKIA" + random_text(rng, list("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"), 16, 16),
        "secret_key": random_text(rng, list(string.ascii_letters + string.digits + "+/"), 40, 40),
        "token": "" if rng.random() < 0.5 else random_text(rng, list("abcdefXYZ0123456789+/="), 20, 300),
        "region": rng.choice(REGIONS),
        "time": rng.randint(1_300_000_000, 2_000_000_000),
    }
    for name in rng.sample(QUERY_NAMES, rng.randint(0, 4)):
        value = "" if rng.random() < 0.3 else random_text(rng, KEY_CHARS, 1, 12)
        request["query"].append([name, value])
    for name in rng.sample(HEADERS, rng.randint(0, 4)):
        request["headers"].append([rng.choice([name, name.lower(), name.upper()]), random_header_value(rng)])
    return request


def botocore_sign(request: dict) -> dict:
    scheme, rest = request["endpoint"].split("://", 1)
    authority, _, base = rest.partition("/")
    base = "/" + base if base else ""
    key = percent_encode(request["key"], safe="/~")
    bucket = request["bucket"]
    if request["path_style"] or not dns_label(bucket):
        url = f"{scheme}://{authority}{base}/{bucket}" + (f"/{key}" if request["key"] else "")
    else:
        url = f"{scheme}://{bucket}.{authority}{base}/{key}"
    when = datetime.datetime.fromtimestamp(request["time"], datetime.timezone.utc).replace(tzinfo=None)
    botocore.auth.get_current_datetime = lambda: when
    aws = AWSRequest(method=request["method"], url=url, headers=dict(request["headers"]),
                     data=bytes.fromhex(request["body_hex"]), params=dict(request["query"]))
    credentials = Credentials(request["access_key"], request["secret_key"], request["token"] or None)
    S3SigV4Auth(credentials, "s3", request["region"]).add_auth(aws)
    signed = {"authorization": aws.headers["Authorization"], "x-amz-date": aws.headers["X-Amz-Date"],
              "x-amz-content-sha256": aws.headers["X-Amz-Content-SHA256"],
              "host": botocore.auth._host_from_url(url), "url": url}
    if request["token"]:
        signed["x-amz-security-token"] = aws.headers["X-Amz-Security-Token"]
    return signed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tool", help="the s3_sign_tool program")
    parser.add_argument("--count", type=int, default=400)
    args = parser.parse_args()
    seed = int(os.environ.get("RESHARD_SEED") or random.SystemRandom().randrange(2**32))
    print(f"sigv4_vs_botocore: RESHARD_SEED={seed}", flush=True)
    rng = random.Random(seed)
    requests = [random_request(rng) for _ in range(args.count)]
    run = subprocess.run([args.tool], input="".join(json.dumps(r) + "\n" for r in requests), capture_output=True,
                         text=True, check=False)
    ours = [json.loads(line) for line in run.stdout.splitlines()]
    if run.returncode != 0 or len(ours) != len(requests):
        print(f"s3_sign_tool failed ({run.returncode}):\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
        return 1
    mismatches = 0
    for request, mine in zip(requests, ours):
        theirs = botocore_sign(request)
        if mine != theirs:
            mismatches += 1
            if mismatches <= 5:
                print(f"MISMATCH for {json.dumps(request, ensure_ascii=False)}\n"
                      f"  botocore: {theirs}\n  reshard:  {mine}")
    print(f"sigv4_vs_botocore: {len(requests) - mismatches} of {len(requests)} requests signed alike")
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
