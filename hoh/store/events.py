"""The journal's vocabulary: one frozen dataclass per event kind.

Writers build events with keyword arguments (a misspelt field fails at once) and readers get the
same classes back, checked field by field, so a renamed field breaks loudly in a test instead of
silently in `hoh status`. This module and `journal.py` are the only places that spell a kind.
On disk an event is one JSON line: `{"v", "seq", "time", "event": KIND, ...fields}`; optional
fields that are None are left out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

STEPS = ("planner", "developer", "freeze", "replay", "qa", "admit", "evidence")
"""The steps of a loop, in order; each ends with a StepFinished once its state file is written."""


class EventError(ValueError):
    """A journal line that does not match the vocabulary (unknown kind, missing or mistyped field)."""


def event(cls: type) -> type:
    """An event kind's class: a frozen dataclass whose equality, hash and repr are `Event`'s, the ones a
    dataclass would generate, written once: `hoh status` imports this module, and generating them for every
    kind was most of its import time."""
    return dataclass(frozen=True, eq=False, repr=False)(cls)


@event
class Event:
    """One journal line's event; a subclass per kind."""

    kind: ClassVar[str]

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name, *_ in _fields(type(self)))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values() == other._values()  # type: ignore[attr-defined]
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name, *_ in _fields(type(self)))
        return f"{type(self).__qualname__}({values})"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"event": self.kind}
        for name, _, optional, _ in _fields(type(self)):
            value = getattr(self, name)
            if value is None and optional:
                continue
            data[name] = value
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> "Event":
        kind = data.get("event")
        cls = KINDS.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise EventError(f"unknown event kind {kind!r}")
        values = {}
        for name, required, _, _ in _fields(cls):
            if name in data:
                values[name] = data[name]
            elif required:
                raise EventError(f"event '{kind}' lacks the field '{name}'")
        event = cls(**values)
        event.check_types()
        return event

    def check_types(self) -> None:
        for name, _, _, expected in _fields(type(self)):
            if expected is None:
                continue
            value = getattr(self, name)
            if not isinstance(value, expected) or (value is True or value is False) and bool not in expected:
                spelt = next(f.type for f in dataclasses.fields(self) if f.name == name)
                raise EventError(f"event '{self.kind}' field '{name}' is {type(value).__name__}, expected {spelt}")


FieldSpec = tuple[str, bool, bool, "tuple[type, ...] | None"]
_FIELD_SPECS: dict[type, list[FieldSpec]] = {}


def _fields(cls: type) -> list[FieldSpec]:
    """Per event class, once: each field's name, whether it is required, whether a None is left out
    on disk, and the types its value may have (None: not checked). A status at 500 loops reads ~7,000
    events, so `dataclasses.fields` per event would be most of its time."""
    specs = _FIELD_SPECS.get(cls)
    if specs is None:
        specs = _FIELD_SPECS[cls] = [
            (f.name, f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
             f.default is None, _TYPES.get(f.type.replace(" ", "")) if isinstance(f.type, str) else None)
            for f in dataclasses.fields(cls)]
    return specs


_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,), "str": (str,), "bool": (bool,), "float": (int, float), "int|None": (int, type(None)),
    "str|None": (str, type(None)), "bool|None": (bool, type(None)), "list[str]": (list,), "dict[str,Any]": (dict,),
    "dict[str,int]|None": (dict, type(None)), "float|None": (int, float, type(None)),
    "dict[str,Any]|None": (dict, type(None)),
}


@event
class WorkspaceCreated(Event):
    """The workspace was made for the spec with this sha256."""
    kind = "workspace_created"
    spec_sha256: str


@event
class RunStarted(Event):
    """A session began: a build, or a resume (`resumed`), running up to `target_loops`."""
    kind = "run_started"
    target_loops: int
    resumed: bool
    harness: str
    sandbox: str | None = None
    """bwrap | off (None in journals written before the jail)."""


@event
class RunFinished(Event):
    """A session ended, with the run's status."""
    kind = "run_finished"
    status: str
    """finished | complete | stalled | budget_exhausted | stopped (a stop request) | quota_exhausted |
    failed (a role failed under the stop policy) | interrupted | error (older journals wrote `stopped` for
    failed)."""
    loops_finished: int
    error: str | None = None


@event
class OrphanReaped(Event):
    """A harness process a crashed session left running was killed."""
    kind = "orphan_reaped"
    pid: int


