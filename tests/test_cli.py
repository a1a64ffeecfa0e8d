"""The command line as a user meets it: help, the demo end to end, and every bad input."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DEMO, REPO, run_hoh

from hoh.resources import schema_errors


@pytest.mark.parametrize("command", ["", "build", "resume", "stop", "status", "show", "report"])
def test_help(command):
    result = run_hoh(*([command] if command else []), "--help")
    assert result.returncode == 0
    if not command:
        for name in ("build", "resume", "stop", "status", "show", "report"):
            assert name in result.stdout


def test_demo_builds_three_loops_with_valid_state(tmp_path):
    ws = tmp_path / "ws"
    result = run_hoh("build", DEMO / "spec.md", "--harness", "scripted", "--loops", "3", "-w", ws)
    assert result.returncode == 0, result.stderr
    tags = subprocess.run(["git", "-C", ws / "project", "tag", "--list"], capture_output=True, text=True).stdout
    assert tags.split() == ["loop-0001", "loop-0002", "loop-0003"]
    assert not (ws / "project" / ".git" / "refs" / "tags" / "loop-0003").exists()  # packed, not a file per loop
    for t in (1, 2, 3):
        loop_dir = ws / "state" / "loops" / f"{t:04d}"
        for name, schema in (("plan", "plan"), ("developer", "developer"), ("candidate", "candidate"), ("qa", "qa")):
            assert schema_errors(schema, json.loads((loop_dir / f"{name}.json").read_text())) == [], (t, name)
    assert schema_errors("ledger", json.loads((ws / "state" / "ledger.json").read_text())) == []

    status = json.loads(run_hoh("status", "-w", ws, "--json").stdout)
    assert status["state"] == "finished" and status["loops_finished"] == 3
    assert [loop["status"] for loop in status["loops"]] == ["pass", "partial", "partial"]
    assert status["usage"]["input_tokens"] > 0
    human = run_hoh("status", "-w", ws)
    assert human.returncode == 0 and "loop-0003-" in human.stdout

    # The demo's fourth loop closes the reopened issue: a multi-day run continued.
    assert run_hoh("resume", "-w", ws, "--loops", "1", "-q").returncode == 0
    shown = run_hoh("show", "I-0001", "-w", ws)
    assert shown.returncode == 0 and "regressions 1" in shown.stdout
    ledger = json.loads((ws / "state" / "ledger.json").read_text())
    history = [h["status"] for h in ledger["issues"][0]["history"]]
    assert history == ["open", "closed", "reopened", "closed"]


def _fails_cleanly(result, *needles: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hoh: "), result.stderr
    for needle in needles:
        assert needle in lines[0]


def _nothing_created(parent: Path, ws: Path) -> None:
    assert not ws.exists()
    assert not [p for p in parent.iterdir() if ".init-" in p.name]


def test_missing_and_empty_spec(tmp_path):
    ws = tmp_path / "ws"
    _fails_cleanly(run_hoh("build", tmp_path / "nope.md", "-w", ws), "not found")
    (tmp_path / "empty.md").write_text("  \n")
    _fails_cleanly(run_hoh("build", tmp_path / "empty.md", "-w", ws), "is empty")
    _nothing_created(tmp_path, ws)


def test_unknown_harness_lists_the_choices(tmp_path):
    ws = tmp_path / "ws"
    _fails_cleanly(run_hoh("build", DEMO / "spec.md", "--harness", "nope", "-w", ws), "unknown harness 'nope'", "scripted")
    _nothing_created(tmp_path, ws)


def test_invalid_config_names_the_key(tmp_path):
    ws = tmp_path / "ws"
    bad = tmp_path / "hoh.yaml"
    bad.write_text("policy:\n  max_retries: lots\n")
    _fails_cleanly(run_hoh("build", DEMO / "spec.md", "--config", bad, "-w", ws), "policy.max_retries")
    bad.write_text("polcy: {}\n")
    _fails_cleanly(run_hoh("build", DEMO / "spec.md", "--config", bad, "-w", ws), "polcy")
    _fails_cleanly(run_hoh("build", DEMO / "spec.md", "--set", "loops", "-w", ws), "KEY=VALUE")
    _fails_cleanly(run_hoh("build", DEMO / "spec.md", "--set", "timeouts.idle_seconds=-1", "-w", ws),
                   "timeouts.idle_seconds")
    _nothing_created(tmp_path, ws)


def test_invalid_config_inside_a_workspace_stops_resume(tmp_path):
    ws = tmp_path / "ws"
    assert run_hoh("build", DEMO / "spec.md", "--loops", "1", "-w", ws, "-q").returncode == 0
    config = ws / "hoh.yaml"
    config.write_text(config.read_text().replace("max_retries: 2", "max_retries: many"))
    before = (ws / "state" / "journal.jsonl").read_bytes()
    _fails_cleanly(run_hoh("resume", "-w", ws, "--loops", "1"), "hoh.yaml", "policy.max_retries")
    assert (ws / "state" / "journal.jsonl").read_bytes() == before


def test_workspace_of_another_spec_is_refused_unless_forced(tmp_path):
    ws = tmp_path / "ws"
    assert run_hoh("build", DEMO / "spec.md", "--loops", "1", "-w", ws, "-q").returncode == 0
    _fails_cleanly(run_hoh("build", DEMO / "spec.md", "-w", ws), "hoh resume")
    other = tmp_path / "other"
    other.mkdir()
    (other / "spec.md").write_text((DEMO / "spec.md").read_text() + "\nAlso support `%` as modulo.\n")
    (other / "script.yaml").write_text((DEMO / "script.yaml").read_text())
    journal = (ws / "state" / "journal.jsonl").read_bytes()
    _fails_cleanly(run_hoh("build", other / "spec.md", "-w", ws), "different spec", "--force")
    assert (ws / "state" / "journal.jsonl").read_bytes() == journal
    forced = run_hoh("build", other / "spec.md", "--loops", "1", "-w", ws, "--force", "-q")
    assert forced.returncode == 0, forced.stderr
    assert (ws / "spec.md").read_text().endswith("modulo.\n")
    assert (tmp_path / "ws.replaced-1" / "state" / "journal.jsonl").read_bytes() == journal


def test_non_empty_directory_that_is_not_a_workspace(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "precious.txt").write_text("mine")
    _fails_cleanly(run_hoh("build", DEMO / "spec.md", "-w", ws), "not a hoh workspace")
    assert sorted(p.name for p in ws.iterdir()) == ["precious.txt"]


def test_unwritable_workspace(tmp_path):
    _fails_cleanly(run_hoh("build", DEMO / "spec.md", "-w", "/proc/hoh-ws"), "not writable")
    blocker = tmp_path / "file"
    blocker.write_text("")
    _fails_cleanly(run_hoh("build", DEMO / "spec.md", "-w", blocker / "ws"), "not writable")


def test_resume_status_show_of_a_non_workspace(tmp_path):
    for args in (("resume",), ("status",), ("show", "I-0001")):
        _fails_cleanly(run_hoh(*args, "-w", tmp_path), "not a hoh workspace")
    assert list(tmp_path.iterdir()) == []


def test_scripted_harness_without_a_script(tmp_path):
    (tmp_path / "spec.md").write_text("# Thing\n")
    _fails_cleanly(run_hoh("build", tmp_path / "spec.md", "-w", tmp_path / "ws"), "needs a script")


def test_changed_frozen_spec_stops_resume(tmp_path):
    ws = tmp_path / "ws"
    assert run_hoh("build", DEMO / "spec.md", "--loops", "1", "-w", ws, "-q").returncode == 0
    (ws / "spec.md").write_text("# something else\n")
    _fails_cleanly(run_hoh("resume", "-w", ws), "frozen spec was changed")


def test_unknown_ledger_id(tmp_path):
    ws = tmp_path / "ws"
    assert run_hoh("build", DEMO / "spec.md", "--loops", "1", "-w", ws, "-q").returncode == 0
    _fails_cleanly(run_hoh("show", "I-0999", "-w", ws), "no issue or behaviour 'I-0999'")


def test_version_and_short_help():
    from importlib.metadata import version
    shown = run_hoh("--version")
    assert shown.returncode == 0 and shown.stdout.strip() == f"hoh {version('hoh')}"
    for argv in (("-h",), ("status", "-h"), ("bench", "-h"), ("replay", "-h")):
        result = run_hoh(*argv)
        assert result.returncode == 0 and result.stdout.startswith("Usage: "), (argv, result.stdout, result.stderr)


ALL_COMMANDS = ["build", "resume", "stop", "status", "show", "report", "replay", "doctor", "mock-llm",
                "bench run", "bench check", "bench report", "bench list"]


@pytest.mark.parametrize("command", ALL_COMMANDS)
def test_help_names_every_value_by_what_it_is(command):
    """No Python type as a metavar (`<path>`, `<list[str]>`, `<int range>`) and no `{spec}`."""
    import re
    result = run_hoh(*command.split(), "--help")
    assert result.returncode == 0, result.stderr
    assert not re.search(r"<[a-z][^>]*>|\{[A-Za-z-]+\}", result.stdout), result.stdout
    assert "--set KEY=VALUE" in result.stdout or "--set" not in result.stdout


def test_build_help_shows_the_defaults_of_harness_and_loops():
    from hoh.cli.main import DEFAULT_LOOPS
    from hoh.config import HohConfig
    assert DEFAULT_LOOPS == HohConfig().loops
    shown = " ".join(run_hoh("build", "--help").stdout.split())
    assert "Usage: hoh build [OPTIONS] SPEC" in shown
    assert "required unless --config names one (`hoh doctor` lists them). [default: (none)]" in shown
    assert f"[default: ({DEFAULT_LOOPS}, or the --config's loops)]" in shown
    assert "[default: hoh-work]" in shown and "--progress [auto|live|lines|json|none]" in shown and "--json" in shown


def test_exit_codes_in_help_are_exactly_the_codes_hoh_exits_with():
    """The epilog's table against what the code raises: run statuses, hoh's errors, usage errors (2),
    a failed check (1) and a second Ctrl-C (130)."""
    import re

    from hoh import errors
    from hoh.statuses import RunStatus
    text = run_hoh("--help").stdout
    listed = {int(code) for code in re.findall(r"^\s+(\d+)\s{2,}", text.split("Exit codes:")[1], re.M)}
    classes = [errors.HohError, *errors.HohError.__subclasses__()]
    while len(classes) != len(set(classes)) or any(set(c.__subclasses__()) - set(classes) for c in classes):
        classes = list({*classes, *(s for c in classes for s in c.__subclasses__())})
    used = {s.exit_code for s in RunStatus} | {c.exit_code for c in classes if hasattr(c, "exit_code")} | {2, 130}
    assert listed == used == {0, 1, 2, 3, 4, 5, 130}
    for status in RunStatus:
        if status.exit_code not in (0, 1):
            assert re.search(rf"^\s+{status.exit_code}\s+{status.value}", text, re.M), status


def test_shell_completion_is_on():
    import os
    import subprocess
    import sys
    shown = run_hoh("--show-completion", "bash")
    assert shown.returncode == 0 and "_HOH_COMPLETE" in shown.stdout.upper()
    env = {**os.environ, "_HOH_COMPLETE": "complete_bash", "COMP_WORDS": "hoh build --prog", "COMP_CWORD": "2"}
    completed = subprocess.run([sys.executable, "-c", "from hoh.cli.main import app; app(prog_name='hoh')"],
                               env=env, capture_output=True, text=True, timeout=60)
    assert completed.stdout.split() == ["--progress"], completed.stderr


def test_the_workspace_is_found_from_the_current_directory(tmp_path):
    ws = tmp_path / "hoh-work"
    built = run_hoh("build", DEMO / "spec.md", "--loops", "1", "-q", cwd=tmp_path)  # build's default: ./hoh-work
    assert built.returncode == 0, built.stderr
    for cwd in (tmp_path, ws, ws / "project", ws / "state" / "loops"):
        status = run_hoh("status", "--json", cwd=cwd)
        assert status.returncode == 0 and json.loads(status.stdout)["workspace"] == str(ws.resolve()), (cwd, status)
    shown = run_hoh("show", "I-0001", "--json", cwd=ws / "project")
    assert shown.returncode == 0 and json.loads(shown.stdout)["id"] == "I-0001"
    assert run_hoh("show", "I-0001", cwd=ws).stdout.startswith("I-0001 ")
    planted = ws / "project" / "app"  # the Developer may write anything under project/, a workspace too
    (planted / "state").mkdir(parents=True)
    (planted / "state" / "workspace.json").write_text("{}")
    (planted / "hoh.yaml").write_text("hooks:\n  on_loop_end: touch /tmp/pwned\n")
    _fails_cleanly(run_hoh("resume", cwd=planted), f"{planted} looks like a workspace but is inside the workspace "
                   f"{ws.resolve()}", "-w DIR")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for args in (("status",), ("resume",), ("show", "I-0001"), ("report",), ("stop",), ("replay",)):
        _fails_cleanly(run_hoh(*args, cwd=elsewhere), "no hoh workspace here", "give one with -w DIR")


def test_verbose_logs_to_stderr_quiet_silences_and_a_bad_log_file_is_one_line(tmp_path):
    ws = tmp_path / "ws"
    loud = run_hoh("-v", "build", DEMO / "spec.md", "--harness", "scripted", "--loops", "1", "-w", ws,
                   "--progress", "none")
    assert loud.returncode == 0, loud.stderr
    assert "hoh: loop 1/1 · qa · attempt 1 · started" in loud.stderr and "hoh: loop 1 finished: pass" in loud.stderr
    quiet = run_hoh("-q", "resume", "-w", ws, "--loops", "1")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    _fails_cleanly(run_hoh("--log-file", tmp_path / "no" / "such" / "dir.log", "status", "-w", ws),
                   "cannot write the log file")


def test_the_log_keeps_the_command_line_but_not_an_agent_variables_value(tmp_path):
    from hoh.cli.main import _loggable
    assert _loggable(["bench", "run", "s", "--ae", "KEY=hunter2", "--ae=K2=x", "--ae", "NAME", "--set", "a=b"]) == \
        ["bench", "run", "s", "--ae", "KEY=…", "--ae=K2=…", "--ae", "NAME", "--set", "a=b"]
    log = tmp_path / "hoh.log"
    assert run_hoh("--log-file", log, "status", "-w", tmp_path).returncode == 2
    assert f"hoh --log-file {log} status -w {tmp_path}" in log.read_text()


def test_show_prints_an_agents_markup_as_text(demo_ws, tmp_path):
    """A title, evidence or note is an agent's text: rich markup in it (an unbalanced closing tag would
    make rich raise) is printed as written."""
    import shutil

    ws = tmp_path / "ws"
    shutil.copytree(demo_ws, ws, symlinks=True)
    ledger_path = ws / "state" / "ledger.json"
    ledger = json.loads(ledger_path.read_text())
    issue = ledger["issues"][0]
    issue["title"] = "crash [/bold] on [red]input[/red]"
    issue["history"][0]["notes"] = "see [/] here"
    ledger_path.write_text(json.dumps(ledger))
    shown = run_hoh("show", issue["id"], "-w", ws)
    assert shown.returncode == 0, shown.stderr
    assert "crash [/bold] on [red]input[/red]" in shown.stdout and "see [/] here" in shown.stdout


def test_a_sigint_ends_hoh_even_where_it_started_with_sigint_ignored():
    """A shell starts a background job with SIGINT ignored; `kill -INT` must still end hoh as Ctrl-C does
    (`hoh bench` then stops its Harbor runs, which are sessions of their own)."""
    child = subprocess.Popen([sys.executable, "-c",
                              "import signal, sys, time\n"
                              "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                              "from hoh.cli.signals import stop_on_signals\n"
                              "stop_on_signals()\n"
                              "try:\n    print('up', flush=True)\n    time.sleep(60)\n"
                              "except KeyboardInterrupt:\n    sys.exit(130)\n"],
                             stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert child.stdout.readline().strip() == "up"
    child.send_signal(signal.SIGINT)
    assert child.wait(timeout=20) == 130
