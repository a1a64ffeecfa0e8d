"""Record the real CLIs' event streams against the mock, driving each one through its hoh adapter.

    npm install --prefix /tmp/hoh-clis $(python -m hoh.harness.pins)    # the adapters' tested versions
    python -m hoh.testing.mock_llm.record --clis /tmp/hoh-clis --lab /tmp/hoh-lab \\
        --out tests/data/harness_streams

Each CLI runs exactly as hoh runs it: `registry.create(...)` builds the adapter, whose argv, env,
config files and subprocess choke point are the ones a Developer attempt uses (a Planner's for
the `denied` case). For each CLI and case a fresh `MockLLM` answers; the adapter's own parser
and classifier judge the run (files byte-exact, final message, typed outcome). With `--out` the
stream is written to `<out>/<cli>/<case>.jsonl` with the lab path replaced by `$LAB`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...config import HarnessConfig
from ...envs.attempt import run_attempt
from ...harness import registry
from ...harness.attempt import HarnessResult, Outcome, RoleRequest
from ...harness.pins import pinned_versions
from ...markers import fact_line, role_marker
from .server import MockLLM

API_KEY = "sk-mock-recording-0123456789"
KEY_ENV = "HOH_RECORDING_KEY"
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
MODEL = {"codex": "gpt-5.5", "opencode": "mock-model", "pi": "mock-model", "claude": "claude-sonnet-4-5"}
CASES: dict[str, tuple[dict[str, Any], Outcome]] = {  # case -> (MockLLM settings, the outcome hoh must type)
    "success": ({}, Outcome.ok),
    "http500": ({"fail_mode": "500", "retry_after_ms": 50}, Outcome.model_error),  # retry-after keeps retries fast
    "http400": ({"fail_mode": "400"}, Outcome.model_error),
    "http429": ({"fail_mode": "429", "retry_after_ms": 50}, Outcome.rate_limited),
    "close": ({"fail_mode": "close"}, Outcome.network_error),
    "minimal": ({"minimal_sse": True}, Outcome.ok),  # checked, not saved: same events as "success"
}
ONLY_FOR: dict[str, dict[str, tuple[dict[str, Any], Outcome]]] = {  # cli -> cases run for it alone
    # A plan-mode Planner's write refused by the CLI itself (exit 0); no API key at all.
    "claude": {"denied": ({}, Outcome.ok), "nokey": ({}, Outcome.auth_error)},
}
CASE_ROLES = {"denied": "planner"}
SAVED = ("success", "http500", "http400", "http429", "close", "denied", "nokey")


def prompt(evidence: Path, role: str = "developer") -> str:
    task = ("Write calc.py and notes/awkward.txt, run the calculator, then answer with the JSON status."
            if role == "developer" else "Look at the project and answer with the JSON status.")
    return "\n".join([role_marker(role, 1, 1), fact_line("candidate_id", CANDIDATE),
                      fact_line("evidence_dir", evidence), "", task, ""])


def cases_for(cli: str) -> dict[str, tuple[dict[str, Any], Outcome]]:
    return {**CASES, **ONLY_FOR.get(cli, {})}


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

    @property
    def attempt_dir(self) -> Path:
        return self.root / "attempt"

    def fresh(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        for d in (self.home, self.work, self.root / "evidence", self.attempt_dir):
            d.mkdir(parents=True, exist_ok=True)


def run_case(lab: Path, bins: Path, cli: str, case: str) -> dict[str, Any]:
    run = Run(lab, cli, case)
    run.fresh()
    log = run.root / "requests.jsonl"
    settings, expected = cases_for(cli)[case]
    os.environ[KEY_ENV] = API_KEY
    role = CASE_ROLES.get(case, "developer")
    # No key at all: the CLI's own login, with none to copy (an endpoint of hoh's without a key would get
    # hoh's placeholder key instead).
    nokey = case == "nokey"
    if nokey:
        os.environ["CLAUDE_CONFIG_DIR"] = str(run.root / "no-login")
    with MockLLM(script=SCRIPT, log_path=log, **settings) as mock:
        adapter = registry.create(HarnessConfig(name=cli, model=MODEL[cli], base_url=None if nokey else mock.base_url,
                                                api_key_env=None if nokey else KEY_ENV,
                                                command=str(bins / cli)))
        request = RoleRequest(role=role, loop=1, attempt=1, prompt=prompt(run.root / "evidence", role),
                              workdir=run.work, access="write" if role == "developer" else "read-only",
                              home=run.home, wall_timeout=180, idle_timeout=90)
        try:
            result = run_attempt(adapter, request, run.attempt_dir)
        finally:
            if nokey:
                os.environ.pop("CLAUDE_CONFIG_DIR", None)
        requests = mock.requests()
    problems = check(run, result, expected, case)
    if log.exists() and API_KEY in log.read_text():
        problems.append("API key leaked into the request log")
    return {"cli": cli, "case": case, "result": result, "requests": len(requests), "problems": problems,
            "stdout": (run.attempt_dir / "events.jsonl").read_text(), "root": run.root,
            "tools": strip_descriptions(requests[-1]["body"].get("tools")) if requests else None,
            "matches": [(r["match"]["source"], r["match"]["step"], r["answer"].get("tool")) for r in requests]}


def check(run: Run, result: HarnessResult, expected: Outcome, case: str) -> list[str]:
    problems = [] if result.outcome is expected else [f"outcome {result.outcome.value}, expected {expected.value}"]
    if case == "denied":
        if result.final_message != json.dumps(PLANNED, separators=(",", ":")):
            problems.append(f"final message {result.final_message!r}")
        if (run.work / "calc.py").exists():
            problems.append("the read-only role wrote calc.py")
        if not result.denials:
            problems.append("no denial recorded")
    elif expected is Outcome.ok:
        if result.final_message != EXPECTED_FINAL:
            problems.append(f"final message {result.final_message!r}")
        for rel, want in (("calc.py", CALC), ("notes/awkward.txt", AWKWARD), ("out.txt", "3.0\n"),
                          ("size.txt", f"{len(AWKWARD.encode())}\n")):
            path = run.work / rel
            got = path.read_bytes() if path.exists() else None
            if got != want.encode():
                problems.append(f"{rel}: got {got!r}")
    elif not result.error:
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
    p.add_argument("--only", default=",".join(pinned_versions()), help="the CLIs to record (default: every pinned one)")
    p.add_argument("--cases", help="default: every case that applies to the CLI")
    args = p.parse_args(argv)
    bins = args.clis.resolve() / "node_modules" / ".bin"
    failed = 0
    for cli in args.only.split(","):
        print(f"{cli}: hoh is tested with {pinned_versions().get(cli, 'no pinned version')}")
        for case in args.cases.split(",") if args.cases else cases_for(cli):
            r = run_case(args.lab, bins, cli, case)
            result = r["result"]
            status = "OK " if not r["problems"] else "BAD"
            failed += bool(r["problems"])
            print(f"{status} {cli:8} {case:8} {result.outcome.value} rc={result.exit_code} wall={result.duration_s}s "
                  f"requests={r['requests']} final={result.final_message!r} error={(result.error or '')[:80]!r} "
                  f"{r['problems']}")
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
