"""A role in a container tries to reach past its environment: what comes back must never touch hoh's side.

Each case runs the same hostile script with local roles and with `--env docker`, and compares what hoh
persisted: the violation recorded for the attempt, the workspace, and any directory outside it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import mini_script, run_hoh
from harbor_env import BASE_IMAGE, harbor  # noqa: F401 - harbor is a fixture
from test_envs import no_container_left, write_project  # noqa: F401 - an autouse fixture

ENV = ("--env", "docker", "--env-image", BASE_IMAGE)


def tree(root: Path) -> dict[str, bytes | str]:
    """Every entry under `root`: a file's bytes, a link's target, a directory's mark."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        found[rel] = f"-> {path.readlink()}" if path.is_symlink() else path.read_bytes() if path.is_file() else "dir"
    return found


def state_of_loop_one(ws: Path) -> dict[str, bytes | str]:
    """What loop 1 left in the workspace, which loop 2 may add to but never change."""
    return {rel: v for rel, v in tree(ws / "state").items()
            if rel in ("workspace.json", "spec.sha256") or rel.startswith("loops/0001/")}


@pytest.mark.parametrize("where", ["relative", "absolute"])
def test_a_developer_that_links_the_project_git_elsewhere_changes_nothing_there(harbor, tmp_path, where):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("the user's file\n")
    (outside / "sub").mkdir()
    (outside / "sub" / "deep.txt").write_text("deep\n")
    before_outside = tree(outside)
    target = "../state" if where == "relative" else str(outside)
    script = mini_script(2)
    dev = script["loops"][2]["developer"]  # the first attempt links, the second behaves
    script["loops"][2]["developer"] = [{**dev, "actions": [{"run": f"rm -rf .git && ln -s {target} .git"},
                                                           *dev.get("actions", [])]}, dev]

    violations, loop_one = {}, {}
    for mode, extra in (("local", ()), ("docker", ENV)):
        spec = write_project(tmp_path / mode, script)
        ws = tmp_path / mode / "ws"
        built = harbor.hoh("build", spec, "--harness", "scripted", "--loops", "1", "-w", ws, "-q", *extra)
        assert built.returncode == 0, built.stderr
        loop_one[mode] = state_of_loop_one(ws)
        resumed = harbor.hoh("resume", "-w", ws, "--loops", "1", "-q")
        assert resumed.returncode == 0, resumed.stderr
        assert state_of_loop_one(ws) == loop_one[mode], f"{mode}: the Developer's link changed loop 1's state"
        for name in ("workspace.json", "ledger.json", "INDEX.md", "journal.jsonl"):
            assert (ws / "state" / name).is_file(), f"{mode}: state/{name} is gone"
        assert (ws / "project" / ".git").is_dir() and not (ws / "project" / ".git").is_symlink()
        status = run_hoh("status", "-w", ws)
        assert status.returncode == 0, status.stderr
        result = json.loads((ws / "state/loops/0002/roles/developer/attempt-1/result.json").read_text())
        violations[mode] = result["violations"]
        assert tree(outside) == before_outside, f"{mode}: the directory outside the workspace changed"
    # Locally .git is a mount point the role cannot replace (it empties it); in a container it is a plain
    # directory, replaced by the link. Either way the attempt is a violation of the same area.
    assert [v["area"] for v in violations["local"]] == ["project .git"], violations["local"]
    assert violations["docker"] == [{"area": "project .git", "changes": ["replaced .git with a link or a file"]}]
