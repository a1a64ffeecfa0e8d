"""The `hoh` program: `hoh status` in its plain forms without typer, everything else through the typer app.

`hoh status` is what people and scripts run over and over, beside a live run. Typer and rich cost more than
the status itself, so a command line this module fully understands (`hoh [-q|--quiet] status [-w DIR |
--workspace DIR | --workspace=DIR] [--json] [--all]`, each at most once) is run here, with the same functions
the typer command calls. Any other command line, and any failure of these (no workspace, a broken one),
goes to the typer app with the same argv: status writes nothing, so running it again there is harmless, and
the app prints its error line and exit code as ever. Nothing is printed here before the output is complete.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

COMPLETION_VARIABLE = "_HOH_COMPLETE"
"""Set by the shell when it asks the typer app for completions."""


@dataclass(frozen=True)
class StatusCall:
    """What a plain `hoh status` command line asks for."""

    workspace: Path | None
    """-w DIR; None: found from the current directory."""
    as_json: bool = False
    show_all: bool = False
    quiet: bool = False


def parse_status(argv: list[str]) -> StatusCall | None:
    """The `hoh status` this command line is, if it is one of the plain forms; else None (the typer app's)."""
    quiet = bool(argv) and argv[0] in ("-q", "--quiet")
    args = argv[1:] if quiet else argv
    if not args or args[0] != "status":
        return None
    seen: dict[str, str | bool] = {}
    rest = iter(args[1:])
    for arg in rest:
        if arg in ("-w", "--workspace"):
            name, value = "workspace", next(rest, None)
        elif arg.startswith("--workspace="):
            name, value = "workspace", arg.removeprefix("--workspace=")
        elif arg in ("--json", "--all"):
            name, value = arg, True
        else:
            return None
        # A value that looks like an option, or none at all, and a repeated option: the parser decides.
        if name in seen or value is None or value == "" or isinstance(value, str) and value.startswith("-"):
            return None
        seen[name] = value
    workspace = seen.get("workspace")
    return StatusCall(Path(workspace) if isinstance(workspace, str) else None, "--json" in seen, "--all" in seen,
                      quiet)


def status_output(call: StatusCall) -> str | None:
    """What `hoh status` prints on stdout, whole: on a terminal, rich's (its styles, highlighted JSON); elsewhere
    plain text where its bytes are certain to be rich's. None when no workspace is found or only rich can lay the
    text out: the typer app prints it. Raises what the status raises; prints nothing."""
    import json

    from .. import api
    from . import plaintext
    from .shared import find_workspace, setup_logging

    setup_logging(0, call.quiet, None)
    workspace = call.workspace if call.workspace is not None else find_workspace()
    if workspace is None:
        return None
    if call.as_json and sys.stdout.isatty():
        return _through_rich(lambda console: console.print_json(json.dumps(api.status(workspace))))
    if call.as_json:
        return json.dumps(api.status(workspace), indent=2) + "\n"
    from .status import SHOWN_LOOPS, render_status, status_layout
    data = api.status(workspace, None if call.show_all else SHOWN_LOOPS)
    if plaintext.styled(sys.stdout):
        return _through_rich(lambda console: render_status(console, data, call.show_all))
    return plaintext.render(status_layout(data, call.show_all), plaintext.width())


def _through_rich(render) -> str:
    """On a terminal: what the typer command prints through rich (its styles, highlighted JSON), made whole first
    by the same console, so nothing is printed before it is complete (typer is still not needed)."""
    from .console import out
    console = out()
    with console.capture() as captured:
        render(console)
    return captured.get()


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def main() -> None:
    call = parse_status(sys.argv[1:]) if COMPLETION_VARIABLE not in os.environ else None
    if call is not None and (code := _run_status(call)) is not None:
        sys.exit(code)
    from .main import main as typer_main
    typer_main()


def _run_status(call: StatusCall) -> int | None:
    """The exit code of the status printed here, or None: the typer app runs the command line."""
    # As the typer app: `kill` and a closed terminal end hoh the way Ctrl-C does.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)
    try:
        text = status_output(call)
        return None if text is None else _write(text)
    except KeyboardInterrupt:
        from .shared import INTERRUPTED, print_error
        print_error(INTERRUPTED)
        return 130
    except Exception:  # noqa: BLE001 - the typer app runs it again and says what is wrong, as it always has
        return None


def _write(text: str) -> int | None:
    """Write the output whole: the exit code; a reader that went away (`hoh status | head -1`) is 1 and no
    message, as with the typer app. None when stdout cannot encode it (nothing was written): the app says so."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except UnicodeEncodeError:
        return None
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush at exit must not fail again
        return 1
    return 0
