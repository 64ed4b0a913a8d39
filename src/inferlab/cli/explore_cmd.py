"""``inferlab explore``: the explorer web page on 127.0.0.1 (:mod:`inferlab.explore`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

#: The port tried first when none is given; if it is taken the system chooses one.
DEFAULT_PORT = 8765


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``explore`` on the subcommand parser."""
    p = sub.add_parser("explore", help="interactive explorer in the browser (local web page)",
                       description="Serve the explorer on 127.0.0.1: knobs for model, GPU, layout, precision, "
                                   "batch, lengths and techniques; roofline, batch curves, memory, cost, explain(); "
                                   "serving sweeps; two configurations side by side. Ctrl-C stops it.")
    p.add_argument("model", nargs="?", help="starting model (default: the page's)")
    p.add_argument("gpu", nargs="?", help="starting GPU (default: the page's)")
    p.add_argument("--port", type=int, default=None,
                   help=f"port on 127.0.0.1 (default: {DEFAULT_PORT}, or one the system chooses if it is taken)")
    p.add_argument("--no-browser", action="store_true", help="print the address only; do not open a browser")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    """Run ``inferlab explore`` until interrupted."""
    import threading
    from urllib.parse import urlencode

    from ..errors import InferlabError
    from ..explore.server import ExplorerServer, warm_up

    if args.port is not None and not 0 <= args.port <= 65535:
        raise InferlabError(f"--port must be in [0, 65535], got {args.port}")
    if args.model or args.gpu:  # an unknown name is refused here, with the closest ones, not on the page
        from ..inputs.resolve import resolve_hardware, resolve_model

        if args.model:
            resolve_model(args.model)
        if args.gpu:
            resolve_hardware(args.gpu)
    try:
        server = ExplorerServer(DEFAULT_PORT if args.port is None else args.port)
    except OSError as exc:
        if args.port is not None:
            raise InferlabError(f"cannot listen on 127.0.0.1:{args.port} ({exc.strerror}); "
                                "choose another --port, or 0 for any free one") from None
        server = ExplorerServer(0)
    query = {k: v for k, v in (("model", args.model), ("gpu", args.gpu)) if v}
    url = server.url + (f"?{urlencode(query)}" if query else "")
    threading.Thread(target=warm_up, daemon=True).start()
    print(f"inferlab explorer at {url} (Ctrl-C stops it)", flush=True)
    if not args.no_browser:
        import webbrowser

        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.server_close()