@event
class EnvironmentStarted(Event):
    """A role's environment (`--env`) is being started; journaled before the start, so a crash at any point
    leaves a record of what the next session must stop."""

    kind = "environment_started"
    role: str
    environment: str
    """`environment.name`: a Harbor type or a `module:Class`."""
    session_id: str
    """Harbor's handle of it (a Docker Compose project, a sandbox's name)."""


@event
class EnvironmentStopped(Event):
    """A role's environment was stopped (by its session, or by a later one after a crash)."""
    kind = "environment_stopped"
    session_id: str
    orphan: bool = False
    """Stopped by a later session: the one that started it ended without stopping it (kill -9)."""
    error: str | None = None
    """Why stopping it failed, when it did."""


@event
class EnvironmentTampered(Event):
    """A role's environment was found changed where no attempt may leave anything (its engine's diff,
    `hoh/envs/verify.py`), with processes an attempt left running, or without hoh's server there. Changed paths:
    replaced by a fresh environment before the next attempt; processes: killed before it started."""

    kind = "environment_tampered"
    role: str
    session_id: str
    changes: list[str] = field(default_factory=list)
    """The engine's lines for what changed ("C /usr/bin", "A /usr/bin/python3.real"), at most 20."""
    processes: int = 0
    server: bool = False
    """hoh's server in the container (`envs/session.py`) ended while it served the role's step: the role killed
    it (or the kernel did, for the container's memory). The step failed and was run again by an `exec` of its
    own; the environment goes on without the server."""


@event
class LoopStarted(Event):
    """A loop began on the candidate of the loop before it (`base_commit`)."""
    kind = "loop_started"
    loop: int
    base_commit: str


@event
class StepFinished(Event):
    """One of a loop's STEPS is done and its state file written."""
    kind = "step_finished"
    loop: int
    step: str
    """One of STEPS."""
    status: str = "ok"
    """ok, failed (its role failed under the continue policy), or a loop status for `evidence`."""
    sha256: str | None = None
    """Of the state file the step wrote."""
    reused_plan: bool | None = None
    candidate_id: str | None = None
    verdict: str | None = None


@event
class ChecksReplayed(Event):
    """The register's checks run on the loop's candidate before QA (`runtime/replay.py`); not hoh's overhead."""
    kind = "checks_replayed"
    loop: int
    replayed: int
    failed: int
    flaky: int
    skipped: int
    seconds: float
    at_risk: list[str]


@event
class ChecksAdmitted(Event):
    """The checks QA attached this loop, run once more on its candidate: kept, or rejected with a reason."""
    kind = "checks_admitted"
    loop: int
    added: int
    rejected: int
    seconds: float
    retired: int = 0


@event
class RoleSetAside(Event):
    """A role's unfinished attempt was moved aside (`moved_to`) before it runs again."""
    kind = "role_set_aside"
    loop: int
    role: str
    moved_to: str
    package: str | None = None
    """The work package of a Developer working beside others (`P1`, or `merge-P2` for a conflict's merge)."""


@event
class RoleFailed(Event):
    """A role used up its attempts without a usable result."""
    kind = "role_failed"
    loop: int
    role: str
    attempts: int
    errors: list[str]
    package: str | None = None
    """The work package of a Developer working beside others (`P1`, or `merge-P2` for a conflict's merge)."""


@event
class LoopFinished(Event):
    """A loop ended with its status and the evidence's figures."""
    kind = "loop_finished"
    loop: int
    status: str
    candidate_id: str | None
    verified: int
    criteria: int
    issues: dict[str, int] | None
    progress: dict[str, int] | None = None
    """What the loop added to the evidence: behaviours_added, reverified, issues_closed (`Ledger.progress`)."""
    reason: str | None = None
    """Why a loop short of `pass` fell short: its regressions (issue and behaviour) and failed criteria
    (`evidence.shortfall`); None for a pass and in journals before it was recorded."""


@event
class AttemptStarted(Event):
    """A role's attempt began."""
    kind = "attempt_started"
    loop: int
    role: str
    attempt: int
    package: str | None = None
    """The work package of a Developer working beside others (`P1`, or `merge-P2` for a conflict's merge)."""


