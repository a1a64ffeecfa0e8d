"""The one place that builds workspace paths.

    WORKSPACE/
      hoh.yaml                  run configuration (user-editable between sessions)
      spec.md                   S, the frozen spec; its sha256 is in state/workspace.json
      script.yaml               the scripted harness's script, frozen at build (scripted runs only)
      hoh.lock                  held by the one hoh process working here
      hoh.stop                  a stop request from `hoh stop` (the run ends after its current role attempt)
      hoh.notes/                notes `hoh note` wrote while a run was live, until that run stores them in state/
      history.git/              the authoritative history, written by hoh alone: loop t is commit + tag
                                `loop-000t` on `main`; sealed state (refs/hoh/sealed); see store/git.py
      project/                  A_t, the work tree (or the `--project DIR` recorded in workspace.json);
                                its own .git mirrors the loop commits for users and agents
      scratch/                  disposable: role homes, QA's view of the candidate, QA's evidence
        view/                     the frozen candidate as plain files (read-only for QA), moved from
                                  candidate to candidate by git
        loops-view/               state/loops without roles/, hard links: the Planner's state/loops
        loop-0007/qa/             QA's scratch, emptied before and after QA runs
        loop-0007/packages/P1/    a work package's copy of A_{t-1}, its Developer's working dir (P1.index its index)
          evidence/               QA's evidence dir (its only writable area)
        homes/<harness>/          isolated config homes for harness CLIs
      state/                    written by the Runtime only, never by an agent
        workspace.json          identity: schema_version, spec sha256, root commit, project dir, created_by
        journal.jsonl           append-only, fsynced event log: the truth for resume
        fold.json               the journal's fold up to a byte offset (derived; see store/fold.py)
        INDEX.md                progressive-disclosure index the Planner reads first
        ledger.json             issue ledger and verified-behaviour register
        notes/N-0001.md         a human's note (`hoh note`), given to the next loop's Planner
        hooks/                  what each hook printed: 0007-on_loop_end.out .err (after loop 7),
                                stop-<n>-on_stop.out .err (the end of session n)
        loops/0007/
          plan.json plan.md     D_t
          developer.json        the Developer's report (claims, never acceptance)
          candidate.json        frozen candidate: id, commit, tree, parent
          qa.json               E_t for this loop, bound to the candidate id
          evidence/             QA's evidence files, copied in after validation
          roles/<role>/attempt-1/
            prompt.md inputs.json events.jsonl stderr.log result.json
          roles/<role>.interrupted-1/  the attempts of a role cut off earlier, set aside on resume
          roles/developer-P1/   a work package's Developer (policy.developers > 1; merge-P2: a conflict's merge)
          packages/P1.json      a work package's result: the Developer's report, its commit and tree
          packages/merge-P2.json  a conflict's merge attempt: its commit, or why the package was dropped
          merge.json            the packages merged in order into the candidate's tree, and the dropped ones
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROLES = ("planner", "developer", "qa")


@dataclass(frozen=True)
class WorkspacePaths:
    root: Path
    project_dir: Path | None = None
    """An existing project dir outside the workspace (`--project`); None means root/project."""

    @property
    def config(self) -> Path:
        return self.root / "hoh.yaml"

    @property
    def spec(self) -> Path:
        return self.root / "spec.md"

    @property
    def script(self) -> Path:
        return self.root / "script.yaml"

    @property
    def lock(self) -> Path:
        return self.root / "hoh.lock"

    @property
    def stop_request(self) -> Path:
        return self.root / "hoh.stop"

    @property
    def notes_inbox(self) -> Path:
        return self.root / "hoh.notes"

    @property
    def notes(self) -> Path:
        return self.state / "notes"

    def note(self, note_id: str) -> Path:
        return self.notes / f"{note_id}.md"

    @property
    def hooks(self) -> Path:
        return self.state / "hooks"

    def hook_output(self, tag: str, hook: str, stream: str) -> Path:
        """What hook `hook` printed on `stream` (out, err); `tag` is the loop (0007) or the session (stop-2)."""
        return self.hooks / f"{tag}-{hook}.{stream}"

    @property
    def project(self) -> Path:
        return self.project_dir or self.root / "project"

    @property
    def history(self) -> Path:
        return self.root / "history.git"

    @property
    def view(self) -> Path:
        return self.scratch / "view"

    @property
    def loops_view(self) -> Path:
        """state/loops without the roles' transcripts, as the Planner's jail shows it (`runtime/loopsview.py`)."""
        return self.scratch / "loops-view"

    @property
    def scratch(self) -> Path:
        return self.root / "scratch"

    @property
    def environments(self) -> Path:
        """hoh's own files of each role environment (`--env`): Harbor's environment and trial dirs."""
        return self.root / "environments"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def identity(self) -> Path:
        return self.state / "workspace.json"

    @property
    def journal(self) -> Path:
        return self.state / "journal.jsonl"

    @property
    def fold(self) -> Path:
        return self.state / "fold.json"

    @property
    def index(self) -> Path:
        return self.state / "INDEX.md"

    @property
    def ledger(self) -> Path:
        return self.state / "ledger.json"

    @property
    def checks(self) -> Path:
        """The register of executable checks (`evidence/checks.py`)."""
        return self.state / "checks.json"

    @property
    def harness_homes(self) -> Path:
        return self.scratch / "homes"

    def harness_home(self, harness: str) -> Path:
        return self.harness_homes / harness

    @property
    def loops(self) -> Path:
        """state/loops: one dir per loop, named by its number (0007)."""
        return self.state / "loops"

    def loop(self, t: int) -> "LoopPaths":
        return LoopPaths(self.loops / f"{t:04d}", self.scratch / f"loop-{t:04d}")

    def rel(self, path: Path) -> str:
        """A workspace-relative POSIX path, as recorded in manifests and reports (absolute outside it)."""
        resolved = path.resolve()
        return resolved.relative_to(self.root).as_posix() if resolved.is_relative_to(self.root) else str(resolved)


@dataclass(frozen=True)
class LoopPaths:
    dir: Path
    scratch: Path

    @property
    def plan(self) -> Path:
        return self.dir / "plan.json"

    @property
    def plan_md(self) -> Path:
        return self.dir / "plan.md"

    @property
    def developer(self) -> Path:
        return self.dir / "developer.json"

    @property
    def candidate(self) -> Path:
        return self.dir / "candidate.json"

    @property
    def qa(self) -> Path:
        return self.dir / "qa.json"

    @property
    def evidence(self) -> Path:
        return self.dir / "evidence"

    @property
    def replay(self) -> Path:
        """The register's checks run on this loop's candidate before its QA."""
        return self.dir / "replay.json"

    @property
    def replay_dir(self) -> Path:
        return self.dir / "replay"

    @property
    def admitted(self) -> Path:
        """The checks QA attached this loop, each kept or rejected with its reason."""
        return self.dir / "checks.json"

    @property
    def admit_dir(self) -> Path:
        return self.dir / "admit"

    @property
    def qa_scratch(self) -> Path:
        return self.scratch / "qa"

    @property
    def qa_evidence(self) -> Path:
        return self.qa_scratch / "evidence"

    @property
    def roles(self) -> Path:
        return self.dir / "roles"

    def role_dir(self, role: str) -> Path:
        return self.roles / role

    @property
    def packages(self) -> Path:
        return self.dir / "packages"

    def package(self, package: str) -> Path:
        """A work package's result (`P1`), or a conflict's merge attempt (`merge-P2`)."""
        return self.packages / f"{package}.json"

    @property
    def merge(self) -> Path:
        return self.dir / "merge.json"

    def package_tree(self, package: str) -> Path:
        """A work package's own copy of A_{t-1}: its Developer's working dir."""
        return self.scratch / "packages" / package

    def package_index(self, package: str) -> Path:
        return self.scratch / "packages" / f"{package}.index"

    def role_set_aside(self, role: str, n: int) -> Path:
        """Where the n-th interrupted run of `role` in this loop is kept."""
        return self.roles / f"{role}.interrupted-{n}"

    def attempt_dir(self, role: str, attempt: int) -> Path:
        return self.role_dir(role) / f"attempt-{attempt}"


@dataclass(frozen=True)
class AgentRunPaths:
    """Where hoh's Harbor agent (`hoh.harbor:HohAgent`) keeps one trial's run, on the machine running Harbor.

    The Runtime runs in the Harbor process, so everything is written there directly, into the trial dir beside
    Harbor's own `agent/`, `verifier/` and `artifacts/`. Unlike those, `hoh/` is never mounted into the task's
    environment, so no role (the roles run in that environment) can read or change it:

        TRIAL/hoh/
          spec.md                 the task's instruction, hoh's spec
          project/                the project on this machine: A_0 is the task's workdir as the image ships it
          workspace/              the hoh workspace: journal, ledger, loops, the project's history
          run.json                the run's summary, rewritten after every loop
          run.log                 one line per finished loop, and how the run ended
          mock-llm.jsonl          the requests hoh's mock model served (`--ak mock_llm=` runs only)
          candidates/loop-0001/
            candidate.tar         loop 1's frozen candidate: the project's whole tree
            candidate.json        its id, commit, tree, the loop's verdict and the task's workdir
    """

    root: Path

    @classmethod
    def for_trial(cls, trial_dir: Path) -> "AgentRunPaths":
        return cls(Path(trial_dir) / "hoh")

    @property
    def spec(self) -> Path:
        return self.root / "spec.md"

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def summary(self) -> Path:
        return self.root / "run.json"

    @property
    def log(self) -> Path:
        return self.root / "run.log"

    @property
    def mock_log(self) -> Path:
        return self.root / "mock-llm.jsonl"

    @property
    def candidates(self) -> Path:
        return self.root / "candidates"

    def candidate_dir(self, t: int) -> Path:
        return self.candidates / f"loop-{t:04d}"

    def candidate_record(self, t: int) -> Path:
        """Loop t's candidate's identity (written last: a record on disk has its tar beside it)."""
        return self.candidate_dir(t) / "candidate.json"

    def candidate_tar(self, t: int) -> Path:
        return self.candidate_dir(t) / "candidate.tar"
