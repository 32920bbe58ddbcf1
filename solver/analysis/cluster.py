"""Independent re-solves on a Dask cluster given by address (issue 31, beyond one machine).

``procure sensitivity --scheduler tcp://HOST:PORT`` sends each parameter's sweep to the
cluster as one task. Dask ships as an extra: ``pip install 'procure[cluster]'``; the
workers need ``procure`` installed (the same version) but none of the driver's files (the
catalog and candidate table travel with each task). Each task is the same computation as
in this process, so the answer is the same (tests/test_cluster.py, slow: a real scheduler
and two workers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from solver.common.errors import InputError, Problem

T = TypeVar("T")
R = TypeVar("R")
INSTALL = "dask is not installed: pip install 'procure[cluster]'"
CONNECT_TIMEOUT = "20s"


def check_scheduler(address: str) -> None:
    """A scheduler address is ``tcp://``, ``tls://`` or ``inproc://`` HOST:PORT."""
    if not address.startswith(("tcp://", "tls://", "inproc://")) or address[-3:] == "://":
        raise InputError([Problem("--scheduler", "", address,
                                  "a Dask scheduler address: tcp://HOST:PORT")])


@contextmanager
def dask_client(address: str, flag: str = "--scheduler") -> Iterator[Any]:
    """A client of the Dask scheduler at ``address`` (closed at the end of the block); an
    input error (exit 2) when dask is missing or the scheduler cannot be reached."""
    check_scheduler(address)
    try:
        from dask.distributed import Client
    except ImportError:
        raise InputError([Problem(flag, "", address, INSTALL)]) from None
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError) as exc:
        raise InputError([Problem(flag, "", address,
                                  f"cannot reach the Dask scheduler: {exc}")]) from None
    try:
        yield client
    finally:
        client.close()


def map_on_cluster(client: Any, task: Callable[[T], R], items: Sequence[T],
                   progress: Callable[[int, int], None] | None = None) -> list[R]:
    """``[task(item) for item in items]``, each on the cluster; results in ``items``' order.
    An exception in a task is raised here (an input error as it is: this process would have
    raised it). ``progress(done, total)`` is told as results arrive."""
    from dask.distributed import as_completed

    futures = [client.submit(task, item, pure=False) for item in items]
    order = {future.key: index for index, future in enumerate(futures)}
    results: dict[int, R] = {}
    for future in as_completed(futures):
        results[order[future.key]] = future.result()
        if progress is not None:
            progress(len(results), len(items))
    return [results[index] for index in range(len(items))]
