"""The guard between two role attempts: a change to a protected file area while no role runs (the freeze,
a process an unjailed role left behind) is put back and journaled, and hoh's own writes are not."""

from __future__ import annotations

import json
import sys
import time

import pytest
from conftest import mini_script, run_hoh

from hoh.envs.local.limits import _cgroup_dirs
from hoh.fsutil import atomic_write_text
from hoh.runtime.between import Continuity
from hoh.runtime.guard import FileArea


def test_a_change_between_two_checks_is_put_back_but_hohs_own_writes_stay(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "ledger.json").write_text('{"issues": []}\n')
    (state / "plan.json").write_text("{}\n")
    areas = [FileArea("state", state, [])]
    continuity = Continuity()
    continuity.remember(areas)                                  # the check after an attempt
    atomic_write_text(state / "plan.json", '{"goal": "g"}\n')    # hoh's own write at the freeze
    (state / "ledger.json").write_text('{"issues": ["forged"]}\n')  # someone else's
    (state / "forged.json").write_text("{}\n")
    found = continuity.check(areas)                             # before the next attempt
    assert [(v.area, sorted(v.changes)) for v in found] == [
        ("state", ["created forged.json (between roles)", "modified ledger.json (between roles)"])]
    assert (state / "ledger.json").read_text() == '{"issues": []}\n' and not (state / "forged.json").exists()
    assert (state / "plan.json").read_text() == '{"goal": "g"}\n'
    continuity.remember(areas)
    assert continuity.check(areas) == []


def test_a_process_an_unjailed_developer_left_cannot_forge_state_at_the_freeze(make_project):
    # With the jail off, a Developer's detached process outlives its attempt; it waits for the freeze and then
    # forges a state file. Whichever guard sees it first (between the roles, or QA's), it does not persist.
    script = mini_script(1)
    dev = script["loops"][1]["developer"]
    forger = (f"{sys.executable} -c \"import os, time, pathlib; w = pathlib.Path(os.environ['WS']); "
              "c = w / 'state/loops/0001/candidate.json'\n"
              "while not c.exists(): time.sleep(0.002)\n"
              "(w / 'state/forged.json').write_text('{}')\"")
    dev["actions"] = [{"run": f"WS=${{workspace}} setsid {forger} > /dev/null 2>&1 &"}] + dev["actions"]
    p = make_project(script)
    # No cgroup for the attempt, or it would end the forger with the Developer's attempt (the next test).
    result = run_hoh("build", p.spec, "--loops", "1", "-w", p.ws, "-q", "--set", "sandbox.mode=off",
                     "--set", "sandbox.limits.processes=null")
    assert result.returncode == 0, result.stderr
    assert not p.state("forged.json").exists()
    journal = [json.loads(line) for line in p.state("journal.jsonl").read_text().splitlines()]
    between = [e for e in journal if e["event"] == "violation_between_roles"]
    during = [e for e in journal if e["event"] == "attempt_finished" and e["role"] == "qa" and e["violations"]]
    assert between or during
    if between:
        assert between[0]["role"] == "qa" and between[0]["changes"] == ["created forged.json (between roles)"]
        status = json.loads(run_hoh("status", "-w", p.ws, "--json").stdout)
        assert status["loops"][0]["violations"]["between roles"] == 1


@pytest.mark.skipif(_cgroup_dirs("processes") is None, reason="no cgroup can be made for an attempt here")
def test_an_unjailed_roles_detached_process_ends_with_its_attempt_where_a_cgroup_holds_it(make_project):
    script = mini_script(1)
    dev = script["loops"][1]["developer"]
    dev["actions"] = [{"run": "setsid sh -c 'sleep 3; echo late > late.txt' > /dev/null 2>&1 &"}] + dev["actions"]
    p = make_project(script)
    result = run_hoh("build", p.spec, "--loops", "1", "-w", p.ws, "-q", "--set", "sandbox.mode=off")
    assert result.returncode == 0, result.stderr
    time.sleep(4)
    assert not (p.ws / "project" / "late.txt").exists()
