"""Independent units of work, run here or on a Dask cluster.

A sweep's configurations (and the chunks of a large grid), a plan's candidate
configurations and validation's case groups do not depend on each other. :func:`map_units`
runs them in order here, or, given a ``dask.distributed`` client, spreads them over its
workers and gathers the results in the same order; each unit computes exactly what it
computes serially, so the results are identical. Dask is the optional ``dask`` extra
(``pip install 'inferlab[dask]'``) and is imported only when a client is made here.

>>> map_units(abs, [-2, 3])
[2, 3]
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from .errors import InferlabError, SpecError

#: Environment of the local cluster's worker processes, beside Dask's own. Dask sets
#: ``MALLOC_TRIM_THRESHOLD_``, which also fixes glibc's mmap threshold at 128 KiB: every
#: temporary array of a sweep block is then mapped and unmapped, and the arithmetic ran 2.4x
#: slower than in this process. 32 MiB is the most glibc's own adaptive threshold reaches.
WORKER_ENVIRON = {"MALLOC_MMAP_THRESHOLD_": 32 << 20}

#: How long to wait for ``--scheduler`` to answer.
CONNECT_TIMEOUT = "5s"

T = TypeVar("T")
R = TypeVar("R")


def check_client(client: Any) -> Any:
    """``client`` if it can map and gather (a ``dask.distributed.Client``), else a clear error."""
    if client is not None and not (callable(getattr(client, "map", None)) and callable(getattr(client, "gather", None))):
        raise SpecError(f"client must be a dask.distributed.Client (or None to run here), got {type(client).__name__}")
    return client


def map_units(fn: Callable[[T], R], units: Sequence[T], client: Any = None) -> list[R]:
    """``[fn(u) for u in units]``, on ``client``'s workers when one is given (results in order).

    ``fn`` and the units are pickled to the workers: a module-level function (or a
    :func:`functools.partial` of one) and plain data.
    """
    if check_client(client) is None or len(units) == 0:
        return [fn(u) for u in units]
    futures = client.map(fn, list(units), pure=False)
    return list(client.gather(futures))


@contextlib.contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None) -> Iterator[Any]:
    """A client for ``--workers N`` (a local cluster of N single-threaded worker processes) or
    ``--scheduler ADDRESS`` (an existing cluster); None, to run here, when neither is given.

    Raises
    ------
    SpecError
        Both given, or a worker count below 1.
    InferlabError
        Dask is not installed, or the scheduler cannot be reached.
    """
    if workers is not None and scheduler is not None:
        raise SpecError("give --workers (a local cluster) or --scheduler (an existing one), not both")
    if workers is None and scheduler is None:
        yield None
        return
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise SpecError(f"--workers must be a whole number of processes, at least 1, got {workers!r}")
    if workers is not None and workers > max_local_workers():
        raise SpecError(f"--workers {workers} is more processes than this machine runs usefully (at most "
                        f"{max_local_workers()}: four per CPU core); for more, start a Dask cluster over several "
                        "machines and give its --scheduler")
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise InferlabError("--workers and --scheduler need dask: pip install 'inferlab[dask]'") from None
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT)
        except OSError as exc:
            raise InferlabError(f"cannot reach the Dask scheduler at {scheduler} ({exc})") from None
        except (ValueError, TypeError) as exc:  # an address dask cannot read: no port, empty
            raise SpecError(f"--scheduler {scheduler!r} is not a scheduler address ({exc}); give host:port, e.g. "
                            "tcp://10.0.0.5:8786") from None
        with client:
            yield client
        return
    import dask

    with dask.config.set({f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in WORKER_ENVIRON.items()}):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0")
    with cluster, Client(cluster) as client:
        yield client


def max_local_workers() -> int:
    """Most processes a local cluster takes: four per CPU core (each worker is a Python process
    holding the catalog; past that they only contend, and hundreds exhaust the OS's semaphores)."""
    return 4 * (os.cpu_count() or 1)
