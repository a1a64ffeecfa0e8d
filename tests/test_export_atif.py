"""`hoh export atif`: every role attempt as an ATIF trajectory that Harbor's own model classes accept (issue 25,
must show #2: a real-CLI run, each of the four CLIs, built against hoh's mock model), the scripted demo too;
bad input is one line, exit 2, and nothing written."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from conftest import DEMO, run_hoh

from hoh import api
from hoh.config import HohConfig
from hoh.testing.demo_mock import mock_script
from hoh.testing.mock_llm import MockLLM

HARNESSES = ["codex", "opencode", "pi", "claude"]
MODEL = {"codex": "gpt-5.5", "opencode": "mock-model", "pi": "mock-model", "claude": "claude-sonnet-4-5"}

VALIDATE = """
import json, sys, pathlib
from harbor.models.trajectories import Trajectory
report = {}
for path in sorted(pathlib.Path(sys.argv[1]).glob("loop-*.json")):
    try:
        t = Trajectory.model_validate_json(path.read_text(encoding="utf-8"))
        report[path.name] = {"ok": True, "steps": len(t.steps), "sources": [s.source for s in t.steps]}
    except Exception as err:
        report[path.name] = {"ok": False, "error": str(err)[:2000]}
from harbor.models.trial.result import TrialResult
for trial in sorted(pathlib.Path(sys.argv[1]).glob("harbor-jobs/*/*")):
    try:
        result = TrialResult.model_validate_json((trial / "result.json").read_text(encoding="utf-8"))
        Trajectory.model_validate_json((trial / "agent" / "trajectory.json").read_text(encoding="utf-8"))
        report[f"trial {trial.name}"] = {"ok": True, "task": result.task_name, "agent": result.agent_info.name,
                                         "input_tokens": result.agent_result.n_input_tokens}
    except Exception as err:
        report[f"trial {trial.name}"] = {"ok": False, "error": str(err)[:2000]}
