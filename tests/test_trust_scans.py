"""hoh's cost does not follow the project's size, and no change hides from it: a read-only role in the jail
cannot write the project or QA's view (the jail mounts them read-only, so they are not scanned), a role
without the jail is checked by a full scan of each tree, said in the journal (`full_scan`), and what it
changed is undone. The hostile roles try to write through every path they have; the tests read the
persisted state: commits, the journal, the files."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import GREET, mini_script

from hoh.harness.jail import JailSpec

WRITE_EVERYTHING = ("echo hacked > greet.py; echo x > planted.txt; mkdir -p newdir && echo y > newdir/f; "
                    "rm -f greet.py; ln greet.py hardlink 2>/dev/null; chmod 777 greet.py; "
                    "echo z > ${project_dir}/greet.py; echo w > ${project_dir}/planted2.txt; true")


def _git(ws: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "--git-dir", str(ws / "history.git"), *args], env=env, capture_output=True,
                          text=True, check=True).stdout


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts}


def _hostile_readers(script: dict, loop: int) -> dict:
    """Loop `loop`'s Planner and QA try to write the project (and QA its view) on their first attempt."""
    for role in ("planner", "qa"):
        entry = script["loops"][loop][role]
        script["loops"][loop][role] = [{**entry, "actions": [{"run": WRITE_EVERYTHING}]}, entry]
    return script


def _full_scans(p) -> list[tuple[int, str, str, str]]:
    return [(e["loop"], e["step"], e["area"], e["reason"]) for e in p.journal() if e["event"] == "full_scan"]


def test_jailed_read_only_roles_cannot_change_the_project_or_the_view_and_nothing_is_scanned(make_project):
    p = make_project(_hostile_readers(mini_script(2), 2))
    assert p.build(loops=2, sets={"sandbox.mode": "bwrap"}).status == "finished"
    for role in ("planner", "qa"):
        result = p.attempt_result(2, role, 1)
        assert result["violations"] == [] and result["ok"], result  # every write failed: a read-only mount
    candidate = p.loop_json(2, "candidate")
    assert _git(p.ws, "show", f"{candidate['commit']}:greet.py") == GREET + "# loop 2\n"
    assert _git(p.ws, "ls-tree", "--name-only", candidate["commit"]).split() == ["greet.py"]
    # The project is exactly the candidate, and so is QA's view.
    assert _files(p.ws / "project") == {"greet.py": GREET + "# loop 2\n"}
    assert _files(p.ws / "scratch" / "view") == {"greet.py": GREET + "# loop 2\n"}
    assert _full_scans(p) == []  # the jail answered for every read-only role


def test_an_unjailed_read_only_roles_changes_are_found_by_a_journaled_full_scan_and_undone(make_project):
    p = make_project(_hostile_readers(mini_script(2), 2))
    assert p.build(loops=2, sets={"sandbox.mode": "off"}).status == "finished"
    planner = p.attempt_result(2, "planner", 1)
    assert [v["area"] for v in planner["violations"]] == ["project"]
    assert {"modified greet.py", "created planted.txt", "created newdir/", "created planted2.txt"} <= set(
        planner["violations"][0]["changes"])
    qa = p.attempt_result(2, "qa", 1)
    assert {v["area"] for v in qa["violations"]} == {"project", "candidate copy"}
    assert p.attempt_result(2, "planner", 2)["ok"] and p.attempt_result(2, "qa", 2)["ok"]
    candidate = p.loop_json(2, "candidate")
    assert _git(p.ws, "ls-tree", "--name-only", candidate["commit"]).split() == ["greet.py"]
    assert _files(p.ws / "project") == {"greet.py": GREET + "# loop 2\n"}
    assert _files(p.ws / "scratch" / "view") == {"greet.py": GREET + "# loop 2\n"}
    scans = _full_scans(p)
    for step, area in (("planner", "project"), ("qa", "project"), ("qa", "candidate copy")):
        assert (2, step, area, "no_jail") in scans, scans


def test_a_jail_writes_into_a_tree_only_through_a_writable_bind_that_reaches_it(tmp_path):
    project, ws = tmp_path / "project", tmp_path / "project" / "ws"
    home, evidence, elsewhere = ws / "homes" / "qa", ws / "state" / "evidence", tmp_path / "other"
    for d in (home, evidence, elsewhere, project / "src"):
        d.mkdir(parents=True, exist_ok=True)
    assert not JailSpec(writable=(elsewhere,), read_only=(project,)).writes_into(project)
    assert not JailSpec(writable=(home, evidence), hidden=(ws,)).writes_into(project)  # inside the hidden workspace
    assert JailSpec(writable=(home,)).writes_into(project)  # inside the project and not hidden: it could
    assert JailSpec(writable=(project,)).writes_into(project)
    assert JailSpec(writable=(tmp_path,)).writes_into(project)  # a bind above the project
    assert JailSpec(writable=(project / "src",), hidden=(ws,)).writes_into(project)
    (tmp_path / "link").symlink_to(project)
    assert JailSpec(writable=(tmp_path / "link",)).writes_into(project)  # the same tree by another name
