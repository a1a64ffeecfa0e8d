"""How hoh's process answers signals: Ctrl-C, `kill` and a closed terminal end it the way Ctrl-C does, and a
build or resume ends after its current role attempt on the first one (`graceful`), at once on the second.

The line an interruption prints names the workspace of the run this process works on, so it says how to go on.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Callable

from .shared import INTERRUPTED, print_error

_running_in: Path | None = None
"""The workspace of the build or resume this process runs: the interruption's hint names it."""


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def stop_on_signals() -> None:
    """`kill` and a closed terminal end hoh the way Ctrl-C does: the running harness's process group is
    killed and the journal records the interruption (kill -9 is handled on resume). SIGINT too, whatever
    this process inherited: a shell starts a background job with SIGINT ignored, and `hoh bench` must still
    stop its Harbor runs (their own sessions) when a supervisor sends it one."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)


def graceful(progress: Callable[..., None], workspace: Path) -> None:
    """A first Ctrl-C, SIGTERM or SIGHUP ends the run after the current role attempt; a second one at once.
    Supervisors with a hard deadline set HOH_STOP_AT_ONCE=1 to make the first one immediate."""
    from ..store import stop
    global _running_in
    _running_in = workspace

    def handler(signum, frame) -> None:
        if stop.in_process_request() is not None or os.environ.get("HOH_STOP_AT_ONCE") == "1":
            raise KeyboardInterrupt
        stop.request_in_process(signal.Signals(signum).name)
        progress("stopping", source=signal.Signals(signum).name)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def interrupted() -> int:
    """Say that hoh was interrupted (and how to go on with the run it worked on); the exit code, 130."""
    if _running_in is None:
        print_error(INTERRUPTED)
    else:
        print_error(f"interrupted; continue with hoh resume -w {_running_in.expanduser().resolve()}")
    return 130
