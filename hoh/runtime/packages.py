"""Developers working at once: one per work package of the plan, each on its own copy of A_{t-1}, then the
Runtime's merge of their trees in package order (`policy.developers` > 1 and a plan with packages).

    package:P1 … package:PK   each package's Developer, in its own thread, jail, harness home and copy
                              (scratch/loop-NNNN/packages/P1/); its tree committed (parent A_{t-1}) and
                              state/loops/NNNN/packages/P1.json written, then its step journaled
    merge                     in package order: a clean merge goes in; a conflict gets one merge attempt by a
                              Developer (package:merge-P2) on git's merge with its markers; a package that
                              still does not merge is dropped with its reason (merge.json)
    developer                 the packages' reports as the loop's one developer.json

Every step is journaled when its file is written, so a resume reruns only what had not finished; merges are
git's, over commits with fixed dates, so the same package trees give the same candidate.
"""

from __future__ import annotations

import contextvars
import copy
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import RoleFailed, RunEnded
from ..harness.process import kill_running
from ..fsutil import atomic_write_json, load_state, note_written
from ..records import DeveloperReport, Plan, TaskClaim, WorkPackage, read_developer
from ..store import events as ev
from ..store.gitrun import GitError
from ..store.merging import PackageGit
from .between import Continuity
from .guard import printable

if TYPE_CHECKING:
    from .loop import Runtime

PACKAGE_SCHEMA_VERSION = 1
MERGE_FIELDS = ("schema_version", "commit", "merged", "dropped")


@dataclass(frozen=True)
class PackageSet:
    """What one Developer's guard leaves out while the others run: their attempts' logs, homes and results."""

    home: Path
    """This Developer's own harness home."""
    skip: tuple[Path, ...]


@dataclass(frozen=True)
class PackageResult:
    """A package's Developer's outcome (`packages/P1.json`): its commit, or why it has none; and what staging its
    copy changed there, as a lone Developer's project (embedded repositories made content, names git refuses
    left out)."""

    package: str
    tasks: tuple[str, ...]
    commit: str | None
    report: DeveloperReport | None
    error: str | None = None
    flattened: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": PACKAGE_SCHEMA_VERSION, "package": self.package, "tasks": list(self.tasks),
                "commit": self.commit, "report": self.report.to_json() if self.report else None, "error": self.error,
                "flattened": list(self.flattened), "left_out": list(self.left_out)}

    @classmethod
    def read(cls, path: Path) -> "PackageResult":
        data = load_state(path, ("schema_version", "package", "tasks"), PACKAGE_SCHEMA_VERSION)
        report = data.get("report")
        return cls(data["package"], tuple(data["tasks"]), data.get("commit"),
                   DeveloperReport.from_json(report) if report else None, data.get("error"),
                   tuple(data.get("flattened") or ()), tuple(data.get("left_out") or ()))


@dataclass(frozen=True)
class Merged:
    """The packages' merge, as the freeze takes it: the merged commit (parent A_{t-1}) and what went in."""

    commit: str
    packages: tuple[str, ...]

    @classmethod
    def of(cls, outcome: dict[str, Any]) -> "Merged":
        return cls(outcome["commit"], tuple(m["package"] for m in outcome["merged"]))


def step_name(package: str) -> str:
    return f"package:{package}"


