"""Parallel Developers hold the same contracts as one (issue 41, part 5): whatever a work package's Developer
leaves in its copy ends as content in the candidate exactly as a lone Developer's project would (embedded
repositories of every kind made content, never a gitlink; names git refuses left out; unreadable files read), or
as that package's failure with git's reason (dropped, merge.json); never an exception that ends the build, never
a state that makes `hoh resume` fail. The tests read persisted state: history.git's trees, merge.json, the
packages' results, the journal; the corpus runs again as an unprivileged user (`test_as_user.py`)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import mini_loop, run_hoh

from hoh import api
from hoh.store.embedded import remove_tree
from hoh.store.gitrun import GitError
from hoh.store.merging import PackageGit
from hoh.store.staging import refused_name

REPLY = {"self_tests": [], "known_gaps": []}
GITLINK = "160000"


def _git(*args: str, cwd: Path | None = None, check: bool = True) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "u",
           "GIT_AUTHOR_EMAIL": "u@x", "GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@x"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=check,
                          errors="surrogateescape").stdout


def tree(ws: Path, rev: str) -> dict[str, tuple[str, str]]:
    """path → (mode, object) of every entry of `rev` in history.git, names as they are (NUL-separated)."""
    out = _git("--git-dir", str(ws / "history.git"), "ls-tree", "-r", "-z", "--full-tree", rev)
    entries = (e.split("\t", 1) for e in out.split("\0") if e)
    return {path: (meta.split()[0], meta.split()[2]) for meta, path in entries}


def show(ws: Path, rev: str, path: str) -> str:
    return _git("--git-dir", str(ws / "history.git"), "cat-file", "-p", f"{rev}:{path}")


def blob(ws: Path, rev: str, path: str) -> bytes:
    """A file of `rev` in history.git, its bytes as stored."""
    return subprocess.run(["git", "--git-dir", str(ws / "history.git"), "cat-file", "blob", f"{rev}:{path}"],
                          capture_output=True, check=True).stdout


def journal(ws: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (ws / "state" / "journal.jsonl").read_text().splitlines()]


def loop_file(ws: Path, t: int, *name: str) -> dict[str, Any]:
    return json.loads((ws / "state" / "loops" / f"{t:04d}").joinpath(*name).read_text())


def task(n: int, checks: int = 1) -> dict[str, Any]:
    return {"id": f"T{n}", "title": f"part {n}", "details": "", "issues": [],
            "acceptance": [{"id": f"T{n}.A{k}", "condition": f"part {n}, check {k}", "method": "black-box"}
                           for k in range(1, checks + 1)]}


def developer(n: int, actions: list[dict[str, Any]], reply_text: str | None = None) -> dict[str, Any]:
    if reply_text is not None:
        return {"actions": actions, "reply_text": reply_text}
    return {"actions": actions, "reply": {"summary": f"part {n}", "tasks": [{"id": f"T{n}", "status": "done",
                                                                            "notes": ""}], **REPLY}}


def two_packages(p1: list[dict[str, Any]], p2: list[dict[str, Any]], checks: list[dict[str, Any]],
                 owns: tuple[list[str], list[str]] = (["a.py"], ["b.py"])) -> dict[str, Any]:
    """One loop of two packages: P1 writes a.py then does `p1`, P2 writes b.py then does `p2`; QA runs `checks`."""
    tasks = [task(1), task(2, 1 + len(checks))]
    checks = [{"id": "T1.A1", "run": "cat a.py", "expect_stdout": "print(1)"}, *checks]
    return {"planner": {"reply": {"goal": "two parts at once", "tasks": tasks,
                                  "preserve": [], "out_of_scope": [],
                                  "packages": [{"id": "P1", "tasks": ["T1"], "owns": owns[0]},
                                               {"id": "P2", "tasks": ["T2"], "owns": owns[1]}]}},
            "developer@P1": developer(1, [{"write": {"path": "a.py", "content": "print(1)\n"}}, *p1]),
            "developer@P2": developer(2, [{"write": {"path": "b.py", "content": "print(2)\n"}}, *p2]),
            "qa": {"checks": [*checks, {"id": "T2.A1", "run": "cat b.py", "expect_stdout": "print(2)"}]}}


def write_project(root: Path, script: dict[str, Any]) -> tuple[Path, Path]:
    """spec.md and script.yaml (the scripted agent's, read beside the spec); the workspace's path."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "spec.md").write_text("# Two parts\n\nWrite both parts.\n")
    (root / "script.yaml").write_text(yaml.safe_dump(script, sort_keys=False))
    return root / "spec.md", root / "ws"


# ---- must show 5: embedded repositories in packages are content, and the run goes on ---------------------------
NO_COMMIT = "mkdir sub && cd sub && git init -q && echo e > e.txt && test -d .git"
COMMITTED = ("mkdir lib && cd lib && git init -q && echo f > f.txt && mkdir inner && cd inner && git init -q && "
             "echo i > i.txt && git add -A && git -c user.name=a -c user.email=a@b commit -q -m inner && cd .. && "
             "git add -A && git -c user.name=a -c user.email=a@b commit -q -m lib && "
             "test \"$(git ls-files -s inner | cut -c1-6)\" = 160000")  # inner is lib's gitlink


def test_packages_leaving_nested_repositories_freeze_them_as_content_and_resume_goes_on(tmp_path):
    loop = two_packages([{"run": NO_COMMIT}], [{"run": COMMITTED}],
                        [{"id": "T2.A2", "run": "cat lib/f.txt", "expect_stdout": "f"},
                         {"id": "T2.A3", "run": "cat lib/inner/i.txt", "expect_stdout": "i"},
                         {"id": "T2.A4", "run": "cat sub/e.txt", "expect_stdout": "e"}],
                        owns=(["a.py", "sub/"], ["b.py", "lib/"]))
    spec, ws = write_project(tmp_path, {"schema_version": 1, "loops": {1: loop, 2: mini_loop(2)}})
    built = run_hoh("build", spec, "--developers", "2", "--loops", "1", "-w", ws, "-q")
    assert built.returncode == 0, built.stderr

    # Both packages merged, each embedded repository made content (the same as the single path's freeze).
    merge = loop_file(ws, 1, "merge.json")
    assert merge["merged"] == [{"package": "P1", "how": "clean"}, {"package": "P2", "how": "clean"}]
    assert merge["dropped"] == []
    assert loop_file(ws, 1, "packages", "P1.json")["flattened"] == ["sub"]
    assert loop_file(ws, 1, "packages", "P2.json")["flattened"] == ["lib", "lib/inner"]
    candidate = loop_file(ws, 1, "candidate.json")
    frozen = tree(ws, candidate["commit"])
    assert GITLINK not in {mode for mode, _ in frozen.values()}
    assert set(frozen) == {"a.py", "b.py", "sub/e.txt", "lib/f.txt", "lib/inner/i.txt"}
    assert tree(ws, "loop-0001") == frozen and merge["tree"] == candidate["tree"]
    assert show(ws, "loop-0001", "lib/inner/i.txt") == "i\n"
    # QA read every file on the merged candidate.
    qa = loop_file(ws, 1, "qa.json")
    assert qa["candidate_id"] == candidate["candidate_id"] and qa["verdict"] == "pass"
    assert {c["id"]: c["status"] for c in qa["criteria"]} == {
        "T1.A1": "verified", "T2.A1": "verified", "T2.A2": "verified", "T2.A3": "verified", "T2.A4": "verified"}

    resumed = run_hoh("resume", "-w", ws, "--loops", "1", "-q")
    assert resumed.returncode == 0, resumed.stderr
    finished = [e for e in journal(ws) if e["event"] == "loop_finished"]
    assert [(e["loop"], e["status"]) for e in finished] == [(1, "pass"), (2, "pass")]
    second = tree(ws, "loop-0002")
    assert GITLINK not in {mode for mode, _ in second.values()}
    assert {"greet.py", "sub/e.txt", "lib/inner/i.txt"} <= second.keys()


# ---- the two paths the same: what a Developer leaves ends the same in its candidate, one Developer or several ----
def plants(outside: Path) -> str:
    """Everything a Developer may leave that git will not take as it is, in one shell command (run where the
    Developer works: the project, or a package's copy), each in its own subshell."""
    return " && ".join(f"({plant})" for plant in [
        NO_COMMIT,
        COMMITTED,
        # nested in a repository without a commit, with one
        "mkdir -p deep/one && cd deep && git init -q && cd one && git init -q && echo d > d.txt && "
        "git add -A && git -c user.name=a -c user.email=a@b commit -q -m d",
        # a repository with a commit holding what git refuses: a name it will not record, a file nobody may read
        "mkdir held && cd held && git init -q && echo h > h.txt && git add h.txt && "
        "git -c user.name=a -c user.email=a@b commit -q -m h && mkdir .GIT && echo x > .GIT/x && echo k > k.txt && "
        "chmod 000 k.txt",
        # a .git file pointing outside (a real repository there), a .git link to it, a .git file pointing nowhere
        f"mkdir pointer && echo 'gitdir: {outside}/.git' > pointer/.git && echo p > pointer/p.txt",
        f"mkdir linked && ln -s {outside}/.git linked/.git && echo l > linked/l.txt",
        "mkdir dangling && echo 'gitdir: /nowhere' > dangling/.git && echo n > dangling/n.txt",
        # repositories git would wait on (a FIFO for HEAD) or read the machine through (a link, a commondir)
        "mkdir -p waits/.git/refs waits/.git/objects && mkfifo waits/.git/HEAD && echo w > waits/w.txt",
        "mkdir -p leak/.git/refs/heads leak/.git/objects && echo 'ref: refs/heads/main' > leak/.git/HEAD && "
        "ln -s /etc/passwd leak/.git/packed-refs && echo l > leak/l.txt",
        "mkdir -p common/.git/refs common/.git/objects && echo 'ref: refs/heads/main' > common/.git/HEAD && "
        "echo /etc > common/.git/commondir && echo c > common/c.txt",
        # names git refuses: .git as another system reads it; a link named .gitmodules
        "mkdir .GIT && echo c > .GIT/config && mkdir -p s/.Git && echo x > s/.Git/f",
        "mkdir 'git~1' '.git.' '.git ' && echo t > 'git~1/f' && echo d > '.git./f' && echo s > '.git /f'",
        "ln -s /etc/passwd .gitmodules",
        # submodule-looking content, attributes naming drivers no config defines, an ignore file
        "mkdir mods && printf '[submodule \"x\"]\\n\\tpath = x\\n\\turl = ext::false\\n' > mods/.gitmodules",
        "printf '* filter=evil merge=evil diff=evil\\n' > .gitattributes && echo g > guarded.txt",
        "printf 'hidden.txt\\n' > .gitignore && echo h > hidden.txt",
        # attributes that would change the bytes (an end-of-line conversion, $Id$) or fail every add (an encoding
        # no iconv knows): history.git's own attributes outrank them
        "mkdir attrs && printf '*.enc working-tree-encoding=NO-SUCH-CODE\\n*.crlf text eol=crlf\\n*.id ident\\n' "
        "> attrs/.gitattributes && printf 'a\\r\\nb\\n' > attrs/x.crlf && printf 'e\\n' > attrs/x.enc && "
        "printf '$Id$\\n' > attrs/x.id",
        # what is not a file, links out of the tree, a file and a directory nobody may read, odd names
        "mkfifo fifo && python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")'",
        "ln -s /etc/passwd passwd-link && ln -s / root-link",
        "echo locked > locked.txt && chmod 000 locked.txt",
        "mkdir shut && echo s > shut/s.txt && chmod 000 shut",
        "printf n > \"$(printf 'new\\nline')\" && printf u > \"$(printf 'bad\\377name')\"",
    ])


