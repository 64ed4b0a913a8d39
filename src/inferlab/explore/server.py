"""The explorer's local web server: one static page and a small JSON API on 127.0.0.1.

Standard library only (:mod:`http.server`), so the explorer adds no dependency and no asset
comes from the network: the page, its script and its style ship in ``explore/static``.

Routes
------
``GET /``, ``/explorer.js``, ``/explorer.css``
    The page.
``GET /api/catalog``
    Models, GPUs, engines, formats (:func:`.views.catalog_view`).
``GET /api/estimate?model=...&gpu=...``
    The estimate tab (:func:`.views.estimate_view`; knobs: :class:`.config.Knobs`).
``GET /api/serve?...&mode=rate|concurrency&loads=1,2,4&requests=300&ttft_slo_ms=..&tpot_slo_ms=..``
    Starts a serving sweep in the background; answers ``{"job": id}``.
``GET /api/job?id=...``
    The sweep's progress (``done`` of ``total`` loads) and, once finished, its curve
    (:func:`.views.load_curve_view`) or its error.

A knob the library refuses, or a configuration that does not run
(:class:`~inferlab.errors.InferlabError`), is an answer, not a failed request: 200 with
``{"error": "one line"}``, which the page shows (a browser logs every 4xx as a console error).
"""

from __future__ import annotations

import itertools
import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

#: The library's lazily imported modules are loaded under this lock: two threads importing the
#: same module at once could see it half-initialised. Every call into the library takes it.
LIBRARY_LOCK = threading.Lock()

_STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
           "/explorer.js": ("explorer.js", "text/javascript; charset=utf-8"),
           "/explorer.css": ("explorer.css", "text/css; charset=utf-8")}

#: Sweeps a page may ask for: at most this many loads, this many requests per load.
MAX_LOADS, MAX_REQUESTS = 12, 2000
#: Sweeps whose results are kept for the page to fetch.
KEEP_JOBS = 16