class ParallelDevelopers:
    """Runs a loop's work packages at once and merges them; the Runtime's Developer step for such a plan."""

    def __init__(self, runtime: "Runtime"):
        self.rt = runtime
        self.git = PackageGit(runtime.repo)
        self._lock = threading.Lock()

    def run(self, t: int, base: str, plan: Plan) -> tuple[DeveloperReport | None, Merged | None]:
        """(the loop's developer report, the merged commit), or (None, None) when no package could be built."""
        rt, lp = self.rt, self.rt.paths.loop(t)
        if done := rt.history.done(t, "developer"):
            if done.status != "ok":
                return None, None
            return read_developer(lp.developer), Merged.of(load_state(lp.merge, MERGE_FIELDS, PACKAGE_SCHEMA_VERSION))
        if rt.history.done(t, "merge"):  # every package's result is on disk, a dropped one's too
            results = {p.id: PackageResult.read(lp.package(p.id)) for p in plan.packages}
        else:
            results = self._build_all(t, base, plan)
            # The packages' own guards checked what changed while they ran; the main runner's memory of the areas
            # (from the Planner) would take their logs and homes for changes between roles.
            rt.runner.continuity.forget()
        merged, outcome = self._merge_all(t, base, plan, results)
        if merged is None:
            errors = [f"package {r.package}: {r.error}" for r in results.values() if r.error]
            rt.journal.append(ev.RoleFailed(loop=t, role="developer", attempts=len(results), errors=errors))
            if rt.config.policy.on_role_failure == "stop":
                raise RoleFailed("developer", t, errors)
            rt._finished(t, "developer", status="failed")
            return None, None
        report = combined_report(t, plan, results, outcome)
        atomic_write_json(lp.developer, report.to_json())
        rt._finished(t, "developer", lp.developer, status="ok")
        return report, Merged.of(outcome)

    # ---- the Developers, at once ---------------------------------------------------------------
    def _build_all(self, t: int, base: str, plan: Plan) -> dict[str, PackageResult]:
        rt, lp = self.rt, self.rt.paths.loop(t)
        results: dict[str, PackageResult] = {}
        todo = []
        for package in plan.packages:
            if rt.history.done(t, step_name(package.id)):
                results[package.id] = PackageResult.read(lp.package(package.id))
            else:
                todo.append(package)
        ids = [p.id for p in plan.packages]
        skip = (lp.packages, *(lp.role_dir(f"developer-{i}") for i in ids),
                *(rt.runner.home("developer", i) for i in ids))
        plan_md = lp.plan_md.read_text(encoding="utf-8")
        notify_lock = threading.Lock()

        def notify(*args: Any, **kwargs: Any) -> None:
            with notify_lock:
                rt.notify(*args, **kwargs)

        gate_lock, cancelled = threading.Lock(), threading.Event()
        working: set[int] = set()  # the Developers (threads) that started an attempt and have not ended

        def gate(role: str) -> None:
            # One at a time: a stop request or a budget is journaled once; after an interrupt no attempt starts.
            # Each Developer working holds a share of the budget: its next attempt's estimate.
            with gate_lock:
                if cancelled.is_set():
                    raise RunEnded("interrupted: another Developer's run ended")
                me = threading.get_ident()
                rt.control.before_attempt(role, running=len(working - {me}))
                working.add(me)

        first_error: list[BaseException] = []

        def build(package: WorkPackage) -> PackageResult:
            runner = copy.copy(rt.runner)  # its own memory of the guard between its attempts
            runner.continuity, runner.notify, runner.gate = Continuity(), notify, gate
            beside = PackageSet(rt.runner.home("developer", package.id), skip)
            info = {"id": package.id, "merge": False, "tasks": list(package.tasks), "owns": list(package.owns)}
            try:
                return self._run_package(t, base, plan.package_plan(package), plan_md, info, runner, beside,
                                         start=base, tasks=package.tasks)
            except BaseException as err:
                with gate_lock:
                    if not cancelled.is_set():  # the run's end; the others' "interrupted" only follows it
                        first_error.append(err)
                        cancelled.set()
                raise
            finally:
                with gate_lock:
                    working.discard(threading.get_ident())

        for package in todo:
            # Before any Developer starts: a rename in state/ while another one's guard watches is a change of it.
            self._set_aside(t, f"developer-{package.id}", package.id)
        if todo:
            pool = ThreadPoolExecutor(max_workers=len(todo), thread_name_prefix="hoh-developer")
            # Each thread in a copy of this context: hoh's record of its own writes is the Runtime's.
            futures = [pool.submit(contextvars.copy_context().run, build, p) for p in todo]
            try:
                wait(futures)
            except BaseException:
                # A second Ctrl-C (or any error here): no Developer goes on, none starts another attempt.
                cancelled.set()
                kill_running()
                raise
            finally:
                pool.shutdown(wait=True)
            for package, future in zip(todo, futures):
                if future.exception() is None:
                    results[package.id] = future.result()
            if first_error:  # every Developer has ended: each finished its attempt, none started another
                raise first_error[0]
        return results

    def _run_package(self, t: int, base: str, plan: Plan, plan_md: str, info: dict[str, Any], runner,
                     beside: PackageSet, start: str, tasks: tuple[str, ...]) -> PackageResult:
        """One package's Developer on a fresh copy of `start`, its tree committed and its result recorded."""
        rt, lp = self.rt, self.rt.paths.loop(t)
        pid = info["id"]
        tree, index = lp.package_tree(pid), lp.package_index(pid)
        with self._lock:
            self.git.checkout(start, tree, index)
            if not rt.config.mechanisms.warm_start and not info["merge"]:
                for child in tree.iterdir():
                    shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        job = rt.jobs.package_developer(t, base, plan, plan_md, info, tree, beside)
        rt.notify("role", role="developer", loop=t, package=pid)
        result = runner.run(job)
        if result.output is None:
            rt.journal.append(ev.RoleFailed(loop=t, role="developer", attempts=result.attempts,
                                            errors=result.errors, package=pid))
            last = result.errors[-1] if result.errors else "no usable result"
            outcome = PackageResult(pid, tasks, None, None, f"its Developer failed after {result.attempts} "
                                                            f"attempt(s): {last}")
        else:
            try:
                with self._lock:
                    made = self.git.commit_copy(tree, index, base, f"hoh loop {t}: package {pid}", t)
                outcome = PackageResult(pid, tasks, made.commit, result.output, None,
                                        tuple(map(printable, made.staged.flattened)),
                                        tuple(map(printable, made.staged.left_out)))
            except (GitError, OSError) as err:  # what git cannot record is this package's end, never the run's
                outcome = PackageResult(pid, tasks, None, result.output, f"git cannot commit its tree: {git_says(err)}")
        path = lp.package(pid)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, outcome.to_json())
        if outcome.commit or rt.config.policy.on_role_failure == "continue":
            # Under `stop` a failed Developer is not done: a resume before the merge runs it again, as it would
            # run a lone Developer that failed again.
            rt._finished(t, step_name(pid), path, status="ok" if outcome.commit else "failed")
        return outcome

    def _set_aside(self, t: int, role_dir_name: str, pid: str) -> None:
        lp = self.rt.paths.loop(t)
        role_dir = lp.role_dir(role_dir_name)
        if not role_dir.exists():
            return
        n = 1
        while (aside := lp.role_set_aside(role_dir_name, n)).exists():
            n += 1
        note_written(role_dir)
        note_written(aside)
        role_dir.rename(aside)
        self.rt.journal.append(ev.RoleSetAside(loop=t, role="developer", moved_to=self.rt.paths.rel(aside),
                                               package=pid))

    # ---- the merge, in package order -------------------------------------------------------------
    def _merge_all(self, t: int, base: str, plan: Plan,
                   results: dict[str, PackageResult]) -> tuple[str | None, dict[str, Any]]:
        rt, lp = self.rt, self.rt.paths.loop(t)
        if rt.history.done(t, "merge"):
            outcome = load_state(lp.merge, MERGE_FIELDS, PACKAGE_SCHEMA_VERSION)
            return outcome["commit"], outcome
        merged, into = base, []
        dropped: list[dict[str, str]] = []
        for package in plan.packages:
            try:
                commit, how = self._merge_one(t, base, plan, package, results, into, merged)
            except GitError as err:  # a merge git cannot do drops this package, never ends the run
                commit, how = None, f"git cannot merge it: {git_says(err)}"
            if commit is None:  # `how` says why
                rt.journal.append(ev.PackageDropped(loop=t, package=package.id, reason=how))
                dropped.append({"package": package.id, "reason": how})
                continue
            merged = commit
            into.append({"package": package.id, "how": how})
            rt.journal.append(ev.PackageMerged(loop=t, package=package.id, how=how, commit=merged))
        outcome = {"schema_version": PACKAGE_SCHEMA_VERSION, "loop": t, "base": base,
                   "order": [p.id for p in plan.packages], "merged": into, "dropped": dropped,
                   "commit": merged if into else None, "tree": self.git.tree_of(merged) if into else None}
        atomic_write_json(lp.merge, outcome)
        if into or rt.config.policy.on_role_failure == "continue":  # nothing merged under `stop`: the resume retries
            rt._finished(t, "merge", lp.merge, status="ok" if into else "failed")
        return outcome["commit"], outcome

    def _merge_one(self, t: int, base: str, plan: Plan, package: WorkPackage, results: dict[str, PackageResult],
                   into: list[dict[str, str]], merged: str) -> tuple[str | None, str]:
        """`package` merged into `merged`: (the new merged commit, "clean" or "resolved"), or (None, why it is
        dropped)."""
        result = results[package.id]
        if result.commit is None:
            return None, result.error or "no result"
        if merged == base:
            return result.commit, "clean"
        step = self.git.merge(merged, result.commit)
        if step.clean:
            return self.git.commit_tree(step.tree, base, f"hoh loop {t}: merged {package.id}", t), "clean"
        resolved, reason = self._resolve(t, base, plan, package, results, into, merged, step)
        return (resolved, "resolved") if resolved is not None else (None, reason)

    def _resolve(self, t: int, base: str, plan: Plan, package: WorkPackage, results: dict[str, PackageResult],
                 into: list[dict[str, str]], merged: str, step) -> tuple[str | None, str]:
        """One merge attempt by a Developer on git's merge of `package` into `merged` (its conflicts marked):
        (the resolved commit, ""), or (None, why the package is dropped)."""
        rt, lp = self.rt, self.rt.paths.loop(t)
        mid = f"merge-{package.id}"
        conflicts = list(step.conflicts)
        shown = ", ".join(map(printable, conflicts))  # a role's names, as the journal and a prompt can hold them
        if rt.history.done(t, step_name(mid)):
            result = PackageResult.read(lp.package(mid))
        else:
            conflicted = self.git.commit_tree(step.tree, base, f"hoh loop {t}: {package.id} with conflicts", t)
            ours = [results[m["package"]] for m in into]
            sides = [{"id": r.package, "tasks": list(r.tasks), "summary": r.report.summary if r.report else ""}
                     for r in (*ours, results[package.id])]
            info = {"id": mid, "merge": True, "conflicts": [printable(c) for c in conflicts],
                    "sides": sides}
            beside = PackageSet(rt.runner.home("developer", mid), ())
            self._set_aside(t, f"developer-{mid}", mid)
            result = self._run_package(t, base, plan.package_plan(package), lp.plan_md.read_text(encoding="utf-8"),
                                       info, rt.runner, beside, start=conflicted, tasks=package.tasks)
        if result.commit is None:
            return None, f"conflicts in {shown}; the merge attempt failed: {result.error}"
        outside = sorted(set(self.git.changed(step.tree, result.commit)) - set(conflicts))
        if outside:
            return None, (f"conflicts in {shown}; the merge attempt also changed "
                          f"{', '.join(map(printable, outside[:5]))}, outside its conflicts")
        if marked := self.git.files_with_markers(result.commit, conflicts):
            return None, f"conflicts in {shown}; conflict markers left in {', '.join(map(printable, marked))}"
        return result.commit, ""


