"""The explorer: turn a knob, watch the estimate move, in the browser or in Jupyter.

``inferlab explore`` serves the page on 127.0.0.1 (:mod:`.server`); in a notebook
:func:`explore` starts the same server in the background and shows the page inline.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

_SERVER: Any = None


def explore(*, port: int = 0, height: int = 900, **knobs: Any) -> Any:
    """Show the explorer in a notebook (an ``IFrame`` on a server in the background).

    Parameters
    ----------
    port : int
        Port of the server on 127.0.0.1 (0: the system chooses); the first call starts it,
        later calls reuse it.
    height : int [pixel]
        Height of the frame.
    **knobs
        The starting configuration, by the page's names (:class:`.config.Knobs`:
        ``model``, ``gpu``, ``tp``, ``batch``, ``kv``...).

    Returns
    -------
    IPython.display.IFrame, or the page's URL (str) outside IPython.
    """
    global _SERVER
    from dataclasses import fields

    from ..errors import UnknownNameError
    from .config import Knobs
    from .server import start

    names = [f.name for f in fields(Knobs)]
    for name in knobs:
        if name not in names:
            raise UnknownNameError("explorer knob", name, names)

    query = Knobs.from_query({k: str(v) for k, v in knobs.items()}).query()  # checks the knobs
    if _SERVER is None:
        _SERVER = start(port)
    url = _SERVER.url + (f"?{urlencode(query)}" if query else "")
    try:
        from IPython.display import IFrame
    except ImportError:
        return url
    return IFrame(url, width="100%", height=height)
