"""The Runtime: sequences Planner → Developer → freeze → QA → evidence, loop after loop.

Every step ends by writing its state file atomically and then journaling `step_finished`; on
resume a step runs again unless the journal says it finished. A role that was interrupted is
rerun from its frozen inputs: the Planner and QA from the frozen candidate, the Developer from
A_{t-1} reset. The Runtime never calls a model itself and never prints.
"""

from __future__ import annotations

import shutil
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Mapping

from ..envs import registry
from ..envs.local.executor import LOCAL
from ..envs.local.jail import require_jail
from ..envs.local.limits import sweep as sweep_cgroups
from ..envs.registry import Environments, Given
from ..errors import RoleFailed, RunEnded
from ..evidence.index import build_index
from ..evidence.ledger import Ledger
from ..evidence.shortfall import shortfall
from ..fsutil import atomic_write_json, atomic_write_text, copy_regular_tree, note_written, sha256_file
from ..harness.base import HarnessAdapter
from ..harness.keys import withheld
from ..harness.process import reap
from ..plans import single_task_plan
from ..records import (Candidate, DeveloperReport, Plan, Preserved, QaReport, read_candidate, read_developer, read_plan,
                       read_qa)
from ..statuses import LoopStatus, RunStatus
from ..store import events as ev
from ..store import fold
from ..store.changefeed import FreezeFeed
from ..store.journal import Journal, RunHistory
from ..store.lock import WorkspaceLock
from ..store.notes import Notes
from ..store.seal import SealedState
from ..store.workspace import Workspace
from .checksteps import CheckSteps
from .control import RunControl
from .hooks import key_names, loop_summary
from .jobs import JobFactory
from .packages import Merged, ParallelDevelopers
from .planmd import plan_markdown
from .replay import Replay
from .roles import RoleJob, RoleRunner
from .setup import check_sealed_state, clear_temp_files, pack_history, prepare_adapters, reconfigure, role_limits
from .validate import MAX_EVIDENCE_FILE_BYTES

Notify = Callable[..., None]
SANDBOX_OFF = ("sandbox.mode is off: roles run without the OS jail; what protects each area is the harness's own "
               "flags, hoh's guard (every protected area checked and restored after each attempt) and, inside a "
               "container, the container")

IN_ENVIRONMENTS = ("roles run in {name} environments, one per role: each environment is its role's sandbox (a "
                   "harness's own sandbox, which cannot work in a container, is off), hoh's state stays outside")


@dataclass
class RunReport:
    status: RunStatus
    """Any `RunStatus` but not started; the journal also records interrupted (a second Ctrl-C) and error (an
    exception, re-raised), which no caller gets as a report."""
    loops_finished: int
    target_loops: int
    error: str | None = None
    nothing_to_do: bool = False
    """A resume of a run that had ended as planned, with no more loops asked for: nothing ran, nothing written."""

    @property
    def ended_as_planned(self) -> bool:
        return self.status.ended_as_planned


def spec_as_plan(t: int) -> Plan:
    """The plan of a Developer-only loop: the whole spec, no Planner, no increments."""
    return single_task_plan(t, goal="Implement the product spec", title="Implement the spec",
                            details="Build everything the spec asks for, continuing from the project as it is.",
                            condition="The product does what the spec asks")


@dataclass
class LoopOutcome:
    """How a loop ended, and the state files it got as far as writing."""

    status: LoopStatus
    plan: Plan | None = None
    developer: DeveloperReport | None = None
    candidate: Candidate | None = None
    qa: QaReport | None = None


