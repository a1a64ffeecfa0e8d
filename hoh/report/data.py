"""One plain model of a run, read from a workspace's state files: what `hoh report` renders.

This is the only module of the report that knows where facts live on disk. It reads through the
existing readers — `open_workspace` (identity, spec, config), `store.status.workspace_status`
(the journal's one fold: per-loop status, usage, attempts and wall time per role), `Ledger.load` —
plus one pass over the journal's typed events for what the fold does not keep (`journal_facts`: each
attempt's outcome, role failures, sessions, the stop reason). A loop's own state files (plan, Developer
report, candidate, QA, evidence) and its diff stats (one `git show --numstat` for all) are read only for
the loops a page shows (`read_details`): a report made again reads no sealed loop whose page it has.
When the journal or status code changes, only this module needs adjusting; the templates see `RunModel`.

Reading never writes: a workspace mid-run is read as it stands (every state file is written
whole, a torn last journal line is ignored), and the model says the run is live when another
hoh process holds the workspace lock. A corrupt state file raises `StateError` naming the file.
"""

from __future__ import annotations

import json

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import role_harness
from ..errors import HohError
from ..evidence.ledger import Ledger
from ..paths import ROLES, WorkspacePaths
from ..records import (Candidate, DeveloperReport, LoopSummary, Plan, QaReport, read_candidate, read_developer,
                       read_plan, read_qa)
from ..statuses import LoopStatus, RunStatus, Verdict
from ..store.events import AttemptFinished, RoleFailed, RunFinished, RunStarted
from ..store.journal import Journal, Record
from ..store.status import stop_message, workspace_status
from ..store.workspace import Workspace, open_workspace

INLINE_FILE_BYTES = 1500
"""Text evidence shown inline per file; longer files are cut and linked whole."""
INLINE_LOOP_BYTES = 6000
"""Inline evidence per loop (each loop has a page of its own: this bounds that page)."""
DIFF_FILES_SHOWN = 25


@dataclass
class RoleSetting:
    """Which harness and model a role ran on."""

    harness: str
    model: str | None = None
    base_url: str | None = None


@dataclass
class Attempt:
    """One role attempt as the journal recorded it."""

    role: str
    attempt: int
    ok: bool
    outcome: str
    seconds: float
    errors: list[str]
    rel_dir: str
    """The attempt's directory (prompt, inputs, events, result), relative to the workspace."""
    package: str | None = None
    """The work package of a Developer that worked beside others."""


@dataclass
class EvidenceFile:
    """A file in a loop's evidence folder, with its inline excerpt when there is room for one."""

    name: str
    rel_path: str
    """Relative to the workspace root."""
    size: int
    text: str | None = None
    """The inline excerpt; None for binary files or once the loop's inline budget is spent."""
    truncated: bool = False


@dataclass
class DiffStat:
    """A candidate's change against the previous candidate."""

    files: list[tuple[str, int | None, int | None]]
    """(path, lines added, lines deleted); None counts for binary files. At most DIFF_FILES_SHOWN."""
    changed: int
    added: int
    deleted: int


@dataclass
class LoopModel:
    """One loop as far as it got: its status, its role outputs and what they cost."""

    loop: int
    status: LoopStatus
    verdict: Verdict | None
    candidate_id: str | None
    criteria_verified: int
    criteria_total: int
    seconds: float
    issues: dict[str, int] | None
    """Ledger counts by status after the loop (open, fixed_pending_verify, closed, reopened)."""
    usage: dict[str, dict[str, Any]]
    """role → input/cached/output/reasoning tokens and cost_usd (None when the harness gave none)."""
    role_seconds: dict[str, float]
    attempts: list[Attempt]
    failures: list[dict[str, Any]]
    """`role_failed` events: role, attempts, errors."""
    plan: Plan | None = None
    developer: DeveloperReport | None = None
    candidate: Candidate | None = None
    qa: QaReport | None = None
    evidence: dict[str, EvidenceFile] = field(default_factory=dict)
    diffstat: DiffStat | None = None
    checks: dict[str, int] | None = None
    """replayed, failed, flaky, skipped, added, rejected, retired (`LoopSummary.checks`)."""
    check_seconds: float = 0.0
    replay: list[dict[str, Any]] = field(default_factory=list)
    """The replay's results before QA (`replay.json`), each with its evidence file under state/."""
    admissions: list[dict[str, Any]] = field(default_factory=list)
    """The checks QA attached, kept or rejected (`checks.json` of the loop)."""
    packages: list[dict[str, Any]] = field(default_factory=list)
    """Developers working at once: each work package's id, tasks, what the merge did with it (`merged (clean)`,
    `dropped: why`) and its criteria as QA found them on the merged candidate."""

    @property
    def finished(self) -> bool:
        return self.status != LoopStatus.RUNNING

    def tokens(self, role: str | None = None) -> int:
        roles = [role] if role else list(self.usage)
        return sum(self.usage[r]["input_tokens"] + self.usage[r]["output_tokens"] for r in roles)

    def cost(self, role: str | None = None) -> float | None:
        costs = [self.usage[r]["cost_usd"] for r in ([role] if role else list(self.usage))]
        known = [c for c in costs if c is not None]
        return round(sum(known), 6) if known else None

    def acceptance(self) -> dict[str, dict[str, Any]]:
        """Acceptance id → the plan's condition (and its task), for QA's criteria."""
        out: dict[str, dict[str, Any]] = {}
        for task in self.plan.tasks if self.plan else ():
            for acc in task.acceptance:
                out[acc.id] = {**acc.to_json(), "task": task.id}
        return out