@pytest.fixture
def outside(tmp_path) -> Path:
    """A repository outside every workspace, which a .git file or link in the project points at."""
    repo = tmp_path / "outside"
    repo.mkdir()
    _git("init", "-q", cwd=repo)
    _git("commit", "-q", "--allow-empty", "-m", "outside", cwd=repo)
    return repo


def test_a_package_leaves_what_a_lone_developer_leaves(tmp_path, outside):
    leave = plants(outside)
    single = copy.deepcopy(mini_loop(1))
    single["developer"]["actions"].append({"run": leave})
    spec, one = write_project(tmp_path / "one", {"schema_version": 1, "loops": {1: single}})
    assert api.build(spec, one, _config()).status == "finished"
    loop = two_packages([{"run": leave}], [], [])
    loop["developer@P1"]["actions"].insert(0, single["developer"]["actions"][0])  # greet.py, as the lone one
    spec, two = write_project(tmp_path / "two", {"schema_version": 1, "loops": {1: loop}})
    assert api.build(spec, two, _config(developers=2)).status == "finished"

    lone, merged = tree(one, "loop-0001"), tree(two, "loop-0001")
    assert loop_file(two, 1, "merge.json")["dropped"] == []
    assert {k: v for k, v in merged.items() if k not in ("a.py", "b.py")} == lone
    assert GITLINK not in {mode for mode, _ in merged.values()}
    assert {"sub/e.txt", "lib/f.txt", "lib/inner/i.txt", "deep/one/d.txt", "pointer/p.txt", "linked/l.txt",
            "dangling/n.txt", "mods/.gitmodules", ".gitattributes", "guarded.txt", "locked.txt", "new\nline",
            "bad\udcffname", "passwd-link", "root-link"} <= merged.keys()
    assert merged["passwd-link"][0] == merged["root-link"][0] == "120000"
    assert show(two, "loop-0001", "locked.txt") == "locked\n"  # read, as root reads it
    assert show(two, "loop-0001", "held/k.txt") == "k\n"
    assert not {"hidden.txt", "fifo", "sock", ".gitmodules"} & merged.keys()
    assert not [p for p in merged if p.split("/")[0] in (".GIT", "git~1", ".git.", ".git ") or "/.Git/" in p]
    p1 = loop_file(two, 1, "packages", "P1.json")
    assert p1["flattened"] == ["common", "dangling", "deep", "deep/one", "held", "leak", "lib", "lib/inner", "linked",
                               "pointer", "sub", "waits"]
    assert {"waits/w.txt", "leak/l.txt", "common/c.txt"} <= merged.keys()
    assert p1["left_out"] == [".GIT", ".git ", ".git.", ".gitmodules", "git~1", "held/.GIT", "s/.Git"]
    assert (outside / ".git" / "HEAD").is_file() and _git("log", "--format=%s", cwd=outside) == "outside\n"
    assert show(two, "loop-0001", "shut/s.txt") == "s\n"  # opened, as root opens it
    assert {name: blob(two, "loop-0001", f"attrs/{name}") for name in ("x.crlf", "x.enc", "x.id")} == {
        "x.crlf": b"a\r\nb\n", "x.enc": b"e\n", "x.id": b"$Id$\n"}  # byte for byte


