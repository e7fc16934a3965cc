"""reshard.transport(): a TCP job of processes that no MPI launcher started, joined by
rank, size and coordinator or from torchrun's environment, and its typed errors."""

from __future__ import annotations

import pathlib
import re
import time

import pytest

import reshard
from conftest import SEED
from process_loop import free_port, run_loop

SCRIPT = pathlib.Path(__file__).with_name("tcp_transport_job.py")

# How each way of naming the job tells process i its place, given the coordinator's port.
EXPLICIT = ("explicit", lambda port, i: {"JOB_RANK": str(i), "JOB_SIZE": "2", "JOB_COORDINATOR": f"127.0.0.1:{port}"})
TORCHRUN = ("torchrun", lambda port, i: {"RANK": str(i), "WORLD_SIZE": "2", "LOCAL_RANK": str(i),
                                         "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                                         "MASTER_PORT": str(port)})


@pytest.mark.parametrize("rendezvous, env", [EXPLICIT, TORCHRUN], ids=["explicit", "torchrun"])
def test_two_processes_join_one_job_and_move_an_array(rendezvous, env):
    port = free_port()
    mode = "explicit" if rendezvous == "explicit" else "auto"
    statuses, output = run_loop(SCRIPT, mode, str(SEED), processes=2, timeout=60,
                                env_of=lambda i: {**env(port, i), "RESHARD_TRANSPORT": "auto"})
    report = f"RESHARD_SEED={SEED}\n{output}"
    assert statuses == [0, 0], report
    ranks = sorted(int(r) for r in re.findall(rf"rank (\d+) ok tcp {rendezvous}\b", output))
    assert ranks == [0, 1], report


@pytest.mark.parametrize("given, missing", [
    ({"rank": 0}, "size, coordinator"),
    ({"rank": 0, "size": 2}, "coordinator"),
    ({"coordinator": "127.0.0.1:1"}, "rank, size"),
])
def test_a_partial_job_is_a_value_error_naming_what_is_missing(given, missing):
    with pytest.raises(ValueError, match=f"^reshard.transport: {missing} missing"):
        reshard.transport(**given)


@pytest.mark.parametrize("given, error, words", [
    ({"rank": "0", "size": 2, "coordinator": "127.0.0.1:1"}, TypeError, "rank must be an int"),
    ({"rank": 0, "size": 2, "coordinator": 29500}, TypeError, "coordinator must be a 'host:port' str"),
    ({"rank": 2, "size": 2, "coordinator": "127.0.0.1:1"}, ValueError, r"rank must be in \[0, 2\), not 2"),
    ({"rank": 0, "size": 0, "coordinator": "127.0.0.1:1"}, ValueError, "size must be at least 1"),
    ({"timeout": 0}, ValueError, "timeout must be positive"),
])
def test_bad_arguments_are_typed_and_named(given, error, words):
    with pytest.raises(error, match=words):
        reshard.transport(**given)


def test_an_unreachable_coordinator_fails_within_the_timeout_naming_it():
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    start = time.monotonic()
    with pytest.raises(reshard.errors.TransportTimeoutError, match=re.escape(address)):
        reshard.transport(rank=1, size=2, coordinator=address, timeout=1.0)
    assert time.monotonic() - start < 10


def test_a_process_of_no_job_is_a_job_of_one(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "RESHARD_RANK", "RESHARD_SIZE",
                 "RESHARD_COORDINATOR", "SLURM_PROCID", "SLURM_NTASKS", "RESHARD_TRANSPORT"):
        monkeypatch.delenv(name, raising=False)
    t = reshard.transport()
    assert (t.kind, t.rendezvous, t.rank, t.size) == ("none", "single", 0, 1)
    assert t.all_gather(b"x") == [b"x"]
