"""The `hoh` command line: build, resume, status, show, report. The only place that prints."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import HohError
from ..statuses import RunStatus
from . import bench as bench_cli
from . import export as export_cli
from .console import err, out
from .options import EXIT_CODES, JSON_HELP, PROGRESS_HELP, PROGRESS_METAVAR, ProgressMode, workspace_option
from .shared import BUILD_DEFAULT, print_error, setup_logging
from .signals import graceful, interrupted, stop_on_signals
from .usage import UsageCommand

# The runtime, the harness adapters and rich's tables are imported inside the commands that use
# them, so `hoh --help` and `hoh status` load only what they need.

log = logging.getLogger("hoh.cli")
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(name="hoh", no_args_is_help=True, add_completion=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None, context_settings=HELP_OPTIONS, epilog=EXIT_CODES,
                  help="Harness-of-Harness: drive a coding-agent CLI through Planner → Developer → QA loops.")
app.add_typer(bench_cli.app, name="bench", context_settings=HELP_OPTIONS)
app.add_typer(export_cli.app, name="export", context_settings=HELP_OPTIONS)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version
        print(f"hoh {version('hoh')}")
        raise typer.Exit()


@app.callback()
def _options(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                          help="Print hoh's version and exit."),
             verbose: int = typer.Option(0, "--verbose", "-v", count=True, show_default=False,
                                         help="Log what hoh does to stderr (-vv: in detail)."),
             quiet: bool = typer.Option(False, "--quiet", "-q", help="Only errors on stderr, no progress."),
             log_file: Optional[Path] = typer.Option(None, "--log-file", metavar="PATH",
                                                     help="Append a log of what hoh does to this file.")) -> None:
    """Harness-of-Harness: drive a coding-agent CLI through Planner → Developer → QA loops."""
    setup_logging(verbose, quiet, log_file)
    global QUIET
    QUIET = quiet
    log.info("hoh %s (pid %d, in %s)", " ".join(_loggable(sys.argv[1:])), os.getpid(), os.getcwd())


def _loggable(argv: list[str]) -> list[str]:
    """The command line as the log keeps it: a value given to an agent (`--ae NAME=VALUE`) may be a secret."""
    kept = []
    for n, arg in enumerate(argv):
        after_ae = n > 0 and argv[n - 1] == "--ae"
        if (after_ae or arg.startswith("--ae=")) and "=" in arg.removeprefix("--ae="):
            arg = arg[: arg.index("=", len("--ae=") if arg.startswith("--ae=") else 0) + 1] + "…"
        kept.append(arg)
    return kept


DEFAULT_LOOPS = 3
"""`HohConfig.loops`'s default, spelt here so `hoh --help` imports no pydantic (a test keeps the two equal)."""
QUIET = False
"""`hoh -q`: no progress unless the command's --progress asks for some."""


_error = print_error


def _progress(mode: Optional[ProgressMode], quiet: bool, as_json: bool):
    """The progress of a build or resume: --progress as given; else none with -q (hoh's or the command's) or
    --json (stdout is the one JSON document; progress is on stderr anyway); else auto."""
    from .progress import LiveProgress
    if mode is None:
        mode = ProgressMode.NONE if quiet or QUIET or as_json else ProgressMode.AUTO
    return LiveProgress(err(), mode)


def _finish(report, workspace: Path, progress=None, as_json: bool = False) -> None:
    """The run's last line (or with --json its report), and its exit code (`RunStatus.exit_code`: by run status)."""
    log.info("run %s after %d/%d loops%s", report.status, report.loops_finished, report.target_loops,
             f": {report.error}" if report.error else "")
    if as_json or progress is not None and progress.wants_report:
        from .runreport import run_report
        data = run_report(report, workspace)
        if progress is not None:
            progress.finished(data)
        if as_json:
            print(json.dumps(data, indent=2), flush=True)
            if code := report.status.exit_code:
                raise typer.Exit(code)
            return
    done = f"{report.loops_finished}/{report.target_loops} loops"
    if report.status is RunStatus.FINISHED:
        out().print(f"finished {done} · hoh status -w {workspace}")
    elif report.status.ended_as_planned:
        # the error may quote a role (its words, a file name): text, never rich markup
        out().print(f"{report.status} after {done}: {report.error} · hoh status -w {workspace}", soft_wrap=True,
                    markup=False, highlight=False)
    else:
        _error(f"{report.status} after {done}: {report.error}")
        _error(report.status.next_step(workspace))
    if code := report.status.exit_code:
        raise typer.Exit(code)


