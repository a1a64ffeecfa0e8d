"""What several commands share: the workspace option (absent, it is found: `shared.find_workspace`), the
`--progress` option and the exit codes `hoh --help` lists.

Only typer and the standard library are imported here: `hoh --help` loads this module. How a workspace is
found and the log are in `shared.py`, which the fast `hoh status` (`entry.py`) uses without typer.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from .shared import BUILD_DEFAULT, find_workspace, setup_logging  # noqa: F401 - the commands import them from here

if TYPE_CHECKING:
    from rich.console import Console

WS_HELP = ("Workspace directory (everything needed to resume lives here); default: the workspace the current "
           f"directory is in, else ./{BUILD_DEFAULT}.")


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
