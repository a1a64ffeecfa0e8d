"""The Planner's view of state/loops (`runtime/loopsview.py`): every earlier loop's files but its roles'
transcripts, bound read-only at state/loops in one mount however many loops there are."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from conftest import Project, mini_script

from hoh.runtime.loopsview import LoopsView
from hoh.store.seal import SealedState
from hoh.store.workspace import open_workspace
from hoh.view import files

W = "${workspace}"


def test_the_planner_reads_earlier_loops_in_one_mount_and_no_role_transcript(tmp_path):
    script = mini_script(3)
    script["loops"][3]["planner"]["actions"] = [{"run": (
        f"cat {W}/state/loops/0001/qa.json > $HOME/qa.txt; ls -A {W}/state/loops/0002 > $HOME/listing.txt; "
        f"grep -c ' {W}/state/loops' /proc/self/mountinfo > $HOME/mounts.txt; "
        f"ls {W}/state/loops/0001/roles > $HOME/roles.txt 2>&1; ls {W}/scratch > $HOME/scratch.txt 2>&1; true")}]
    p = Project(tmp_path, script)
    p.build(loops=3)
    home = p.ws / "scratch/homes/scripted/planner"
    assert (home / "qa.txt").read_bytes() == p.state("loops/0001/qa.json").read_bytes()
    listing = (home / "listing.txt").read_text().split()
    assert "qa.json" in listing and "plan.md" in listing and "roles" not in listing
    assert (home / "mounts.txt").read_text().split() == ["1"]  # the view alone: no mount per loop
    assert "No such file" in (home / "roles.txt").read_text() and "loops-view" not in (home / "scratch.txt").read_text()
    assert p.loop_json(3, "qa")["verdict"] == "pass"
    rel = "state/loops/0001/qa.json"  # `hoh view` serves a file whose second name is the view's, and no other
    path = files.safe_file(p.ws, rel)
    assert os.stat(path).st_nlink == 2
    assert files.read_capped(path, view_name=files.loops_view_name(p.ws.resolve(), rel))[0] == path.read_bytes()
    with pytest.raises(files.Refused, match="hard link"):
        files.read_capped(path, view_name=None)


def test_a_sealed_loop_is_linked_once_and_again_after_a_restore_or_in_a_new_session(demo_ws, tmp_path):
    ws_dir = tmp_path / "ws"
    shutil.copytree(demo_ws, ws_dir, symlinks=True)
    ws = open_workspace(ws_dir)
    loops, into = ws.paths.loops, tmp_path / "view"
    sealed = SealedState(ws.history, ws.paths.state)
    assert sealed.sealed_loops() == [1, 2, 3, 4]
    (loops / "0005" / "roles" / "planner").mkdir(parents=True)  # an open loop
    (loops / "0005" / "plan.json").write_text("{}")
    view = LoopsView(loops, into, sealed)

    assert view.update() == into
    assert sorted(os.listdir(into)) == ["0001", "0002", "0003", "0004", "0005"]
    assert not any(path.name == "roles" for path in into.rglob("*"))
    kept = [path.relative_to(into) for path in into.rglob("*") if path.is_file()]
    assert kept and all(os.path.samefile(into / rel, loops / rel) for rel in kept)  # links, not copies
    assert {str(rel) for rel in kept} >= {"0001/qa.json", "0001/plan.md", "0005/plan.json"}

    for name in ("0001", "0005"):
        (into / name / "marker").write_text("x")
    view.update()
    assert (into / "0001" / "marker").exists()  # a sealed loop's view is made once
    assert not (into / "0005" / "marker").exists()  # an open loop's at every update
    shutil.rmtree(loops / "0005")
    view.update()
    assert sorted(os.listdir(into)) == ["0001", "0002", "0003", "0004"]

    qa = ws.paths.state / "loops/0001/qa.json"
    assert sealed.changes([5]) == []  # the baseline
    qa.write_text("forged")
    sealed.restore(sealed.changes([5]))  # the guard puts it back: a new file, not the view's inode
    assert json.loads(qa.read_text())["schema_version"]
    view.update()
    assert not (into / "0001" / "marker").exists() and (into / "0001/qa.json").read_bytes() == qa.read_bytes()

    (into / "0002" / "marker").write_text("x")
    LoopsView(loops, into, SealedState(ws.history, ws.paths.state)).update()
    assert not (into / "0002" / "marker").exists()  # a new session trusts nothing an earlier one left
