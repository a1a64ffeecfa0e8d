"""hoh as a library: the same build and resume the CLI runs, callable from Python (the benchmark
runner uses these)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .errors import EnvironmentUnavailable
from .statuses import RunStatus
from .store.journal import Journal, RunHistory

if TYPE_CHECKING:
    from .config import HohConfig
    from .envs.registry import Given
    from .runtime.loop import Notify, RunReport

# The Runtime (prompts, schemas, adapters) is imported by build and resume only, and the config's pydantic
# models by the commands that write: `hoh status` and `hoh show` open the workspace for reading
# (`store.readview`), and must not pay for what they do not use.


def build(spec: Path, workspace: Path, config: HohConfig, *, force: bool = False,
          notify: Notify | None = None, project: Path | None = None, given: Given | None = None) -> RunReport:
    """Create a workspace for `spec` and run `config.loops` loops in it. With `project`, an existing
    directory (with or without files or its own git history) is the project: its content is A_0. `given`:
    the environment every role runs in, someone else's (a Harbor trial's: `hoh/harbor/agent.py`)."""
    from .runtime.loop import Runtime
    from .runtime.setup import prepare_adapters, role_adapters
    from .store.workspace import create_workspace
    prepare_adapters(config)  # every role's CLI, and a cost budget's prices, before anything is created
    if not config.environment.local:
        from .envs import registry
        from .harness.keys import withheld
        from .runtime.hooks import key_names
        with withheld(key_names(config)):  # Harbor's checks start its engine's clients with hoh's environment
            registry.check(config)  # the environment's class and its engine, before anything is created
    ws = create_workspace(Path(workspace), Path(spec), config, force=force,
                          project=Path(project) if project is not None else None)
    # The workspace's config is the frozen one (the scripted agent's script is its copy in the
    # workspace); the CLIs behind it were checked above.
    try:
        with Runtime.open(ws, notify, role_adapters(ws.config), given=given) as runtime:
            return runtime.run(config.loops)
    except EnvironmentUnavailable:
        # The first role's environment did not start (an image that is not there, a CLI missing in it):
        # nothing ran, so the workspace this call made goes again, and the same build can be run once fixed.
        if RunHistory.read(Journal(ws.paths.journal)).run_started is None:
            import shutil  # here: `hoh status` imports this module
            shutil.rmtree(ws.paths.root, ignore_errors=True)
        raise


def resume(workspace: Path, *, more_loops: int | None = None, notify: Notify | None = None,
           overrides: list[str] | None = None) -> RunReport:
    """Continue a run: finish its target, or run `more_loops` past the last finished loop. `overrides`
    (`budget.cost_usd=20`) change the workspace's hoh.yaml first. A run that ended `complete` or
    `stalled` runs again only when `more_loops` asks for it."""
    from .runtime.loop import Runtime
    from .store.workspace import open_workspace, require_writable
    ws = open_workspace(Path(workspace))
    require_writable(ws, "hoh resume")
    with Runtime.open(ws, notify, overrides=overrides) as runtime:
        history = runtime.history
        target = history.run_started.target_loops if history.run_started else runtime.config.loops
        if more_loops is not None:
            target = history.last_finished_loop + more_loops
        elif history.run_finished is not None and history.run_finished.status in (RunStatus.COMPLETE, RunStatus.STALLED):
            target = history.last_finished_loop
        ended = history.run_finished
        if more_loops is None and ended is not None and RunStatus(ended.status).ended_as_planned \
                and history.last_finished_loop >= target:
            # Nothing left to run: say so (the CLI names `--loops`) rather than journal an empty session.
            from .runtime.loop import RunReport
            return RunReport(RunStatus(ended.status), history.last_finished_loop, target, ended.error,
                             nothing_to_do=True)
        return runtime.run(target)


def stop(workspace: Path) -> str:
    """Ask the hoh running in `workspace` to stop after its current role attempt; returns its pid."""
    from .errors import UsageError
    from .store.lock import lock_held
    from .store.stop import StopFile
    from .store.workspace import open_workspace, require_writable
    ws = open_workspace(Path(workspace))
    if not lock_held(ws.paths.root):
        raise UsageError(f"no hoh is running in {ws.paths.root}; nothing to stop")
    require_writable(ws, "hoh stop")
    StopFile(ws.paths.stop_request).write("hoh stop")
    try:
        return ws.paths.lock.read_text().strip() or "?"
    except OSError:
        return "?"


def note(workspace: Path, text: str) -> str | None:
    """Add a human's note for the next loop's Planner (`hoh note`): its id once stored, or None while it waits
    for the live run to store it when its next loop starts planning."""
    from .store.notes import add_note, check_text
    from .store.workspace import open_workspace, require_writable
    text = check_text(text)  # an empty note is refused before the workspace is even looked at
    ws = open_workspace(Path(workspace))
    require_writable(ws, "hoh note")
    return add_note(ws.paths, text)


def status(workspace: Path, shown: int | None = None) -> dict:
    """The workspace summary `hoh status --json` prints; with `shown`, what its text needs: the last `shown` loops'
    entries and the others' `EarlierLoops` (`store.status.workspace_status`)."""
    from .store.readview import open_for_reading
    from .store.status import workspace_status
    return workspace_status(open_for_reading(Path(workspace)), shown)


def verify(workspace: Path, repair: bool = False) -> dict:
    """Re-hash everything finished loops left (`hoh status --verify`); with `repair`, restore sealed files."""
    from .store.verify import verify_workspace
    from .store.workspace import open_workspace, require_writable
    ws = open_workspace(Path(workspace))
    if repair:
        require_writable(ws, "hoh status --repair")
    return verify_workspace(ws, repair)


def ledger_item(workspace: Path, item_id: str) -> dict:
    """One issue (I-…) or verified behaviour (V-…) from the workspace's ledger."""
    from .errors import UsageError
    from .evidence.ledger import Ledger
    from .store.readview import open_for_reading
    ws = open_for_reading(Path(workspace))
    ledger = Ledger.load(ws.paths.ledger)
    found = ledger.issue(item_id) or next((b for b in ledger.behaviours if b["id"] == item_id), None)
    if found is None:
        known = len(ledger.issues), len(ledger.behaviours)
        raise UsageError(f"no issue or behaviour '{item_id}' in {ws.paths.ledger} "
                         f"({known[0]} issues, {known[1]} behaviours; ids look like I-0001 or V-0001)")
    return found