print(json.dumps(report))
"""


def find_harbor_python() -> Path | None:
    harbor = os.environ.get("HOH_HARBOR")
    python = Path(harbor).parent / "python" if harbor else None
    return python if python is not None and python.exists() else None


@pytest.fixture(scope="session")
def harbor_python() -> Path:
    """The python of Harbor's own venv ($HOH_HARBOR names its `harbor`); Harbor needs Python >= 3.12, hoh's
    core does not, so the check runs there."""
    found = find_harbor_python()
    if found is None:
        if os.environ.get("HOH_REQUIRE_HARBOR"):
            pytest.fail("Harbor is required (HOH_REQUIRE_HARBOR) but $HOH_HARBOR names no harbor executable")
        pytest.skip("Harbor not installed: set HOH_HARBOR to its harbor executable")
    return found


def harbor_accepts(python: Path, out: Path) -> dict[str, dict]:
    """Every exported file validated by `harbor.models.trajectories.Trajectory`; fails naming the ones refused."""
    proc = subprocess.run([str(python), "-c", VALIDATE, str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    index = json.loads((out / "index.json").read_text())
    files = [item["file"] for item in index["trajectories"]]
    assert sorted(report) == sorted(files + [f"trial {name.removesuffix('.json')}" for name in files])
    for name in files:  # Harbor's jobs layout holds the same trajectory, a hard link to the flat file
        (trial,) = out.glob(f"harbor-jobs/*/{name.removesuffix('.json')}")
        assert (trial / "agent" / "trajectory.json").read_bytes() == (out / name).read_bytes()
    refused = {name: r["error"] for name, r in report.items() if not r["ok"]}
    assert not refused, refused
    return report


def export(ws: Path, out: Path) -> subprocess.CompletedProcess:
    return run_hoh("export", "atif", "-w", ws, "-o", out)


def load(out: Path, name: str) -> dict:
    return json.loads((out / name).read_text(encoding="utf-8"))


def tool_steps(doc: dict) -> list[tuple[str, dict, str]]:
    """(tool, arguments, output) of every call in a trajectory."""
    found = []
    for step in doc["steps"]:
        results = {r.get("source_call_id"): r["content"] for r in (step.get("observation") or {}).get("results", [])}
        for call in step.get("tool_calls") or []:
            found.append((call["function_name"], call["arguments"], results.get(call["tool_call_id"])))
    return found


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    ws = tmp_path_factory.mktemp("atif") / "ws"
    assert run_hoh("build", DEMO / "spec.md", "--loops", "2", "-w", ws, "-q").returncode == 0
    return ws


def test_the_scripted_demo_exports_one_trajectory_per_attempt_that_harbor_accepts(demo, tmp_path, harbor_python):
    out = tmp_path / "atif"
    result = export(demo, out)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (f"exported 6 trajectories to {out} (index.json lists them in run order; "
                                     f"Harbor's viewer: harbor view {out / 'harbor-jobs'} --jobs)")
    index = json.loads((out / "index.json").read_text())
    assert [(i["loop"], i["role"], i["attempt"]) for i in index["trajectories"]] == [
        (loop, role, 1) for loop in (1, 2) for role in ("planner", "developer", "qa")]
    assert sorted(p.name for p in out.iterdir()) == sorted(["harbor-jobs", "index.json"] +
                                                          [i["file"] for i in index["trajectories"]])
    report = harbor_accepts(harbor_python, out)
    assert report["loop-0001-developer-attempt-1.json"]["sources"] == ["user", "agent", "agent", "agent"]
    doc = load(out, "loop-0001-developer-attempt-1.json")
    attempt = demo / "state" / "loops" / "0001" / "roles" / "developer" / "attempt-1"
    recorded = json.loads((attempt / "result.json").read_text())["harness"]
    assert doc["steps"][0]["message"] == (attempt / "prompt.md").read_text()
    assert tool_steps(doc) == [("write", {"path": str(demo / "project" / "calc.py")}, "ok"),
                               ("run", {"command": "python3 calc.py 2 + 3 && python3 calc.py 7 - 10"}, "exit code 0")]
    assert doc["steps"][-1]["message"] == recorded["final_message"]
    assert doc["final_metrics"]["total_prompt_tokens"] == recorded["usage"]["input_tokens"]
    assert doc["final_metrics"]["total_completion_tokens"] == recorded["usage"]["output_tokens"]
    assert doc["agent"]["name"] == "hoh/scripted" and doc["session_id"] == "scripted-1-developer-1"
    assert doc["extra"]["hoh"]["outcome"] == "ok"


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The scripted demo's first loop, and the mock script that replays it through a real CLI."""
    ws = tmp_path_factory.mktemp("reference") / "ws"
    assert api.build(DEMO / "spec.md", ws, HohConfig(loops=1, harness={"name": "scripted"})).status == "finished"
    return mock_script(yaml.safe_load((DEMO / "script.yaml").read_text()), ws)


@pytest.mark.parametrize("name", HARNESSES)
def test_a_real_cli_run_exports_trajectories_harbor_accepts(name, reference, harness_bin, harbor_python, tmp_path,
                                                            monkeypatch):
    # resolved: the jail binds the real directory, not the worktree's symlink to it
    monkeypatch.setenv("PATH", f"{harness_bin.resolve()}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HOH_TEST_KEY", "sk-hoh-atif-test")
    ws, out = tmp_path / "ws", tmp_path / "atif"
    with MockLLM(script=reference) as mock:
        built = run_hoh("build", DEMO / "spec.md", "--harness", name, "--model", MODEL[name], "--base-url",
                        mock.base_url, "--api-key-env", "HOH_TEST_KEY", "--loops", "1", "-w", ws, "-q", timeout=300)
    assert built.returncode == 0, built.stderr
    result = export(ws, out)
    assert result.returncode == 0, result.stderr
    report = harbor_accepts(harbor_python, out)
    assert sorted(name for name in report if name.startswith("loop-")) == [
        f"loop-0001-{role}-attempt-1.json" for role in ("developer", "planner", "qa")]
    assert report["trial loop-0001-developer-attempt-1"]["agent"] == f"hoh/{name}"
    doc = load(out, "loop-0001-developer-attempt-1.json")
    assert doc["agent"]["name"] == f"hoh/{name}" and doc["agent"]["model_name"] == MODEL[name]
    assert doc["steps"][0]["source"] == "user" and doc["steps"][0]["message"].startswith(
        "<!-- hoh:role=developer loop=1 attempt=1 -->")
    calls = tool_steps(doc)
    # The Developer writes calc.py through the CLI's own tools and runs it: the inputs and outputs are there.
    assert any("calc.py" in json.dumps(args) for _tool, args, _out in calls), calls
    runs = [(args, output) for _tool, args, output in calls if "python3 calc.py 2 + 3" in json.dumps(args)]
    assert runs and all(output is not None for _args, output in runs), calls
    assert "5\n-3" in runs[-1][1] or name == "pi" and "5" in runs[-1][1], runs
    final = json.loads(doc["extra"]["hoh"]["final_message"])
    assert doc["steps"][-1]["source"] == "agent" and json.loads(doc["steps"][-1]["message"]) == final
    assert final["loop"] == 1 and doc["final_metrics"]["total_prompt_tokens"] > 0
    recorded = json.loads((ws / "state" / "loops" / "0001" / "roles" / "developer" / "attempt-1" /
                           "result.json").read_text())["harness"]
    assert doc["final_metrics"]["total_cost_usd"] == recorded["usage"]["cost_usd"]
    assert doc["session_id"] == recorded["session_id"]


