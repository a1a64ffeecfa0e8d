"""QA's view moved by the files that differ (`viewmove.py`): after every move it is exactly the candidate, as a
fresh checkout of it would be, whatever changed between the two (a file made a directory, a link made a file,
an executable bit, a directory emptied); what only git's checkout handles, or too much at once, goes through
git, and the view's index is rebuilt when a role that needs it comes."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from hoh.store import viewmove
from hoh.store.git import History


def _snapshot(root: Path) -> dict[str, tuple[str, str]]:
    """path → (kind and mode, content or link target) of everything under root."""
    found = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory, name)
            rel = str(path.relative_to(root))
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = ("dir", "")
            else:
                found[rel] = (f"file {stat.S_IMODE(st.st_mode):o}", path.read_bytes().hex())
    return found


STEPS = [
    {"a.txt": "1", "d/e/f.txt": "2", "x": "3", "run.sh": "4", "l": "->a.txt", "gone/deep/g": "5"},
    {"a.txt": "1 changed", "d/e/f.txt": "2", "x/inner.txt": "x is a dir now", "run.sh": "4+x",
     "l": "a file now", "new/dir/n.txt": "6", os.fsdecode(b"caf\xe9"): "7"},
    {"a.txt": "->d/e/f.txt", "d": "d is a file now", "x": "a file again", "run.sh": "4"},
    {},
]


def _write(work: Path, files: dict[str, str]) -> None:
    """The project as `files` says: "->target" a link, "+x" at the end an executable."""
    for child in work.iterdir():
        if child.name != ".git":
            subprocess.run(["rm", "-rf", str(child)], check=True)
    for rel, content in files.items():
        path = work / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if content.startswith("->"):
            path.symlink_to(content[2:])
        else:
            path.write_text(content.removesuffix("+x"))
            path.chmod(0o755 if content.endswith("+x") else 0o644)


@pytest.mark.parametrize("index_needed", [False, True])
def test_every_move_leaves_the_view_exactly_the_candidate(tmp_path, index_needed):
    work, view = tmp_path / "project", tmp_path / "view"
    work.mkdir()
    history = History(tmp_path / "history.git", work)
    parent = history.create("A_0")
    for t, files in enumerate(STEPS, 1):
        _write(work, files)
        parent = history.commit_all(parent, f"loop {t}", loop=t)
        history.update_view(view, parent, index_needed=index_needed)
        fresh = tmp_path / f"fresh-{t}"
        history.export(parent, fresh)
        assert _snapshot(view) == _snapshot(fresh), f"loop {t}"
        assert history.view_index.exists() == (index_needed or t == 1)  # the first view is a checkout
        assert history.view_clean


def test_a_change_git_must_check_out_or_too_large_goes_through_git(tmp_path, monkeypatch):
    work, view = tmp_path / "project", tmp_path / "view"
    work.mkdir()
    history = History(tmp_path / "history.git", work)
    parent = history.create("A_0")
    _write(work, {"a.txt": "small"})
    parent = history.commit_all(parent, "loop 1", loop=1)
    history.update_view(view, parent, index_needed=False)
    monkeypatch.setattr(viewmove, "MAX_BYTES", 1000)
    _write(work, {"a.txt": "big" * 1000})
    parent = history.commit_all(parent, "loop 2", loop=2)
    history.update_view(view, parent, index_needed=False)
    assert (view / "a.txt").read_text() == "big" * 1000
    assert history.view_index.exists()  # moved by read-tree -m -u: its index follows
    assert viewmove.tree_changes(b":160000 160000 " + b"a" * 40 + b" " + b"b" * 40 + b" M\0sub\0") is None


def test_a_view_without_its_index_is_rebuilt_when_a_role_needs_the_index(tmp_path):
    work, view = tmp_path / "project", tmp_path / "view"
    work.mkdir()
    history = History(tmp_path / "history.git", work)
    parent = history.create("A_0")
    for t in (1, 2):
        _write(work, {"a.txt": f"loop {t}", "b.txt": "same"})
        parent = history.commit_all(parent, f"loop {t}", loop=t)
        history.update_view(view, parent, index_needed=False)
    assert not history.view_index.exists()
    (view / "b.txt").write_text("tampered")  # what an unjailed role could do
    history.view_clean = False
    history.update_view(view, parent)
    assert (view / "b.txt").read_text() == "same" and history.view_index.exists()
    assert history.view_changes(view) == []
