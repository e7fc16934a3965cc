"""Failing together from Python (reshard.jax, reshard.orbax): the collective calls agree
through _core._agreed, the C++ pipelines' own agreement, so that a preparation failed on
one process reaches every process, named as a C++ pipeline names it."""

from __future__ import annotations

import reshard
from reshard import _core, errors


def agree(t: reshard.Transport, failing: set[int], what: str) -> tuple[type, str] | int:
    """This rank's result of agreeing on a preparation that raises on the ranks in `failing`."""

    def prepare():
        if t.rank in failing:
            raise ValueError(f"bad sharding on {t.rank}")
        return t.rank * 10

    try:
        return _core._agreed(t, prepare, what)
    except Exception as e:  # noqa: BLE001 - the test compares what each rank raised
        return type(e), str(e)


def test_one_failed_preparation_fails_every_process_naming_it_as_the_pipelines_do():
    group = reshard.InProcessGroup(3)
    for r in range(3):
        group.transport(r).timeout = 3600  # told, not timed out: a wait this long fails the test run
    # The second agreement, on the same transports, shows them still usable.
    got, again = zip(*group.run(lambda t: (agree(t, {1}, "moving x"), agree(t, set(), "again"))))
    assert got[1] == (ValueError, "bad sharding on 1")  # its own error, its type kept
    peer = (errors.PeerFailedError, "moving x: process 1 failed: ValueError: bad sharding on 1")
    assert got[0] == peer and got[2] == peer
    assert again == (0, 10, 20)


def test_several_failed_preparations_name_the_first():
    got = reshard.InProcessGroup(3).run(lambda t: agree(t, {1, 2}, "moving x"))
    assert got[0] == (errors.PeerFailedError, "moving x: process 1 failed: ValueError: bad sharding on 1")
    assert got[1] == (ValueError, "bad sharding on 1") and got[2] == (ValueError, "bad sharding on 2")


def test_without_a_transport_or_with_one_process_the_preparation_runs_alone():
    assert _core._agreed(None, lambda: "x", "moving x") == "x"
    assert reshard.InProcessGroup(1).run(lambda t: _core._agreed(t, lambda: t.size, "moving x")) == [1]