@dataclass
class RunModel:
    """A workspace's run: header facts, every loop, the ledger. Plain data for the templates."""

    workspace: Path
    title: str
    spec_sha256: str
    roles: dict[str, RoleSetting]
    mode: str
    mechanisms: dict[str, bool]
    state: str
    """finished | running | interrupted | stopped | error | not started (as `hoh status`)."""
    live: bool
    target_loops: int
    loops_finished: int
    stop_reason: str | None
    sessions: int
    """How many times the run was started (1 + resumes)."""
    usage: dict[str, Any]
    loops: list[LoopModel]
    issues: list[dict[str, Any]]
    behaviours: list[dict[str, Any]]
    diff_note: str | None = None
    """Why diff stats are missing, when the project history could not be read."""
    started: float | None = None
    """When the first session started (epoch seconds, from the journal)."""
    ended: float | None = None
    """When the last session ended; None while the run is live (or never started)."""
    active_seconds: float = 0.0
    """The sessions' time added up: the days a stopped run waited for its resume are not in it."""
    ws: Workspace | None = field(default=None, repr=False)
    """The opened workspace, for reading loops' details later (`read_details`)."""

    @property
    def tokens(self) -> int:
        return self.usage["input_tokens"] + self.usage["output_tokens"]

    def role_tokens(self, role: str) -> int:
        return sum(lp.tokens(role) for lp in self.loops)

    def role_cost(self, role: str) -> float | None:
        known = [c for lp in self.loops if (c := lp.cost(role)) is not None]
        return round(sum(known), 6) if known else None

    def role_seconds(self, role: str) -> float:
        return round(sum(lp.role_seconds.get(role, 0.0) for lp in self.loops), 3)


def read_run(root: Path) -> RunModel:
    """Read the run in workspace `root`: its header, the ledger and every loop as the journal's fold has it
    (status, usage, attempts: what the plots and the loop lists need). No loop's own state file is read
    here; `read_details` reads them for the loops a page shows. Raises UsageError (not a workspace) or
    StateError (corrupt)."""
    ws = open_workspace(Path(root))
    paths = ws.paths
    status = workspace_status(ws)
    facts = journal_facts(Journal(paths.journal))
    ledger = Ledger.load(paths.ledger)
    loops = [loop_model(paths, LoopSummary.from_json(entry), facts, detail=False) for entry in status["loops"]]
    return RunModel(
        workspace=paths.root, title=spec_title(paths.spec.read_text(encoding="utf-8")),
        spec_sha256=ws.identity["spec_sha256"], roles=role_settings(ws),
        mode=ws.config.mode, mechanisms=ws.config.mechanisms.model_dump(), state=status["state"],
        live=status["state"] == RunStatus.RUNNING, target_loops=status["target_loops"],
        loops_finished=status["loops_finished"], stop_reason=facts["stop_reason"], sessions=facts["sessions"],
        usage=status["usage"], loops=loops, issues=ledger.issues, behaviours=ledger.behaviours,
        started=facts["started"], ended=None if status["state"] == RunStatus.RUNNING else facts["ended"],
        active_seconds=facts["active_seconds"], ws=ws)


def read_plans(run: RunModel, loops: list[LoopModel]) -> None:
    """Each loop's plan (its goal heads the loop lists)."""
    for lp in loops:
        if lp.plan is None:
            path = run.ws.paths.loop(lp.loop).plan
            lp.plan = read_plan(path) if path.exists() else None