def _config(developers: int = 1, **sets: Any):
    from hoh.config import HohConfig, apply_overrides
    values = {"harness.name": "scripted", "policy.developers": developers, **sets}
    return apply_overrides(HohConfig(loops=1), [f"{k}={json.dumps(v)}" for k, v in values.items()])


def test_no_driver_a_package_names_runs_in_its_commit_or_the_merge(tmp_path):
    # Each copy gets a .git/config of its own at its top and in an embedded repository, defining the merge and
    # filter drivers its .gitattributes name; both packages change the same file, so git merges it. Only hoh's
    # git, outside the jail, could write the marker: none of its git commands reads a config a role wrote.
    marker = tmp_path / "outside" / "driver-ran"
    marker.parent.mkdir()
    drivers = (f"printf '[merge \"evil\"]\\n\\tdriver = touch {marker}-merge\\n[filter \"evil\"]\\n"
               f"\\tclean = touch {marker}-clean; cat\\n\\tsmudge = touch {marker}-smudge; cat\\n'")
    plant = (f"mkdir -p .git && {drivers} > .git/config && printf '* merge=evil filter=evil\\n' > .gitattributes && "
             f"mkdir sub && cd sub && git init -q && {drivers} >> .git/config && "
             "printf '* filter=evil\\n' > .gitattributes && echo s > s.txt && git add -A && "
             "git -c user.name=a -c user.email=a@b commit -q -m s && echo changed > s.txt")
    shared = "printf 'from P%s\\n' > shared.txt"
    loop = two_packages([{"run": f"{plant} && cd .. && {shared % 1}"}], [{"run": f"{plant} && cd .. && {shared % 2}"}],
                        [], owns=(["a.py", "shared.txt"], ["b.py"]))
    loop["developer@merge-P2"] = developer(2, [{"write": {"path": "shared.txt", "content": "from P1\nfrom P2\n"}}])
    spec, ws = write_project(tmp_path, {"schema_version": 1, "loops": {1: loop}})
    assert api.build(spec, ws, _config(developers=2)).status == "finished"
    assert loop_file(ws, 1, "merge.json")["merged"] == [{"package": "P1", "how": "clean"},
                                                        {"package": "P2", "how": "resolved"}]
    assert list(marker.parent.iterdir()) == []
    frozen = tree(ws, "loop-0001")
    assert show(ws, "loop-0001", "shared.txt") == "from P1\nfrom P2\n" and show(ws, "loop-0001", "sub/s.txt") == "changed\n"
    assert {".gitattributes", "sub/.gitattributes"} <= frozen.keys() and GITLINK not in {m for m, _ in frozen.values()}
    assert loop_file(ws, 1, "qa.json")["verdict"] == "pass"


