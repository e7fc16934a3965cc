"""Running the ranks of an InProcessGroup as threads, for tests of collective calls."""

from __future__ import annotations

import threading
from typing import Any, Callable


def run_ranks(group: Any, ranks: int, body: Callable[[int, Any], Any], timeout: float = 60) -> dict[int, Any]:
    """Calls body(rank, group.transport(rank)) on one thread per rank and returns each
    rank's result; the first exception any rank raised is re-raised here."""
    results: dict[int, Any] = {}
    failures: list[BaseException] = []

    def run(rank: int) -> None:
        try:
            results[rank] = body(rank, group.transport(rank))
        except BaseException as e:  # re-raised below, on the test's thread
            failures.append(e)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    assert not any(t.is_alive() for t in threads), "a rank did not finish"
    if failures:
        raise failures[0]
    return results
