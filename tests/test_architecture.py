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

from hoh.harness.process import call
from hoh.markers import fact_line, find_fact, find_role_marker, role_marker
from hoh.resources import schema_errors
from hoh.store import events as ev
from hoh.store.journal import Journal, RunHistory
from hoh.usage import Usage

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
                                 candidate_dir="/c", evidence_dir="/e dir", schema="{}",
                                 replay=None, checks_rejected=[])
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
    # The scripted agent is a harness program, not hoh; inside.py and serve.py run in a role's environment, never here.
    allowed = {"harness/process.py", "testing/scripted_agent.py", "envs/inside.py", "envs/serve.py"}
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
    result = call(["bash", "-c", script], env={"PATH": os.defpath}, timeout=0.5)
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
    # It drives every CLI through registry.create(...) and envs.attempt.run_attempt: the argv is the adapter's.
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
    {"hoh", "errors", "config", "fsutil", "paths", "plans", "markers", "resources", "usage", "records", "summary",
     "statuses", "terminal"},
    {"evidence", "harness"},
    {"store"},
    {"transcript"},
    {"envs"},
    {"testing"},
    {"runtime"},
    {"api"},
    {"harbor"},
    {"bench"},
    {"report"},
    {"view"},
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


# ---- one status vocabulary (hoh/statuses.py) ---------------------------------------------------------------
# A run or loop status is spelt only in statuses.py; everywhere else it is a member (`RunStatus.FINISHED`), so a
# renamed or misspelt status fails at import, not silently in a comparison. The rule is about the places a status
# string decides something: an operand of a comparison (also inside a tuple/list/set operand), the value given to a
# name, attribute, keyword or dict key called `status`, `state` or `verdict` (also through a tuple assignment), and
# a field's default. Two status words are left out because they are other vocabularies' words too: "error" (the
# message field of every report and event) and "failed" (a QA check result and a step's status). testing/ is
# exempt: its fakes speak for the agents (they write role outputs as JSON, as any harness would).
STATUS_TARGETS = {"status", "state", "verdict"}
SHARED_WORDS = {"error", "failed"}


def _status_words() -> set[str]:
    from hoh.statuses import LoopStatus, RunStatus, Verdict
    return {s.value for enum in (RunStatus, LoopStatus, Verdict) for s in enum} - SHARED_WORDS


