"""hoh's git is hoh's alone: every git command hoh runs on a tree a role touched uses hoh's own git dir
and a configuration no role can write, embedded repositories are content, and git's environment holds
no secret. The hostile Developers plant what would make hoh's git run a command of theirs outside the
jail (it would write a marker file outside the workspace, with the environment it saw), or break hoh's
git; the project's .git and history.git are checked as a whole."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from conftest import mini_script

from hoh.store.git import ATTRIBUTES, History, ProjectMirror
from hoh.store.gitrun import GitError, git_env, run_git

GUARD_ONLY = {"sandbox.mode": "off"}
SECRET = "sk-hoh-trust-git-7d2e91"


def _git(*args: str, cwd: Path | None = None) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "u",
           "GIT_AUTHOR_EMAIL": "u@x", "GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@x"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


def _tree(ws: Path, rev: str) -> dict[str, str]:
    """path → mode of every entry of `rev` in history.git."""
    out = _git("--git-dir", str(ws / "history.git"), "ls-tree", "-r", "-z", rev)
    entries = (e.split("\t", 1) for e in out.split("\0") if e)
    return {path: meta.split()[0] for meta, path in entries}


def _developer_first(script: dict, loop: int, actions: list) -> dict:
    """The Developer's first attempt of `loop` runs `actions` first; its second behaves."""
    dev = script["loops"][loop]["developer"]
    script["loops"][loop]["developer"] = [{**dev, "actions": actions + dev["actions"]}, dev]
    return script


# -- git's environment -------------------------------------------------------------------------------------

