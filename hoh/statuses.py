"""The one vocabulary of how a run and a loop end, and what depends on it.

`StrEnum`s: a member is its string (`RunStatus.FINISHED == "finished"`, `json.dumps` writes "finished"), so the
journal, `hoh status --json`, hook payloads and reports keep the strings they always had. What hangs on a status
(ended as planned, the CLI's exit code, the next step to suggest) is a property of the member, not a table kept
elsewhere.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """How a run (one session of it) stands or ended: `RunFinished.status`, `hoh status`'s state, a task run's."""

    NOT_STARTED = "not started"
    """`hoh status` of a workspace whose run never started."""
    RUNNING = "running"
    FINISHED = "finished"
    """Its target loops done."""
    COMPLETE = "complete"
    """The Planner found the spec complete and QA re-verified every verified behaviour."""
    STALLED = "stalled"
    """`policy.patience` loops without progress."""
    BUDGET_EXHAUSTED = "budget_exhausted"
    STOPPED = "stopped"
    """`hoh stop`, a first Ctrl-C or SIGTERM."""
    QUOTA_EXHAUSTED = "quota_exhausted"
    """A usage limit resets later than `policy.max_quota_wait_hours`."""
    FAILED = "failed"
    """A role failed under `policy.on_role_failure: stop`."""
    INTERRUPTED = "interrupted"
    """A second Ctrl-C (or a crash: `hoh status` of a run nobody holds)."""
    ERROR = "error"
    """An exception, re-raised."""
    OUT_OF_TIME = "out_of_time"
    """A run of hoh's Harbor agent cut at the trial's time budget."""

    @property
    def ended_as_planned(self) -> bool:
        """The run needs nothing more: its target reached, the spec complete, or no progress."""
        return self in _AS_PLANNED

    @property
    def exit_code(self) -> int:
        """How `hoh build` and `hoh resume` exit (2: bad input, nothing run; 130: a second Ctrl-C)."""
        return 0 if self.ended_as_planned else _EXIT_CODES.get(self, 1)

    def next_step(self, workspace: object) -> str:
        """What the user does next after a run that ended short of its plan."""
        return _NEXT_STEP.get(self, _NEXT_STEP[RunStatus.FAILED]).format(ws=workspace)


_AS_PLANNED = frozenset({RunStatus.FINISHED, RunStatus.COMPLETE, RunStatus.STALLED})
_EXIT_CODES = {RunStatus.BUDGET_EXHAUSTED: 3, RunStatus.STOPPED: 4, RunStatus.QUOTA_EXHAUSTED: 5}
_NEXT_STEP = {
    RunStatus.BUDGET_EXHAUSTED: "raise the budget and continue: hoh resume -w {ws} --set budget.KEY=VALUE",
    RunStatus.STOPPED: "continue with: hoh resume -w {ws}",
    RunStatus.QUOTA_EXHAUSTED: "continue once the usage limit has reset: hoh resume -w {ws}",
    RunStatus.FAILED: "fix the cause, then continue with: hoh resume -w {ws}",
}


class Verdict(StrEnum):
    """QA's verdict on one frozen candidate (schemas/qa.schema.json)."""

    PASS = "pass"
    PARTIAL = "partial"
    FAIL = "fail"


class LoopStatus(StrEnum):
    """How one loop stands or ended (`LoopFinished.status`): QA's verdict, or how it got short of one."""

    RUNNING = "running"
    """Until `LoopFinished`."""
    PASS = "pass"
    PARTIAL = "partial"
    FAIL = "fail"
    COMPLETE = "complete"
    """A spec-complete plan whose QA passed: the run ends `complete`."""
    UNVERIFIED = "unverified"
    """`mode: developer_only`: no QA."""
    PLANNER_FAILED = "planner_failed"
    DEVELOPER_FAILED = "developer_failed"
    QA_FAILED = "qa_failed"

    @classmethod
    def of_verdict(cls, verdict: Verdict | None) -> "LoopStatus":
        """QA's verdict as the loop's status; no QA report is `qa_failed`."""
        return cls.QA_FAILED if verdict is None else cls(verdict.value)

    @property
    def verdict(self) -> Verdict | None:
        """The QA verdict this status is, if it is one."""
        return Verdict(self.value) if self.value in Verdict._value2member_map_ else None

    @property
    def finished(self) -> bool:
        return self is not LoopStatus.RUNNING