# ---- what git cannot do is the package's failure, never the run's ----------------------------------------------
def test_a_tree_git_cannot_commit_drops_its_package_with_gits_reason_and_resume_goes_on(tmp_path, monkeypatch):
    # What git refused of a role's tree is settled (`staging.py`), and history.git's attributes outrank a role's
    # (an encoding no iconv knows once failed every add): should git still refuse one (a full disk, a bug), that is
    # the package's end, with git's words, never the run's.
    real = PackageGit.commit_copy

    def refusing(self, dest, index, parent, message, loop):
        if message.endswith("package P1"):
            raise GitError(f"git --git-dir {dest} add -A failed", code=128,
                           stderr="fatal: NO-SUCH-CODE: cannot convert\n")
        return real(self, dest, index, parent, message, loop)

    monkeypatch.setattr(PackageGit, "commit_copy", refusing)
    loop = two_packages([], [], [])
    spec, ws = write_project(tmp_path, {"schema_version": 1, "loops": {1: loop, 2: mini_loop(2)}})
    assert api.build(spec, ws, _config(developers=2)).status == "finished"
    merge = loop_file(ws, 1, "merge.json")
    assert merge["merged"] == [{"package": "P2", "how": "clean"}]
    [dropped] = merge["dropped"]
    assert dropped["package"] == "P1" and dropped["reason"].startswith("git cannot commit its tree: ")
    assert "NO-SUCH-CODE" in dropped["reason"] and "--git-dir" not in dropped["reason"]  # git's words, not argv
    p1 = loop_file(ws, 1, "packages", "P1.json")
    assert p1["commit"] is None and p1["error"] == dropped["reason"]
    assert [(e["package"], e["reason"]) for e in journal(ws) if e["event"] == "package_dropped"] == [
        ("P1", dropped["reason"])]
    assert set(tree(ws, "loop-0001")) == {"b.py"}
    assert api.resume(ws, more_loops=1).status == "finished"
    assert [e["loop"] for e in journal(ws) if e["event"] == "loop_finished"] == [1, 2]


