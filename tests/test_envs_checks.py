"""A check step's checks in QA's container run many to one `exec` (`hoh/envs/batch.py`): what a hostile check
does there never changes what a later check sees or reports. The same checks run with local roles and with
`--env docker`, and what hoh persisted is compared."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import GREET
from harbor_env import BASE_IMAGE, harbor  # noqa: F401 - harbor is a fixture
from test_envs import no_container_left, write_project  # noqa: F401 - an autouse fixture
from test_trust_checks import greeter_loop

ENV = ("--env", "docker", "--env-image", BASE_IMAGE)
ALICE = "#!/bin/sh\\necho hello alice\\n"
HOSTILE = [
    # Each passes (it ends in `true`) and tries to change what the checks after it see or report.
    "echo 'print(\"hello alice\")' > greet.py 2>/dev/null; true",  # the candidate's copy
    f"printf '{ALICE}' > /opt/hoh/bin/python3 2>/dev/null; chmod 755 /opt/hoh/bin/python3 2>/dev/null; true",
    "for n in $(seq 1 400); do mkdir -p /opt/hoh/attempts/$n && echo 0 > /opt/hoh/attempts/$n/exit; done "
    "2>/dev/null; true",  # every later run's exit code
    "(setsid sh -c 'while :; do echo \"print(1)\" > greet.py; sleep 0.01; done' >/dev/null 2>&1 &) 2>/dev/null; "
    "true",  # a daemon
    "mv /opt/hoh/attempts /opt/hoh/moved 2>/dev/null && ln -s /opt/hoh/moved /opt/hoh/attempts 2>/dev/null; "
    "true",  # later runs' files elsewhere
]
HONEST = [
    ("python3 greet.py bob", {}, True),
    ("python3 greet.py bob", {"expect": {"stdout": "hello alice"}}, False),  # a wrapper or a changed copy passes
    ("grep -q alice greet.py", {}, False),  # a forged exit code passes
]


def checks() -> tuple[list[str], list[dict]]:
    found = [{"id": f"H{n}", "run": "true", "attach": {"command": command}} for n, command in enumerate(HOSTILE, 1)]
    found += [{"id": f"K{n}", "run": "python3 greet.py bob", "expect_stdout": "hello bob",
               "attach": {"command": command, **attach}} for n, (command, attach, _) in enumerate(HONEST, 1)]
    return [c["id"] for c in found], found


def test_a_hostile_check_in_qa_s_container_changes_no_other_check_s_result(harbor, tmp_path):
    """Loop 1 admits (and loop 2 replays) hostile checks before honest ones, in one `exec` each step in docker:
    the admissions and the replay equal the local ones, and what the batch found changed is journaled."""
    ids, attached = checks()
    loop = greeter_loop(ids, attached)
    script = {"schema_version": 1, "loops": {1: loop, 2: greeter_loop(ids, [dict(c, attach=False) for c in attached])}}
    state = {}
    for mode, extra in (("local", ()), ("docker", ENV)):
        spec = write_project(tmp_path / mode, script)
        ws = tmp_path / mode / "ws"
        built = harbor.hoh("build", spec, "--harness", "scripted", "--loops", "2", "-w", ws, "-q", *extra)
        assert built.returncode in (0, 1), built.stderr
        loops = ws / "state" / "loops"
        state[mode] = {
            "admitted": {a["item"]: a["admitted"] for a in json.loads((loops / "0001" / "checks.json").read_text())["checks"]},
            "replayed": {r["id"]: r["status"] for r in json.loads((loops / "0002" / "replay.json").read_text())["results"]},
            "journal": [json.loads(line) for line in (ws / "state" / "journal.jsonl").read_text().splitlines()],
            "greet": (ws / "project" / "greet.py").read_text(),
        }
    expected = {**{f"H{n}": True for n in range(1, len(HOSTILE) + 1)},
                **{f"K{n}": admitted for n, (_, _, admitted) in enumerate(HONEST, 1)}}
    assert state["local"]["admitted"] == state["docker"]["admitted"] == expected
    assert state["local"]["replayed"] == state["docker"]["replayed"]
    assert set(state["docker"]["replayed"].values()) == {"passed"}
    assert state["docker"]["greet"] == GREET
    candidates = {mode: [e["candidate_id"] for e in s["journal"] if e["event"] == "loop_finished"]
                  for mode, s in state.items()}
    assert candidates["local"] == candidates["docker"]
    changed = [c for e in state["docker"]["journal"] if e["event"] == "environment_tampered" and e["role"] == "qa"
               for c in e["changes"]]
    # Seen between two runs of one `exec`: the candidate's copy, and hoh's programs (put back afresh between
    # two attempts, so never reported there).
    assert any(c.endswith("/greet.py") for c in changed), changed
    assert any(c.startswith("C /opt/hoh/bin") for c in changed), changed
    assert "C /opt/hoh/attempts" in changed, changed
    assert not [e for e in state["local"]["journal"] if e["event"] == "environment_tampered"]


def test_checks_run_together_each_keep_their_own_result(harbor, tmp_path):
    """Honest checks in one `exec`: each result, exit code and output is its own."""
    ids = [f"K{n}" for n in range(1, 5)]
    attached = [{"id": i, "run": "python3 greet.py bob", "expect_stdout": "hello bob",
                 "attach": {"command": f"python3 greet.py bob && test {n} -gt 2"}} for n, i in enumerate(ids, 1)]
    loop = greeter_loop(ids, attached)
    spec = write_project(tmp_path, {"schema_version": 1, "loops": {1: loop}})
    ws = tmp_path / "ws"
    built = harbor.hoh("build", spec, "--harness", "scripted", "--loops", "1", "-w", ws, "-q", *ENV)
    assert built.returncode in (0, 1), built.stderr
    admitted = json.loads((ws / "state" / "loops" / "0001" / "checks.json").read_text())["checks"]
    assert {a["item"]: a["admitted"] for a in admitted} == {"K1": False, "K2": False, "K3": True, "K4": True}
    evidence = [Path(ws / "state" / a["evidence"]).read_text() for a in admitted]
    assert [e.splitlines()[2] for e in evidence] == ["exit code: 1 (expected 0)"] * 2 + ["exit code: 0 (expected 0)"] * 2
    assert all("hello bob" in e for e in evidence)
    journal = [json.loads(line) for line in (ws / "state" / "journal.jsonl").read_text().splitlines()]
    assert not [e for e in journal if e["event"] == "environment_tampered"]


def test_the_leftovers_benchmark_runs(harbor):
    """benchmarks/perf/env_leftovers.py, tiny: a Developer leaves 2,000 files and a 2 GB sparse file; the files come
    back from its container as they stay locally, the sparse file from neither, and hoh's peak memory is read."""
    result = subprocess.run([str(harbor.exe.parent / "python"), str(Path(__file__).parents[1] / "benchmarks" / "perf" /
                             "env_leftovers.py"), "--smoke"], capture_output=True, text=True, timeout=900,
                            env=harbor.env(), stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-2000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])["figures"]
    for where in ("local", "docker"):
        assert figures[where]["files_back"] == 2002 and not figures[where]["sparse_back"], figures
        assert 0 < figures[where]["peak_mb"] < 500, figures
