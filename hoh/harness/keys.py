"""The model keys hoh's egress proxy adds, held out of hoh's own environment while a run goes on.

A key comes from the user's environment (`api_key_env`). Left there, every process hoh's process starts would
inherit it: hoh builds its own children's environments from nothing (`process.call`, git, bwrap), but the
libraries it drives do not — Harbor's Docker environment runs `docker compose` with a copy of `os.environ`. So a
run (`withheld`, around a Runtime's session) takes each key out of `os.environ` and holds it here, where only
the egress proxy (`HarnessAdapter.api_key`) and the scrub of known secrets read it; it goes back when the run
ends, for the library user whose process it is.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Iterable, Iterator

_LOCK = threading.Lock()
_HELD: dict[str, str] = {}
"""Keys a run took out of `os.environ`, given back when the last run holding them ends."""
_GIVEN: dict[str, str] = {}
"""Keys given to hoh outside its environment (`give`: Harbor's agent, from its trial's `--ae`), never put there."""
_HOLDERS: dict[str, int] = {}
"""How many runs of this process hold each name (a process may run several workspaces at once)."""


def value(name: str | None) -> str | None:
    """The key named `name`: the environment's, else the one a run holds, else one given; None when none has one."""
    if not name:
        return None
    with _LOCK:
        return os.environ.get(name) or _HELD.get(name) or _GIVEN.get(name) or None


def give(name: str, key: str) -> None:
    """The key named `name` for hoh's proxies in this process, without putting it in `os.environ` (where every
    process started would inherit it, whichever run it started for)."""
    with _LOCK:
        _GIVEN[name] = key


@contextmanager
def withheld(names: Iterable[str | None]) -> Iterator[None]:
    """Within: each named variable is out of `os.environ`, its value held here. After the last run holding it
    ends, it is back in `os.environ` (unless something set the variable again meanwhile)."""
    names = sorted({n for n in names if n})
    with _LOCK:
        for name in names:
            if (found := os.environ.pop(name, None)) is not None:
                _HELD[name] = found
            _HOLDERS[name] = _HOLDERS.get(name, 0) + 1
    try:
        yield
    finally:
        with _LOCK:
            for name in names:
                _HOLDERS[name] -= 1
                if _HOLDERS[name]:
                    continue
                del _HOLDERS[name]
                if (held := _HELD.pop(name, None)) is not None:
                    os.environ.setdefault(name, held)
