"""The loop's two check steps and their fold: replay (after the freeze, before QA) and admit (after QA).

Both are the Runtime's own work on the frozen candidate, journaled as steps of their own (`ChecksReplayed`,
`ChecksAdmitted`) so their time is counted as the project's test time, never as a role's or hoh's overhead.
Their results are state files of the loop (`replay.json`, `checks.json`, one text file per run); the
register (`state/checks.json`) changes only in the evidence step, after the ledger, like the ledger itself.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..config import HohConfig
from ..envs.base import Executor
from ..evidence.checks import BrokenCheck, CheckRegister, CheckSpec, RunStatus
from ..evidence.ledger import Ledger
from ..fsutil import atomic_write_json, sha256_file
from ..harness.sandbox import JailSpec, Limits
from ..paths import WorkspacePaths
from ..records import Candidate, Plan, QaReport
from ..store import events as ev
from ..store.git import History
from ..store.journal import Journal, RunHistory
from .replay import Admission, CheckRunner, Replay, admit, clear, replay


class CheckSteps:
    def __init__(self, paths: WorkspacePaths, config: HohConfig, repo: History, journal: Journal,
                 history: RunHistory, executor: Executor, jail: JailSpec | None, limits: Limits):
        self.paths, self.config, self.repo, self.journal, self.history = paths, config, repo, journal, history
        self.runner = CheckRunner(executor, jail, limits, paths.scratch / "checks")
        self.executor = executor

    def register(self) -> CheckRegister:
        return CheckRegister.load(self.paths.checks)

    def _finished(self, t: int, step: str, path: Path) -> None:
        self.journal.append(ev.StepFinished(loop=t, step=step, sha256=sha256_file(path)))

    def _view(self, commit: str) -> Path:
        self.executor.prepare()
        self.repo.update_view(self.paths.view, commit, index_needed=not self.config.jailed_here)
        return self.paths.view

    def _after_runs(self) -> None:
        if self.runner.unjailed_runs:
            self.repo.view_clean = False  # an unjailed check could have written the view: rebuilt, not trusted

    # ---- replay -----------------------------------------------------------------------------------------
    def replay(self, t: int, base: str, candidate: Candidate) -> Replay:
        lp = self.paths.loop(t)
        if self.history.done(t, "replay"):
            return Replay.from_json(json.loads(lp.replay.read_text(encoding="utf-8")))
        register = self.register()
        active = register.active() if self.config.checks.replay else []
        budget = self.config.checks.replay_budget_s
        if not active:
            done = Replay(t, candidate.candidate_id, budget_s=budget)
        else:
            clear(lp.replay_dir)
            changed = set(self.repo.changed_paths(base, candidate.commit))
            done = replay(self.runner, register, self._view(candidate.commit), self.paths.state, lp.replay_dir,
                          loop=t, candidate_id=candidate.candidate_id, changed=changed, budget_s=budget)
            self._after_runs()
        atomic_write_json(lp.replay, done.to_json())
        if active:
            f = done.figures
            self.journal.append(ev.ChecksReplayed(loop=t, replayed=f["replayed"], failed=f["failed"], flaky=f["flaky"],
                                                  skipped=f["skipped"], seconds=done.seconds, at_risk=f["at_risk"]))
        self._finished(t, "replay", lp.replay)
        return done

    # ---- admission --------------------------------------------------------------------------------------
    def admit(self, t: int, qa: QaReport, candidate: Candidate) -> list[Admission]:
        lp = self.paths.loop(t)
        if self.history.done(t, "admit"):
            return self.admissions(t)
        if not any(item.check is not None for item in (*qa.criteria, *qa.preserved)) and not qa.retire:
            return []
        clear(lp.admit_dir)
        started = time.monotonic()
        view = self._view(candidate.commit)
        admissions = admit(self.runner, self.register(), qa, view, lp.evidence, self.paths.state, lp.admit_dir,
                           self.config.sandbox.network, self.config.checks.replay_budget_s)
        self._after_runs()
        atomic_write_json(lp.admitted, {"schema_version": 1, "loop": t, "candidate_id": candidate.candidate_id,
                                        "checks": [a.to_json() for a in admissions]})
        self.journal.append(ev.ChecksAdmitted(loop=t, added=sum(a.admitted and not a.reason for a in admissions),
                                              rejected=sum(not a.admitted for a in admissions),
                                              retired=len(qa.retire), seconds=round(time.monotonic() - started, 3)))
        self._finished(t, "admit", lp.admitted)
        return admissions

    def admissions(self, t: int) -> list[Admission]:
        path = self.paths.loop(t).admitted
        if not path.exists():
            return []
        return [Admission.from_json(a) for a in json.loads(path.read_text(encoding="utf-8"))["checks"]]

    # ---- what the ledger and the next QA get -----------------------------------------------------------
    def broken(self, t: int, qa: QaReport | None) -> tuple[BrokenCheck, ...]:
        """This loop's replay failures that count: a check QA retired this loop changed on purpose."""
        path = self.paths.loop(t).replay
        if not path.exists():
            return ()
        retired = {r.id for r in qa.retire} if qa else set()
        return tuple(BrokenCheck(r.id, r.behaviour_id, r.evidence, r.reason or r.status.value)
                     for r in Replay.from_json(json.loads(path.read_text(encoding="utf-8"))).broken()
                     if r.id not in retired and r.behaviour_id)

    def prompt_values(self, t: int, replayed: Replay | None) -> dict[str, Any]:
        rejected = [{"item": a.item, "loop": t - 1, "reason": a.reason} for a in self.admissions(t - 1)
                    if not a.admitted] if t > 1 else []
        shown = None
        if replayed is not None and replayed.results:
            shown = {**replayed.figures, "results": [r.to_json() for r in replayed.results]}
        return {"replay": shown, "checks_rejected": rejected}

    def active_ids(self) -> set[str]:
        return self.register().active_ids()

    # ---- the evidence step -----------------------------------------------------------------------------
    def fold(self, t: int, ledger: Ledger, plan: Plan | None, qa: QaReport | None, candidate_id: str | None) -> None:
        """The loop into the register, once (after the ledger, whose behaviour ids the new checks take)."""
        register = self.register()
        if register.applied_through >= t:
            return
        path = self.paths.loop(t).replay
        if path.exists():
            for r in Replay.from_json(json.loads(path.read_text(encoding="utf-8"))).results:
                if r.status is not RunStatus.skipped:
                    register.record_replay(r.id, t, candidate_id or "", r.status)
        for retirement in (qa.retire if qa else ()):
            if register.get(retirement.id) is not None:
                register.retire(retirement.id, t, retirement.reason)
        conditions = {a.id: a.condition for a in plan.acceptance} if plan else {}
        for a in self.admissions(t):
            if not a.admitted or register.get(a.check_id) is not None:
                continue
            behaviour = a.item if a.kind == "preserved" else ledger.behaviour_of(conditions.get(a.item, ""))
            register.add(a.check_id, behaviour, CheckSpec.from_json(a.spec), t, a.item, self.config.sandbox.network)
        register.data["applied_through"] = t
        register.save(self.paths.checks)
