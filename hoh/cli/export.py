"""`hoh export`: a workspace's records in other tools' formats. `atif`: every role attempt as a trajectory
in Harbor's Agent Trajectory Interchange Format."""

from __future__ import annotations

from pathlib import Path

import typer

from .usage import UsageCommand

app = typer.Typer(name="export", no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                  help="Export a workspace's records in other tools' formats (atif: Harbor's trajectories).")


@app.command(cls=UsageCommand)
def atif(
    workspace: Path = typer.Option(..., "--workspace", "-w", help="The hoh workspace to read (never written)."),
    out: Path = typer.Option(..., "--output", "-o", help="The directory to write: one "
                             "loop-NNNN-ROLE-attempt-K.json per role attempt, index.json and harbor-jobs/ (for "
                             "`harbor view DIR/harbor-jobs --jobs`); a new directory, "
                             "an empty one, or an earlier export (replaced whole)."),
) -> None:
    """Every role attempt (prompt, messages, thinking, tool calls with their inputs and outputs, errors, usage)
    as one ATIF trajectory file, Harbor's Agent Trajectory Interchange Format. A live run exports what its
    attempts hold so far. Exit 0 when written, 2 on bad input (nothing is written then)."""
    from ..transcript.atif import export_workspace

    done = export_workspace(workspace, out)
    live = f" ({done.live} still running)" if done.live else ""
    print(f"exported {len(done.files)} trajectories{live} to {done.directory} (index.json lists them in run order; "
          f"Harbor's viewer: harbor view {done.directory / 'harbor-jobs'} --jobs)")
