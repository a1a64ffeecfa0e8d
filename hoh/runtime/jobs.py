"""Build each role's job: its frozen inputs, prompt values, permissions and expectations.

This is the one place that decides what each role may see and write (DESIGN.md §4.2), and
where the three mechanisms change what the roles receive.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Sequence

from ..config import HohConfig
from ..evidence.ledger import Ledger
from ..harness.registries import registry_hosts
from ..harness.sandbox import JailSpec, Network
from ..paths import WorkspacePaths
from ..records import Candidate, Plan
from ..resources import schema
from ..store.git import History
from ..store.hashcache import HashCache
from ..store.journal import Journal
from ..store.mirror import ProjectMirror
from ..store.notes import Note
from ..store.seal import SealedState
from .guard import Area, FileArea, HistoryArea, JournalArea, MirrorArea, SealedArea, WorkTreeArea
from .loopsview import LoopsView
from .roles import RoleJob

if TYPE_CHECKING:
    from .packages import PackageSet
from .validate import Expectations

ROLE_VIEWS = {
    "planner": {"writes": ["its own harness home"],
                "reads": ["the project (A_{t-1}, with its .git)", "spec.md", "state/INDEX.md", "state/ledger.json",
                          "earlier loops' state/loops/NNNN/ without roles/ (no prompt or transcript of any role)"]},
    "developer": {"writes": ["the project (with its .git)", "its own harness home"],
                  "reads": ["spec.md", "its loop's plan.json"]},
    "qa": {"writes": ["its evidence dir", "its own harness home"],
           "reads": ["the frozen candidate (a plain copy: no .git, no history)", "spec.md", "its loop's plan.json "
                     "and candidate.json"]},
}
"""What `_jail` shows each role of the workspace, in words (`hoh doctor`); besides it every role reads the
machine's programs (`jail.SYSTEM_DIRS`, PATH, hoh's Python), /etc's allowlist (`jail_etc.py`) and nothing else."""


def _not_an_attempt_log(rel: str) -> bool:
    """Past attempts' logs grow with the run; they are hash-guarded but not held in memory."""
    return "/roles/" not in f"/{rel}"


class _Shown(NamedTuple):
    """What of state/loops a jail shows, in JailSpec's terms."""
    read_only: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    shown_as: tuple[tuple[Path, Path], ...] = ()


def schema_text(name: str) -> str:
    return json.dumps(schema(name), indent=2)


