"""Typed records of what the roles hand over and what the Runtime freezes: a plan, a Developer report, a
candidate, a QA report (schemas/*.schema.json), and a loop's summary.

Frozen: a record read from a state file is never edited in place; a changed one is a new record
(`dataclasses.replace`). `from_json` reads what the schema allows (plan versions 1 and 2 alike);
`to_json` writes the same JSON back: the schema's fields in its order, an optional field only when it is
set. A caller-built dict (tests, fixtures) may leave out a list or text field: it reads as empty.
Checking a role's output against its schema stays in `runtime/validate.py`; this module only gives the
checked JSON a type.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields, replace
from pathlib import Path
from typing import Any, Mapping, TypeVar

from .errors import StateError
from .fsutil import load_state
from .statuses import Verdict

Json = dict[str, Any]
R = TypeVar("R")


def record_of(cls: type[R], value: R | Mapping[str, Any]) -> R:
    """`value` as a record of `cls`: itself, or read from its JSON (what tests and fixtures build by hand)."""
    return value if isinstance(value, cls) else cls.from_json(value)  # type: ignore[attr-defined]


def _optional(out: Json, **fields: Any) -> Json:
    """`out` with the fields that are set (None is absent on disk)."""
    out.update({k: v for k, v in fields.items() if v is not None})
    return out


class FlatRecord:
    """A record of plain JSON values: its fields are its keys, in its order; a field with a default may be absent."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]):  # -> the subclass
        return cls(**{f.name: data[f.name] if f.default is MISSING else data.get(f.name, f.default)
                      for f in fields(cls)})  # type: ignore[arg-type]

    def to_json(self) -> Json:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]


# ---- the plan (schemas/plan.schema.json) -----------------------------------------------------------------
@dataclass(frozen=True)
class Acceptance(FlatRecord):
    """One acceptance condition of a task, checked by QA as the criterion of the same id."""

    id: str
    condition: str
    method: str = "black-box"


@dataclass(frozen=True)
class Task:
    id: str
    title: str
    details: str
    acceptance: tuple[Acceptance, ...]
    issues: tuple[str, ...] = ()
    """Ledger issue ids (I-…) the task is meant to fix."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Task":
        return cls(data["id"], data.get("title", ""), data.get("details", ""),
                   tuple(Acceptance.from_json(a) for a in data.get("acceptance", ())), tuple(data.get("issues", ())))

    def to_json(self) -> Json:
        return {"id": self.id, "title": self.title, "details": self.details,
                "acceptance": [a.to_json() for a in self.acceptance], "issues": list(self.issues)}


@dataclass(frozen=True)
class Preserved(FlatRecord):
    """A verified behaviour (V-…) the loop must keep; its words are the register's."""

    id: str
    behaviour: str