def read_details(run: RunModel, loops: list[LoopModel]) -> None:
    """Fill in `loops` from their state files: plan, Developer report, candidate, QA, replay, admissions, the
    evidence files (with excerpts up to INLINE_LOOP_BYTES each) and the diff stats (one git call for all)."""
    paths = run.ws.paths
    for lp in loops:
        read_loop_files(paths, lp)
        lp.evidence, _ = evidence_files(paths, paths.loop(lp.loop).evidence, INLINE_LOOP_BYTES)
    try:
        stats = diff_stats(run.ws, [lp.candidate.commit for lp in loops if lp.candidate])
    except HohError as err:
        run.diff_note = f"diff stats unavailable: {err}"
    else:
        for lp in loops:
            if lp.candidate:
                lp.diffstat = stats.get(lp.candidate.commit)


def role_settings(ws: Workspace) -> dict[str, RoleSetting]:
    """Harness and model per role: `harness.*` with the role's own `roles.<role>.*` over it."""
    settings = {}
    for role in ROLES:
        h = role_harness(ws.config, role)
        settings[role] = RoleSetting(h.name, h.model, h.base_url)
    return settings


def spec_title(spec: str) -> str:
    for line in spec.splitlines():
        if m := re.match(r"^#\s+(.+?)\s*#*\s*$", line):
            return m.group(1)
    first = next((line.strip() for line in spec.splitlines() if line.strip()), "")
    return first[:80] or "untitled spec"


def journal_facts(journal: Journal) -> dict[str, Any]:
    """What the fold does not keep: each attempt, role failures, sessions, the stop reason."""
    facts = JournalFacts()
    for record in journal.records():
        facts.add(record)
    return facts.result()


class JournalFacts:
    """`journal_facts` one record at a time, so a reader that follows the journal (`hoh view`) adds only the
    lines appended since it last looked."""

    def __init__(self) -> None:
        self.attempts: dict[int, list[AttemptFinished]] = {}
        self.failures: dict[int, list[RoleFailed]] = {}
        self.last_run: RunFinished | None = None
        self.sessions = 0
        self.started: float | None = None
        self.session_start: float | None = None
        self.last_time: float | None = None
        self.active = 0.0

    def add(self, record: Record) -> None:
        ev = record.event
        if isinstance(ev, RunStarted):
            if self.session_start is not None and self.last_time is not None:
                self.active += self.last_time - self.session_start  # a session killed without its run_finished
            self.session_start = record.time
            self.started = record.time if self.started is None else self.started
            self.sessions, self.last_run = self.sessions + 1, None
        elif isinstance(ev, RunFinished):
            if self.session_start is not None:
                self.active, self.session_start = self.active + record.time - self.session_start, None
            self.last_run = ev
        elif isinstance(ev, AttemptFinished):
            self.attempts.setdefault(ev.loop, []).append(ev)
        elif isinstance(ev, RoleFailed):
            self.failures.setdefault(ev.loop, []).append(ev)
        self.last_time = record.time

    def result(self) -> dict[str, Any]:
        reason = None
        if self.last_run is not None and self.last_run.status != RunStatus.FINISHED:
            reason = stop_message(RunStatus(self.last_run.status), self.last_run.error)
        active = self.active
        if self.session_start is not None and self.last_time is not None:
            active += self.last_time - self.session_start  # the session still going (or killed): so far
        return {"attempts": self.attempts, "failures": self.failures, "stop_reason": reason,
                "sessions": self.sessions, "started": self.started, "ended": self.last_time,
                "active_seconds": round(active, 2)}


def loop_model(paths: WorkspacePaths, entry: LoopSummary, facts: dict[str, Any], detail: bool = True) -> LoopModel:
    """Loop `entry` from the fold and the journal's facts; with `detail`, its state files too (`read_loop_files`)."""
    t = entry.loop
    lp = paths.loop(t)
    attempts = [Attempt(ev.role, ev.attempt, ev.ok, ev.outcome, float(ev.seconds), list(ev.errors),
                        paths.rel(lp.attempt_dir(f"{ev.role}-{ev.package}" if ev.package else ev.role, ev.attempt)),
                        ev.package) for ev in facts["attempts"].get(t, [])]
    model = LoopModel(
        loop=t, status=entry.status, verdict=entry.verdict, candidate_id=entry.candidate_id,
        criteria_verified=entry.criteria_verified, criteria_total=entry.criteria_total,
        seconds=entry.seconds, issues=entry.issues, usage=entry.usage,
        role_seconds={role: entry.role_seconds.get(role, 0.0) for role in ROLES}, attempts=attempts,
        failures=[{"role": f.role, "attempts": f.attempts, "errors": f.errors} for f in facts["failures"].get(t, [])],
        checks=entry.checks, check_seconds=entry.check_seconds)
    if detail:
        read_loop_files(paths, model)
    return model


