"""`CandidateAgent`: puts one loop's recorded hoh candidate into a fresh task environment, so that
Harbor's own verifier grades exactly that candidate (`hoh bench`'s per-loop grades).

    harbor run -p TASK --agent hoh.harbor:CandidateAgent --ak trial=TRIAL_DIR --ak loop=2 --env docker

TRIAL_DIR is a finished `HohAgent` trial of the same task on this machine. The environment
starts from the task's own image, so its workdir holds A_0 (the files the task ships); the agent
removes the A_0 files that loop t's candidate no longer has and unpacks the candidate's tree
over the workdir. Files the project ignores stay as the image has them, as they did in the live
trial; the workdir's `.git` is the image's own (the candidate is a tree, not a history).
"""

from __future__ import annotations

import json
import shlex
import tempfile
from pathlib import Path
from typing import Any

from harbor.agents.base import BaseAgent
from harbor.agents.options import AgentOptions
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from pydantic import Field

import hoh

from ..errors import TaskEnvironmentError
from ..paths import AgentRunPaths, WorkspacePaths
from ..store.gitrun import run_git

UPLOAD = "/tmp/hoh-candidate"
"""Where the candidate's tar and the list of removed files go inside the environment."""


class CandidateOptions(AgentOptions):
    """`--ak` options of the candidate agent."""

    trial: str = Field(..., description="A finished HohAgent trial dir on this machine.")
    loop: int = Field(..., ge=1, description="The loop whose candidate to put in place.")


def removed_files(trial: Path, commit: str) -> list[str]:
    """Paths of A_0 (the task's own files, hoh's root commit) that the candidate `commit` lacks."""
    ws = WorkspacePaths(Path(AgentRunPaths.for_trial(trial).workspace))
    root = json.loads(ws.identity.read_text(encoding="utf-8"))["root_commit"]
    out = run_git(["--git-dir", str(ws.history), "diff", "--name-only", "-z", "--no-renames", "--diff-filter=D",
                   root, commit], cwd=ws.root, binary=True)
    return [name.decode("utf-8", "surrogateescape") for name in out.split(b"\0") if name]


class CandidateAgent(BaseAgent):
    """Replays a recorded hoh candidate (loop t of a HohAgent trial) into the task's workdir."""

    options_model = CandidateOptions
    options: CandidateOptions

    @staticmethod
    def name() -> str:
        return "hoh-candidate"

    def version(self) -> str:
        return hoh.__version__

    def candidate(self) -> tuple[Path, dict[str, Any]]:
        """The loop's candidate.tar and its candidate.json record."""
        trial = Path(self.options.trial)
        paths = AgentRunPaths.for_trial(trial)
        try:
            record = json.loads(Path(paths.candidate_record(self.options.loop)).read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise TaskEnvironmentError(f"no candidate of loop {self.options.loop} in {trial} ({err})") from None
        return Path(paths.candidate_tar(self.options.loop)), record

    async def setup(self, environment: BaseEnvironment) -> None:
        self.candidate()  # a missing candidate fails before anything is uploaded

    async def run(self, instruction: str, environment: BaseEnvironment, context: AgentContext) -> None:
        tar, record = self.candidate()
        removed = removed_files(Path(self.options.trial), record["commit"])
        with tempfile.TemporaryDirectory(prefix="hoh-candidate-") as tmp:
            listing = Path(tmp, "removed")
            listing.write_bytes(b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in removed))
            await environment.upload_file(listing, f"{UPLOAD}.removed")
        await environment.upload_file(tar, f"{UPLOAD}.tar")
        workdir = shlex.quote(record["workdir"])
        script = (f"set -e; mkdir -p {workdir}; cd {workdir}; "
                  f"while IFS= read -r -d '' f; do rm -f -- \"$f\"; done < {UPLOAD}.removed; "
                  f"tar -xf {UPLOAD}.tar; rm -f {UPLOAD}.tar {UPLOAD}.removed")
        result = await environment.exec(f"bash -c {shlex.quote(script)}", timeout_sec=600)
        if result.return_code != 0:
            detail = ((result.stderr or result.stdout or "").strip().splitlines() or ["no output"])[-1]
            raise TaskEnvironmentError(f"could not put loop {self.options.loop}'s candidate into {record['workdir']}: "
                                       f"{detail}")
        context.metadata = {"hoh_candidate": {"loop": self.options.loop, "candidate_id": record["candidate_id"],
                                              "commit": record["commit"], "trial": self.options.trial,
                                              "removed": len(removed)}}
