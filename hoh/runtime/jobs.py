"""Build each role's job: its frozen inputs, prompt values, permissions and expectations.

This is the one place that decides what each role may see and write (DESIGN.md §4.2), and
where the three mechanisms change what the roles receive.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ..config import HohConfig
from ..evidence.ledger import Ledger
from ..paths import WorkspacePaths
from ..resources import schema
from .git import ProjectRepo
from .guard import Area, FileArea, GitArea, JournalArea, RebuildArea, TagsArea
from .journal import Journal
from .roles import RoleJob
from .validate import Expectations


def _not_an_attempt_log(rel: str) -> bool:
    """Past attempts' logs grow with the run; they are hash-guarded but not held in memory."""
    return "/roles/" not in f"/{rel}"


def schema_text(name: str) -> str:
    return json.dumps(schema(name), indent=2)


class JobFactory:
    def __init__(self, paths: WorkspacePaths, config: HohConfig, repo: ProjectRepo, journal: Journal):
        self.paths, self.config, self.repo, self.journal = paths, config, repo, journal
        self.ignore = config.guard.ignore
        self.spec_text = paths.spec.read_text(encoding="utf-8")

    def _fixed_files(self, attempt_dir: Path) -> list[Area]:
        """What no role may ever write: state/ (but the active attempt's logs), spec, config, script,
        the other roles' harness homes (no planting instructions for the next role), and the project's
        git configuration (an exclude or hook would change what gets frozen)."""
        role = attempt_dir.parent.name
        git = self.paths.project / ".git"
        areas: list[Area] = [FileArea("state", self.paths.state, self.ignore, skip=(attempt_dir, self.paths.journal),
                                      keep_bytes=_not_an_attempt_log),
                             JournalArea(self.journal), FileArea("spec.md", self.paths.spec, []),
                             FileArea("hoh.yaml", self.paths.config, []),
                             FileArea("harness homes", self.paths.scratch / "homes", [],
                                      skip=(self.paths.harness_home(self.config.harness.name) / role,)),
                             *(FileArea(f"project .git/{name}", git / name, []) for name in ("config", "info", "hooks"))]
        if self.paths.script.exists():
            areas.append(FileArea("script.yaml", self.paths.script, []))
        return areas

    def _mechanisms(self) -> dict[str, bool]:
        return self.config.mechanisms.model_dump()

    def _context(self, **extra: Any) -> dict[str, Any]:
        return {"workspace": self.paths.root, "project_dir": self.paths.project, **extra}

    def planner(self, loop: int, base_commit: str, ledger: Ledger) -> RoleJob:
        feedback = self.config.mechanisms.evidence_feedback
        inputs = [self.paths.spec]
        index_text = ""
        if feedback:
            inputs += [p for p in (self.paths.index, self.paths.ledger) if p.exists()]
            if self.paths.index.exists():
                index_text = self.paths.index.read_text(encoding="utf-8")
        return RoleJob(
            role="planner", loop=loop, workdir=self.paths.project, access="read-only",
            prompt_values=dict(loop=loop, spec=self.spec_text, index=index_text, index_path=self.paths.index,
                               project_dir=self.paths.project, schema=schema_text("plan")),
            expectations=Expectations(loop=loop, issue_ids=ledger.issue_ids(), behaviour_ids=ledger.behaviour_ids()),
            inputs=inputs,
            project={"commit": base_commit, "tree": self.repo.tree_of(base_commit)},
            protected=lambda adir: [GitArea("project", self.repo, self.ignore), *self._fixed_files(adir)],
            context=self._context(), mechanisms=self._mechanisms(),
        )

    def developer(self, loop: int, base_commit: str, plan: dict[str, Any], plan_md: str) -> RoleJob:
        lp = self.paths.loop(loop)
        return RoleJob(
            role="developer", loop=loop, workdir=self.paths.project, access="write",
            prompt_values=dict(loop=loop, spec=self.spec_text, plan_md=plan_md, project_dir=self.paths.project,
                               warm_start=self.config.mechanisms.warm_start, schema=schema_text("developer")),
            expectations=Expectations(loop=loop, plan=plan),
            inputs=[self.paths.spec, lp.plan],
            project={"commit": base_commit, "tree": self.repo.tree_of(base_commit),
                     "warm_start": str(self.config.mechanisms.warm_start).lower()},
            protected=lambda adir: [TagsArea(self.repo), *self._fixed_files(adir)],
            context=self._context(), mechanisms=self._mechanisms(),
        )

    def qa(self, loop: int, candidate: dict[str, Any], plan: dict[str, Any], plan_md: str, ledger: Ledger) -> RoleJob:
        lp = self.paths.loop(loop)

        def rebuild_copy() -> None:
            shutil.rmtree(lp.qa_candidate, ignore_errors=True)
            self.repo.export(candidate["commit"], lp.qa_candidate)

        def protected(adir: Path) -> list[Area]:
            return [GitArea("project", self.repo, self.ignore),
                    RebuildArea("candidate copy", lp.qa_candidate, self.ignore, rebuild_copy),
                    *self._fixed_files(adir)]

        def fresh_evidence_dir(resumed: bool) -> None:
            # A new attempt must not cite files an earlier (perhaps rejected) attempt left behind.
            if not resumed:
                shutil.rmtree(lp.qa_evidence, ignore_errors=True)
                lp.qa_evidence.mkdir(parents=True)

        return RoleJob(
            role="qa", loop=loop, workdir=lp.qa_candidate, access="read-only", writable=(lp.qa_evidence,),
            before_attempt=fresh_evidence_dir,
            prompt_values=dict(loop=loop, spec=self.spec_text, plan_md=plan_md, candidate_id=candidate["candidate_id"],
                               candidate_dir=lp.qa_candidate, evidence_dir=lp.qa_evidence, schema=schema_text("qa")),
            expectations=Expectations(loop=loop, plan=plan, candidate_id=candidate["candidate_id"],
                                      evidence_dir=lp.qa_evidence, issue_ids=ledger.issue_ids()),
            inputs=[self.paths.spec, lp.plan, lp.candidate],
            project={"commit": candidate["commit"], "tree": candidate["tree"]},
            protected=protected,
            context=self._context(candidate_id=candidate["candidate_id"], evidence_dir=lp.qa_evidence),
            mechanisms=self._mechanisms(),
        )