def read_loop_files(paths: WorkspacePaths, model: LoopModel) -> None:
    """The loop's plan, Developer report, candidate, QA report, replay results and admissions."""
    lp = paths.loop(model.loop)
    model.plan = read_plan(lp.plan) if lp.plan.exists() else None
    model.developer = read_developer(lp.developer) if lp.developer.exists() else None
    model.candidate = read_candidate(lp.candidate) if lp.candidate.exists() else None
    model.qa = read_qa(lp.qa) if lp.qa.exists() else None
    for path, key, attr in ((lp.replay, "results", "replay"), (lp.admitted, "checks", "admissions")):
        if path.exists():
            setattr(model, attr, json.loads(path.read_text(encoding="utf-8")).get(key, []))
    if model.plan is not None and model.plan.packages and lp.merge.exists():
        merge = json.loads(lp.merge.read_text(encoding="utf-8"))
        how = {m["package"]: f"merged ({m['how']})" for m in merge.get("merged", [])}
        how.update({d["package"]: f"dropped: {d['reason']}" for d in merge.get("dropped", [])})
        verdicts = {c.id: c.status for c in model.qa.criteria} if model.qa else {}
        tasks = {t.id: t for t in model.plan.tasks}
        for package in model.plan.packages:
            criteria = [a.id for task in package.tasks if task in tasks for a in tasks[task].acceptance]
            model.packages.append({"id": package.id, "tasks": list(package.tasks), "merge": how.get(package.id, "—"),
                                   "verified": sum(str(verdicts.get(c)) == "verified" for c in criteria),
                                   "criteria": len(criteria)})


def evidence_files(paths: WorkspacePaths, folder: Path, total: int) -> tuple[dict[str, EvidenceFile], int]:
    """The loop's evidence files (QA's, copied in after validation), with inline text excerpts
    while the budget lasts; returns them and what is left of the report's `total` budget."""
    if not folder.is_dir():
        return {}, total
    found: dict[str, EvidenceFile] = {}
    budget = min(INLINE_LOOP_BYTES, total)
    spent = 0
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        name = path.relative_to(folder).as_posix()
        item = EvidenceFile(name, paths.rel(path), path.stat().st_size)
        if budget > 0:
            with open(path, "rb") as fh:
                head = fh.read(min(INLINE_FILE_BYTES, budget))
            item.truncated = item.size > len(head)
            item.text = _text_excerpt(head, item.truncated)
            if item.text is not None:
                budget -= len(head)
                spent += len(head)
        found[name] = item
    return found, total - spent


def evidence_path(run: RunModel, loop: int, name: str) -> str:
    """Loop `loop`'s evidence file `name` relative to the workspace, as a link spells it (a name: never resolved)."""
    return (run.ws.paths.loop(loop).evidence / name).relative_to(run.ws.paths.root).as_posix()


def _text_excerpt(head: bytes, cut: bool) -> str | None:
    """The bytes as text, or None when they are not UTF-8 text (a cut may split one character)."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as err:
        if not cut or err.start < len(head) - 3:
            return None
        text = head[:err.start].decode("utf-8")
    return None if "\x00" in text else text


def diff_stats(ws: Workspace, commits: list[str]) -> dict[str, DiffStat]:
    """commit → its change against its parent, the previous candidate (one git call for all)."""
    if not commits:
        return {}
    out = ws.history.git("show", "--numstat", "--format=\x01%H", "--no-renames", *commits)
    stats: dict[str, DiffStat] = {}
    current: DiffStat | None = None
    for line in str(out).splitlines():
        if line.startswith("\x01"):
            current = stats.setdefault(line[1:].strip(), DiffStat([], 0, 0, 0))
        elif line.strip() and current is not None:
            added, deleted, path = line.split("\t", 2)
            a = int(added) if added.isdigit() else None
            d = int(deleted) if deleted.isdigit() else None
            current.changed += 1
            current.added += a or 0
            current.deleted += d or 0
            if len(current.files) < DIFF_FILES_SHOWN:
                current.files.append((path, a, d))
    return stats
