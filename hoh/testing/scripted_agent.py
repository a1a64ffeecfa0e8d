"""A scripted coding agent: a real subprocess that behaves like a harness CLI, minus the model.

It reads its prompt on stdin (as real CLIs do), looks up what to do for (loop, role, attempt)
in a YAML script, really does it in its working directory (writes and deletes files, runs
commands, runs QA checks and saves their output as evidence), and prints a JSONL event stream
ending in a final message. It can also misbehave on purpose: invalid JSON, a wrong candidate id,
writes into read-only areas, hangs and crashes. Run: `python -m hoh.testing.scripted_agent
--script S --role R --loop N --attempt K`, with `HOH_SCRIPT_CONTEXT` holding a JSON object of
facts (`candidate_id`, `evidence_dir`, `project_dir`, `workspace`) usable as `${name}` in paths,
commands and replies.

Script layout:

    loops:
      1:
        planner:   {reply: {...plan...}}
        developer:                        # a list gives one entry per attempt; the last repeats
          - reply_text: "not json"         # attempt 1 misbehaves
          - actions: [{write: {path: app.py, content: "..."}}, {run: "python app.py"}]
            reply: {...report...}
        qa:
          checks:                          # really run; each becomes a criterion with evidence
            - {id: A1, run: "python app.py 2 + 3", expect_stdout: "5",
               finding: {title: "...", severity: major},
               attach: {paths: [app.py]}}  # also attach it as an executable check (true, or fields to set)
          preserve_checks: [...]           # the same, reported under `preserved`
          probes: [...]                    # exploratory checks: only a failure's finding is reported
          reply: {findings: []}            # merged with what the checks found

A work package's Developer (`policy.developers` > 1) takes `developer@P1` when the loop has one, else
`developer`; a conflict's merge attempt takes `developer@merge-P2`.

Actions: write {path, content}, delete PATH, run CMD (optional `save: PATH` for its output),
sleep SECONDS, hang, crash CODE, print TEXT (a raw stdout line).

Other keys of an entry: `usage: {input_tokens, cached_input_tokens, output_tokens, cost_usd}` (what the
run reports; by default a count from the prompt and reply sizes, no cost), `exit_code`, `fenced`, and
`fail_runs: {times: N, message: TEXT}`: the first N runs of this (loop, role, attempt) only print an
`error` event with TEXT and exit 1, as a CLI does when its provider refuses (a usage limit: "You've
hit your limit · resets 1pm"); the count is kept in the agent's HOME, so a rerun of the same attempt
goes on with the entry.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from string import Template
from typing import Any

import yaml

DEFAULTS = {"planner": ("loop",), "developer": ("loop",), "qa": ("loop", "candidate_id")}


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def expand(value: Any, facts: dict[str, str]) -> Any:
    if isinstance(value, str):
        return Template(value).safe_substitute(facts)
    if isinstance(value, list):
        return [expand(v, facts) for v in value]
    if isinstance(value, dict):
        return {k: expand(v, facts) for k, v in value.items()}
    return value


def select_entry(script: dict[str, Any], loop: int, role: str, attempt: int, package: str | None = None) -> dict[str, Any]:
    loops = script.get("loops") or {}
    by_role = loops.get(loop, loops.get(str(loop)))
    if package and by_role and f"{role}@{package}" in by_role:
        role = f"{role}@{package}"  # a work package's own Developer (`developer@P1`, `developer@merge-P2`)
    if not by_role or role not in by_role:
        raise SystemExit(f"scripted agent: the script has no entry for loop {loop} role {role}")
    entry = by_role[role]
    if isinstance(entry, list):
        entry = entry[min(attempt, len(entry)) - 1]
    return entry or {}


def run_shell(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)


def do_action(action: dict[str, Any], cwd: Path, env: dict[str, str], facts: dict[str, str]) -> None:
    kind, arg = next(iter(action.items()))
    if kind == "write":
        target = cwd / expand(arg["path"], facts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(arg["content"], encoding="utf-8")
        if arg.get("executable"):
            target.chmod(0o755)
        emit({"type": "tool", "name": "write", "path": str(target), "ok": True})
    elif kind == "delete":
        target = cwd / expand(arg, facts)
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
        emit({"type": "tool", "name": "delete", "path": str(target), "ok": True})
    elif kind == "run":
        command = expand(arg, facts)
        proc = run_shell(command, cwd, env)
        if action.get("save"):
            out = cwd / expand(action["save"], facts)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(proc.stdout + proc.stderr, encoding="utf-8")
        emit({"type": "tool", "name": "run", "command": command, "exit_code": proc.returncode})
    elif kind == "sleep":
        time.sleep(float(arg))
    elif kind == "hang":
        while True:
            time.sleep(3600)
    elif kind == "crash":
        sys.stderr.write(f"scripted agent: crashing on purpose with exit code {arg}\n")
        sys.exit(int(arg))
    elif kind == "print":
        sys.stdout.write(str(arg) + "\n")
        sys.stdout.flush()
    else:
        raise SystemExit(f"scripted agent: unknown action '{kind}'")


def run_check(check: dict[str, Any], cwd: Path, env: dict[str, str], facts: dict[str, str]) -> dict[str, Any]:
    """Run one QA check for real and return its criterion entry, saving the output as evidence."""
    command = expand(check["run"], facts)
    proc = run_shell(command, cwd, env)
    stdout = proc.stdout.strip()
    ok = proc.returncode == check.get("expect_exit", 0)
    if "expect_stdout" in check:
        ok = ok and stdout == str(check["expect_stdout"]).strip()
    if "expect_contains" in check:
        ok = ok and str(check["expect_contains"]) in proc.stdout + proc.stderr
    name = f"{check['id']}.txt"
    evidence_dir = Path(facts["evidence_dir"])
    evidence_dir.mkdir(parents=True, exist_ok=True)
    (evidence_dir / name).write_text(
        f"$ {command}\nexit code: {proc.returncode}\n--- stdout ---\n{proc.stdout}--- stderr ---\n{proc.stderr}",
        encoding="utf-8")
    emit({"type": "tool", "name": "check", "id": check["id"], "command": command, "ok": ok})
    result = {
        "id": check["id"],
        "status": "verified" if ok else "failed",
        "evidence": [
            {"kind": "command", "ref": command, "detail": f"exit {proc.returncode}, stdout {stdout[:120]!r}"},
            {"kind": "file", "ref": name, "detail": "command, exit code and output"},
        ],
        "_finding": None if ok else check.get("finding"),
    }
    if attach := check.get("attach"):
        result["check"] = executable_check(check, command, proc, {} if attach is True else expand(attach, facts))
    return result


def executable_check(check: dict[str, Any], command: str, proc, overrides: dict[str, Any]) -> dict[str, Any]:
    """The check QA attaches for hoh to replay: what this one compared, as the schema spells it."""
    expect: dict[str, Any] = {"exit_code": check.get("expect_exit", 0)}
    if "expect_contains" in check:
        text = str(check["expect_contains"])
        expect.update({"match": "regex", "stdout" if text in proc.stdout else "stderr": re.escape(text)})
    elif "expect_stdout" in check:
        expect.update({"match": "exact", "stdout": str(check["expect_stdout"]).strip()})
    spec = {"command": command, "expect": expect}
    for key, value in overrides.items():
        spec[key] = {**spec[key], **value} if isinstance(value, dict) and key in spec else value
    return spec


def qa_reply(entry: dict[str, Any], reply: dict[str, Any], cwd: Path, env, facts) -> dict[str, Any]:
    criteria = [run_check(c, cwd, env, facts) for c in entry.get("checks", [])]
    preserved = [run_check(c, cwd, env, facts) for c in entry.get("preserve_checks", [])]
    probes = [run_check(c, cwd, env, facts) for c in entry.get("probes", [])]
    findings = list(reply.get("findings", []))
    for item in criteria + preserved + probes:
        finding = item.pop("_finding")
        if finding:
            findings.append({"repro": item["evidence"][0]["ref"], "evidence": item["evidence"], **expand(finding, facts)})
    reply["criteria"] = list(reply.get("criteria", [])) + criteria
    reply["preserved"] = list(reply.get("preserved", [])) + preserved
    reply["findings"] = findings
    if "verdict" not in reply:
        statuses = [c["status"] for c in reply["criteria"] + reply["preserved"]]
        serious = any(f["severity"] in ("blocker", "major") for f in findings)
        if statuses and all(s == "verified" for s in statuses) and not serious:
            reply["verdict"] = "pass"
        elif "verified" in statuses:
            reply["verdict"] = "partial"
        else:
            reply["verdict"] = "fail"
    return reply


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripted-agent")
    parser.add_argument("--script", required=True, type=Path)
    parser.add_argument("--role", required=True)
    parser.add_argument("--loop", required=True, type=int)
    parser.add_argument("--attempt", required=True, type=int)
    args = parser.parse_args(argv)

    prompt = sys.stdin.read()
    facts = {k: str(v) for k, v in json.loads(os.environ.get("HOH_SCRIPT_CONTEXT", "{}")).items()}
    facts.update(loop=str(args.loop), role=args.role, attempt=str(args.attempt))
    script = yaml.safe_load(args.script.read_text(encoding="utf-8")) or {}
    entry = select_entry(script, args.loop, args.role, args.attempt, facts.get("package"))
    cwd = Path.cwd()
    env = dict(os.environ)

    emit({"type": "session", "id": f"scripted-{args.loop}-{args.role}-{args.attempt}"})
    if failing := entry.get("fail_runs"):
        who = f"{args.role}-{facts['package']}" if facts.get("package") else args.role
        counter = Path.home() / ".scripted-agent" / f"runs-{args.loop}-{who}-{args.attempt}"
        counter.parent.mkdir(parents=True, exist_ok=True)
        runs = int(counter.read_text()) if counter.exists() else 0
        counter.write_text(str(runs + 1))
        if runs < int(failing.get("times", 1)):
            emit({"type": "error", "message": expand(str(failing["message"]), facts)})
            return 1
    for action in entry.get("actions", []):
        do_action(action, cwd, env, facts)

    if "reply_text" in entry:
        final = expand(entry["reply_text"], facts)
    else:
        reply = expand(dict(entry.get("reply") or {}), facts)
        reply.setdefault("schema_version", 1)
        for key in DEFAULTS.get(args.role, ()):
            reply.setdefault(key, args.loop if key == "loop" else facts.get(key))
        if args.role == "qa":
            reply = qa_reply(entry, reply, cwd, env, facts)
        final = "```json\n" + json.dumps(reply, indent=2) + "\n```" if entry.get("fenced") else json.dumps(reply)
    emit({"type": "message", "text": final})
    usage = entry.get("usage") or {"input_tokens": len(prompt) // 4, "output_tokens": len(final) // 4}
    emit({"type": "usage", **usage})
    emit({"type": "done"})
    return int(entry.get("exit_code", 0))


if __name__ == "__main__":
    sys.exit(main())
