"""Drive the real Codex CLI, OpenCode, Pi and Claude Code against the mock, check them, record their event streams.

    npm install --prefix /tmp/hoh-clis @openai/codex@0.171.0 opencode-ai@1.18.33 \\
        @mariozechner/pi-coding-agent@0.73.1 @anthropic-ai/claude-code@2.1.332
    python -m hoh.testing.mock_llm.record --clis /tmp/hoh-clis --lab /tmp/hoh-lab \\
        --out tests/data/harness_streams

For each CLI and case it starts a fresh `MockLLM`, gives the CLI an isolated home, runs one
developer prompt, checks the outcome (files byte-exact, final message in the events, exit
code) and, with `--out`, writes `<out>/<cli>/<case>.jsonl` with the lab path replaced by
`$LAB`. Claude Code gets its argv, environment and config from hoh's own adapter
(`registry.create`), so the recording is what `hoh build` runs; the other recipes are the
hand-verified ones.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from unittest import mock as _patch

from ...config import HarnessConfig
from ...harness import registry
from ...harness.base import RoleRequest
from .server import MockLLM

API_KEY = "sk-mock-recording-0123456789"
CANDIDATE = "loop-0001-abcdef012345"
AWKWARD = ("line 1: 'single' \"double\" `backtick` $HOME ${PATH} $(echo no) \\backslash \\n %s %%\n"
           "\ttabbed line 2 — ünïcode ✓\n\nlast line without newline \\")
CALC = 'import sys\n\na, op, b = sys.argv[1:4]\nprint(float(a) + float(b) if op == "+" else float(a) - float(b))\n'
FINAL = {"status": "done", "candidate_id": "{{candidate_id}}", "files": ["calc.py", "notes/awkward.txt"]}
PLANNED = {"status": "planned"}
SCRIPT = {"developer": {"1": [
    {"write": {"path": "calc.py", "content": CALC}},
    {"write": {"path": "notes/awkward.txt", "content": AWKWARD}},
    {"shell": "python3 calc.py 1 + 2 > out.txt && wc -c < notes/awkward.txt > size.txt"},
    {"final": FINAL},
]}, "planner": {"1": [  # a read-only role that tries to write anyway
    {"shell": "echo hacked > calc.py"},
    {"shell": "ls -a"},
    {"final": PLANNED},
]}}
EXPECTED_FINAL = json.dumps({**FINAL, "candidate_id": CANDIDATE}, separators=(",", ":"))
CASES: dict[str, dict[str, Any]] = {  # case -> MockLLM settings
    "success": {},
    "http500": {"fail_mode": "500", "retry_after_ms": 50},  # retry-after-ms keeps OpenCode's retries fast
    "http400": {"fail_mode": "400"},
    "minimal": {"minimal_sse": True},  # checked, not saved: same events as "success"
}
ONLY_FOR = {  # cli -> extra cases run for it alone (its adapter gives the role)
    "claude": {"denied": {}, "nokey": {}},  # a plan-mode Planner's write refused; no API key at all
}
CASE_ROLES = {"denied": "planner"}
SAVED = ("success", "http500", "http400", "denied", "nokey")


def prompt(evidence: Path, role: str = "developer") -> str:
    task = ("Write calc.py and notes/awkward.txt, run the calculator, then answer with the JSON status."
            if role == "developer" else "Look at the project and answer with the JSON status.")
    return (f"<!-- hoh:role={role} loop=1 attempt=1 -->\n"
            f"Candidate id: {CANDIDATE}\nEvidence dir: {evidence}\n\n{task}\n")


@dataclass
class Run:
    """Where one CLI run happens."""

    lab: Path
    cli: str
    case: str

    @property
    def root(self) -> Path:
        return self.lab / "runs" / f"{self.cli}-{self.case}"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def work(self) -> Path:
        return self.root / "work"

    def fresh(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        for d in (self.home, self.work, self.root / "evidence", self.lab / "tmp"):
            d.mkdir(parents=True, exist_ok=True)


def base_env(run: Run) -> dict[str, str]:
    """A scrubbed environment: no inherited *_API_KEY or proxy variables."""
    return {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "HOME": str(run.home),
            "LANG": "C.UTF-8", "TMPDIR": str(run.lab / "tmp"), "MOCK_API_KEY": API_KEY}


def codex(run: Run, bins: Path, base_url: str) -> tuple[list[str], dict[str, str], Path]:
    env = base_env(run)
    codex_home = run.home / ".codex"  # must exist, and must not lie inside $TMPDIR
    codex_home.mkdir(parents=True, exist_ok=True)
    env["CODEX_HOME"] = str(codex_home)
    argv = [str(bins / "codex"), "exec", "--json", "--skip-git-repo-check", "-m", "gpt-5.5",
            "-s", "workspace-write", "-C", str(run.work),
            "-c", "model_provider=mock", "-c", "model_providers.mock.name=mock",
            "-c", f"model_providers.mock.base_url={base_url}",
            "-c", "model_providers.mock.wire_api=responses",
            "-c", "model_providers.mock.env_key=MOCK_API_KEY",
            "-c", "approval_policy=never",
            "-c", "model_providers.mock.request_max_retries=0",
            "-c", "model_providers.mock.stream_max_retries=0",
            "-"]  # the prompt comes on stdin
    return argv, env, run.work


def opencode_config(base_url: str) -> dict[str, Any]:
    return {
        "$schema": "https://opencode.ai/config.json",
        "model": "mock/mock-model", "small_model": "mock/mock-model",
        "autoupdate": False, "share": "disabled",
        # run mode auto-rejects "ask", so every permission is decided up front
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny",
                       "doom_loop": "deny", "external_directory": "deny"},
        "provider": {"mock": {
            "npm": "@ai-sdk/openai-compatible", "name": "Mock (local scripted server)",
            "options": {"baseURL": base_url, "apiKey": "{env:MOCK_API_KEY}"},
            "models": {"mock-model": {"name": "Mock Model", "tool_call": True,
                                      "limit": {"context": 128000, "output": 4096}}}}},
    }


def opencode(run: Run, bins: Path, base_url: str) -> tuple[list[str], dict[str, str], Path]:
    env = base_env(run)
    h = run.home
    env.update(XDG_CONFIG_HOME=str(h / ".config"), XDG_DATA_HOME=str(h / ".local/share"),
               XDG_CACHE_HOME=str(h / ".cache"), XDG_STATE_HOME=str(h / ".local/state"),
               OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_CONFIG=str(h / "opencode.json"))
    (h / "opencode.json").write_text(json.dumps(opencode_config(base_url), indent=2))
    argv = [str(bins / "opencode"), "run", "--format", "json", "-m", "mock/mock-model", "--dir", str(run.work)]
    return argv, env, run.work


def pi_models(base_url: str) -> dict[str, Any]:
    return {"providers": {"mock": {
        "baseUrl": base_url, "api": "openai-completions", "apiKey": "MOCK_API_KEY",
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": "mock-model", "name": "Mock Model", "contextWindow": 128000, "maxTokens": 4096}]}}}


PI_SETTINGS = {"retry": {"enabled": True, "maxRetries": 1, "baseDelayMs": 100, "provider": {"maxRetries": 0}}}


def pi(run: Run, bins: Path, base_url: str) -> tuple[list[str], dict[str, str], Path]:
    env = base_env(run)
    agent = run.home / ".pi" / "agent"
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "models.json").write_text(json.dumps(pi_models(base_url), indent=2))
    (agent / "settings.json").write_text(json.dumps(PI_SETTINGS, indent=2))
    env.update(PI_CODING_AGENT_DIR=str(agent), PI_OFFLINE="1")
    argv = [str(bins / "pi"), "-p", "--mode", "json", "--provider", "mock", "--model", "mock-model",
            "--no-session", "--tools", "read,bash,edit,write"]
    return argv, env, run.work  # pi has no --cwd flag: it works in the process cwd


def via_adapter(name: str, model: str) -> Callable[[Run, Path, str], tuple[list[str], dict[str, str], Path]]:
    """The argv, environment and config files hoh's own adapter gives this case's role attempt."""
    def recipe(run: Run, bins: Path, base_url: str) -> tuple[list[str], dict[str, str], Path]:
        key_env = "HOH_RECORD_UNSET_KEY" if run.case == "nokey" else "MOCK_API_KEY"
        adapter = registry.create(HarnessConfig(name=name, command=str(bins / name), model=model,
                                                base_url=base_url, api_key_env=key_env))
        role = CASE_ROLES.get(run.case, "developer")
        request = RoleRequest(role=role, loop=1, attempt=1, prompt=prompt(run.root / "evidence", role),
                              workdir=run.work, access="write" if role == "developer" else "read-only",
                              home=run.home)
        with _patch.patch.dict(os.environ, {"MOCK_API_KEY": API_KEY}):
            adapter.prepare(request)
            return adapter.build_argv(request), adapter.env(request), adapter.cwd(request)
    return recipe


HARNESSES: dict[str, Callable[[Run, Path, str], tuple[list[str], dict[str, str], Path]]] = {
    "codex": codex, "opencode": opencode, "pi": pi, "claude": via_adapter("claude", "claude-sonnet-4-5")}


def final_message(cli: str, events: list[dict[str, Any]]) -> tuple[str | None, str | None]:
    """(final text, error) as an adapter would read them from the event stream."""
    text = error = None
    for e in events:
        t = e.get("type")
        if cli == "codex":
            if t == "item.completed" and e["item"].get("type") == "agent_message":
                text = e["item"]["text"]
            elif t == "turn.failed":
                error = e.get("error", {}).get("message")
        elif cli == "opencode":
            if t == "text":
                text = e["part"]["text"]
            elif t == "error":
                error = json.dumps(e.get("error"))
        elif cli == "claude":
            if t == "result":
                text, error = (None, e.get("result")) if e.get("is_error") else (e.get("result"), None)
        elif t == "message_end" and e["message"].get("role") == "assistant":
            msg = e["message"]
            text = "".join(c.get("text", "") for c in msg.get("content", []) if c.get("type") == "text")
            error = msg.get("errorMessage") if msg.get("stopReason") == "error" else None
    return text, error


def run_case(lab: Path, bins: Path, cli: str, case: str) -> dict[str, Any]:
    run = Run(lab, cli, case)
    run.fresh()
    log = run.root / "requests.jsonl"
    with MockLLM(script=SCRIPT, log_path=log, **{**CASES, **ONLY_FOR.get(cli, {})}[case]) as mock:
        argv, env, cwd = HARNESSES[cli](run, bins, mock.base_url)
        started = time.monotonic()
        proc = subprocess.run(argv, input=prompt(run.root / "evidence", CASE_ROLES.get(case, "developer")), env=env,
                              cwd=cwd, capture_output=True, text=True, timeout=180)
        wall = time.monotonic() - started
        requests = mock.requests()
    (run.root / "stdout.jsonl").write_text(proc.stdout)
    (run.root / "stderr.log").write_text(proc.stderr)
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    text, error = final_message(cli, events)
    problems = check(run, "success" if case == "minimal" else case, proc.returncode, text, error, events)
    if log.exists() and API_KEY in log.read_text():
        problems.append("API key leaked into the request log")
    return {"cli": cli, "case": case, "rc": proc.returncode, "wall": round(wall, 2), "requests": len(requests),
            "final": text, "error": error, "problems": problems, "stdout": proc.stdout, "root": run.root,
            "tools": strip_descriptions(requests[-1]["body"].get("tools")) if requests else None,
            "matches": [(r["match"]["source"], r["match"]["step"], r["answer"].get("tool")) for r in requests]}


def check(run: Run, case: str, rc: int, text: str | None, error: str | None,
          events: list[dict[str, Any]]) -> list[str]:
    problems = []
    if case == "denied":
        if rc != 0 or text != json.dumps(PLANNED, separators=(",", ":")):
            problems.append(f"rc={rc}, final message {text!r}")
        if (run.work / "calc.py").exists():
            problems.append("the read-only role wrote calc.py")
        if not any(e.get("subtype") == "permission_denied" for e in events):
            problems.append("no permission_denied event")
    elif case == "success":
        if rc != 0:
            problems.append(f"rc={rc}")
        if text != EXPECTED_FINAL:
            problems.append(f"final message {text!r}")
        for rel, want in (("calc.py", CALC), ("notes/awkward.txt", AWKWARD), ("out.txt", "3.0\n"),
                          ("size.txt", f"{len(AWKWARD.encode())}\n")):
            path = run.work / rel
            got = path.read_bytes() if path.exists() else None
            if got != want.encode():
                problems.append(f"{rel}: got {got!r}")
    elif not error:
        problems.append("no error reported in the events")
    return problems


def strip_descriptions(value: Any) -> Any:
    """Tool schemas without their prose, which is most of their size and irrelevant to argument building."""
    if isinstance(value, dict):
        return {k: strip_descriptions(v) for k, v in value.items() if k != "description"}
    if isinstance(value, list):
        return [strip_descriptions(v) for v in value]
    return value


def sanitize(text: str, lab: Path) -> str:
    return text.replace(str(lab.resolve()), "$LAB").replace(str(lab), "$LAB").replace(API_KEY, "<api-key>")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clis", type=Path, default=Path("/tmp/hoh-clis"), help="npm --prefix of the installed CLIs")
    p.add_argument("--lab", type=Path, default=Path("/tmp/hoh-lab"), help="scratch dir (homes, workdirs, logs)")
    p.add_argument("--out", type=Path, help="write sanitized event streams here")
    p.add_argument("--only", default="codex,opencode,pi,claude")
    p.add_argument("--cases", help="default: every case that applies to the CLI")
    args = p.parse_args(argv)
    bins = args.clis / "node_modules" / ".bin"
    failed = 0
    for cli in args.only.split(","):
        cases = args.cases.split(",") if args.cases else [*CASES, *ONLY_FOR.get(cli, {})]
        for case in cases:
            r = run_case(args.lab, bins, cli, case)
            status = "OK " if not r["problems"] else "BAD"
            failed += bool(r["problems"])
            print(f"{status} {cli:8} {case:8} rc={r['rc']} wall={r['wall']}s requests={r['requests']} "
                  f"final={r['final']!r} error={(r['error'] or '')[:80]!r} {r['problems']}")
            print(f"    matches={r['matches']} logs in {r['root']}")
            if args.out and case in SAVED and not r["problems"]:
                dest = args.out / cli / f"{case}.jsonl"
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(sanitize(r["stdout"], args.lab))
                if case == "success":  # the tool schemas the CLI advertised, for argument-building tests
                    tools = json.dumps(r["tools"], indent=1, ensure_ascii=False)
                    (dest.parent / "tools.json").write_text(sanitize(tools, args.lab) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
