"""One vocabulary for what hoh writes and reads: journal events, state files, usage, markers, plans,
subprocesses and imports each have one home, and these tests fail when a second spelling appears."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, run_hoh

from hoh.usage import Usage
from hoh.harness.process import call
from hoh.markers import fact_line, find_fact, find_role_marker, role_marker
from hoh.resources import schema_errors
from hoh.store import events as ev
from hoh.store.journal import Journal, RunHistory

PACKAGE = REPO / "hoh"


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def string_constants(path: Path) -> set[str]:
    return {node.value for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Constant)
            and isinstance(node.value, str)}


def test_only_the_journal_spells_event_kinds():
    kinds = set(ev.KINDS)
    home = {PACKAGE / "store" / "events.py", PACKAGE / "store" / "journal.py"}
    offenders = {f"{path.relative_to(REPO)}: {sorted(found)}" for path in modules() if path not in home
                 for found in [string_constants(path) & kinds] if found}
    assert not offenders, "event kinds spelt outside the journal's vocabulary: " + "; ".join(sorted(offenders))


def test_a_renamed_event_field_is_caught_on_read(tmp_path):
    journal = Journal(tmp_path / "journal.jsonl")
    journal.append(ev.LoopStarted(loop=1, base_commit="abc"))
    journal.append(ev.LoopFinished(loop=1, status="pass", candidate_id="c", verified=1, criteria=1, issues=None))
    assert RunHistory.read(journal).loops[1].status == "pass"
    lines = journal.path.read_text().splitlines()
    lines[1] = lines[1].replace('"verified"', '"verified_count"')
    journal.path.write_text("\n".join(lines) + "\n")
    with pytest.raises(Exception, match=r"line 2: event 'loop_finished' lacks the field 'verified'"):
        RunHistory.read(Journal(journal.path))
    with pytest.raises(TypeError):
        ev.LoopStarted(loop=1, base="abc")  # a writer's typo fails at once


def test_a_mistyped_event_field_is_caught_on_read(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_text(json.dumps({"v": 1, "seq": 1, "time": 1.0, "event": "attempt_started", "loop": "1",
                                "role": "qa", "attempt": 1}) + "\n")
    with pytest.raises(Exception, match="field 'loop' is str"):
        list(Journal(path).records())


def test_journal_reads_its_sequence_from_the_tail(tmp_path):
    journal = Journal(tmp_path / "journal.jsonl")
    for n in range(3):
        journal.append(ev.OrphanReaped(pid=n))
    with open(journal.path, "ab") as fh:
        fh.write(b'{"v": 1, "seq": 4, "ti')  # torn by a crash
    again = Journal(journal.path)
    assert again.append(ev.OrphanReaped(pid=9)).seq == 4
    assert [r.seq for r in again.records()] == [1, 2, 3, 4]


def test_usage_is_one_shape_and_an_unknown_cost_stays_unknown():
    a = Usage(10, 2, 5, 1, None)
    assert Usage.from_json(a.to_json()) == a
    assert (a + Usage(1, 0, 1)).cost_usd is None
    assert (a + Usage(0, 0, 0, 0, 0.25)).cost_usd == 0.25
    assert Usage.from_json({"input_tokens": None}) == Usage()
    assert Usage.sum([a, a]).total_tokens == 30


def test_prompts_and_the_mock_share_the_marker():
    from hoh.runtime.prompts import template
    text = template("qa").render(role="qa", loop=3, attempt=2, spec="S", plan_md="P", candidate_id="loop-0003-abc",
                                 candidate_dir="/c", evidence_dir="/e dir", schema="{}")
    assert text.splitlines()[0] == role_marker("qa", 3, 2)
    marker = find_role_marker(text)
    assert (marker.role, marker.loop, marker.attempt) == ("qa", 3, 2)
    assert find_fact("candidate_id", text) == "loop-0003-abc" and find_fact("evidence_dir", text) == "/e dir"
    assert fact_line("candidate_id", "x") in text.replace("loop-0003-abc", "x")
    for name in ("planner", "developer", "qa", "retry"):
        assert "hoh:role" not in (REPO / "prompts" / f"{name}.md.j2").read_text()


def test_single_task_plans_are_valid_plans():
    from hoh.runtime.loop import spec_as_plan
    assert schema_errors("plan", spec_as_plan(4).to_json()) == []


def test_only_the_choke_point_starts_processes():
    # The scripted agent is a harness program, not hoh.
    allowed = {"harness/process.py", "testing/scripted_agent.py"}
    offenders = []
    for path in modules():
        rel = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        if "subprocess" in imported and rel not in allowed:
            offenders.append(rel)
    assert not offenders


def test_a_short_call_that_hangs_is_killed_with_its_children(tmp_path):
    marker = tmp_path / "child-alive"
    script = f"(sleep 3; touch {marker}) & sleep 60"
    started = time.monotonic()
    result = call(["bash", "-c", script], timeout=0.5)
    assert result.exit_code is None and time.monotonic() - started < 10
    time.sleep(3.5)
    assert not marker.exists()


def test_the_cli_entry_imports_no_runtime_and_no_bench():
    code = ("import sys, hoh.cli.main; "
            "print(sorted(m for m in sys.modules if m.startswith(('hoh.bench', 'hoh.runtime', 'hoh.harness'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_the_bench_commands_load_rich_and_the_bench_only_when_run():
    code = "import sys, hoh.cli.bench; print(sorted(m for m in sys.modules if m.startswith(('rich', 'hoh.bench'))))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_a_corrupt_past_qa_report_is_one_line_naming_the_file(tmp_path):
    ws = tmp_path / "ws"
    demo = REPO / "examples" / "demo"
    assert run_hoh("build", demo / "spec.md", "--loops", "2", "-w", ws, "-q").returncode == 0
    qa = ws / "state" / "loops" / "0001" / "qa.json"
    qa.write_text(qa.read_text()[:40])
    result = run_hoh("resume", "-w", ws, "--loops", "1", "-q")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(qa) in lines[0] and "Traceback" not in result.stderr
    assert os.path.getsize(qa) == 40  # nothing was overwritten


def test_the_recorder_has_no_command_line_of_its_own():
    # It drives every CLI through registry.create(...).run(...): the argv is the adapter's.
    constants = string_constants(PACKAGE / "testing" / "mock_llm" / "record.py")
    assert not constants & {"exec", "--json", "run", "--format", "-p", "--mode", "--skip-git-repo-check"}


def test_a_build_checks_its_harness_once(tmp_path, monkeypatch):
    from conftest import Project, mini_script

    from hoh.harness.scripted import ScriptedAdapter
    calls = []
    monkeypatch.setattr(ScriptedAdapter, "check_available", lambda self: calls.append(1))
    project = Project(tmp_path, mini_script(1))
    assert project.build(1).status == "finished"
    assert len(calls) == 1


# The house's floors, bottom first: a module may import its own floor's package and anything below it, never
# above. The ground floor's single modules (config, paths, usage, ...) may import each other.
FLOORS = [
    {"hoh", "errors", "config", "fsutil", "paths", "plans", "markers", "resources", "usage", "records", "statuses"},
    {"evidence", "harness"},
    {"testing"},
    {"store"},
    {"runtime"},
    {"api"},
    {"taskrun"},
    {"harbor"},
    {"bench"},
    {"report"},
    {"cli"},
    {"__main__"},
]
FLOOR = {unit: n for n, units in enumerate(FLOORS) for unit in units}


def imported_units(rel: str, source: str) -> set[str]:
    """The top-level hoh units (`store`, `config`, ...) one module imports, lazy and TYPE_CHECKING ones included."""
    me = ["hoh", *Path(rel).with_suffix("").parts]
    package = me if rel.endswith("__init__.py") else me[:-1]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                names = [".".join(base + [node.module])] if node.module else [".".join(base + [a.name]) for a in node.names]
            else:
                names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found |= {(name.split(".") + ["hoh"])[1] for name in names if name.split(".")[0] == "hoh"}
    return {unit for unit in found if unit != "__version__"}


def layer_violations(sources: dict[str, str]) -> list[str]:
    """Every import that points up (or sideways between two packages of one floor)."""
    bad = []
    for rel, source in sources.items():
        me = Path(rel).parts[0].removesuffix(".py")
        for unit in imported_units(rel, source) - {me}:
            if unit not in FLOOR or me not in FLOOR:
                bad.append(f"{rel}: {unit!r} or {me!r} has no floor in FLOORS")
            elif FLOOR[unit] > FLOOR[me] or (FLOOR[unit] == FLOOR[me] and FLOOR[me] != 0):
                bad.append(f"{rel} imports hoh.{unit}")
    return bad


def test_imports_point_down_the_floors_only():
    sources = {path.relative_to(PACKAGE).as_posix(): path.read_text() for path in modules()}
    assert layer_violations(sources) == []


def test_a_store_module_importing_the_engine_is_caught():
    planted = {"store/x.py": "def f():\n    from ..runtime.loop import Runtime\n",
               "evidence/y.py": "from hoh.harness import registry\n",
               "store/z.py": "from .journal import Journal\nfrom ..usage import Usage\n"}
    assert layer_violations(planted) == ["store/x.py imports hoh.runtime", "evidence/y.py imports hoh.harness"]
