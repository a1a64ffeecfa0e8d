"""What several commands share: the workspace option and how a workspace is found without one, the
`--progress` option, the exit codes `hoh --help` lists, and the log (`-v`, `-q`, `--log-file`).

Only typer and the standard library are imported here: `hoh --help` loads this module.
"""

from __future__ import annotations

import logging
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

if TYPE_CHECKING:
    from rich.console import Console

BUILD_DEFAULT = Path("hoh-work")
"""`hoh build`'s workspace when no -w is given; the other commands find it too."""

WS_HELP = ("Workspace directory (everything needed to resume lives here); default: the workspace the current "
           f"directory is in, else ./{BUILD_DEFAULT}.")


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


def _workspace(ctx: typer.Context, value: Optional[Path]) -> Optional[Path]:
    if value is not None or ctx.resilient_parsing:  # shell completion parses without running anything
        return value
    found = find_workspace()
    if found is None:
        from ..errors import UsageError
        raise UsageError(f"no hoh workspace here: none in {Path.cwd()} or its parents, and no ./{BUILD_DEFAULT}; "
                         "give one with -w DIR")
    return found


def workspace_option(**extra) -> Optional[Path]:
    """-w DIR of every command that reads or continues a workspace; absent, it is found (`find_workspace`)."""
    return typer.Option(None, "--workspace", "-w", help=WS_HELP, callback=_workspace, show_default=False, **extra)


class ProgressMode(StrEnum):
    """`--progress`: how a build or resume reports while it runs (always on stderr)."""

    AUTO = "auto"
    """live on a terminal, lines otherwise."""
    LIVE = "live"
    LINES = "lines"
    JSON = "json"
    NONE = "none"

    def resolve(self, console: "Console") -> "ProgressMode":
        if self is ProgressMode.AUTO:
            return ProgressMode.LIVE if console.is_terminal else ProgressMode.LINES
        return self


PROGRESS_METAVAR = "[" + "|".join(ProgressMode) + "]"

PROGRESS_HELP = ("How the run reports while it goes, on stderr: auto (live on a terminal, else lines), live, "
                 "lines (one per role attempt's start and end), json (one object per line), none.")
JSON_HELP = "Print the run report as one JSON document on stdout (progress then defaults to none)."

EXIT_CODES = """\b
Exit codes:
  0    done: a run finished, is complete or stalled; a command succeeded
  1    a role failed, hoh failed, or a check found a problem (status --verify,
       replay, doctor --harness)
  2    bad input: usage, spec, settings, workspace (nothing was run)
  3    budget_exhausted: hoh resume --set budget.KEY=VALUE continues
  4    stopped (hoh stop, a first Ctrl-C): hoh resume continues
  5    quota_exhausted: the usage limit resets later than the run may wait
  130  interrupted (a second Ctrl-C)"""


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
        stream.setFormatter(logging.Formatter("hoh: %(message)s"))
        root.addHandler(stream)
    if log_file is not None:
        try:
            handler = logging.FileHandler(log_file.expanduser(), encoding="utf-8")
        except OSError as err:
            from ..errors import UsageError
            raise UsageError(f"cannot write the log file {log_file}: {err.strerror}") from None
        handler.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    if not root.handlers:
        root.addHandler(logging.NullHandler())
