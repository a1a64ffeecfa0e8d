"""What the typer app and the fast `hoh status` (`entry.py`) share, with no typer: how a workspace is found
without -w, hoh's log (`-v`, `-q`, `--log-file`) and the one-line error. Both quote what roles wrote (a file
name, a role's error), so both print text only (`hoh.terminal`).

Only the standard library is imported here: `hoh status` loads this module without typer.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Optional

from ..terminal import terminal_text

BUILD_DEFAULT = Path("hoh-work")
"""`hoh build`'s workspace when no -w is given; the other commands find it too."""


def _is_workspace(directory: Path) -> bool:
    return (directory / "state" / "workspace.json").is_file()


def find_workspace(start: Path | None = None) -> Path | None:
    """The workspace a directory is in, found the way git finds `.git`: the first of it and its parents that
    holds state/workspace.json; else `./hoh-work` (build's default) if that is one; else None.

    A workspace found inside another one is refused: inside a workspace only its project is writable by
    the roles, so a `state/workspace.json` there is an agent's, and its hoh.yaml (hooks, `sandbox.mode: off`)
    must not be what `hoh resume` or `hoh replay` runs. Given with -w, it is the user's choice."""
    here = (start or Path.cwd()).resolve()
    chain = (here, *here.parents)
    found = next((directory for directory in chain if _is_workspace(directory)), None)
    if found is None:
        return here / BUILD_DEFAULT if _is_workspace(here / BUILD_DEFAULT) else None
    outer = next((directory for directory in found.parents if _is_workspace(directory)), None)
    if outer is not None:
        from ..errors import UsageError
        raise UsageError(f"{found} looks like a workspace but is inside the workspace {outer} (a role could have "
                         f"written it); name the one you mean with -w DIR")
    return found


class TerminalFormatter(logging.Formatter):
    """A log line as text: its message on one line with its controls visible, a traceback over its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return terminal_text(super().formatMessage(record))

    def formatException(self, ei) -> str:
        return terminal_text(super().formatException(ei), lines=True)

    def formatStack(self, stack_info: str) -> str:
        return terminal_text(super().formatStack(stack_info), lines=True)


def setup_logging(verbose: int, quiet: bool, log_file: Optional[Path]) -> None:
    """hoh's log (`hoh.*` loggers): to stderr with -v (INFO) or -vv (DEBUG), only errors with -q; to
    `log_file` at INFO (DEBUG with -vv), appended, whatever stderr shows."""
    root = logging.getLogger("hoh")
    root.setLevel(logging.DEBUG)
    root.propagate = False
    for handler in list(root.handlers):
        root.removeHandler(handler)
    if verbose or quiet:
        stream = logging.StreamHandler(sys.stderr)
        stream.setLevel(logging.ERROR if quiet else logging.DEBUG if verbose > 1 else logging.INFO)
        stream.setFormatter(TerminalFormatter("hoh: %(message)s"))
        root.addHandler(stream)
    if log_file is not None:
        try:
            handler = logging.FileHandler(log_file.expanduser(), encoding="utf-8")
        except OSError as err:
            from ..errors import UsageError
            raise UsageError(f"cannot write the log file {log_file}: {err.strerror}") from None
        handler.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)
        handler.setFormatter(TerminalFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    if not root.handlers:
        root.addHandler(logging.NullHandler())


def print_error(message: str) -> None:
    """Errors are plain single lines (never wrapped), so scripts can read them; what a role wrote in one (a file
    name, its own error) shows its controls and newlines as escapes."""
    print(f"hoh: {terminal_text(message)}", file=sys.stderr, flush=True)


INTERRUPTED = "interrupted"
"""The error line of a command cut off by Ctrl-C (or SIGTERM, SIGHUP) that had no run to name."""
