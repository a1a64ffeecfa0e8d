"""`hoh view`: find the workspaces, bind the loopback port, print the URL, open a browser, serve until Ctrl-C."""

from __future__ import annotations

import sys
import webbrowser
from pathlib import Path


def run(workspaces: list[Path], host: str, port: int | None, open_browser: bool) -> int:
    from ..view.serve import bind, serve
    from ..view.sources import find_workspaces

    roots = find_workspaces(workspaces)
    bound = bind(host, port)
    count = f"{len(roots)} workspaces" if len(roots) > 1 else str(roots[0])
    print(f"hoh view of {count} at {bound.url} (read-only; Ctrl-C to stop)", flush=True)
    if open_browser:
        webbrowser.open(bound.url)
    try:
        serve(roots, bound)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a view ends: not an interruption of anything
    print("hoh view stopped", file=sys.stderr, flush=True)
    return 0
