"""Turn a scripted-agent run into a mock-model script, so a real CLI can replay the same build.

Given the scripted agent's script and a workspace the scripted harness built from it, this
writes a `hoh.testing.mock_llm` script in which, for every loop: the Planner answers the same
plan; the Developer writes the same files and runs the same commands through the CLI's own
tools, then reports; QA runs each check through the CLI's shell tool into an evidence file of
the same name, then answers the same report with `{{candidate_id}}` filled in by the mock.
A real CLI driven by it must therefore reach the same candidate ids as the scripted run.

    python -m hoh.testing.demo_mock SCRIPT.yaml WORKSPACE OUT.json
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import yaml

from ..paths import WorkspacePaths


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _qa_steps(entry: dict[str, Any]) -> list[dict[str, Any]]:
    steps = []
    for check in entry.get("checks", []) + entry.get("preserve_checks", []) + entry.get("probes", []):
        # Codex and Claude Code run QA in the evidence dir; the prompt names the candidate dir.
        steps.append({"shell": f"cd {{{{candidate_dir}}}} && {{ {check['run']} ; }} "
                               f"> {{{{evidence_dir}}}}/{shlex.quote(check['id'] + '.txt')} 2>&1; true"})
    return steps


def mock_script(script: dict[str, Any], workspace: Path) -> dict[str, Any]:
    entries = []
    paths = WorkspacePaths(workspace)
    for t in sorted(int(d.name) for d in paths.loops.iterdir() if d.name.isdigit()):
        lp = paths.loop(t)
        if not lp.qa.exists():
            continue
        by_role = script["loops"][t]
        developer = by_role["developer"][-1] if isinstance(by_role["developer"], list) else by_role["developer"]
        qa_entry = by_role["qa"][-1] if isinstance(by_role["qa"], list) else by_role["qa"]
        dev_steps: list[dict[str, Any]] = []
        for action in developer.get("actions", []):
            if "write" in action:
                dev_steps.append({"write": {"path": action["write"]["path"], "content": action["write"]["content"]}})
                if action["write"].get("executable"):  # a CLI's write tool keeps the default mode
                    dev_steps.append({"shell": f"chmod 755 {shlex.quote(action['write']['path'])}"})
            elif "run" in action:
                dev_steps.append({"shell": action["run"]})
        qa = _load(lp.qa)
        qa["candidate_id"] = "{{candidate_id}}"
        entries += [
            {"role": "planner", "loop": t, "steps": [{"final": _load(lp.plan)}]},
            {"role": "developer", "loop": t, "steps": dev_steps + [{"final": _load(lp.developer)}]},
            {"role": "qa", "loop": t, "steps": _qa_steps(qa_entry) + [{"final": qa}]},
        ]
    return {"entries": entries}


def main(argv: list[str] | None = None) -> int:
    script_path, workspace, out = map(Path, (argv or sys.argv[1:]))
    script = yaml.safe_load(script_path.read_text(encoding="utf-8"))
    out.write_text(json.dumps(mock_script(script, workspace), indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