def git_says(err: GitError | OSError, limit: int = 400) -> str:
    """git's own words for an error (its last lines, not hoh's command line), bounded; a file's error as it is."""
    said = " ".join(printable((err.stderr if isinstance(err, GitError) else "") or str(err)).split())
    return said if len(said) <= limit else f"{said[:limit]}…"


def combined_report(t: int, plan: Plan, results: dict[str, PackageResult], outcome: dict[str, Any]) -> DeveloperReport:
    """The packages' reports as one, in package order; a dropped package's tasks are not started, with why."""
    dropped = {d["package"]: d["reason"] for d in outcome["dropped"]}
    claims: list[TaskClaim] = []
    summaries, tests, gaps, files = [], [], [], set()
    any_files = False
    for package in plan.packages:
        result = results[package.id]
        if package.id in dropped:
            claims += [TaskClaim(task, "not_started", f"package {package.id} dropped: {dropped[package.id]}")
                       for task in package.tasks]
            gaps.append(f"package {package.id} dropped to the next loop: {dropped[package.id]}")
            summaries.append(f"{package.id}: dropped ({dropped[package.id]})")
            continue
        report = result.report
        assert report is not None
        claims += list(report.tasks)
        summaries.append(f"{package.id}: {report.summary}")
        tests += list(report.self_tests)
        gaps += [f"{package.id}: {gap}" for gap in report.known_gaps]
        if report.files_changed is not None:
            any_files = True
            files.update(report.files_changed)
    return DeveloperReport(1, t, "\n".join(summaries), tuple(claims), tuple(tests), tuple(gaps),
                           tuple(sorted(files)) if any_files else None)