@event
class AttemptFinished(Event):
    """A role's attempt ended: its outcome, usage and time."""
    kind = "attempt_finished"
    loop: int
    role: str
    attempt: int
    ok: bool
    outcome: str
    errors: list[str]
    usage: dict[str, Any]
    """`Usage.to_json()` of this attempt (its reruns after transient failures and usage limits included)."""
    violations: int
    seconds: float
    harness: str | None = None
    model: str | None = None
    """The role's harness and model (None: the harness's default model)."""
    cost_source: str | None = None
    """harness | price | table, or None when the cost is unknown (see `HarnessResult.cost_source`)."""
    package: str | None = None
    """The work package of a Developer working beside others (`P1`, or `merge-P2` for a conflict's merge)."""


@event
class ProcessStarted(Event):
    """The harness process of an attempt started (its pid and start time, to find it after a crash)."""
    kind = "process_started"
    loop: int
    role: str
    attempt: int
    pid: int
    start_ticks: int | None
    package: str | None = None
    """The work package of a Developer working beside others (`P1`, or `merge-P2` for a conflict's merge)."""


@event
class TransientFailure(Event):
    """An attempt failed in a way worth retrying (`retry_in` seconds later)."""
    kind = "transient_failure"
    loop: int
    role: str
    attempt: int
    outcome: str
    error: str | None
    retry_in: float
    package: str | None = None
    """The work package of a Developer working beside others (`P1`, or `merge-P2` for a conflict's merge)."""


@event
class QuotaWait(Event):
    """The run waits for the harness's usage limit to reset."""
    kind = "quota_wait"
    loop: int
    role: str
    attempt: int
    until: float
    """Epoch seconds: the reset the harness named (or hoh's guess when it named none)."""
    error: str | None
    package: str | None = None
    """The work package of a Developer working beside others (`P1`, or `merge-P2` for a conflict's merge)."""


@event
class BudgetStop(Event):
    """A budget would be passed by the next attempt: the run stops."""
    kind = "budget_stop"
    loop: int
    role: str
    budget: str
    """tokens | cost_usd | wall_hours"""
    limit: float
    spent: float
    estimate: float
    """The role's largest attempt so far: what the next one is expected to spend at most."""


@event
class StopRequested(Event):
    """`hoh stop` or a signal asked the run to stop after the current attempt."""
    kind = "stop_requested"
    source: str
    """`hoh stop` (with its pid) or the signal that asked for it."""


@event
class HookRan(Event):
    """A hook of hoh.yaml ran."""
    kind = "hook_ran"
    hook: str
    """on_loop_end | on_stop"""
    loop: int | None
    exit_code: int | None
    """None when it could not start or was killed on timeout."""
    seconds: float
    error: str | None = None


@event
class ViolationBetweenRoles(Event):
    """A protected area changed while no role ran; put back."""
    kind = "violation_between_roles"
    loop: int
    role: str
    """The role about to start when the change was found."""
    area: str
    changes: list[str]


@event
class FullScan(Event):
    """hoh scanned a whole work tree, because neither the jail nor the kernel could say what changed in it
    (`changefeed.ScanReason`): said, since the cost then follows the project's size."""

    kind = "full_scan"
    loop: int
    step: str
    """The role whose guard scanned (planner, qa), or freeze."""
    area: str
    """project | candidate copy."""
    reason: str
    """A `changefeed.ScanReason` value."""


@event
class NoteAdded(Event):
    """A human's note (`hoh note`) stored as `state/notes/<note>.md`, waiting for the next loop that plans."""
    kind = "note_added"
    note: str
    """N-0001, …: its file's name."""
    sha256: str
    inbox: str | None = None
    """The `hoh.notes/` file it came from when it was written while a run was live (that file is then removed;
    a crash before its removal never stores it twice)."""


@event
class NotesTaken(Event):
    """The notes loop `loop`'s Planner gets, fixed before its inputs are frozen: a resume gives it the same."""
    kind = "notes_taken"
    loop: int
    notes: list[str]


@event
class PackageMerged(Event):
    """A work package's tree went into the loop's candidate (`runtime/packages.py`): cleanly, or through a
    Developer's merge of its conflicts."""
    kind = "package_merged"
    loop: int
    package: str
    how: str
    """clean | resolved."""
    commit: str
    """The merged tree so far, as a commit whose parent is A_{t-1}."""


@event
class PackageDropped(Event):
    """A work package could not be merged (or its Developer failed): its tasks go to the next loop."""
    kind = "package_dropped"
    loop: int
    package: str
    reason: str


KINDS: dict[str, type[Event]] = {cls.kind: cls for cls in Event.__subclasses__()}