def test_a_conflict_in_a_name_git_would_quote_is_still_found(tmp_path):
    # Both packages write a file whose name git quotes in a plain listing (a newline, a byte not UTF-8); the merge
    # attempt leaves git's markers in it: found, so the package is dropped, never merged with them.
    name = "we\nird\udce9.txt"
    write = "printf 'from P%s\\n' > \"$(printf 'we\\nird\\351.txt')\""
    loop = two_packages([{"run": write % 1}], [{"run": write % 2}], [], owns=(["a.py"], ["b.py"]))
    loop["developer@merge-P2"] = developer(2, [])
    spec, ws = write_project(tmp_path, {"schema_version": 1, "loops": {1: loop}})
    assert api.build(spec, ws, _config(developers=2)).status == "finished"
    [dropped] = loop_file(ws, 1, "merge.json")["dropped"]
    assert dropped["package"] == "P2" and "conflict markers left in" in dropped["reason"]
    assert show(ws, "loop-0001", name) == "from P1\n" and "b.py" not in tree(ws, "loop-0001")


def test_a_package_never_writes_into_a_workspace_inside_the_project(tmp_path):
    # The workspace lives inside the project (`--project .`): a package's copy holds the same relative path, and
    # what its Developer writes there never reaches the candidate, nor, through the merge, the workspace itself.
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("readme\n")
    plant = ("mkdir -p ws/state ws/history.git/objects/info && echo planted > ws/state/planted.txt && "
             "echo /tmp > ws/history.git/objects/info/alternates && echo x > ws/hoh.yaml")
    loop = two_packages([{"run": plant}], [], [])
    spec, _ = write_project(tmp_path, {"schema_version": 1, "loops": {1: loop}})
    ws = project / "ws"
    assert api.build(spec, ws, _config(developers=2), project=project).status == "finished"
    assert loop_file(ws, 1, "merge.json")["dropped"] == []
    assert not [p for p in tree(ws, "loop-0001") if p.startswith("ws/")]
    assert not (ws / "state" / "planted.txt").exists()
    assert not (ws / "history.git" / "objects" / "info" / "alternates").exists()
    assert "harness" in (ws / "hoh.yaml").read_text()


