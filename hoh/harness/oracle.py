"""The `oracle` harness: applies a benchmark task's reference solution (`solution/solve.sh`).

It proves a task solvable and its verifier sound: an oracle run must score 1.0. Like Harbor's
OracleAgent it runs `bash solve.sh` from the work directory (here, hoh's project); the solution
directory is copied aside first so that nothing of it lands in the project unless solve.sh puts
it there. In hoh mode it also plays Planner (a one-task plan) and QA (which reports its one
criterion as `insufficient_evidence`: the oracle tests nothing, the benchmark's verifier does).

`hoh bench` passes the task's solution with `harness.extra_args: [--solution, DIR]`. The agent
side is this module run as `python -m hoh.harness.oracle --role R --loop N --solution DIR`,
printing the scripted agent's JSONL events, which `parse_events` reads.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..plans import single_task_plan
from ..testing.scripted_agent import emit
from .base import RoleRequest
from .scripted import ScriptedAdapter

SOLVE_TIMEOUT_SECONDS = 3600


class OracleAdapter(ScriptedAdapter):
    """Same event stream and environment as the scripted agent; a different program behind it."""

    name = "oracle"

    def build_argv(self, request: RoleRequest) -> list[str]:
        return [sys.executable, "-m", "hoh.harness.oracle", "--role", request.role, "--loop", str(request.loop),
                "--attempt", str(request.attempt), *self.config.extra_args]


# ---- the agent process -------------------------------------------------------------------------
def plan(loop: int) -> dict[str, Any]:
    return single_task_plan(loop, goal="Apply the task's reference solution", title="Run solution/solve.sh",
                            details="The oracle applies the reference solution in the project directory.",
                            condition="solution/solve.sh exits 0", method="white-box")


def develop(loop: int, solution: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="hoh-oracle-") as tmp:
        copy = Path(tmp) / "solution"
        shutil.copytree(solution, copy)
        proc = subprocess.run(["bash", str(copy / "solve.sh")], cwd=Path.cwd(), capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=SOLVE_TIMEOUT_SECONDS,
                              env={**os.environ, "SOLUTION_DIR": str(copy)})
    emit({"type": "tool", "name": "run", "command": "bash solution/solve.sh", "exit_code": proc.returncode})
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-2000:] + proc.stderr[-2000:])
    status = "done" if proc.returncode == 0 else "partial"
    tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or [""]
    return {"schema_version": 1, "loop": loop, "summary": f"applied the reference solution (exit {proc.returncode})",
            "tasks": [{"id": "T1", "status": status, "notes": tail[0][:200]}],
            "self_tests": [{"command": "bash solution/solve.sh", "exit_code": proc.returncode,
                            "summary": "the reference solution's own script"}],
            "known_gaps": [] if status == "done" else ["solve.sh failed; see stderr"]}


def qa(loop: int, facts: dict[str, str]) -> dict[str, Any]:
    evidence = Path(facts["evidence_dir"])
    evidence.mkdir(parents=True, exist_ok=True)
    (evidence / "oracle.txt").write_text("The oracle harness applies the reference solution and tests nothing;\n"
                                         "the benchmark's verifier grades this candidate.\n", encoding="utf-8")
    return {"schema_version": 1, "loop": loop, "candidate_id": facts["candidate_id"], "verdict": "partial",
            "criteria": [{"id": "T1.A1", "status": "insufficient_evidence",
                          "evidence": [{"kind": "file", "ref": "oracle.txt", "detail": "why nothing was tested"}]}],
            "preserved": [], "findings": [], "summary": "oracle: no acceptance testing"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hoh-oracle")
    parser.add_argument("--role", required=True, choices=("planner", "developer", "qa"))
    parser.add_argument("--loop", required=True, type=int)
    parser.add_argument("--attempt", type=int, default=1)
    parser.add_argument("--solution", type=Path)
    args = parser.parse_args(argv)
    sys.stdin.read()  # the prompt: the oracle does not need it, but a harness always drains stdin
    facts = {k: str(v) for k, v in json.loads(os.environ.get("HOH_SCRIPT_CONTEXT", "{}")).items()}
    emit({"type": "session", "id": f"oracle-{args.loop}-{args.role}-{args.attempt}"})
    if args.role == "developer":
        if args.solution is None or not (args.solution / "solve.sh").is_file():
            emit({"type": "error", "message": "the oracle harness needs --solution DIR holding solve.sh "
                                               "(hoh bench sets it per task via harness.extra_args)"})
            return 2
        reply = develop(args.loop, args.solution)
    elif args.role == "planner":
        reply = plan(args.loop)
    else:
        reply = qa(args.loop, facts)
    emit({"type": "message", "text": json.dumps(reply)})
    emit({"type": "usage", "input_tokens": 0, "output_tokens": 0})
    emit({"type": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