class _Jobs:
    """Serving sweeps running in background threads, by id."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._jobs: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def start(self, query: dict[str, list[str]]) -> str:
        from ..errors import SpecError
        from .config import Knobs

        knobs = Knobs.from_query(query)
        mode = _one(query, "mode", "concurrency")
        if mode not in ("rate", "concurrency"):
            raise SpecError(f"mode must be 'rate' or 'concurrency', got {mode!r:.40}")
        raw = _one(query, "loads", "1,4,16,64")
        try:
            loads = sorted({float(x) for x in raw.split(",") if x.strip()})
        except ValueError:
            loads = []
        if not loads or len(loads) > MAX_LOADS or loads[0] <= 0 or not math.isfinite(loads[-1]):
            raise SpecError(f"loads must be 1 to {MAX_LOADS} positive finite numbers, got {raw:.60}")
        try:
            requests = float(_one(query, "requests", "300"))
        except ValueError:
            requests = math.nan
        if not (1 <= requests <= MAX_REQUESTS and requests == int(requests)):
            raise SpecError(f"requests must be a whole number in [1, {MAX_REQUESTS}], got "
                            f"{_one(query, 'requests', ''):.20}")
        requests = int(requests)
        slo = (_one(query, "ttft_slo_ms", ""), _one(query, "tpot_slo_ms", ""))
        slo_s = tuple(_slo_ms(name, x) / 1e3 for name, x in zip(("ttft_slo_ms", "tpot_slo_ms"), slo)) \
            if all(slo) else (None, None)
        job_id = str(next(self._ids))
        with self._lock:
            for old in list(self._jobs)[:-KEEP_JOBS]:  # finished sweeps nobody asks about any more
                del self._jobs[old]
            self._jobs[job_id] = {"done": 0, "total": len(loads), "curve": None, "error": None}
        threading.Thread(target=self._run, args=(job_id, knobs, mode, loads, requests, slo_s), daemon=True).start()
        return job_id

    def _run(self, job_id: str, knobs: Any, mode: str, loads: list[float], requests: int,
             slo_s: tuple[float | None, float | None]) -> None:
        from ..errors import InferlabError
        from ..serving.serve import serve
        from ..serving.curve import LoadCurve
        from .views import load_curve_view

        import numpy as np

        job = self._jobs[job_id]
        results = []
        try:
            for load in loads:
                load_kw = {"rate": load} if mode == "rate" else {"concurrency": int(load)}
                with LIBRARY_LOCK:
                    results.append(serve(**knobs.serve_kwargs(), num_requests=requests, **load_kw))
                job["done"] += 1
            with LIBRARY_LOCK:
                curve = LoadCurve(mode, np.asarray(loads), tuple(results), ttft_slo_s=slo_s[0], tpot_slo_s=slo_s[1])
                job["curve"] = load_curve_view(curve)
        except InferlabError as exc:
            job["error"] = str(exc)
        except Exception as exc:  # noqa: BLE001 - a worker thread must end its job, never leave it pending
            job["error"] = f"internal error ({type(exc).__name__}: {exc}); please report it"

    def status(self, job_id: str) -> dict[str, Any]:
        from ..errors import SpecError

        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise SpecError(f"no serving sweep {job_id!r:.20}")
        return dict(job)


def _one(query: dict[str, list[str]], name: str, default: str) -> str:
    values = query.get(name)
    return values[-1].strip() if values else default


class _Handler(BaseHTTPRequestHandler):
    server: ExplorerServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Quiet: a request log on stderr would bury the URL line."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urlsplit(self.path)
        if url.path in _STATIC:
            name, kind = _STATIC[url.path]
            self._send(200, kind, resources.files(__package__).joinpath("static", name).read_bytes())
            return
        if url.path == "/favicon.ico":
            self._send(204, "image/x-icon", b"")
            return
        api = {"/api/catalog": self._catalog, "/api/estimate": self._estimate, "/api/serve": self._serve,
               "/api/job": self._job}.get(url.path)
        if api is None:
            self._json(404, {"error": f"no such page: {url.path[:80]}"})
            return
        from ..errors import InferlabError

        try:
            self._json(200, api(parse_qs(url.query)))
        except (InferlabError, ValueError) as exc:
            self._json(200, {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__})

    def _catalog(self, query: dict[str, list[str]]) -> dict[str, Any]:
        from .views import catalog_view

        with LIBRARY_LOCK:
            return catalog_view()

    def _estimate(self, query: dict[str, list[str]]) -> dict[str, Any]:
        from .config import Knobs
        from .views import estimate_view

        with LIBRARY_LOCK:
            return estimate_view(Knobs.from_query(query))

    def _serve(self, query: dict[str, list[str]]) -> dict[str, Any]:
        return {"job": self.server.jobs.start(query)}

    def _job(self, query: dict[str, list[str]]) -> dict[str, Any]:
        return self.server.jobs.status(_one(query, "id", ""))

    def _json(self, status: int, data: Any) -> None:
        self._send(status, "application/json", json.dumps(data, allow_nan=False).encode())

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


class ExplorerServer(ThreadingHTTPServer):
    """The explorer on ``host:port`` (port 0: the system chooses); :attr:`url` is its address."""

    daemon_threads = True

    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        super().__init__((host, port), _Handler)
        self.jobs = _Jobs()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"


def warm_up() -> None:
    """Load the library's modules and the default configuration's specs once, under the lock,
    before (or while) the first requests come, so no two threads import the same module."""
    from .config import Knobs
    from .views import catalog_view, estimate_view

    with LIBRARY_LOCK:
        catalog_view()
        estimate_view(Knobs())
        from ..serving.serve import serve  # noqa: F401 - the serving tab's modules
        from ..serving.curve import LoadCurve  # noqa: F401


def start(port: int = 0, host: str = "127.0.0.1") -> ExplorerServer:
    """Start the explorer on a background thread and return the server (``.url``,
    ``.shutdown()``); the library warms up on another thread meanwhile."""
    server = ExplorerServer(port, host)
    threading.Thread(target=warm_up, daemon=True).start()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _slo_ms(name: str, text: str) -> float:
    """An SLO knob of the serving sweep [ms]: a positive finite number, else one line naming it."""
    from ..errors import SpecError

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise SpecError(f"{name} must be a positive number of milliseconds, got {text:.20}")
    return value