@pytest.mark.parametrize("developers", [1, 2])
def test_a_submodule_a_role_leads_out_of_the_tree_is_never_opened_and_the_run_goes_on(tmp_path, developers):
    # The user's project has a submodule (a gitlink); a Developer gives it a repository whose packed-refs is a link
    # to a file of the machine. hoh's git would resolve the submodule's HEAD through it and quote the file's lines
    # in its error (the journal, the package's result, the next prompt), at every freeze: the repository is
    # removed unopened (`store/nested.py`).
    secret = f"hoh-machine-secret-{os.getpid()}"
    (tmp_path / "machine.txt").write_text(f"{secret}:first line\n{secret}:second line\n")
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "README.md").write_text("readme\n")
    _git("init", "-q", cwd=project / "sub")
    _git("commit", "-q", "--allow-empty", "-m", "the submodule", cwd=project / "sub")
    plant = ("rm -rf sub/.git && mkdir -p sub/.git/refs/heads sub/.git/objects && "
             "echo 'ref: refs/heads/main' > sub/.git/HEAD && "
             f"ln -s {tmp_path / 'machine.txt'} sub/.git/packed-refs && echo s > sub/s.txt")
    if developers == 1:
        loop = copy.deepcopy(mini_loop(1))
        loop["developer"]["actions"].append({"run": plant})
    else:
        loop = two_packages([{"run": plant}], [], [])
    spec, _ = write_project(tmp_path, {"schema_version": 1, "loops": {1: loop, 2: mini_loop(2)}})
    ws = tmp_path / "ws"
    assert api.build(spec, ws, _config(developers=developers), project=project).status == "finished"
    # The submodule stays as A_0 had it: its repository gone (never opened), git takes it as unchanged.
    assert tree(ws, "loop-0001^")["sub"] == tree(ws, "loop-0001")["sub"] and tree(ws, "loop-0001")["sub"][0] == GITLINK
    for path in [*ws.rglob("*"), *tmp_path.glob("*.yaml")]:
        if path.is_file() and not path.is_symlink() and "history.git" not in path.parts:
            assert secret not in path.read_text(errors="replace"), path
    assert api.resume(ws, more_loops=1).status == "finished"


def test_a_package_that_shuts_its_own_copy_is_still_committed(tmp_path):
    # Its Developer takes every permission from the top of its copy, as its last act: hoh's user (root or not)
    # still commits what it wrote there.
    loop = two_packages([{"run": "chmod 000 ."}], [], [])
    spec, ws = write_project(tmp_path, {"schema_version": 1, "loops": {1: loop}})
    assert api.build(spec, ws, _config(developers=2)).status == "finished"
    assert loop_file(ws, 1, "merge.json")["dropped"] == []
    assert set(tree(ws, "loop-0001")) == {"a.py", "b.py"}


# ---- a copy left in any state is made again on resume --------------------------------------------------------
LEFT_BEHIND = ("mkdir shut && echo s > shut/s && chmod 000 shut && mkdir fixed && echo f > fixed/f && "
               "chmod 500 fixed && python3 -c \"import os\nfor _ in range(1200):\n    os.mkdir('d'); os.chdir('d')\"")


def test_a_copy_its_developer_left_unremovable_is_made_again_on_resume(tmp_path):
    loop = two_packages([], [], [])
    script = {"schema_version": 1, "loops": {1: copy.deepcopy(loop)}}
    for n in (1, 2):
        script["loops"][1][f"developer@P{n}"] = developer(n, [{"run": LEFT_BEHIND}], reply_text="not json")
    spec, ws = write_project(tmp_path, script)
    report = api.build(spec, ws, _config(developers=2, **{"policy.max_retries": 0}))
    assert report.status == "failed" and "its Developer failed" in report.error
    left = ws / "scratch" / "loop-0001" / "packages" / "P1"
    assert (left / "shut").is_dir() and (left / "d" / "d").is_dir()
    (ws / "script.yaml").write_text(yaml.safe_dump({"schema_version": 1, "loops": {1: loop}}, sort_keys=False))
    assert api.resume(ws).status == "finished"
    assert set(tree(ws, "loop-0001")) == {"a.py", "b.py"}
    assert sorted(os.listdir(left)) == ["a.py"]