def test_git_env_is_built_from_scratch(monkeypatch):
    monkeypatch.setenv("HOH_TEST_SECRET", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("GIT_DIR", "/elsewhere")
    monkeypatch.setenv("GIT_SSH_COMMAND", "touch /tmp/never")
    monkeypatch.setenv("XDG_CONFIG_HOME", "/elsewhere")
    env = git_env(3)
    assert SECRET not in "".join(env.values()) and "HOH_TEST_SECRET" not in env and "OPENAI_API_KEY" not in env
    assert "GIT_DIR" not in env and "XDG_CONFIG_HOME" not in env
    assert env["PATH"] == os.environ["PATH"]
    assert not os.path.isdir(env["HOME"])  # no ~/.gitconfig, no ~/.config/git to read
    assert env["GIT_SSH_COMMAND"] != "touch /tmp/never" and env["GIT_TERMINAL_PROMPT"] == "0"
    assert env["GIT_CONFIG_GLOBAL"] == os.devnull and env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert env["GIT_COMMITTER_DATE"] == env["GIT_AUTHOR_DATE"] and env["LC_ALL"] == "C"


def test_a_repository_config_cannot_turn_a_transport_back_on(tmp_path):
    # Command-line configuration beats the repository's for the same key: protocol.ext.allow=always
    # in a role-written config does not let hoh's git run an ext:: command.
    repo = tmp_path / "repo"
    _git("init", "-q", str(repo))
    _git("config", "protocol.ext.allow", "always", cwd=repo)
    marker = tmp_path / "ext-ran"
    with pytest.raises(GitError):
        run_git(["fetch", "-q", f"ext::sh -c touch% {marker}% ;false"], cwd=repo)
    assert not marker.exists()
    assert run_git(["config", "--get", "protocol.ext.allow"], cwd=repo) == "never"


# -- PROJECT/.git as a whole ------------------------------------------------------------------------------

def _commondir_attack(marker: Path, history: Path) -> list:
    """A copy of .git whose config rewrites hoh's fetch URL to ssh and sets the ssh command; .git/commondir
    points there, so config, info and hooks of .git itself stay as they were."""
    config = (f"[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tsshCommand = \"env > {marker}; false\"\n"
              f'[protocol "ext"]\n\tallow = always\n[url "ssh://hoh-attacker.invalid/x"]\n\tinsteadOf = {history}\n')
    return [{"run": "cp -r .git evil.git"}, {"write": {"path": "evil.git/config", "content": config}},
            {"run": "echo ../evil.git > .git/commondir"}]


@pytest.mark.parametrize("mode", ["off", "bwrap"])
def test_a_planted_commondir_never_configures_hohs_git(mode, make_project, tmp_path, monkeypatch):
    monkeypatch.setenv("HOH_TEST_SECRET", SECRET)
    marker = tmp_path / "outside" / "ssh-ran"
    marker.parent.mkdir()
    p = make_project(mini_script(2))
    p.script = _developer_first(p.script, 2, _commondir_attack(marker, p.ws.resolve() / "history.git"))
    p.write_script()
    assert p.build(loops=2, sets={"sandbox.mode": mode}).status == "finished"
    assert not marker.exists()
    violations = p.attempt_result(2, "developer", 1)["violations"]
    assert [v["area"] for v in violations] == ["project .git"] and "created commondir" in violations[0]["changes"]
    assert p.attempt_result(2, "developer", 2)["ok"]
    git_dir = p.ws / "project" / ".git"
    assert not (git_dir / "commondir").exists()
    assert _git("tag", cwd=p.ws / "project").split() == ["loop-0001", "loop-0002"]
    assert _git("rev-parse", "HEAD", cwd=p.ws / "project").strip() == p.loop_json(2, "candidate")["commit"]


@pytest.mark.parametrize("plant,change", [
    ("mkdir -p .git/objects/info && echo /tmp > .git/objects/info/alternates", "created objects/info/alternates"),
    ("mkdir -p .git/worktrees/w && echo ../.. > .git/worktrees/w/commondir", "created worktrees/w/commondir"),
    ("echo planted > .git/config.worktree", "created config.worktree"),
    ("echo planted >> .git/description", "modified description"),
    ("ln -s /tmp .git/refs/planted", "created refs/planted"),
    ("mkdir .git/commondir && echo ../.. > .git/commondir/x", "created commondir/x"),  # it breaks every git command there
    ("rm .git/index && mkfifo .git/index", "created index"),  # it would hang hoh's git
])
def test_every_part_of_the_project_git_but_its_history_is_guarded(plant, change, make_project):
    """(An empty file or directory is what a harness's sandbox leaves as a mount point: removed, and no
    violation: test_empty_mount_points_a_sandbox_leaves_are_removed_quietly.)"""
    p = make_project(_developer_first(mini_script(1), 1, [{"run": plant}]))
    assert p.build(sets=GUARD_ONLY).status == "finished"
    assert p.attempt_result(1, "developer", 1)["violations"] == [{"area": "project .git", "changes": [change]}]
    path = p.ws / "project" / ".git" / change.split(" ", 1)[1]
    if change.startswith("modified"):
        assert path.read_text() == "Unnamed repository; edit this file 'description' to name the repository.\n"
    elif path.name == "index":
        assert path.is_file()  # put back by hoh, a regular file again
    else:
        assert not os.path.lexists(path)
    assert _git("tag", cwd=p.ws / "project").split() == ["loop-0001"]


def test_a_developer_may_use_its_repository(make_project):
    work = ("git -c user.name=a -c user.email=a@b commit -q --allow-empty -m mine && git stash list && "
            "git branch topic && git gc -q && git log -1 --format=%s")
    p = make_project(_developer_first(mini_script(1), 1, [{"run": work}]))
    assert p.build(sets=GUARD_ONLY).status == "finished"
    assert p.attempt_result(1, "developer", 1)["violations"] == []
    assert "mine" in _git("log", "--format=%s", "--all", cwd=p.ws / "project")


def _published_root(tmp_path: Path, name: str) -> tuple[Path, History, ProjectMirror, str]:
    """A project dir, its history.git and mirror, with A_0 published."""
    work = tmp_path / name
    work.mkdir()
    history = History(tmp_path / f"{name}.git", work)
    a0 = history.create("A_0")
    mirror = ProjectMirror(work, history)
    mirror.publish(a0)
    return work, history, mirror, a0


def test_hoh_refuses_to_run_git_on_a_repository_that_is_not_plain(tmp_path):
    work, history, mirror, a0 = _published_root(tmp_path, "project")
    _git("-C", str(work), "tag", "-a", "-m", "t", "annotated")  # a peeled entry in packed-refs
    _git("-C", str(work), "symbolic-ref", "refs/heads/alias", "refs/heads/main")
    _git("-C", str(work), "pack-refs", "--all")
    _git("-C", str(work), "branch", "loose")
    listed = _git("-C", str(work), "for-each-ref", "--format=%(refname) %(objectname)").splitlines()
    assert mirror.refs() == ("ref: refs/heads/main", dict(line.split(" ", 1) for line in listed))

    (work / ".git" / "commondir").write_text("../elsewhere\n")
    with pytest.raises(GitError, match="commondir"):
        mirror.publish(a0)
    (work / ".git" / "commondir").unlink()
    with open(work / ".git" / "config", "a") as fh:
        fh.write('[remote "x"]\n\turl = y\n')
    with pytest.raises(GitError, match="config"):
        mirror.publish(a0)
    with pytest.raises(GitError, match="config"):
        ProjectMirror(work, history).publish(a0)  # the accepted configuration is hoh's record, not memory


def test_a_loop_reaches_the_project_by_its_new_objects_or_by_a_fetch_when_the_project_lacks_its_parent(
        make_project, tmp_path, monkeypatch):
    calls: list[str] = []
    real = ProjectMirror.git
    monkeypatch.setattr(ProjectMirror, "git", lambda self, *args, **kw: calls.append(args[0]) or real(self, *args, **kw))
    p = make_project(mini_script(3))
    assert p.build(loops=3).status == "finished"
    project, history = p.ws / "project", ["--git-dir", str(p.ws / "history.git")]
    assert calls.count("unpack-objects") == 3 and calls.count("fetch") == 1  # the workspace's first commit
    _git("fsck", "--strict", "--no-dangling", cwd=project)
    for ref in ("main", "loop-0001", "loop-0002", "loop-0003"):
        assert _git("rev-parse", ref, cwd=project) == _git(*history, "rev-parse", ref)

    work, _, mirror, a0 = _published_root(tmp_path, "lone")
    other = _git("commit-tree", "-m", "other", "4b825dc642cb6eb9a060e54bf8d69288fbee4904", cwd=work).strip()
    _git("update-ref", "refs/heads/main", other, cwd=work)  # no ref of the project holds A_0 any more
    a1 = _git("--git-dir", str(tmp_path / "lone.git"), "commit-tree", "-p", a0, "-m", "A_1", f"{a0}^{{tree}}").strip()
    _git("--git-dir", str(tmp_path / "lone.git"), "tag", "loop-0001", a1)
    calls.clear()
    mirror.publish(a1, "loop-0001", parent=a0)
    assert "fetch" in calls and "unpack-objects" not in calls
    assert _git("rev-parse", "main", "loop-0001", cwd=work).split() == [a1, a1]
    _git("fsck", "--strict", "--no-dangling", cwd=work)


def test_a_loop_tag_moved_after_refs_were_found_sound_is_still_found(tmp_path):
    work, history, mirror, a0 = _published_root(tmp_path, "project")
    published = {"loop-0001": a0}
    _git("tag", "loop-0001", a0, cwd=work)
    head, refs = mirror.refs()
    assert mirror.ref_problems(head, refs, published) == []  # sound: remembered, compared whole next time
    other = _git("commit-tree", "-m", "other", "4b825dc642cb6eb9a060e54bf8d69288fbee4904", cwd=work).strip()
    _git("tag", "-f", "loop-0001", other, cwd=work)
    _git("tag", "loop-0002", a0, cwd=work)
    assert mirror.ref_problems(*mirror.refs(), published) == ["moved or deleted tag loop-0001", "created tag loop-0002"]
    refs["refs/heads/main"] = other  # the dict it was given changes in the caller's hands: not what was found sound
    assert mirror.ref_problems(head, refs, {"loop-0001": other}) == ["moved or deleted tag loop-0001"]
    assert mirror.ref_problems(head, mirror.refs()[1], published) != []
    assert mirror.ref_problems("ref: refs/heads/gone", refs, published) == [
        "broke .git (HEAD names refs/heads/gone, which does not exist)"]


# -- hoh's history.git -----------------------------------------------------------------------------------

def test_everything_a_role_could_plant_in_history_git_is_guarded(make_project):
    plant = ("echo /tmp > ${workspace}/history.git/objects/info/alternates && "
             "echo '* filter=x' > ${workspace}/history.git/info/attributes && "
             "echo .. > ${workspace}/history.git/commondir")
    p = make_project(_developer_first(mini_script(1), 1, [{"run": plant}]))
    assert p.build(sets=GUARD_ONLY).status == "finished"
    violations = p.attempt_result(1, "developer", 1)["violations"]
    assert violations == [{"area": "history", "changes": ["modified info/attributes", "created commondir",
                                                           "created objects/info/alternates"]}]
    for rel in ("commondir", "objects/info/alternates"):
        assert not (p.ws / "history.git" / rel).exists()
    assert (p.ws / "history.git" / "info" / "attributes").read_text() == ATTRIBUTES  # hoh's own, restored
    assert p.attempt_result(1, "qa", 1)["violations"] == []  # hoh's own files in history.git are not a role's


# -- embedded repositories are content ------------------------------------------------------------------

def test_an_embedded_repository_is_frozen_as_content_and_its_filter_never_runs(make_project, tmp_path):
    marker = tmp_path / "outside" / "filter-ran"
    marker.parent.mkdir()
    nested = ("mkdir sub && cd sub && git init -q && echo hi > f.txt && git add f.txt && "
              "git -c user.name=a -c user.email=a@b commit -q -m nested && "
              f"git config filter.x.clean 'env > {marker}; cat' && echo '* filter=x' > .gitattributes && "
              "echo ho > f.txt")  # the same size: only hashing, through the filter, tells it changed
    script = mini_script(2)
    script["loops"][1]["developer"]["actions"].append({"run": nested})
    p = make_project(script)
    assert p.build(loops=2, sets=GUARD_ONLY).status == "finished"
    assert not marker.exists()
    for rev in ("loop-0001", "loop-0002"):
        tree = _tree(p.ws, rev)
        assert "160000" not in tree.values()
        assert {"sub/f.txt", "sub/.gitattributes"} <= tree.keys()
    assert _git("--git-dir", str(p.ws / "history.git"), "show", "loop-0002:sub/f.txt") == "ho\n"
    assert not (p.ws / "project" / "sub" / ".git").exists()


def test_commit_all_flattens_nested_repositories_of_every_kind(tmp_path):
    work = tmp_path / "project"
    work.mkdir()
    history = History(tmp_path / "history.git", work)
    a0 = history.create("A_0")
    for repo in ("outer", "outer/inner"):  # committed, so `git add` records outer as a gitlink
        (work / repo).mkdir()
        _git("init", "-q", cwd=work / repo)
        (work / repo / "f.txt").write_text(f"{repo}\n")
    _git("add", "-A", cwd=work / "outer" / "inner")
    _git("commit", "-q", "-m", "inner", cwd=work / "outer" / "inner")
    _git("add", "-A", cwd=work / "outer")  # inner becomes outer's gitlink
    _git("commit", "-q", "-m", "outer", cwd=work / "outer")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _git("init", "-q", cwd=elsewhere)
    _git("commit", "-q", "--allow-empty", "-m", "elsewhere", cwd=elsewhere)
    (work / "linked").mkdir()
    (work / "linked" / ".git").symlink_to(elsewhere / ".git")  # removed as a link, never followed
    (work / "linked" / "l.txt").write_text("l\n")
    first = history.commit_all(a0, "loop 1", loop=1)
    assert history.flattened == ["linked", "outer", "outer/inner"]
    assert (elsewhere / ".git" / "HEAD").is_file()

    (work / "empty").mkdir()
    _git("init", "-q", cwd=work / "empty")  # no commit: `git add` alone fails on it
    (work / "empty" / "e.txt").write_text("e\n")
    second = history.commit_all(first, "loop 2", loop=2)
    assert history.flattened == ["empty"]
    tree = _tree(tmp_path, second)
    assert "160000" not in tree.values()
    assert {"empty/e.txt", "outer/f.txt", "outer/inner/f.txt", "linked/l.txt"} <= tree.keys()
    assert not any(os.path.lexists(work / repo / ".git") for repo in ("outer", "outer/inner", "linked", "empty"))
    assert history.commit_all(first, "loop 2", loop=2) == second and history.flattened == []


def test_empty_mount_points_a_sandbox_leaves_are_removed_quietly(make_project):
    # Claude Code's sandbox mounts over git's configuration paths that do not exist; an empty `commondir` left
    # behind would break every git command hoh runs there.
    plant = "mkdir -p .git/remotes .git/commondir && touch .git/config.worktree .git/objects/info/alternates"
    p = make_project(_developer_first(mini_script(1), 1, [{"run": plant}]))
    assert p.build(sets=GUARD_ONLY).status == "finished"
    assert p.attempt_result(1, "developer", 1)["violations"] == []
    git_dir = p.ws / "project" / ".git"
    assert [n for n in ("remotes", "commondir", "config.worktree", "objects/info/alternates")
            if os.path.lexists(git_dir / n)] == []
    assert _git("tag", cwd=p.ws / "project").split() == ["loop-0001"]


# -- the loop tags, packed ---------------------------------------------------------------------------------

FORGED = "c=$(git -c user.name=a -c user.email=a@b commit-tree 'HEAD^{tree}' -m forged) && o=$(git rev-parse loop-0001)"


@pytest.mark.parametrize("plant", [
    f"{FORGED} && git update-ref refs/tags/loop-0001 $c",  # a loose file over the packed tag
    # packed-refs rewritten in place with its size and mtime kept: only its ctime tells (which no one can set)
    f"{FORGED} && cp -p .git/packed-refs ../pr && sed \"s/^$o /$c /\" ../pr > ../new && cat ../new > .git/packed-refs"
    " && touch -r ../pr .git/packed-refs && rm ../pr ../new",
    "rm .git/packed-refs",
])
def test_the_packed_loop_tags_cannot_be_moved(plant, make_project):
    p = make_project(_developer_first(mini_script(2), 2, [{"run": plant}]))
    assert p.build(loops=2, sets=GUARD_ONLY).status == "finished"
    assert p.attempt_result(2, "developer", 1)["violations"] == [
        {"area": "project .git", "changes": ["moved or deleted tag loop-0001"]}]
    project = p.ws / "project"
    assert _git("rev-parse", "loop-0001", cwd=project).strip() == p.loop_json(1, "candidate")["commit"]
    # Every loop's tag is in packed-refs, none is a loose file: the guard's read of them does not grow.
    assert not (project / ".git" / "refs" / "tags").exists() or not any((project / ".git" / "refs" / "tags").iterdir())
    packed = (project / ".git" / "packed-refs").read_text()
    assert "refs/tags/loop-0001" in packed and "refs/tags/loop-0002" in packed


def test_a_listing_kept_for_a_directory_git_writes_sees_a_link_planted_later(tmp_path, monkeypatch):
    from hoh.runtime import guard_git
    monkeypatch.setattr(guard_git, "settled", lambda st: True)  # keep every listing, however fresh
    objects = tmp_path / "objects" / "ab"
    objects.mkdir(parents=True)
    (objects / "cdef").write_bytes(b"blob")
    (tmp_path / "HEAD").write_text("ref: refs/heads/main\n")
    cache = guard_git.HashCache()
    before = guard_git.git_dir_fingerprint(tmp_path, guard_git.mirror_kind, cache)
    assert str(objects) in guard_git._FREE_DIRS and "objects/ab/cdef" not in before
    (objects / "link").symlink_to("/etc")
    after = guard_git.git_dir_fingerprint(tmp_path, guard_git.mirror_kind, cache)
    assert after["objects/ab/link"] == "link:/etc" and before.keys() < after.keys()


def test_a_listing_is_kept_once_its_times_are_a_clock_tick_old_or_two_seconds_where_times_are_whole_seconds():
    from types import SimpleNamespace

    from hoh.store.mirror import settled
    now = time.time_ns()

    def at(ns_ago: int, whole: bool = False) -> SimpleNamespace:
        t = now - ns_ago
        t -= t % 1_000_000_000 if whole else 0
        return SimpleNamespace(st_mtime_ns=t if whole else t - 7, st_ctime_ns=t)

    assert not settled(at(2_000_000)) and settled(at(50_000_000)) and settled(at(5 * 10**9))
    assert not settled(at(100_000_000, whole=True)) and settled(at(4 * 10**9, whole=True))
    with tempfile.TemporaryDirectory() as d:
        assert not settled(os.stat(d))  # made just now


def _changes(work: Path, also: str) -> list[str]:
    """A Developer's changes, the paths as the kernel's feed reports them."""
    (work / "kept.txt").write_text("changed\n")
    (work / "new").mkdir()
    (work / "new" / "a.txt").write_text("a\n")
    (work / "link").symlink_to("kept.txt")
    changed = ["kept.txt", "new", "link"]
    if also == "ignored files":
        (work / "build.o").write_text("ignored\n")
        (work / "cache").mkdir()
        (work / "cache" / "c.bin").write_text("ignored dir\n")
        changed += ["build.o", "cache"]
    elif also == "a deleted file":
        (work / "gone.txt").unlink()
        changed.append("gone.txt")
    elif also == "a temp file made and removed":
        changed.append("tmp.swp")
    elif also == "a path beyond a link":
        shutil.rmtree(work / "dir")
        (work / "dir").symlink_to("new")
        changed += ["dir", "dir/f.txt"]
    return changed


@pytest.mark.parametrize("also", ["", "ignored files", "a deleted file", "a temp file made and removed",
                                  "a path beyond a link"])
def test_a_freeze_of_the_changed_paths_is_the_freeze_of_the_whole_tree(tmp_path, also):
    """Whichever way `add` of the feed's paths goes (at once, or git's status first), the tree is the one a
    scan of the whole tree makes: ignored files out, deleted files gone, new directories and links in."""
    trees = []
    for name, fed in (("scanned", False), ("fed", True)):
        work = tmp_path / name
        work.mkdir()
        (work / ".gitignore").write_text("*.o\ncache/\n")
        (work / "kept.txt").write_text("kept\n")
        (work / "gone.txt").write_text("gone\n")
        (work / "dir").mkdir()
        (work / "dir" / "f.txt").write_text("f\n")
        history = History(tmp_path / f"{name}.git", work)
        a0 = history.commit_all(history.create("A_0"), "loop 0", loop=0)
        changed = _changes(work, also)
        commit = history.commit_all(a0, "loop 1", loop=1, changed=changed if fed else None)
        trees.append(run_git(["ls-tree", "-r", "--full-tree", commit], cwd=history.git_dir))
    assert trees[0] == trees[1]
    assert "new/a.txt" in trees[1] and "120000" in trees[1] and "build.o" not in trees[1]
    assert "cache/" not in trees[1] and ("gone.txt" in trees[1]) == (also != "a deleted file")