@app.command(cls=UsageCommand)
def build(
    spec: Path = typer.Argument(..., help="The product spec, a Markdown file."),
    harness: Optional[str] = typer.Option(None, "--harness", "-H", help="Harness CLI to drive: codex, opencode, pi, "
                                          "claude, scripted (model-free) or package.module:Class; required unless "
                                          "--config names one (`hoh doctor` lists them).", rich_help_panel="Harness",
                                          show_default="none"),
    model: Optional[str] = typer.Option(None, help="Model name for the harness.", rich_help_panel="Harness"),
    base_url: Optional[str] = typer.Option(None, help="Model endpoint (OpenAI-compatible; Anthropic for claude).",
                                           rich_help_panel="Harness"),
    api_key_env: Optional[str] = typer.Option(None, help="Env var holding the endpoint's API key.",
                                              rich_help_panel="Harness"),
    loops: Optional[int] = typer.Option(None, "--loops", "-n", help="Number of loops to run.", rich_help_panel="Run",
                                        show_default=f"{DEFAULT_LOOPS}, or the --config's loops"),
    developers: Optional[int] = typer.Option(None, "--developers", help="Developers that may work at once: the "
                                             "Planner may split a loop's tasks into up to this many work packages, "
                                             "merged by hoh before QA.", rich_help_panel="Run",
                                             show_default="1, or the --config's policy.developers"),
    workspace: Path = typer.Option(BUILD_DEFAULT, "--workspace", "-w", rich_help_panel="Run",
                                   help="Workspace directory to make (everything needed to resume lives here)."),
    project: Optional[Path] = typer.Option(None, "--project", help="An existing project directory to work on "
                                           "(its files, with or without git history, are loop 1's start); by "
                                           "default a new empty project inside the workspace.", rich_help_panel="Run"),
    config: Optional[Path] = typer.Option(None, "--config", help="A hoh.yaml to start from.", rich_help_panel="Run"),
    set_: list[str] = typer.Option([], "--set", help="Override a setting: key.sub=value (repeatable).",
                                   rich_help_panel="Run"),
    env: Optional[str] = typer.Option(None, "--env", help="Where the roles run: local (this machine's jail, the "
                                      "default) or a Harbor environment, one per role: docker, podman, modal, … or "
                                      "package.module:Class (needs hoh[harbor]).", rich_help_panel="Environment"),
    env_image: Optional[str] = typer.Option(None, "--env-image", help="The image the roles' environments start "
                                            "from.", rich_help_panel="Environment"),
    env_dockerfile: Optional[Path] = typer.Option(None, "--env-dockerfile", help="A Dockerfile to build that image "
                                                  "from instead (frozen into the workspace).",
                                                  rich_help_panel="Environment"),
    force: bool = typer.Option(False, "--force", help="Replace a workspace that belongs to another spec "
                               "(the old one is kept as WORKSPACE.replaced-N).", rich_help_panel="Run"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress (--progress none).", rich_help_panel="Run"),
    progress_mode: Optional[ProgressMode] = typer.Option(None, "--progress", help=PROGRESS_HELP, show_default="auto",
                                                         metavar=PROGRESS_METAVAR, rich_help_panel="Run"),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP, rich_help_panel="Run"),
) -> None:
    """Start a new project from SPEC and run its loops."""
    from .. import api
    from ..config import HohConfig, apply_overrides, load_config
    _check_loops(loops)
    base = load_config(config) if config else HohConfig()
    cfg = apply_overrides(base, set_, {"harness.name": harness, "harness.model": model, "harness.base_url": base_url,
                                       "harness.api_key_env": api_key_env, "loops": loops, "environment.name": env,
                                       "policy.developers": developers,
                                       "environment.image": env_image,
                                       "environment.dockerfile": str(env_dockerfile) if env_dockerfile else None})
    with _progress(progress_mode, quiet, as_json) as progress:
        graceful(progress, workspace)
        report = api.build(spec, workspace, cfg, force=force, notify=progress, project=project)
    _finish(report, workspace, progress, as_json)


