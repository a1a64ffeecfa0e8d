"""The few exceptions hoh raises. Each carries what the user should do next.

Library code raises these; only the CLI edge turns them into one-line messages and exit codes.
"""

from __future__ import annotations

from .statuses import RunStatus


class HohError(Exception):
    """Base class. `str(err)` is a complete one-line message for the user."""

    exit_code = 1


class UsageError(HohError):
    """Bad input from the user: spec, flags, config, workspace. Nothing was changed."""

    exit_code = 2


class WorkspaceBusy(UsageError):
    """Another hoh process holds the workspace lock."""


class StateError(HohError):
    """A persisted state file is unreadable, corrupt or from a newer hoh. Nothing was overwritten."""

    exit_code = 2


class RoleFailed(HohError):
    """A role exhausted its attempts without producing a valid output."""

    def __init__(self, role: str, loop: int, errors: list[str]):
        self.role, self.loop, self.errors = role, loop, errors
        detail = errors[-1] if errors else "no detail"
        super().__init__(f"{role} failed in loop {loop} after all attempts: {detail}")


class HarnessUnavailable(UsageError):
    """The selected harness CLI is missing or unusable here."""


class EnvironmentUnavailable(UsageError):
    """A role environment (`--env`) that cannot be made, reached or started; said in one line with its cause."""


class TaskEnvironmentError(HohError):
    """A Harbor task's environment cannot run hoh: it lacks Python ≥ 3.11 or git, the harness
    cannot be installed there offline, the model endpoint is unreachable from it, or the task's
    agent timeout is shorter than one role. The message names what is missing."""

    exit_code = 2


class Interrupted(HohError):
    """The user stopped hoh (Ctrl-C, SIGTERM); the message says how to continue."""

    exit_code = 130


class RunEnded(HohError):
    """The run ended on purpose before its target, between two role attempts, with everything recorded;
    `hoh resume` continues it. `status` is the run status the journal records; the CLI's exit code and next
    step are that status's own (`RunStatus.exit_code`, `RunStatus.next_step`)."""

    status = RunStatus.STOPPED


class BudgetExhausted(RunEnded):
    """The next role attempt would pass a budget (`budget.*`); raise it to continue."""

    status = RunStatus.BUDGET_EXHAUSTED


class StopRequested(RunEnded):
    """`hoh stop`, or a first Ctrl-C/SIGTERM, asked the run to end after the current role attempt."""

    status = RunStatus.STOPPED


class QuotaExhausted(RunEnded):
    """The harness's usage limit resets later than `policy.max_quota_wait_hours` allows hoh to wait."""

    status = RunStatus.QUOTA_EXHAUSTED
