"""The real Codex, OpenCode, Pi and Claude Code CLIs, installed from npm at the pinned versions, building
the demo against the mock model server that ships in hoh: real argv, real event streams, real files."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import DEMO, Project, mini_script, run_hoh

from hoh import api
from hoh.config import HarnessConfig, HohConfig
from hoh.errors import HarnessUnavailable
from hoh.harness import registry
from hoh.harness.pins import pinned_versions
from hoh.resources import schema_errors
from hoh.testing.demo_mock import mock_script
from hoh.testing.mock_llm import MockLLM

HARNESSES = ["codex", "opencode", "pi", "claude"]
MODEL = {"codex": "gpt-5.5", "opencode": "mock-model", "pi": "mock-model", "claude": "claude-sonnet-4-5"}
SENTINEL = "sk-hoh-sentinel-7f3a9c"
PINS = pinned_versions()
"""The adapters' pinned versions: what .ci/run installs (`python -m hoh.harness.pins`)."""


@pytest.fixture(autouse=True)
def clis_on_path(harness_bin, monkeypatch):
    monkeypatch.setenv("PATH", f"{harness_bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HOH_TEST_KEY", SENTINEL)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The scripted demo over two loops, and the mock script that replays it through a real CLI."""
    ws = tmp_path_factory.mktemp("reference") / "ws"
    report = api.build(DEMO / "spec.md", ws, HohConfig(loops=2, harness={"name": "scripted"}))
    assert report.status == "finished"
    script = mock_script(yaml.safe_load((DEMO / "script.yaml").read_text()), ws)
    return ws, script


def candidate_ids(ws: Path) -> list[str]:
    return [loop["candidate_id"] for loop in api.status(ws)["loops"]]


def harness_flags(name: str, mock: MockLLM) -> list[str]:
    return ["--harness", name, "--model", MODEL[name], "--base-url", mock.base_url, "--api-key-env", "HOH_TEST_KEY"]


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


def no_process_mentions(path: Path) -> bool:
    out = subprocess.run(["pgrep", "-af", str(path)], capture_output=True, text=True).stdout
    return not [line for line in out.splitlines() if "pgrep" not in line]


@pytest.mark.parametrize("name", HARNESSES)
def test_real_cli_builds_the_demo(name, reference, tmp_path):
    ref_ws, script = reference
    ws = tmp_path / "ws"
    with MockLLM(script=script) as mock:
        # two loops of a real CLI: ~50 s on a quiet machine, more beside the other tests' containers
        result = run_hoh("build", DEMO / "spec.md", *harness_flags(name, mock), "--loops", "2", "-w", ws, "-q",
                         timeout=300)
        requests = mock.requests()
    assert result.returncode == 0, result.stderr
    # The same files written through the CLI's own tools give the same trees, hence the same ids.
    assert candidate_ids(ws) == candidate_ids(ref_ws)
    assert (ws / "project" / "calc.py").read_bytes() == (ref_ws / "project" / "calc.py").read_bytes()
    for t in (1, 2):
        loop_dir = ws / "state" / "loops" / f"{t:04d}"
        for name_, schema in (("plan", "plan"), ("developer", "developer"), ("candidate", "candidate"), ("qa", "qa")):
            assert schema_errors(schema, json.loads((loop_dir / f"{name_}.json").read_text())) == []
        dev = json.loads((loop_dir / "roles" / "developer" / "attempt-1" / "result.json").read_text())
        assert dev["ok"] and dev["harness"]["tool_calls"] >= 2
    assert any(r.get("match", {}).get("role") == "developer" for r in requests)
    # QA's finding names the behaviour it breaks: the subtraction regression is one issue, as in the reference.
    issues = [(i["id"], i["title"], i["status"], i.get("behaviour_id"))
              for i in json.loads((ws / "state" / "ledger.json").read_text())["issues"]]
    assert issues == [(i["id"], i["title"], i["status"], i.get("behaviour_id"))
                      for i in json.loads((ref_ws / "state" / "ledger.json").read_text())["issues"]]
    assert [i[3] for i in issues] == [None, "V-0002"]
    status = json.loads(run_hoh("status", "-w", ws, "--json").stdout)
    assert status["usage"]["input_tokens"] > 0 and status["usage"]["output_tokens"] > 0
    if name == "claude":  # Claude Code prices its runs: total_cost_usd per attempt, summed by status
        assert status["usage"]["cost_usd"] > 0
        dev = json.loads((ws / "state/loops/0001/roles/developer/attempt-1/result.json").read_text())
        assert dev["harness"]["usage"]["cost_usd"] > 0 and dev["harness"]["denials"] == []
        assert written_by_tool(ws / "state/loops/0001/roles/developer/attempt-1", "Write") == [
            str(ws / "project" / "calc.py")]
        assert not list(ws.glob("state/loops/*/evidence/.claude")) and not (ws / "project" / ".claude").exists()
    # The key is behind hoh's egress: the CLI held the attempt's token, the proxy sent the real key, and no workspace
    # file holds it.
    sent = {v for r in requests for k, v in r["headers"].items() if k in ("authorization", "x-api-key")}
    assert sent and sent <= {f"<redacted len={len(SENTINEL)}>", f"<redacted len={len('Bearer ' + SENTINEL)}>"}
    logs = list(ws.glob("state/loops/*/roles/*/attempt-*/egress.jsonl"))
    assert len(logs) >= 6 and all(any(e["kind"] == "model" and e["decision"] == "allowed"
                                      for e in map(json.loads, log.read_text().splitlines())) for log in logs)
    assert not [p for p in files_under(ws) if SENTINEL.encode() in p.read_bytes()]
    assert no_process_mentions(ws)


@pytest.mark.parametrize("name", ["codex", "pi"])
def test_an_agent_that_prints_its_key_prints_its_attempt_s_token(name, tmp_path):
    p = one_loop_project(tmp_path)
    script = mock_script(yaml.safe_load(p.script_path.read_text()), _scripted_ws(p, tmp_path))
    developer = next(e for e in script["entries"] if e["role"] == "developer")
    developer["steps"].insert(0, {"shell": "env > env-dump.txt; cat /proc/*/environ >> env-dump.txt 2>/dev/null; true"})
    with MockLLM(script=script) as mock:
        result = run_one_loop(name, p, mock)
        bodies = [json.dumps(r["body"]) for r in mock.requests()]
    assert result.returncode == 0, result.stderr
    dump = (p.ws / "project" / "env-dump.txt").read_text(errors="replace")
    assert re.search(r"^HOH_TEST_KEY=hoh-[\w-]{40,}$", dump, re.MULTILINE) and SENTINEL not in dump
    assert not [b for b in bodies if SENTINEL in b]  # the tool output the model saw held no key either
    assert not [f for f in files_under(p.ws) if SENTINEL.encode() in f.read_bytes()]
    assert SENTINEL.encode() not in subprocess.run(["git", "--git-dir", str(p.ws / "history.git"), "cat-file",
                                                    "--batch-all-objects", "--batch"], capture_output=True).stdout


def tool_uses(attempt: Path) -> list[dict]:
    """The tool calls a Claude Code attempt made, from its recorded event stream."""
    events = [json.loads(line) for line in (attempt / "events.jsonl").read_text().splitlines()]
    return [block for e in events if e.get("type") == "assistant"
            for block in e["message"]["content"] if block.get("type") == "tool_use"]


def written_by_tool(attempt: Path, tool: str) -> list[str]:
    return [call["input"]["file_path"] for call in tool_uses(attempt) if call["name"] == tool]


def one_loop_project(tmp_path) -> Project:
    return Project(tmp_path, mini_script(1))


def run_one_loop(name: str, p: Project, mock: MockLLM, *extra: str):
    return run_hoh("build", p.spec, *harness_flags(name, mock), "--loops", "1", "-w", p.ws, "-q",
                   "--set", "policy.max_retries=0", "--set", "policy.transient_retries=0", *extra)


@pytest.mark.parametrize("name", HARNESSES)
@pytest.mark.parametrize("fault,expected", [("500", "model_error"), ("close", "network_error")])
def test_persistent_faults_end_with_a_typed_outcome_and_resume_cleanly(name, fault, expected, tmp_path):
    p = one_loop_project(tmp_path)
    mini = mock_script(yaml.safe_load(p.script_path.read_text()), _scripted_ws(p, tmp_path))
    with MockLLM(script=mini, fail_mode=fault, retry_after_ms=20) as mock:
        result = run_one_loop(name, p, mock)
        assert result.returncode == 1, result.stderr
        attempt = json.loads((p.ws / "state/loops/0001/roles/planner/attempt-1/result.json").read_text())
        assert attempt["harness"]["outcome"] == expected, attempt
        if name == "pi":
            assert attempt["harness"]["exit_code"] == 0  # pi's exit-0 model error, caught from the events
        assert [e["event"] for e in p.journal()][-2:] == ["role_failed", "run_finished"]
        assert no_process_mentions(p.ws)
        mock.control(fail_mode="none")
        resumed = run_hoh("resume", "-w", p.ws, "-q")
    assert resumed.returncode == 0, resumed.stderr
    assert api.status(p.ws)["loops_finished"] == 1


@pytest.mark.parametrize("name", HARNESSES)
def test_a_stalled_model_hits_the_idle_timeout(name, tmp_path):
    p = one_loop_project(tmp_path)
    # Headers and the first events of a message, then silence: Claude Code would wait >= 300 s.
    with MockLLM(fail_mode="stall", stall_seconds=120, stall_after_frames=2) as mock:
        result = run_one_loop(name, p, mock, "--set", "timeouts.idle_seconds=4")
    assert result.returncode == 1
    attempt = json.loads((p.ws / "state/loops/0001/roles/planner/attempt-1/result.json").read_text())
    assert attempt["harness"]["outcome"] == "idle_timeout" and attempt["harness"]["duration_s"] < 30
    assert no_process_mentions(p.ws)


CREDENTIALS = ("authorization", "x-api-key", "api-key")


@pytest.mark.parametrize("network", ["egress", "shared"])
@pytest.mark.parametrize("name", HARNESSES)
def test_a_key_less_endpoint_is_reached_through_hoh_egress_and_without_it(name, network, tmp_path):
    """`--base-url` without `--api-key-env`: every role reaches the model through hoh's proxy (which sends no
    made-up key on): in its own network, by the jail's socket; with `sandbox.network: shared`, on hoh's loopback."""
    p = one_loop_project(tmp_path)
    mini = mock_script(yaml.safe_load(p.script_path.read_text()), _scripted_ws(p, tmp_path))
    with MockLLM(script=mini) as mock:
        result = run_hoh("build", p.spec, "--harness", name, "--model", MODEL[name], "--base-url", mock.base_url,
                         "--loops", "1", "-w", p.ws, "-q", "--set", "policy.max_retries=0",
                         "--set", f"sandbox.network={network}", timeout=240)
        requests = mock.requests()
    assert result.returncode == 0, result.stderr
    assert {r["match"]["role"] for r in requests} >= {"planner", "developer", "qa"}  # opencode also asks for a title
    events = [e["event"] for e in p.journal()]
    assert "role_failed" not in events and api.status(p.ws)["loops_finished"] == 1
    logs = list(p.ws.glob("state/loops/*/roles/*/attempt-*/egress.jsonl"))
    assert not [r["headers"] for r in requests if set(r["headers"]) & set(CREDENTIALS)]
    assert len(logs) == 3 and all(any(e["kind"] == "model" and e["decision"] == "allowed" and e["status"] == 200
                                      for e in map(json.loads, log.read_text().splitlines())) for log in logs)


def test_codex_read_only_planner_cannot_write(tmp_path):
    p = one_loop_project(tmp_path)
    script = mock_script(yaml.safe_load(p.script_path.read_text()), _scripted_ws(p, tmp_path))
    planner = next(e for e in script["entries"] if e["role"] == "planner")
    planner["steps"].insert(0, {"shell": "echo hacked > planner-was-here.txt; echo hacked > calc.py"})
    with MockLLM(script=script) as mock:
        result = run_one_loop("codex", p, mock)
        tool_outputs = [json.dumps(r["body"]) for r in mock.requests() if r.get("match", {}).get("role") == "planner"]
    assert result.returncode == 0, result.stderr
    attempt = json.loads((p.ws / "state/loops/0001/roles/planner/attempt-1/result.json").read_text())
    # The jail (codex's sandbox without it) refused the write, so hoh's guard found nothing to revert.
    assert attempt["ok"] and attempt["violations"] == []
    assert any("Read-only file system" in body for body in tool_outputs)
    assert not (p.ws / "project" / "planner-was-here.txt").exists()


def _scripted_ws(p: Project, tmp_path: Path) -> Path:
    ws = tmp_path / "scripted-reference"
    assert api.build(p.spec, ws, p.config(1)).status == "finished"
    return ws


def test_doctor_reports_installed_and_missing_harnesses(tmp_path):
    installed = run_hoh("doctor", "--json")
    doctor = json.loads(installed.stdout)
    reports = {r["harness"]: r for r in doctor["harnesses"]}
    assert installed.returncode == 0
    assert doctor["jail"]["works"] and doctor["jail"]["status"].startswith("works")
    assert reports["codex"]["roles"]["planner"][0].startswith("codex sandbox read-only")
    roles = doctor["roles"]
    assert {r: roles[r]["capabilities"].split(" (")[0] for r in roles} == {"planner": "none", "developer": "none", "qa": "none"}
    assert roles["developer"]["filesystem"]["writes"][0].startswith("the project") and roles["planner"]["network"]
    assert "egress" in roles["qa"]["network"] and roles["qa"]["limits"]["tmp_mb"] > 0
    assert reports["pi"]["roles"]["developer"][1] == "hoh's jail (bwrap)"
    for name in HARNESSES:
        assert reports[name]["usable"] and reports[name]["version"] == reports[name]["tested_version"]
    assert reports["codex"]["sandbox"].startswith("works")
    assert reports["claude"]["version"] == PINS["claude"]
    assert reports["claude"]["sandbox"].startswith("works: bwrap and socat")
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    missing = subprocess.run([os.sys.executable, "-m", "hoh", "doctor", "--harness", "pi"],
                             env=env, capture_output=True, text=True)
    assert missing.returncode == 1
    assert f"npm install -g @mariozechner/pi-coding-agent@{PINS['pi']}" in missing.stderr
    build = subprocess.run([os.sys.executable, "-m", "hoh", "build", str(DEMO / "spec.md"), "--harness", "codex",
                            "-w", str(tmp_path / "ws")], env=env, capture_output=True, text=True)
    assert build.returncode == 2 and f"npm install -g @openai/codex@{PINS['codex']}" in build.stderr
    assert not (tmp_path / "ws").exists()


@pytest.mark.parametrize("name", HARNESSES)
def test_a_schema_violation_is_re_asked_in_the_same_cli_session(name, tmp_path):
    p = one_loop_project(tmp_path)
    script = mock_script(yaml.safe_load(p.script_path.read_text()), _scripted_ws(p, tmp_path))
    planner = next(e for e in script["entries"] if e["role"] == "planner")
    script["entries"].append({"role": "planner", "loop": 1, "attempt": 1, "steps": [{"final": "Here is my plan!"}]})
    with MockLLM(script=script) as mock:
        result = run_one_loop(name, p, mock, "--set", "policy.max_retries=1")
    assert result.returncode == 0, result.stderr
    attempts = p.ws / "state/loops/0001/roles/planner"
    first = json.loads((attempts / "attempt-1/result.json").read_text())
    second = json.loads((attempts / "attempt-2/result.json").read_text())
    assert not first["ok"] and "not a JSON object" in first["errors"][0] and second["ok"]
    argv = json.loads((attempts / "attempt-2/command.json").read_text())["argv"]
    session = first["harness"]["session_id"]
    assert session and session in argv  # codex `resume ID`, opencode `-s ID`, pi `--session ID`
    assert "Fix these problems" in (attempts / "attempt-2/prompt.md").read_text()
    assert p.loop_json(1, "plan") == planner["steps"][-1]["final"]


# Claude Code retries once itself (CLAUDE_CODE_MAX_RETRIES=1), so two 429s reach hoh's transient policy.
@pytest.mark.parametrize("name,failures", [("codex", 1), ("claude", 2)])
def test_a_rate_limit_is_retried_with_backoff_without_spending_an_attempt(name, failures, tmp_path):
    p = one_loop_project(tmp_path)
    script = mock_script(yaml.safe_load(p.script_path.read_text()), _scripted_ws(p, tmp_path))
    with MockLLM(script=script, fail_mode="429", fail_count=failures) as mock:
        result = run_hoh("build", p.spec, *harness_flags(name, mock), "--loops", "1", "-w", p.ws, "-q",
                         "--set", "policy.max_retries=0", "--set", "policy.transient_backoff_seconds=0.2")
    assert result.returncode == 0, result.stderr
    transient = [e for e in p.journal() if e["event"] == "transient_failure"]
    assert [(e["role"], e["attempt"], e["outcome"]) for e in transient] == [("planner", 1, "rate_limited")]
    attempt = p.ws / "state/loops/0001/roles/planner/attempt-1"
    assert json.loads((attempt / "result.json").read_text())["ok"]
    assert "429" in (attempt / "events.transient-1.jsonl").read_text()


# ---- Claude Code: the rest of the fault suite, its permission layer, and doctor --------------------
def _attempt(p: Project, role: str = "planner", n: int = 1) -> dict:
    return json.loads((p.ws / f"state/loops/0001/roles/{role}/attempt-{n}/result.json").read_text())


@pytest.mark.parametrize("fault,expected,extra", [
    ("429", "rate_limited", {"retry_after_ms": 1000}),  # retry-after honoured once, then typed
    ("400", "model_error", {}),
])
def test_claude_http_faults_are_typed_within_the_configured_time(fault, expected, extra, tmp_path):
    p = one_loop_project(tmp_path)
    mini = mock_script(yaml.safe_load(p.script_path.read_text()), _scripted_ws(p, tmp_path))
    with MockLLM(script=mini, fail_mode=fault, **extra) as mock:
        result = run_one_loop("claude", p, mock)
        requests = len(mock.requests())
        assert result.returncode == 1, result.stderr
        attempt = _attempt(p)["harness"]
        assert attempt["outcome"] == expected and attempt["exit_code"] == 1, attempt
        assert attempt["duration_s"] < 20 and requests <= 3  # CLAUDE_CODE_MAX_RETRIES=1: one retry of its own
        assert no_process_mentions(p.ws)
        assert not [f for f in files_under(p.ws) if SENTINEL.encode() in f.read_bytes()]
        mock.control(fail_mode="none")
        resumed = run_hoh("resume", "-w", p.ws, "-q")
    assert resumed.returncode == 0, resumed.stderr
    assert api.status(p.ws)["loops_finished"] == 1


@pytest.mark.parametrize("name", HARNESSES)
def test_an_endpoint_that_wants_a_key_it_was_not_given_is_an_auth_error(name, tmp_path):
    p = one_loop_project(tmp_path)
    with MockLLM(require_key=True) as mock:
        result = run_hoh("build", p.spec, "--harness", name, "--model", MODEL[name], "--base-url",
                         mock.base_url, "--loops", "1", "-w", p.ws, "-q", "--set", "policy.max_retries=0",
                         "--set", "policy.transient_retries=0")
        answers = [r["answer"]["status"] for r in mock.requests()]
    assert result.returncode == 1, result.stderr
    assert answers and set(answers) == {401}  # reached, and refused for the missing key
    assert _attempt(p)["harness"]["outcome"] == "auth_error"
    assert no_process_mentions(p.ws)


def test_claude_read_only_planner_is_refused_by_the_cli_and_the_denial_recorded(tmp_path):
    p = one_loop_project(tmp_path)
    script = mock_script(yaml.safe_load(p.script_path.read_text()), _scripted_ws(p, tmp_path))
    planner = next(e for e in script["entries"] if e["role"] == "planner")
    planner["steps"][:0] = [{"shell": "echo hacked > planner-was-here.txt"}, {"shell": "ls -a"}]
    with MockLLM(script=script) as mock:
        result = run_one_loop("claude", p, mock)
        last = [r["body"] for r in mock.requests() if r["match"]["role"] == "planner"][-1]
    assert result.returncode == 0, result.stderr
    attempt = _attempt(p)
    # Plan mode refused the write itself (exit 0), so hoh's guard found nothing to revert.
    assert attempt["ok"] and attempt["violations"] == []
    assert [(d["tool"], d["target"]) for d in attempt["harness"]["denials"]] == [
        ("Bash", "echo hacked > planner-was-here.txt")]
    results = [block["content"] for m in last["messages"] if isinstance(m["content"], list)
               for block in m["content"] if block.get("type") == "tool_result"]
    assert ".git" in results[1].splitlines()  # the read-only `ls -a` did run
    assert not (p.ws / "project" / "planner-was-here.txt").exists()


def test_claude_qa_writes_its_evidence_but_not_the_project(tmp_path):
    p = one_loop_project(tmp_path)
    script = mock_script(yaml.safe_load(p.script_path.read_text()), _scripted_ws(p, tmp_path))
    qa = next(e for e in script["entries"] if e["role"] == "qa")
    project = p.ws.resolve() / "project"
    qa["steps"][:0] = [
        {"call": {"name": "Write", "arguments": {"file_path": str(project / "qa-was-here.txt"), "content": "x"}}},
        {"shell": f"echo hacked > {project}/greet.py; echo hacked > {p.ws.resolve()}/scratch/view/greet.py"},
    ]
    with MockLLM(script=script) as mock:
        result = run_one_loop("claude", p, mock)
        qa_bodies = [json.dumps(r["body"]) for r in mock.requests() if r["match"]["role"] == "qa"]
    assert result.returncode == 0, result.stderr
    attempt = _attempt(p, "qa")
    assert attempt["ok"] and attempt["violations"] == []
    assert [(d["tool"], d["target"]) for d in attempt["harness"]["denials"]] == [
        ("Write", str(project / "qa-was-here.txt"))]
    # The jail stopped the Bash writes: the project is not in QA's view at all, its candidate copy is read-only.
    assert any("No such file or directory" in body and "Read-only file system" in body for body in qa_bodies)
    assert not (project / "qa-was-here.txt").exists() and "hacked" not in (project / "greet.py").read_text()
    assert (p.ws / "state/loops/0001/evidence/T1.A1.txt").read_text().strip() == "hello bob"
    assert p.loop_json(1, "qa")["verdict"] == "pass"


def test_claude_refuses_to_bypass_permissions_before_creating_anything(tmp_path):
    result = run_hoh("build", DEMO / "spec.md", "--harness", "claude", "-w", tmp_path / "ws",
                     "--set", 'harness.extra_args=["--dangerously-skip-permissions"]')
    assert result.returncode == 2 and "never bypasses" in result.stderr and len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "ws").exists()


def test_claude_without_socat_is_refused_and_doctor_says_why(harness_bin, tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").symlink_to((harness_bin / "claude").resolve())
    (bin_dir / "bwrap").symlink_to(shutil.which("bwrap"))
    monkeypatch.setenv("PATH", str(bin_dir))  # the real CLI and bwrap, but no socat
    claude = registry.create(HarnessConfig(name="claude"))
    assert claude.installed_version() == PINS["claude"]
    with pytest.raises(HarnessUnavailable, match="sandbox needs socat.*apt-get install bubblewrap socat"):
        claude.check_available()
    assert claude.sandbox_probe(tmp_path).startswith("unavailable: socat not installed")


# ---- cost per attempt: the harness's own figure, the price table, or unknown -------------------
def pi_reported_cost(attempt: Path) -> float:
    """What Pi itself reported in its event stream: the sum of its messages' cost.total."""
    total = 0.0
    for line in (attempt / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        message = event.get("message") or {}
        if event.get("type") == "message_end" and message.get("role") == "assistant":
            total += ((message.get("usage") or {}).get("cost") or {}).get("total") or 0.0
    return total


@pytest.mark.parametrize("case", ["harness", "table", "unknown"])
def test_pi_costs_are_its_own_figure_else_the_table_else_unknown(case, tmp_path):
    from hoh.usage import Usage
    from hoh.harness.pricing import table_cost
    p = one_loop_project(tmp_path)
    mini = mock_script(yaml.safe_load(p.script_path.read_text()), _scripted_ws(p, tmp_path))
    model = {"harness": "mock-model", "table": "gpt-4o", "unknown": "mock-model"}[case]
    price = ["--set", "harness.price={input: 2, output: 8}"] if case == "harness" else []
    with MockLLM(script=mini) as mock:
        result = run_hoh("build", p.spec, "--harness", "pi", "--model", model, "--base-url", mock.base_url,
                         "--api-key-env", "HOH_TEST_KEY", "--loops", "1", "-w", p.ws, "-q", *price)
    assert result.returncode == 0, result.stderr
    attempts = [e for e in p.journal() if e["event"] == "attempt_finished"]
    assert [a["role"] for a in attempts] == ["planner", "developer", "qa"]
    for a in attempts:
        usage = a["usage"]
        reported = pi_reported_cost(p.ws / f"state/loops/0001/roles/{a['role']}/attempt-{a['attempt']}")
        assert usage["input_tokens"] > 0 and (a["harness"], a["model"]) == ("pi", model)
        if case == "harness":  # Pi priced its own run (hoh gave it the price); its figure is recorded as is
            assert reported > 0 and a["cost_source"] == "harness" and usage["cost_usd"] == pytest.approx(reported)
            assert reported == pytest.approx((usage["input_tokens"] * 2 + usage["output_tokens"] * 8) / 1e6)
        elif case == "table":  # Pi knows no price on hoh's endpoint (it says 0): tokens × the table's price
            assert reported == 0 and a["cost_source"] == "table"
            assert usage["cost_usd"] > 0 and usage["cost_usd"] == pytest.approx(table_cost(Usage.from_json(usage),
                                                                                           "gpt-4o"))
        else:
            assert reported == 0 and a.get("cost_source") is None and usage["cost_usd"] is None
    status = json.loads(run_hoh("status", "-w", p.ws, "--json").stdout)
    costs = [a["usage"]["cost_usd"] for a in attempts]
    if case == "unknown":
        assert status["cost_usd"] is None and status["loops"][0]["cost_usd"] is None
        assert "cost ?" in run_hoh("status", "-w", p.ws).stdout
    else:  # summed per role, per loop and for the run
        assert status["cost_usd"] == pytest.approx(sum(costs))
        assert status["loops"][0]["cost_usd"] == pytest.approx(sum(costs))
        assert {r: v["cost_usd"] for r, v in status["roles"].items()} == pytest.approx(
            {a["role"]: a["usage"]["cost_usd"] for a in attempts})


def test_roles_on_different_harnesses_are_each_recorded(tmp_path):
    """The Planner on the real Pi against the mock, the Developer and QA on the scripted agent."""
    p = one_loop_project(tmp_path)
    mini = mock_script(yaml.safe_load(p.script_path.read_text()), _scripted_ws(p, tmp_path))
    with MockLLM(script=mini) as mock:
        result = run_hoh("build", p.spec, "--loops", "1", "-w", p.ws, "-q", "--set", "roles.planner.harness=pi",
                         "--set", "roles.planner.model=mock-model", "--set", f"roles.planner.base_url={mock.base_url}",
                         "--set", "roles.planner.api_key_env=HOH_TEST_KEY",
                         "--set", "roles.planner.price={input: 1, output: 4}")
        roles = {r["match"]["role"] for r in mock.requests() if r.get("match")}
    assert result.returncode == 0, result.stderr
    assert roles == {"planner"}  # only the Planner asked the model
    status = json.loads(run_hoh("status", "-w", p.ws, "--json").stdout)["roles"]
    assert {r: (v["harness"], v["model"]) for r, v in status.items()} == {
        "planner": ("pi", "mock-model"), "developer": ("scripted", None), "qa": ("scripted", None)}
    assert status["planner"]["cost_usd"] > 0 and status["developer"]["cost_usd"] is None
    assert status["planner"]["tokens"] > 0 and status["developer"]["tokens"] > 0
    homes = p.ws / "scratch" / "homes"
    assert (homes / "pi" / "planner" / ".pi").is_dir() and (homes / "scripted" / "developer").is_dir()
    assert not [f for f in files_under(p.ws) if SENTINEL.encode() in f.read_bytes()]