def test_a_live_a_rejected_and_a_hostile_attempt_still_export_what_harbor_accepts(demo, tmp_path, harbor_python):
    ws = tmp_path / "ws"
    shutil.copytree(demo, ws, symlinks=True)
    roles = ws / "state" / "loops" / "0002" / "roles"
    (roles / "qa" / "attempt-1" / "result.json").unlink()  # still running
    first = roles / "developer" / "attempt-1"
    result = json.loads((first / "result.json").read_text())
    (first / "result.json").write_text(json.dumps({**result, "ok": False, "errors": ["tasks: T9 is not in the plan"]}))
    shutil.copytree(first, roles / "developer" / "attempt-2")
    hostile = roles / "developer" / "attempt-2" / "events.jsonl"
    hostile.write_bytes(b"\x00\xff binary\n[1]\n" + json.dumps({"type": "tool", "name": ["x"], "exit_code": "2"}).encode()
                        + b"\n" + json.dumps({"type": "message", "text": "\ud800 " + "B" * 100_000}).encode() + b"\n{\"cut")
    planner = roles / "planner" / "attempt-1"  # a claude attempt: thinking, a call, its result, a stray result
    (planner / "inputs.json").write_text(json.dumps({"harness": "claude", "model": "claude-sonnet-4-5"}))
    events = [{"type": "assistant", "timestamp": "2026-12-01T10:00:00.000Z", "message": {"content": [
                  {"type": "thinking", "thinking": "look first"}, {"type": "text", "text": "I will list the files"},
                  {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]}},
              {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "calc.py"}]}},
              {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t9", "content": "stray"}]}},
              {"type": "assistant", "message": {"content": [{"type": "text", "text": "{}"}]}}]
    (planner / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    out = tmp_path / "atif"
    assert export(ws, out).returncode == 0
    report = harbor_accepts(harbor_python, out)
    assert report["loop-0002-developer-attempt-1.json"]["sources"][-1] == "system"  # the re-ask
    steps = load(out, "loop-0002-planner-attempt-1.json")["steps"]
    assert [s["source"] for s in steps] == ["user", "agent", "system", "agent"]
    assert steps[1]["reasoning_content"] == "look first" and steps[1]["message"] == "I will list the files"
    assert steps[1]["timestamp"] == "2026-12-01T10:00:00.000Z"
    assert steps[1]["tool_calls"] == [{"tool_call_id": "t1", "function_name": "Bash", "arguments": {"command": "ls"}}]
    assert steps[1]["observation"] == {"results": [{"content": "calc.py", "source_call_id": "t1"}]}
    assert steps[2]["observation"] == {"results": [{"content": "stray"}]}  # its call is not in that step
    reask = load(out, "loop-0002-developer-attempt-1.json")["steps"][-1]["message"]
    assert reask == "hoh rejected this reply (hoh re-asked in attempt 2):\n- tasks: T9 is not in the plan"
    live = load(out, "loop-0002-qa-attempt-1.json")
    assert live["extra"]["hoh"]["live"] is True and live["extra"]["hoh"]["outcome"] is None
    bad = load(out, "loop-0002-developer-attempt-2.json")
    texts = [s["message"] for s in bad["steps"]]
    assert any(t.startswith("error: line 1 is not JSON") for t in texts)
    assert any("cut by hoh" in t for t in texts) and any(t.startswith("? BBB") for t in texts)


def test_an_interrupted_attempt_is_exported_under_its_own_name(demo, tmp_path, harbor_python):
    ws = tmp_path / "ws"
    shutil.copytree(demo, ws, symlinks=True)
    roles = ws / "state" / "loops" / "0001" / "roles"
    shutil.copytree(roles / "qa", roles / "qa.interrupted-1")
    out = tmp_path / "atif"
    assert export(ws, out).returncode == 0
    index = json.loads((out / "index.json").read_text())["trajectories"]
    assert [i["file"] for i in index][2:4] == ["loop-0001-qa-interrupted-1-attempt-1.json",
                                               "loop-0001-qa-attempt-1.json"]
    assert index[2]["interrupted"] and not index[3]["interrupted"]
    harbor_accepts(harbor_python, out)


def test_bad_input_is_one_line_exit_2_and_writes_nothing(demo, tmp_path):
    def refused(ws: Path, out: Path, message: str) -> None:
        before = sorted(p.name for p in out.parent.iterdir()) if out.parent.exists() else None
        result = export(ws, out)
        assert result.returncode == 2 and result.stdout == "", result
        assert result.stderr.strip().splitlines() == [f"hoh: {message}"], result.stderr
        after = sorted(p.name for p in out.parent.iterdir()) if out.parent.exists() else None
        assert before == after  # no half-written directory, no temporary one left

    out = tmp_path / "atif"
    refused(tmp_path / "nowhere", out, f"{tmp_path / 'nowhere'} is not a hoh workspace (no state/workspace.json)")
    (tmp_path / "file").write_text("x")
    refused(demo, tmp_path / "file", f"{tmp_path / 'file'} is a file; -o names a directory to write the trajectories into")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("keep")
    refused(demo, foreign, f"{foreign} is not empty and is not an earlier hoh export (no index.json); choose an empty "
                           "or new directory")
    assert (foreign / "mine.txt").read_text() == "keep"
    refused(demo, demo / "exported", f"{demo / 'exported'} is inside the workspace; hoh export never writes the "
                                     "workspace: choose another -o")
    empty = tmp_path / "empty-ws"
    shutil.copytree(demo, empty, symlinks=True, ignore=shutil.ignore_patterns("loops"))
    refused(empty, out, f"nothing to export: {empty} has no role attempt yet")


def test_an_earlier_export_is_replaced_whole(demo, tmp_path):
    out = tmp_path / "atif"
    assert export(demo, out).returncode == 0
    (out / "loop-0009-qa-attempt-1.json").write_text("{}")  # from an export of a longer run
    assert export(demo, out).returncode == 0
    assert not (out / "loop-0009-qa-attempt-1.json").exists() and len(list(out.glob("loop-*.json"))) == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["atif"]  # nothing left beside it
    assert run_hoh("export", "atif", "--help").returncode == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_harbor_s_own_viewer_lists_the_attempts_and_serves_their_trajectories(demo, tmp_path, harbor_python):
    out = tmp_path / "atif"
    assert export(demo, out).returncode == 0
    port = free_port()
    viewer = subprocess.Popen([str(harbor_python.parent / "harbor"), "view", str(out / "harbor-jobs"), "--jobs",
                               "--port", str(port), "--no-build"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}/api/jobs"
        local = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy for localhost
        deadline = time.monotonic() + 60
        while True:
            try:
                jobs = json.loads(local.open(base, timeout=5).read())
                break
            except OSError:
                assert time.monotonic() < deadline and viewer.poll() is None, "harbor view did not start"
                time.sleep(0.5)
        assert [job["name"] for job in jobs["items"]] == ["hoh-ws"]
        trials = json.loads(local.open(f"{base}/hoh-ws/trials", timeout=10).read())["items"]
        assert sorted(t["name"] for t in trials) == sorted(p.stem for p in out.glob("loop-*.json"))
        developer = next(t for t in trials if t["name"] == "loop-0001-developer-attempt-1")
        assert (developer["task_name"], developer["agent_name"]) == ("loop-0001", "hoh/scripted")
        assert developer["input_tokens"] == load(out, "loop-0001-developer-attempt-1.json")["final_metrics"][
            "total_prompt_tokens"]
        served = json.loads(local.open(
            f"{base}/hoh-ws/trials/loop-0001-developer-attempt-1/trajectory", timeout=10).read())
        assert served == load(out, "loop-0001-developer-attempt-1.json")
    finally:
        os.killpg(viewer.pid, signal.SIGTERM)
        viewer.wait(timeout=30)