@dataclass(frozen=True)
class WorkPackage:
    """One Developer's share of a plan when Developers work at once (`policy.developers` > 1): its tasks and
    the project files or directories (a trailing /) it alone may change."""

    id: str
    tasks: tuple[str, ...]
    owns: tuple[str, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "WorkPackage":
        return cls(data["id"], tuple(data.get("tasks", ())), tuple(data.get("owns", ())))

    def to_json(self) -> Json:
        return {"id": self.id, "tasks": list(self.tasks), "owns": list(self.owns)}


@dataclass(frozen=True)
class Plan:
    """D_t, the Planner's document for one loop (or the Runtime's own, with no Planner)."""

    schema_version: int
    loop: int
    goal: str
    tasks: tuple[Task, ...]
    preserve: tuple[Preserved, ...] = ()
    out_of_scope: tuple[str, ...] = ()
    spec_complete: bool | None = None
    """Version 2 only: nothing is left to build (no tasks); QA re-verifies every verified behaviour."""
    notes: str | None = None
    packages: tuple[WorkPackage, ...] = ()
    """Work packages for Developers working at once; empty: one Developer takes every task."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Plan":
        return cls(data.get("schema_version", 1), data.get("loop", 0), data.get("goal", ""),
                   tuple(Task.from_json(t) for t in data.get("tasks", ())),
                   tuple(Preserved.from_json(p) for p in data.get("preserve", ())),
                   tuple(data.get("out_of_scope", ())), data.get("spec_complete"), data.get("notes"),
                   tuple(WorkPackage.from_json(p) for p in data.get("packages", ())))

    def to_json(self) -> Json:
        return _optional({"schema_version": self.schema_version, "loop": self.loop, "goal": self.goal,
                          "tasks": [t.to_json() for t in self.tasks], "preserve": [p.to_json() for p in self.preserve],
                          "out_of_scope": list(self.out_of_scope)},
                         spec_complete=self.spec_complete, notes=self.notes,
                         packages=[p.to_json() for p in self.packages] if self.packages else None)

    @property
    def acceptance(self) -> list[Acceptance]:
        """Every acceptance condition, in plan order."""
        return [a for t in self.tasks for a in t.acceptance]

    def package_plan(self, package: WorkPackage) -> "Plan":
        """The plan one package's Developer answers for: its tasks only, the rest of the plan as it is."""
        mine = set(package.tasks)
        return replace(self, tasks=tuple(t for t in self.tasks if t.id in mine), packages=())

    def task_of(self) -> dict[str, Task]:
        """Acceptance id → the task it belongs to."""
        return {a.id: t for t in self.tasks for a in t.acceptance}


# ---- the Developer's report (schemas/developer.schema.json) ----------------------------------------------
@dataclass(frozen=True)
class TaskClaim(FlatRecord):
    id: str
    status: str
    """done | partial | not_started: a claim, never acceptance."""
    notes: str = ""


@dataclass(frozen=True)
class SelfTest(FlatRecord):
    command: str
    exit_code: int
    summary: str = ""


@dataclass(frozen=True)
class DeveloperReport:
    schema_version: int
    loop: int
    summary: str
    tasks: tuple[TaskClaim, ...]
    self_tests: tuple[SelfTest, ...] = ()
    known_gaps: tuple[str, ...] = ()
    files_changed: tuple[str, ...] | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "DeveloperReport":
        files = data.get("files_changed")
        return cls(data.get("schema_version", 1), data.get("loop", 0), data.get("summary", ""),
                   tuple(TaskClaim.from_json(t) for t in data.get("tasks", ())),
                   tuple(SelfTest.from_json(s) for s in data.get("self_tests", ())), tuple(data.get("known_gaps", ())),
                   tuple(files) if files is not None else None)

    def to_json(self) -> Json:
        return _optional({"schema_version": self.schema_version, "loop": self.loop, "summary": self.summary,
                          "tasks": [t.to_json() for t in self.tasks],
                          "self_tests": [s.to_json() for s in self.self_tests], "known_gaps": list(self.known_gaps)},
                         files_changed=list(self.files_changed) if self.files_changed is not None else None)

    def done(self) -> set[str]:
        """The task ids the Developer claims done."""
        return {t.id for t in self.tasks if t.status == "done"}


# ---- the frozen candidate (schemas/candidate.schema.json) ------------------------------------------------
CANDIDATE_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Candidate(FlatRecord):
    """A_t: the commit QA judges, frozen in hoh's history and tagged."""

    schema_version: int
    loop: int
    candidate_id: str
    commit: str
    tree: str
    parent: str
    tag: str
    packages: tuple[str, ...] | None = None
    """The work packages merged into it, in order, when Developers worked at once; None: one Developer."""

    @classmethod
    def frozen(cls, loop: int, commit: str, tree: str, parent: str, tag: str,
               packages: tuple[str, ...] | None = None) -> "Candidate":
        return cls(CANDIDATE_SCHEMA_VERSION, loop, f"loop-{loop:04d}-{tree[:12]}", commit, tree, parent, tag,
                   packages)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Candidate":
        packages = data.get("packages")
        return cls(data["schema_version"], data["loop"], data["candidate_id"], data["commit"], data["tree"],
                   data["parent"], data["tag"], tuple(packages) if packages is not None else None)

    def to_json(self) -> Json:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "packages"}
        return _optional(out, packages=list(self.packages) if self.packages is not None else None)


# ---- QA's report (schemas/qa.schema.json) ----------------------------------------------------------------
@dataclass(frozen=True)
class Evidence(FlatRecord):
    kind: str
    """command | file (a path inside the loop's evidence dir) | observation."""
    ref: str
    detail: str = ""

    @property
    def label(self) -> str:
        """How the ledger cites it: `kind:ref`."""
        return f"{self.kind}:{self.ref}"


def _evidence(data: Mapping[str, Any]) -> tuple[Evidence, ...]:
    return tuple(Evidence.from_json(e) for e in data.get("evidence", ()))