class Runtime:
    """One open session on a workspace: it holds the lock, the journal, the job factory and the role
    runner from the start, and only iterates loops.

        with Runtime.open(workspace) as runtime:
            report = runtime.run(target_loops)
    """

    def __init__(self, workspace: Workspace, journal: Journal, adapters: Mapping[str, HarnessAdapter],
                 notify: Notify | None = None, opened_at: float | None = None,
                 environments: Environments | None = None):
        self.ws = workspace
        self.paths, self.config = workspace.paths, workspace.config
        self.repo, self.mirror = workspace.history, workspace.mirror
        self.sealed = SealedState(self.repo, self.paths.state)
        self.feed = FreezeFeed(self.repo)  # what the Developer changed, from the kernel: the freeze looks there only
        self.notify: Notify = notify or (lambda *a, **k: None)
        self.journal = journal
        self.history = RunHistory.read(journal)
        journal.listeners.append(self.history.apply)  # the fold stays current: budgets read it live
        self.control = RunControl(self.paths, self.config, journal, self.history, self.notify,
                                  opened_at if opened_at is not None else time.time())
        self.runner = RoleRunner(self.paths, adapters, journal, policy=self.config.policy,
                                 timeouts=self.config.timeouts, notify=self.notify, gate=self.control.before_attempt,
                                 stop_requested=self.control.stop_requested, limits=role_limits(self.config),
                                 executors=environments.executors() if environments else None)
        self.jobs = JobFactory(self.paths, self.config, self.repo, journal, self.sealed, self.mirror,
                               home=self.runner.home)
        self.notes = Notes(self.paths, journal)
        self.parallel = ParallelDevelopers(self)
        self.checks = CheckSteps(self.paths, self.config, self.repo, journal, self.history,
                                 self.runner.executors.get("qa", LOCAL), self.jobs.check_jail(), role_limits(self.config))

    @classmethod
    @contextmanager
    def open(cls, workspace: Workspace, notify: Notify | None = None,
             adapters: Mapping[str, HarnessAdapter] | None = None,
             overrides: list[str] | None = None, given: Given | None = None) -> Iterator["Runtime"]:
        """Take the workspace lock, apply `--set` overrides to its hoh.yaml (validated before it is written),
        check each role's harness (unless the caller passes adapters it has checked already), clean up
        after a crash (orphaned agents, git locks), and hold the model keys out of this process's environment
        while it is open (`keys.withheld`: no process a library starts for hoh inherits one). `given`: the
        environment every role runs in, started and stopped by someone else (a Harbor trial's)."""
        with WorkspaceLock(workspace.paths.lock), ExitStack() as stack:
            opened_at = time.time()
            if overrides:
                workspace, adapters = reconfigure(workspace, overrides)
            elif adapters is None:
                adapters = prepare_adapters(workspace.config)
            if workspace.config.jailed_here:
                require_jail()
            stack.enter_context(withheld(key_names(workspace.config)))  # for the egress proxy alone
            journal = Journal(workspace.paths.journal)
            history = RunHistory.read(journal)
            for pid, ticks in history.live_processes:
                if reap(pid, ticks):
                    journal.append(ev.OrphanReaped(pid=pid))
            workspace.history.clear_stale_locks()
            workspace.history.move_outside_patterns()
            workspace.history.hold_attributes()
            clear_temp_files(workspace)
            pack_history(workspace)
            sweep_cgroups()
            check_sealed_state(workspace, history)
            environments = registry.places(workspace.config, workspace.paths, journal, adapters,
                                           warn=lambda message: notify("warning", message=message) if notify else None,
                                           given=given)
            try:
                environments.check()
                environments.stop_orphans(history)
                runtime = cls(workspace, journal, adapters, notify, opened_at, environments)
                try:
                    if not environments.local:
                        # An image that cannot start is said before anything else happens.
                        first = "developer" if workspace.config.mode == "developer_only" else "planner"
                        environments.executor(first).start()
                    yield runtime
                finally:
                    runtime.sealed.close()  # its kernel watch: a process may open many runtimes
                    runtime.feed.close()
            finally:
                environments.close()

    def run(self, target_loops: int) -> RunReport:
        history, control = self.history, self.control
        previous = history.run_finished
        control.clear_stale_request()
        self.journal.append(ev.RunStarted(target_loops=target_loops, resumed=history.run_started is not None,
                                          harness=self.config.harness.name, sandbox=self.config.sandbox.mode))
        if not self.config.environment.local:
            self.notify("warning", message=IN_ENVIRONMENTS.format(name=self.config.environment.name))
        elif self.config.sandbox.mode == "off":
            self.notify("warning", message=SANDBOX_OFF)
        report = RunReport(RunStatus.RUNNING, history.last_finished_loop, target_loops)
        try:
            for t in range(history.last_finished_loop + 1, target_loops + 1):
                self.notify("loop", loop=t, target=target_loops)
                self.run_loop(t)
                report.loops_finished = t
                if ended := control.end_after(t, target_loops):
                    report.status, report.error = ended
                    break
            else:
                report.status = RunStatus.FINISHED
                if report.loops_finished == history.last_finished_loop and previous is not None \
                        and previous.status in (RunStatus.COMPLETE, RunStatus.STALLED):
                    report.status, report.error = RunStatus(previous.status), previous.error  # nothing more asked for
        except RoleFailed as err:
            report.status, report.error = RunStatus.FAILED, str(err)
        except RunEnded as err:
            report.status, report.error = err.status, str(err)
        except BaseException as err:
            report.status = RunStatus.INTERRUPTED if isinstance(err, KeyboardInterrupt) else RunStatus.ERROR
            report.error = str(err) or type(err).__name__
            raise
        finally:
            self.journal.append(ev.RunFinished(status=report.status, loops_finished=report.loops_finished,
                                               error=report.error))
            fold.save(self.paths)
            control.stop_file.clear()
            if report.status is not RunStatus.INTERRUPTED:
                last = history.last_finished_loop
                control.hook("on_stop", None, f"stop-{history.sessions}",
                          {"event": "stop", "status": report.status, "error": report.error,
                           "last_loop": loop_summary(history.loops[last].summary()) if last else None})
        return report

    # ---- one loop ----------------------------------------------------------------------------
    def run_loop(self, t: int) -> None:
        self.control.loop = t
        lp = self.paths.loop(t)
        lp.dir.mkdir(parents=True, exist_ok=True)
        base = self.base_commit(t)
        if not any(self.history.done(t, step) for step in ev.STEPS):
            self.journal.append(ev.LoopStarted(loop=t, base_commit=base))
        ledger = Ledger.load(self.paths.ledger)  # once per loop: the roles read it, the evidence step folds into it
        self.finish_loop(t, self.loop_steps(t, base, ledger), ledger)

    def loop_steps(self, t: int, base: str, ledger: Ledger) -> LoopOutcome:
        plan = self.step_planner(t, base, ledger)
        if plan is None:
            return LoopOutcome(LoopStatus.PLANNER_FAILED)
        if plan.spec_complete:
            # No Developer: the last candidate again, and QA re-verifies every verified behaviour on it.
            self.repo.reset_to(base)
            candidate = self.step_freeze(t, base, plan)
            qa = self.step_qa(t, plan, candidate, ledger, self.checks.replay(t, base, candidate))
            status = LoopStatus.of_verdict(qa.verdict if qa else None)
            return LoopOutcome(LoopStatus.COMPLETE if status is LoopStatus.PASS else status, plan, None, candidate, qa)
        merged = None
        if len(plan.packages) > 1 and self.config.policy.developers > 1:
            developer, merged = self.parallel.run(t, base, plan)  # one Developer per work package, at once
        else:
            developer = self.step_developer(t, base, plan)
        if developer is None:
            return LoopOutcome(LoopStatus.DEVELOPER_FAILED, plan)
        candidate = self.step_freeze(t, base, plan, merged)
        replayed = self.checks.replay(t, base, candidate)  # model-free, before QA: QA is told what it found
        if self.config.mode == "developer_only":
            return LoopOutcome(LoopStatus.UNVERIFIED, plan, developer, candidate)
        qa = self.step_qa(t, plan, candidate, ledger, replayed)
        return LoopOutcome(LoopStatus.of_verdict(qa.verdict if qa else None), plan, developer, candidate, qa)

    def base_commit(self, t: int) -> str:
        """A_{t-1}: the newest frozen candidate before loop t, else the empty root commit."""
        for earlier in range(t - 1, 0, -1):
            path = self.paths.loop(earlier).candidate
            if path.exists():
                return read_candidate(path).commit
        return self.ws.identity["root_commit"]

    def _finished(self, t: int, step: str, path=None, **fields: Any) -> None:
        sha = sha256_file(path) if path is not None else None
        self.journal.append(ev.StepFinished(loop=t, step=step, sha256=sha, **fields))

    def _run_role(self, job: RoleJob) -> Plan | DeveloperReport | QaReport | None:
        """Run a role afresh; a role interrupted earlier keeps its attempts aside, not reused."""
        role_dir = self.paths.loop(job.loop).role_dir(job.role)
        if role_dir.exists():
            n = 1
            while (aside := self.paths.loop(job.loop).role_set_aside(job.role, n)).exists():
                n += 1
            note_written(role_dir)
            note_written(aside)
            role_dir.rename(aside)
            self.journal.append(ev.RoleSetAside(loop=job.loop, role=job.role, moved_to=self.paths.rel(aside)))
        self.notify("role", role=job.role, loop=job.loop)
        if job.jail is None and job.role != "qa":
            self.repo.view_clean = False  # unjailed, this role could write QA's view, which only QA's guard checks
        result = self.runner.run(job)
        if result.output is not None:
            return result.output
        self.journal.append(ev.RoleFailed(loop=job.loop, role=job.role, attempts=result.attempts, errors=result.errors))
        if self.config.policy.on_role_failure == "stop":
            raise RoleFailed(job.role, job.loop, result.errors)
        self._finished(job.loop, job.role, status="failed")
        return None

    # ---- steps -------------------------------------------------------------------------------
    def step_planner(self, t: int, base: str, ledger: Ledger) -> Plan | None:
        lp = self.paths.loop(t)
        if done := self.history.done(t, "planner"):
            return read_plan(lp.plan) if done.status == "ok" else None
        if self.config.mode == "developer_only":
            plan, reused = spec_as_plan(t), False
        elif not self.config.mechanisms.plan_update and t > 1 and self.paths.loop(1).plan.exists():
            plan = replace(read_plan(self.paths.loop(1).plan), loop=t)
            reused = True
        else:
            self.repo.reset_to(base)
            planned = self._run_role(self.jobs.planner(t, base, ledger, self.notes.for_loop(t)))
            if planned is None:
                return None
            plan, reused = self.preserve_as_registered(planned, ledger), False
        atomic_write_text(lp.plan_md, plan_markdown(plan))
        atomic_write_json(lp.plan, plan.to_json())
        self._finished(t, "planner", lp.plan, status="ok", reused_plan=reused)
        return plan

    @staticmethod
    def preserve_as_registered(plan: Plan, ledger: Ledger) -> Plan:
        """A preserved id means the register's behaviour, whatever words the Planner used for it; a spec-complete
        plan preserves every verified behaviour (the last check before `complete` covers them all)."""
        if plan.spec_complete:
            kept = [Preserved(b["id"], b["behaviour"]) for b in ledger.verified_behaviours()]
        else:
            kept = [Preserved(p.id, ledger.behaviour(p.id)["behaviour"]) for p in plan.preserve]
        return replace(plan, preserve=tuple(kept))

    def step_developer(self, t: int, base: str, plan: Plan) -> DeveloperReport | None:
        lp = self.paths.loop(t)
        if done := self.history.done(t, "developer"):
            return read_developer(lp.developer) if done.status == "ok" else None
        self.repo.reset_to(base)
        self.feed.arm(jailed=self.config.roles_apart)
        if not self.config.mechanisms.warm_start:
            self.repo.empty_worktree()
        self.repo.clean_at = None  # the Developer writes the project
        report = self._run_role(self.jobs.developer(t, base, plan, lp.plan_md.read_text(encoding="utf-8")))
        if report is None:
            self.repo.reset_to(base)
            return None
        atomic_write_json(lp.developer, report.to_json())
        self._finished(t, "developer", lp.developer, status="ok")
        return report

    def step_freeze(self, t: int, base: str, plan: Plan, merged: Merged | None = None) -> Candidate:
        """Freeze the project as the loop's candidate; `merged`: the work packages' merged tree, put into the
        project first (its paths are exactly what changed)."""
        lp = self.paths.loop(t)
        if self.history.done(t, "freeze"):
            return read_candidate(lp.candidate)
        if merged is not None:
            self.repo.clean_at = None  # whatever reached the project while the packages ran goes
            self.repo.reset_to(base)
            self.repo.git("read-tree", "-m", "-u", merged.commit)
            changed, why = self.repo.changed_paths(base, merged.commit), None
        else:
            changed, why = self.feed.take(base)
        if why is not None:
            self.journal.append(ev.FullScan(loop=t, step="freeze", area="project", reason=why.value))
        tag = f"loop-{t:04d}"
        commit = self.repo.commit_all(base, f"hoh loop {t}: {plan.goal}", loop=t, changed=changed, tag=tag)
        self.mirror.publish(commit, tag, index=self.repo.index, parent=base)
        candidate = Candidate.frozen(t, commit, self.repo.tree_of(commit), base, tag,
                                     merged.packages if merged is not None else None)
        atomic_write_json(lp.candidate, candidate.to_json())
        self._finished(t, "freeze", lp.candidate, candidate_id=candidate.candidate_id)
        self.notify("frozen", loop=t, candidate_id=candidate.candidate_id)
        return candidate

    def step_qa(self, t: int, plan: Plan, candidate: Candidate, ledger: Ledger, replayed: Replay) -> QaReport | None:
        lp = self.paths.loop(t)
        if done := self.history.done(t, "qa"):
            report = read_qa(lp.qa) if done.status == "ok" else None
            if report is not None:
                self.checks.admit(t, report, candidate)
            return report
        self.repo.reset_to(candidate.commit)
        shutil.rmtree(lp.qa_scratch, ignore_errors=True)
        self.repo.update_view(self.paths.view, candidate.commit, index_needed=not self.config.jailed_here)
        lp.qa_evidence.mkdir(parents=True)
        plan_md = lp.plan_md.read_text(encoding="utf-8")
        report = self._run_role(self.jobs.qa(t, candidate, plan, plan_md, ledger,
                                             self.checks.prompt_values(t, replayed), self.checks.active_ids()))
        if report is None:
            return None
        note_written(lp.evidence)
        shutil.rmtree(lp.evidence, ignore_errors=True)
        # Regular files and dirs only: a symlink could point anywhere, a FIFO would block the copy.
        copy_regular_tree(lp.qa_evidence, lp.evidence, MAX_EVIDENCE_FILE_BYTES)
        atomic_write_json(lp.qa, report.to_json())
        self._finished(t, "qa", lp.qa, status="ok", verdict=report.verdict)
        shutil.rmtree(lp.qa_scratch, ignore_errors=True)
        self.checks.admit(t, report, candidate)  # QA's new checks, run once more on its candidate
        return report

    def finish_loop(self, t: int, outcome: LoopOutcome, ledger: Ledger) -> None:
        candidate_id = outcome.candidate.candidate_id if outcome.candidate else None
        if not self.history.done(t, "evidence"):
            # The ledger records the last loop folded in, so a crash between its save and the
            # journal entry never applies a loop twice.
            if ledger.data.get("applied_through", 0) < t:
                if outcome.plan is not None:
                    ledger.apply_loop(t, outcome.plan, outcome.developer, candidate_id, outcome.qa,
                                      self.config.ledger.same_defect_loops, self.checks.broken(t, outcome.qa))
                ledger.data["applied_through"] = t
                ledger.save(self.paths.ledger)
            self.checks.fold(t, ledger, outcome.plan, outcome.qa, candidate_id)
            self.write_index(t, ledger)
            self._finished(t, "evidence", self.paths.ledger, status=outcome.status)
        self.sealed.seal(t)
        qa = outcome.qa
        short = outcome.status in (LoopStatus.PARTIAL, LoopStatus.FAIL)
        self.journal.append(ev.LoopFinished(loop=t, status=outcome.status, candidate_id=candidate_id,
                                            verified=qa.verified_count if qa else 0,
                                            criteria=len(qa.criteria) if qa else 0, issues=ledger.counts(),
                                            progress=ledger.progress(t), reason=shortfall(ledger, t, qa) if short else None))
        fold.save(self.paths, unless_tail_under=fold.LOOP_END_TAIL)  # `hoh status` folds only what comes after
        self.notify("loop_done", loop=t, status=outcome.status)
        self.control.hook("on_loop_end", t, f"{t:04d}",
                          {"event": "loop_end", **loop_summary(self.history.loops[t].summary())})

    def write_index(self, t: int, ledger: Ledger) -> None:
        text = build_index(self.paths, self.jobs.spec_text, ledger, t, self.config.index)
        atomic_write_text(self.paths.index, text)