def _target_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _constants(node: ast.AST | None) -> list[ast.Constant]:
    """The string constant `node` is, or the ones a tuple/list/set literal holds."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [c for element in node.elts for c in _constants(element)]
    return []


def status_literals(rel: str, source: str, words: set[str]) -> list[str]:
    """`rel:line 'word'` for every status word a module spells in a deciding place (the rule above)."""
    found: list[ast.Constant] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                found += _constants(operand)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    found += [c for t, v in zip(target.elts, node.value.elts) if _target_name(t) in STATUS_TARGETS
                              for c in _constants(v)]
                elif _target_name(target) in STATUS_TARGETS:
                    found += _constants(node.value)
        elif isinstance(node, ast.keyword) and node.arg in STATUS_TARGETS:
            found += _constants(node.value)
        elif isinstance(node, ast.Dict):
            found += [c for k, v in zip(node.keys, node.values)
                      if isinstance(k, ast.Constant) and k.value in STATUS_TARGETS for c in _constants(v)]
    found.sort(key=lambda c: (c.lineno, c.col_offset))
    return [f"{rel}:{c.lineno} {c.value!r}" for c in found if c.value in words]


def test_run_and_loop_statuses_are_spelt_only_in_their_vocabulary():
    words = _status_words()
    offenders = [hit for path in modules() for rel in [path.relative_to(PACKAGE).as_posix()]
                 if rel != "statuses.py" and not rel.startswith("testing/")
                 for hit in status_literals(rel, path.read_text(), words)]
    assert offenders == [], "status strings outside hoh/statuses.py (use RunStatus/LoopStatus/Verdict): " \
                            + "; ".join(offenders)


def test_a_status_literal_outside_the_vocabulary_is_caught():
    planted = ('def f(report, stats, t):\n'
               '    if report.status == "finished":\n'             # a comparison
               '        return stats.status in ("complete", "stalled")\n'  # inside a tuple operand
               '    report.status, report.error = "stopped", "why"\n'  # a tuple assignment
               '    t.append(Event(status="quota_exhausted"))\n'     # a keyword
               '    return {"state": "running", "error": "failed"}\n')  # a dict value; shared words pass
    assert status_literals("x.py", planted, _status_words()) == [
        "x.py:2 'finished'", "x.py:3 'complete'", "x.py:3 'stalled'", "x.py:4 'stopped'", "x.py:5 'quota_exhausted'",
        "x.py:6 'running'"]
    assert status_literals("x.py", 'message = "the run finished"\nkind = "pass"\n', _status_words()) == []


# ---- typed role outputs (hoh/records.py) ------------------------------------------------------------------
# A plan, a Developer report, a candidate or a QA report crosses modules as its record, never as a dict whose keys
# each reader spells again. The rule: a subscript (`plan["tasks"]`, read or written) or a `.get("verdict")` whose key
# is a field of one of those records, on an expression named as the codebase names role outputs (a variable or
# attribute `plan`, `developer`, `candidate`, `qa`). Names, not types: the AST has no types, and these four names
# mean a role output wherever hoh uses them (other dicts with a `tasks` or `status` key, the bench's summaries or
# `hoh status`'s loop entries, go by other names). records.py reads the JSON and runtime/validate.py checks it
# against its schema, so both may; testing/ is exempt as above (its fakes build role outputs as agents do).
ROLE_OUTPUT_NAMES = {"plan", "developer", "candidate", "qa"}
RAW_OUTPUT_HOMES = {"records.py", "runtime/validate.py"}


def _record_fields() -> set[str]:
    import dataclasses

    from hoh.records import Candidate, DeveloperReport, Plan, QaReport
    return {f.name for cls in (Plan, DeveloperReport, Candidate, QaReport) for f in dataclasses.fields(cls)}


def raw_output_keys(rel: str, source: str, fields: set[str]) -> list[str]:
    """`rel:line name[key]` for every role-output field read (or written) through a raw dict (the rule above)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript):
            owner, keys = node.value, _constants(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args:
            owner, keys = node.func.value, _constants(node.args[0])
        else:
            continue
        name = _target_name(owner)
        found += [(k.lineno, k.col_offset, f"{rel}:{node.lineno} {name}[{k.value!r}]") for k in keys
                  if name in ROLE_OUTPUT_NAMES and k.value in fields]
    return [hit for *_, hit in sorted(found)]


def test_role_outputs_cross_modules_as_records():
    fields = _record_fields()
    offenders = [hit for path in modules() for rel in [path.relative_to(PACKAGE).as_posix()]
                 if rel not in RAW_OUTPUT_HOMES and not rel.startswith("testing/")
                 for hit in raw_output_keys(rel, path.read_text(), fields)]
    assert offenders == [], "role outputs read as raw dicts (use hoh.records): " + "; ".join(offenders)


def test_a_role_output_read_as_a_raw_dict_is_caught():
    planted = ('def f(plan, qa, lp, summary):\n'
               '    for task in plan["tasks"]:\n'
               '        print(qa.get("verdict"), lp.candidate["commit"])\n'
               '    plan["preserve"] = []\n'                          # the in-place edit records replaced
               '    return summary["tasks"], qa.verdict, plan.get("unknown")\n')  # other dicts, attributes pass
    assert raw_output_keys("x.py", planted, _record_fields()) == [
        "x.py:2 plan['tasks']", "x.py:3 qa['verdict']", "x.py:3 candidate['commit']", "x.py:4 plan['preserve']"]