@dataclass(frozen=True)
class CheckResult:
    """QA's result on one acceptance criterion or one preserved behaviour."""

    id: str
    status: str
    """verified | failed | insufficient_evidence."""
    evidence: tuple[Evidence, ...] = ()
    check: Json | None = None
    """The executable check QA attached (`schemas/qa.schema.json#/$defs/check`; read by `evidence.checks`)."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "CheckResult":
        return cls(data["id"], data["status"], _evidence(data), data.get("check"))

    def to_json(self) -> Json:
        return _optional({"id": self.id, "status": self.status, "evidence": [e.to_json() for e in self.evidence]},
                         check=self.check)

    @property
    def verified(self) -> bool:
        return self.status == "verified"


@dataclass(frozen=True)
class Finding:
    title: str
    severity: str
    """blocker | major | minor | note."""
    repro: str = ""
    evidence: tuple[Evidence, ...] = ()
    issue_id: str | None = None
    behaviour_id: str | None = None
    """The verified behaviour this defect breaks."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Finding":
        return cls(data["title"], data["severity"], data.get("repro", ""), _evidence(data), data.get("issue_id"),
                   data.get("behaviour_id"))

    def to_json(self) -> Json:
        return _optional({"title": self.title, "severity": self.severity, "repro": self.repro,
                          "evidence": [e.to_json() for e in self.evidence]},
                         issue_id=self.issue_id, behaviour_id=self.behaviour_id)


@dataclass(frozen=True)
class Retirement(FlatRecord):
    """A check QA retires: the behaviour it pins was changed on purpose."""

    id: str
    reason: str


@dataclass(frozen=True)
class QaReport:
    """E_t: QA's independent acceptance of one frozen candidate."""

    schema_version: int
    loop: int
    candidate_id: str
    verdict: Verdict
    criteria: tuple[CheckResult, ...] = ()
    preserved: tuple[CheckResult, ...] = ()
    findings: tuple[Finding, ...] = ()
    summary: str | None = None
    retire: tuple[Retirement, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "QaReport":
        return cls(data.get("schema_version", 1), data.get("loop", 0), data.get("candidate_id", ""),
                   Verdict(data["verdict"]), tuple(CheckResult.from_json(c) for c in data.get("criteria", ())),
                   tuple(CheckResult.from_json(p) for p in data.get("preserved", ())),
                   tuple(Finding.from_json(f) for f in data.get("findings", ())), data.get("summary"),
                   tuple(Retirement.from_json(r) for r in data.get("retire", ())))

    def to_json(self) -> Json:
        return _optional({"schema_version": self.schema_version, "loop": self.loop, "candidate_id": self.candidate_id,
                          "verdict": self.verdict.value, "criteria": [c.to_json() for c in self.criteria],
                          "preserved": [p.to_json() for p in self.preserved],
                          "findings": [f.to_json() for f in self.findings]}, summary=self.summary,
                         retire=[r.to_json() for r in self.retire] or None)

    @property
    def verified_count(self) -> int:
        return sum(1 for c in self.criteria if c.verified)


# ---- readers of the state files ---------------------------------------------------------------------------
PLAN_SCHEMA_VERSION = 2
"""1: tasks, preserve, out_of_scope. 2: `spec_complete` (the Planner finds nothing left to build; no tasks).
Readers take both."""


def _read(cls: type[R], path: Path, required: tuple[str, ...], version: int = 1) -> R:
    """A state file as its record; a file that has the fields but not their shape is one StateError too."""
    data = load_state(path, required, version)
    try:
        return cls.from_json(data)  # type: ignore[attr-defined]
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise StateError(f"{path}: corrupt ({type(err).__name__}: {err}); nothing was changed") from None


def read_plan(path: Path) -> Plan:
    """A persisted plan (schema_version 1 or 2)."""
    return _read(Plan, path, ("schema_version", "loop", "tasks"), PLAN_SCHEMA_VERSION)


def read_developer(path: Path) -> DeveloperReport:
    return _read(DeveloperReport, path, ("schema_version", "loop", "summary", "tasks"))


def read_candidate(path: Path) -> Candidate:
    return _read(Candidate, path, ("schema_version", "loop", "candidate_id", "commit", "tree", "parent", "tag"))


def read_qa(path: Path) -> QaReport:
    return _read(QaReport, path, ("schema_version", "loop", "verdict", "criteria", "preserved", "findings"))


# ---- a loop's summary: in its own module, which `hoh status` imports without the records above ------------
from .summary import LoopSummary  # noqa: E402,F401 - read as hoh.records.LoopSummary too