class JobFactory:
    def __init__(self, paths: WorkspacePaths, config: HohConfig, repo: History, journal: Journal,
                 sealed: SealedState, mirror: ProjectMirror, home: Callable[[str], Path]):
        self.paths, self.config, self.repo, self.journal, self.sealed = paths, config, repo, journal, sealed
        self.mirror = mirror
        self.home = home
        """Each role's own harness home (roles may run on different harnesses)."""
        self.ignore = config.guard.ignore
        self.spec_text = paths.spec.read_text(encoding="utf-8")
        self.cache = HashCache()  # one for the run: files are hashed again only when their stat changes
        self.loops_view = LoopsView(paths.loops, paths.loops_view, sealed)

    def _fixed_files(self, attempt_dir: Path, head: str, read_only_project: bool,
                     beside: "PackageSet | None" = None) -> list[Area]:
        """What no role may ever write: the project's git configuration (an exclude or hook would change
        what gets frozen; checked first, before anything runs git there) and repository, hoh's history,
        state/ (but the active attempt's logs; sealed loops through their seal), the journal, spec,
        config, script, and the other roles' harness homes (no planting instructions for the next role)."""
        skip: tuple[Path, ...] = ()
        if beside is None:
            home, cache = self.home(attempt_dir.parent.name), self.cache
        else:
            # Developers working at once: what the others' attempts and hoh write for them meanwhile (their
            # logs, homes and package results) is no change of this one's; each sees only its own in the jail.
            # Its own hash cache: the run's is not shared between threads.
            home, skip, cache = beside.home, beside.skip, HashCache()
        sealed_dirs = self.sealed.sealed_dirs()
        areas: list[Area] = [
            *([MirrorArea(self.mirror, head, strict=read_only_project, published_tags=self.repo.tags, cache=cache)]
              if self.mirror.enabled else []),
            HistoryArea(self.repo, cache=cache),
            SealedArea(self.sealed, self.sealed.open_loops()),
            FileArea("state", self.paths.state, self.ignore,
                     skip=(attempt_dir, self.paths.journal, *sealed_dirs, *(p for p in skip if p.is_relative_to(self.paths.state))),
                     keep_bytes=_not_an_attempt_log, cache=cache),
            JournalArea(self.journal),
            FileArea("spec.md", self.paths.spec, [], cache=cache),
            FileArea("hoh.yaml", self.paths.config, [], cache=cache),
            FileArea("harness homes", self.paths.harness_homes, [], cache=cache,
                     skip=(home, *(p for p in skip if p.is_relative_to(self.paths.harness_homes))))]
        if self.paths.script.exists():
            areas.append(FileArea("script.yaml", self.paths.script, [], cache=cache))
        return areas

    def _unjailed(self) -> bool:
        """No OS jail on this machine (`sandbox.mode: off`) and no environment: roles run as they are."""
        return self.config.sandbox.mode == "off" and self.config.environment.local

    def _jail(self, role: str, inputs: list[Path], writable: tuple[Path, ...] = (),
              read_only: tuple[Path, ...] = (), hidden: tuple[Path, ...] = (),
              shown_as: tuple[tuple[Path, Path], ...] = ()) -> JailSpec | None:
        """What the OS jail shows this role: its frozen inputs and what it reads, read-only; what it may
        write; nothing else of the workspace (the role's own home is added by the runner). None when
        `sandbox.mode` is off on this machine; in an environment (`--env`) it is what goes in and what comes out."""
        sandbox = self.config.sandbox
        if self._unjailed():
            return None
        root, project = self.paths.root, self.paths.project
        hosts = getattr(sandbox.allow_hosts, role)
        if hosts is None:
            hosts = list(registry_hosts())
        return JailSpec(writable=writable, read_only=(*inputs, *read_only, *map(Path, sandbox.read_only_paths)),
                        hidden=((root,) if root.is_relative_to(project) else ()) + hidden, shown_as=shown_as,
                        network=Network(sandbox.network), allow_hosts=tuple(hosts),
                        tmp_bytes=sandbox.limits.tmp_mb * 2**20)

    def _evidence_dirs(self) -> "_Shown":
        """How the Planner is shown the earlier loops' state without any role's prompt or transcript: in this
        machine's jail, their view (`loopsview.py`) bound at state/loops; in an environment, state/loops with
        each loop's roles/ left out of what travels there."""
        loops = self.paths.loops
        if not loops.is_dir() or self._unjailed():
            return _Shown()
        if self.config.jailed_here:
            return _Shown(shown_as=((self.loops_view.update(), loops),))
        hidden = [loops / name / "roles" for name in sorted(os.listdir(loops))]
        return _Shown(read_only=(loops,), hidden=tuple(p for p in hidden if p.is_dir()))

    def _digest(self, path: Path) -> str:
        """An input's sha256 through the run's hash cache: the guard's next look at state/ finds it there."""
        return self.cache.digest(str(path), os.stat(path))

    def _project(self) -> WorkTreeArea:
        return WorkTreeArea("project", self.repo, self.paths.project, self.repo.index, self.ignore)

    def _mechanisms(self) -> dict[str, bool]:
        return self.config.mechanisms.model_dump()

    def _context(self, **extra: Any) -> dict[str, Any]:
        return {"workspace": self.paths.root, "project_dir": self.paths.project, **extra}

    def planner(self, loop: int, base_commit: str, ledger: Ledger, notes: Sequence[Note] = ()) -> RoleJob:
        """The Planner's job; `notes` are a human's (`hoh note`), frozen with its inputs like the spec."""
        feedback = self.config.mechanisms.evidence_feedback
        inputs = [self.paths.spec, *(note.path for note in notes)]
        evidence = self._evidence_dirs() if feedback else _Shown()
        index_text = ""
        if feedback:
            inputs += [p for p in (self.paths.index, self.paths.ledger) if p.exists()]
            if self.paths.index.exists():
                index_text = self.paths.index.read_text(encoding="utf-8")
        return RoleJob(
            role="planner", loop=loop, workdir=self.paths.project, access="read-only",
            prompt_values=dict(loop=loop, spec=self.spec_text, index=index_text, index_path=self.paths.index,
                               project_dir=self.paths.project, schema=schema_text("plan"),
                               developers=self.config.policy.developers,
                               notes=[{"id": note.id, "text": note.text} for note in notes]),
            expectations=Expectations(loop=loop, issue_ids=ledger.issue_ids(), behaviour_ids=ledger.behaviour_ids(),
                                      active_issue_ids={i["id"] for i in ledger.ranked_active_issues()},
                                      verified_ids={b["id"] for b in ledger.verified_behaviours()},
                                      developers=self.config.policy.developers),
            inputs=inputs,
            project={"commit": base_commit, "tree": self.repo.tree_of(base_commit)},
            protected=lambda adir: [*self._fixed_files(adir, base_commit, True), self._project()],
            context=self._context(), mechanisms=self._mechanisms(),
            jail=self._jail("planner", inputs, read_only=(self.paths.project, *evidence.read_only),
                            hidden=evidence.hidden, shown_as=evidence.shown_as),
            digest=self._digest,
        )

    def developer(self, loop: int, base_commit: str, plan: Plan, plan_md: str) -> RoleJob:
        lp = self.paths.loop(loop)
        return RoleJob(
            role="developer", loop=loop, workdir=self.paths.project, access="write",
            prompt_values=dict(loop=loop, spec=self.spec_text, plan_md=plan_md, project_dir=self.paths.project,
                               warm_start=self.config.mechanisms.warm_start, schema=schema_text("developer"),
                               package=None),
            expectations=Expectations(loop=loop, plan=plan),
            inputs=[self.paths.spec, lp.plan],
            project={"commit": base_commit, "tree": self.repo.tree_of(base_commit),
                     "warm_start": str(self.config.mechanisms.warm_start).lower()},
            protected=lambda adir: self._fixed_files(adir, base_commit, False),
            context=self._context(), mechanisms=self._mechanisms(),
            # The project's .git bound apart from its tree: no hard link joins the two (link(2) fails across
            # mounts), so every write to the tree is a write under one of its own directories (`changefeed.py`).
            jail=self._jail("developer", [self.paths.spec, lp.plan],
                            writable=(self.paths.project, *[g for g in (self.paths.project / ".git",)
                                                            if g.is_dir() and not g.is_symlink()])),
        )

    def package_developer(self, loop: int, base_commit: str, plan: Plan, plan_md: str, package: dict[str, Any],
                          workdir: Path, beside: "PackageSet") -> RoleJob:
        """A work package's Developer (`package`: its id, tasks and owned paths, or a conflict's merge with
        its files and both sides' reports), on its own copy of A_{t-1} (`workdir`), beside the others
        (`beside`: what they write meanwhile). The Developer's guard, its jail writes `workdir` only."""
        lp = self.paths.loop(loop)
        warm = self.config.mechanisms.warm_start
        return RoleJob(
            role="developer", loop=loop, workdir=workdir, access="write", package=package["id"],
            prompt_values=dict(loop=loop, spec=self.spec_text, plan_md=plan_md, project_dir=workdir,
                               warm_start=warm, schema=schema_text("developer"), package=package),
            expectations=Expectations(loop=loop, plan=plan),
            inputs=[self.paths.spec, lp.plan],
            project={"commit": base_commit, "tree": self.repo.tree_of(base_commit), "warm_start": str(warm).lower()},
            # Not the project's work tree: its git index is one, and K guards would race on it. The jail
            # never shows the project writable; whatever reaches it is reset before the merged tree goes in.
            protected=lambda adir: self._fixed_files(adir, base_commit, False, beside),
            context=self._context(project_dir=workdir, package=package["id"]), mechanisms=self._mechanisms(),
            jail=self._jail("developer", [self.paths.spec, lp.plan], writable=(workdir,)),
        )

    def check_jail(self) -> JailSpec | None:
        """The jail of the Runtime's own check runs: QA's, less its inputs and evidence dir (`replay.py`)."""
        return self._jail("qa", [], read_only=(self.paths.view,))

    def qa(self, loop: int, candidate: Candidate, plan: Plan, plan_md: str, ledger: Ledger,
           checks: dict[str, Any] | None = None, check_ids: set[str] | None = None) -> RoleJob:
        """`checks`: the replay's results and last loop's rejected checks for the prompt; `check_ids`: the
        register's active checks, which QA may retire."""
        lp = self.paths.loop(loop)

        view = self.paths.view

        def protected(adir: Path) -> list[Area]:
            return [*self._fixed_files(adir, candidate.commit, True), self._project(),
                    WorkTreeArea("candidate copy", self.repo, view, self.repo.view_index, self.ignore,
                                 rebuild=lambda: self.repo.update_view(view, candidate.commit))]

        def fresh_evidence_dir(resumed: bool) -> None:
            # A new attempt must not cite files an earlier (perhaps rejected) attempt left behind, and
            # gets the evidence dir hoh made, whatever the last one turned it into.
            evidence = lp.qa_evidence
            if evidence.is_symlink() or (evidence.exists() and not evidence.is_dir()):
                evidence.unlink()
            elif not resumed:
                shutil.rmtree(evidence, ignore_errors=True)
            evidence.mkdir(parents=True, exist_ok=True)

        return RoleJob(
            role="qa", loop=loop, workdir=view, access="read-only", writable=(lp.qa_evidence,),
            before_attempt=fresh_evidence_dir,
            prompt_values=dict(loop=loop, spec=self.spec_text, plan_md=plan_md, candidate_id=candidate.candidate_id,
                               candidate_dir=view, evidence_dir=lp.qa_evidence, schema=schema_text("qa"),
                               **(checks or {"replay": None, "checks_rejected": []})),
            expectations=Expectations(loop=loop, plan=plan, candidate_id=candidate.candidate_id,
                                      evidence_dir=lp.qa_evidence, issue_ids=ledger.issue_ids(),
                                      behaviour_ids=ledger.behaviour_ids(), check_ids=check_ids or set()),
            inputs=[self.paths.spec, lp.plan, lp.candidate],
            project={"commit": candidate.commit, "tree": candidate.tree},
            protected=protected,
            context=self._context(candidate_id=candidate.candidate_id, evidence_dir=lp.qa_evidence),
            mechanisms=self._mechanisms(),
            # QA judges the frozen view alone: no project, no history, its evidence dir its only writable place.
            jail=self._jail("qa", [self.paths.spec, lp.plan, lp.candidate], writable=(lp.qa_evidence,),
                            read_only=(view,)),
        )