# ---- the pieces ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,link,refused", [
    (".git", False, True), (".GIT", False, True), (".Git", False, True), (".git.", False, True),
    (".git ", False, True), (".git. .", False, True), ("git~1", False, True), ("GIT~1", False, True),
    (".git:stream", False, True), ("x\\.git", False, True), (".gitx", False, False), ("git", False, False),
    ("git~2", False, False), (".github", False, False), (".gitignore", False, False), (".gitmodules", False, False),
    (".gitmodules", True, True), (".GITMODULES.", True, True), ("gitmod~1", True, True), ("gi7eba~3", True, True),
    (".gitattributes", True, False),
])
def test_the_names_git_refuses(name, link, refused):
    assert refused_name(name, link) is refused


def test_remove_tree_removes_what_a_role_left_and_follows_no_link(tmp_path, outside):
    top = tmp_path / "copy"
    top.mkdir()
    subprocess.run(["bash", "-c", LEFT_BEHIND], cwd=top, check=True)
    (top / "out").symlink_to(outside)
    remove_tree(top)
    assert not os.path.lexists(top)
    assert (outside / ".git" / "HEAD").is_file()
    remove_tree(top)  # nothing there: nothing to do


# ---- what is too large for a candidate is left out before git reads it, one Developer or several -------------------
@pytest.mark.parametrize("developers", [1, 2])
def test_a_huge_sparse_file_is_left_out_and_the_freeze_and_resume_go_on(tmp_path, developers):
    # 100 GB of a sparse file cost the role nothing; git would read and compress every byte, past its timeout, at
    # every freeze and every resume.
    plant = "truncate -s 100G huge.bin && echo small > small.txt"
    if developers == 1:
        loop = copy.deepcopy(mini_loop(1))
        loop["developer"]["actions"].append({"run": plant})
    else:
        loop = two_packages([{"run": plant}], [], [])
    spec, ws = write_project(tmp_path, {"schema_version": 1, "loops": {1: loop, 2: mini_loop(2)}})
    assert api.build(spec, ws, _config(developers=developers)).status == "finished"
    files = tree(ws, "loop-0001")
    assert "small.txt" in files and "huge.bin" not in files
    if developers == 2:
        assert loop_file(ws, 1, "packages", "P1.json")["left_out"] == ["huge.bin"]
    assert api.resume(ws, more_loops=1).status == "finished"


def test_new_files_past_the_freeze_s_bounds_are_left_out_largest_first_and_a_parent_s_file_comes_back(
        tmp_path, monkeypatch):
    from hoh.store import sizes
    monkeypatch.setattr(sizes, "MAX_FILE_BYTES", 1_000_000)
    monkeypatch.setattr(sizes, "MAX_NEW_BYTES", 3_000_000)
    project = tmp_path / "project"
    project.mkdir()
    (project / "data.bin").write_bytes(b"the user's data\n")
    plant = ("head -c 1500000 /dev/zero > one.bin && for f in f1 f2 f3 f4; do head -c 900000 /dev/zero > $f.bin; done "
             "&& head -c 2000000 /dev/zero > data.bin")
    loop = copy.deepcopy(mini_loop(1))
    loop["developer"]["actions"].append({"run": plant})
    spec, _ = write_project(tmp_path, {"schema_version": 1, "loops": {1: loop}})
    ws = tmp_path / "ws"
    assert api.build(spec, ws, _config(), project=project).status == "finished"
    files = tree(ws, "loop-0001")
    assert not {"one.bin", "f1.bin"} & files.keys() and {"f2.bin", "f3.bin", "f4.bin"} <= files.keys()
    assert show(ws, "loop-0001", "data.bin") == "the user's data\n"  # left out: the parent's, not deleted
    assert (project / "data.bin").read_bytes() == b"the user's data\n" and not (project / "one.bin").exists()