@app.command(cls=UsageCommand)
def resume(
    workspace: Path = workspace_option(),
    loops: Optional[int] = typer.Option(None, "--loops", "-n",
                                        help="Run this many more loops past the last finished one."),
    set_: list[str] = typer.Option([], "--set", help="Change a setting in the workspace's hoh.yaml first: "
                                   "key.sub=value (repeatable), e.g. budget.cost_usd=20."),
    developers: Optional[int] = typer.Option(None, "--developers", help="Developers that may work at once from "
                                             "the next loop on (policy.developers).", show_default="as before"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress (--progress none)."),
    progress_mode: Optional[ProgressMode] = typer.Option(None, "--progress", help=PROGRESS_HELP, show_default="auto",
                                                         metavar=PROGRESS_METAVAR),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Continue a run from its workspace: finish an interrupted loop, then the remaining ones."""
    from .. import api
    _check_loops(loops)
    with _progress(progress_mode, quiet, as_json) as progress:
        graceful(progress, workspace)
        overrides = [*set_, *([f"policy.developers={developers}"] if developers is not None else [])]
        report = api.resume(workspace, more_loops=loops, notify=progress, overrides=overrides)
    if report.nothing_to_do and not as_json:
        ws = workspace.expanduser().resolve()
        out().print(f"the run in {ws} is already {report.status} ({report.loops_finished}/{report.target_loops} "
                    f"loops); nothing to resume · to run more loops: hoh resume -w {ws} --loops N", soft_wrap=True)
        return
    _finish(report, workspace, progress, as_json)


def _check_loops(loops: int | None) -> None:
    if loops is not None and loops < 1:
        from ..errors import UsageError
        raise UsageError(f"--loops must be at least 1 (got {loops})")


@app.command(cls=UsageCommand)
def stop(
    workspace: Path = workspace_option(),
    wait: bool = typer.Option(False, "--wait", help="Return only once that hoh has stopped."),
) -> None:
    """Ask the hoh running in a workspace to stop after its current role attempt (hoh resume continues)."""
    import time

    from .. import api
    from ..store.lock import lock_held
    pid = api.stop(workspace)
    out().print(f"stop requested: hoh pid {pid} ends after its current role attempt; continue later with: "
              f"hoh resume -w {workspace}", soft_wrap=True)
    while wait and lock_held(workspace.expanduser().resolve()):
        time.sleep(0.2)


@app.command(cls=UsageCommand)
def note(
    text: str = typer.Argument(..., help="What the next loop's Planner should know, e.g. \"fix I-0002 first\".",
                               metavar="TEXT"),
    workspace: Path = workspace_option(),
) -> None:
    """Leave a note for the next loop's Planner (a live run takes it when its next loop starts planning)."""
    from .. import api
    note_id = api.note(workspace, text)
    ws = workspace.expanduser().resolve()
    if note_id is None:
        out().print(f"note queued: the live run gives it to the next loop that starts planning · hoh status -w {ws}",
                    soft_wrap=True)
    else:
        out().print(f"note {note_id} added: the next loop's Planner gets it · hoh status -w {ws}", soft_wrap=True)


@app.command(cls=UsageCommand)
def status(
    workspace: Path = workspace_option(),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    verify: bool = typer.Option(False, "--verify", help="Re-hash everything finished loops left and report any "
                                "tampering (exit 1)."),
    repair: bool = typer.Option(False, "--repair", help="With --verify: put tampered sealed files back."),
    show_all: bool = typer.Option(False, "--all", help=f"Every loop, not only the last {20}."),
) -> None:
    """Loops, verdicts, criteria, attempts, time, issues and tokens of a run."""
    from .. import api
    from .status import SHOWN_LOOPS, render_status
    if verify or repair:
        found = api.verify(workspace, repair=repair)
        if as_json:
            print(json.dumps(found, indent=2))
        for line in found["repaired"]:
            out().print(f"repaired: {line}", markup=False, highlight=False, soft_wrap=True)
        for line in found["problems"]:
            _error(line)
        if found["problems"]:
            raise typer.Exit(1)
        if not as_json:
            out().print("verified: every finished loop's state, tag and history object is as it was sealed")
        return
    if as_json:
        data = api.status(workspace)
        out().print_json(json.dumps(data)) if sys.stdout.isatty() else print(json.dumps(data, indent=2))
    else:
        render_status(out(), api.status(workspace, None if show_all else SHOWN_LOOPS), show_all)


@app.command(cls=UsageCommand)
def show(
    issue_id: str = typer.Argument(..., help="An issue id (I-0001) or a verified-behaviour id (V-0001)."),
    workspace: Path = workspace_option(),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output: the item as the ledger has it."),
) -> None:
    """Print one issue or verified behaviour with its whole history."""
    from .. import api
    from .status import show_issue
    item = api.ledger_item(workspace, issue_id)
    if as_json:
        print(json.dumps(item, indent=2))
    else:
        show_issue(out(), item)


@app.command(cls=UsageCommand)
def report(
    workspace: Path = workspace_option(),
    output: Optional[Path] = typer.Option(None, "--output", "-o",
                                          help="The main HTML page to write (default: WORKSPACE/report.html); "
                                          "the loops' and the ledger's pages go into NAME-pages/ beside it."),
) -> None:
    """A self-contained HTML report of a run: plots, the issue ledger, every loop with its evidence."""
    from ..report import write_workspace_report

    path, run = write_workspace_report(workspace, output)
    live = " · the run is live: this shows what had finished" if run.live else ""
    print(f"report: {path} ({run.loops_finished}/{run.target_loops} loops, {run.state}){live}")


@app.command("replay", cls=UsageCommand)
def replay_checks(
    workspace: Path = workspace_option(),
    loop: Optional[int] = typer.Option(None, "--loop", min=1, help="Replay on this loop's candidate "
                                       "(default: the last finished loop's)."),
    bisect: Optional[str] = typer.Option(None, "--bisect", metavar="CHECK", help="Find the first loop whose "
                                         "candidate fails this check (C-0007), from the loop that added it to the "
                                         "last finished one; retired checks too."),
    env: Optional[str] = typer.Option(None, "--env", metavar="NAME", help="Where the checks run: `local` or an "
                                      "environment (`docker`, …); default: the workspace's, with no network."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Run the register's active checks again on a past candidate, where the run's QA ran them (the jail, or its
    environment); read-only: no lock, nothing written in the workspace, so a live run may go on.
    Exit 0 when every check passed (a flaky one too), 1 when one failed, timed out or could not run, 2 on bad
    input; --bisect exits 0 once it has found its answer."""
    from .replay import run
    if code := run(workspace, loop, bisect, as_json, env):
        raise typer.Exit(code)


@app.command(cls=UsageCommand)
def doctor(
    harness: Optional[str] = typer.Option(None, "--harness", "-H", help="Check one harness; exit 1 if it is unusable."),
    workspace: Optional[Path] = typer.Option(None, "--workspace", "-w", help="Report on this workspace's settings "
                                                                              "(default: hoh's defaults)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """The OS jail; per role its capabilities, filesystem view, network, limits; which harness CLIs are installed,
    their versions, sandboxes and credential paths; who enforces what per role."""
    from ..harness import registry
    from .doctor import diagnose, jail_report, render, roles_report, settings

    names = [harness] if harness else registry.names()
    if harness:
        registry.check_name(harness)
    config = settings(workspace)
    jail = jail_report()
    roles = roles_report(config)
    reports = [diagnose(name, jail_works=jail["works"],
                        config=config.harness if name == config.harness.name else None) for name in names]
    if as_json:
        print(json.dumps({"jail": jail, "roles": roles, "harnesses": reports}, indent=2))
    else:
        render(out(), jail, reports, roles)
    if harness and not reports[0]["usable"]:
        _error(reports[0]["problem"])
        raise typer.Exit(1)


@app.command(cls=UsageCommand)
def view(
    workspaces: list[Path] = typer.Option(..., "--workspace", "-w", metavar="DIR", help="A workspace, or a folder holding several "
                                                                          "(a bench OUT dir); repeat for more."),
    port: Optional[int] = typer.Option(None, help="Port on the loopback (default: a free one)."),
    host: str = typer.Option("127.0.0.1", help="Loopback address to serve on; any other is refused."),
    no_open: bool = typer.Option(False, "--no-open", help="Print the URL only; do not open a browser."),
) -> None:
    """A live, read-only web view of runs: loops, ledger, diffs, every attempt's transcript (until Ctrl-C)."""
    from .view import run
    raise typer.Exit(run(workspaces, host, port, not no_open))


@app.command("mock-llm", cls=UsageCommand)
def mock_llm(
    script: Optional[Path] = typer.Option(None, help="JSON script of steps per role and loop."),
    port: int = typer.Option(0, help="0 picks a free port (see --port-file)."),
    port_file: Optional[Path] = typer.Option(None, help="Write the bound port here once listening."),
    log: Optional[Path] = typer.Option(None, help="Append one JSON line per model request here."),
) -> None:
    """Serve the scripted mock model (OpenAI Responses and Chat, Anthropic Messages) on 127.0.0.1 until stopped."""
    from ..testing.mock_llm.__main__ import main as serve

    argv = ["--port", str(port)] + [a for flag, v in (("--script", script), ("--port-file", port_file), ("--log", log))
                                    if v for a in (flag, str(v))]
    raise typer.Exit(serve(argv))


def main() -> None:
    stop_on_signals()
    # Typer's standalone mode owns usage errors (its usage message, exit 2) and turns Ctrl-C into
    # exit 130, with no import of click here: recent typer releases vendor it. hoh's own errors
    # pass through to be printed as one line.
    try:
        app(standalone_mode=True, prog_name="hoh")  # `python -m hoh` too: its usage and completion are hoh's
    except HohError as e:
        _error(str(e))
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        sys.exit(interrupted())
    except SystemExit as e:
        if e.code == 130:
            interrupted()
        raise
    except Exception as e:
        if os.environ.get("HOH_DEBUG"):
            raise
        _error(f"internal error: {type(e).__name__}: {e} (a bug in hoh; rerun with HOH_DEBUG=1 for the traceback)")
        sys.exit(1)
