"""`hoh build SPEC --project DIR`: an existing directory, with or without files and its own git
history, is the project; its content is A_0, while the authoritative history and state/ stay in
the workspace. And the project's own .git, which agents may use, cannot lose a loop."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import run_hoh

SPEC = "# Greeter\n\nExtend the existing greeter.\n"


def git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@x", "GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@x",
           "PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout.strip()


def loop(t: int) -> dict:
    """Loop t appends a line to the user's greet.py, which loop 1 must find already there."""
    return {
        "planner": {"reply": {"goal": f"loop {t}", "preserve": [], "out_of_scope": [], "tasks": [
            {"id": "T1", "title": "Extend", "details": "extend greet.py", "issues": [],
             "acceptance": [{"id": "T1.A1", "condition": "greet.py runs", "method": "black-box"}]}]}},
        "developer": {"actions": [{"run": f"test -f greet.py && echo '# loop {t}' >> greet.py"}],
                      "reply": {"summary": "s", "tasks": [{"id": "T1", "status": "done", "notes": ""}],
                                "self_tests": [], "known_gaps": []}},
        "qa": {"checks": [{"id": "T1.A1", "run": "python3 greet.py", "expect_stdout": "hello"}]},
    }


@pytest.fixture
def user_project(tmp_path) -> Path:
    """A user's repository: two commits on branch `trunk`, an uncommitted edit, an ignored file."""
    project = tmp_path / "myapp"
    project.mkdir()
    git(project, "init", "-q", "-b", "trunk")
    (project / "greet.py").write_text('print("hello")\n')
    (project / ".gitignore").write_text("*.log\n")
    git(project, "add", ".")
    git(project, "commit", "-q", "-m", "first")
    (project / "README.md").write_text("my app\n")
    git(project, "add", ".")
    git(project, "commit", "-q", "-m", "second")
    (project / "notes.txt").write_text("uncommitted\n")
    (project / "debug.log").write_text("ignored, and kept\n")
    return project


def write_spec(tmp_path: Path, loops: int) -> Path:
    (tmp_path / "spec.md").write_text(SPEC)
    (tmp_path / "script.yaml").write_text(yaml.safe_dump({"schema_version": 1,
                                                          "loops": {t: loop(t) for t in range(1, loops + 3)}}))
    return tmp_path / "spec.md"


def test_an_existing_repository_is_loop_1s_start_and_keeps_its_history(user_project, tmp_path):
    spec, ws = write_spec(tmp_path, 2), tmp_path / "ws"
    user_head = git(user_project, "rev-parse", "HEAD")
    result = run_hoh("build", spec, "--project", user_project, "--loops", "1", "-w", ws, "-q")
    assert result.returncode == 0, result.stderr

    identity = json.loads((ws / "state" / "workspace.json").read_text())
    assert identity["project_dir"] == str(user_project)
    a0 = identity["root_commit"]
    history = ["git", "--git-dir", str(ws / "history.git")]
    files = subprocess.run([*history, "ls-tree", "-r", "--name-only", a0], capture_output=True, text=True).stdout.split()
    assert sorted(files) == [".gitignore", "README.md", "greet.py", "notes.txt"]  # uncommitted edit in, ignored out
    assert subprocess.run([*history, "rev-parse", f"{a0}^"], capture_output=True, text=True).stdout.strip() == user_head

    # Loop 1 started from the user's files; its commit continues the user's own history.
    assert (user_project / "greet.py").read_text() == 'print("hello")\n# loop 1\n'
    assert git(user_project, "log", "--format=%s") .splitlines() == ["hoh loop 1: loop 1", "hoh: the project as it "
                                                                     "was (A_0)", "second", "first"]
    assert git(user_project, "symbolic-ref", "--short", "HEAD") == "trunk"
    assert git(user_project, "status", "--porcelain") == ""
    assert (user_project / "debug.log").read_text() == "ignored, and kept\n"
    assert not (user_project / "state").exists() and not (user_project / "history.git").exists()
    assert json.loads((ws / "state" / "loops" / "0001" / "qa.json").read_text())["verdict"] == "pass"

    resumed = run_hoh("resume", "-w", ws, "--loops", "1", "-q")
    assert resumed.returncode == 0, resumed.stderr
    assert (user_project / "greet.py").read_text().endswith("# loop 1\n# loop 2\n")
    assert git(user_project, "tag").split() == ["loop-0001", "loop-0002"]
    assert run_hoh("status", "-w", ws, "--verify").returncode == 0


def test_a_plain_directory_gets_no_git_of_its_own(tmp_path):
    # hoh never adds a .git to someone's directory (a task's verifier may look); the history is the workspace's.
    project = tmp_path / "plain"
    project.mkdir()
    (project / "greet.py").write_text('print("hello")\n')
    spec, ws = write_spec(tmp_path, 2), tmp_path / "ws"
    assert run_hoh("build", spec, "--project", project, "--loops", "2", "-w", ws, "-q").returncode == 0
    assert not (project / ".git").exists()
    assert (project / "greet.py").read_text().endswith("# loop 1\n# loop 2\n")
    assert git(ws, "--git-dir", "history.git", "log", "--format=%s").splitlines() == [
        "hoh loop 2: loop 2", "hoh loop 1: loop 1", "hoh: the project as it was (A_0)"]


def test_a_workspace_inside_the_project_is_never_part_of_it(user_project, tmp_path):
    spec = write_spec(tmp_path, 1)
    result = run_hoh("build", spec, "--project", ".", "--loops", "1", "-w", "hoh-work", "-q", cwd=user_project)
    assert result.returncode == 0, result.stderr
    tree = git(user_project, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert not any(name.startswith(("hoh-work", ".hoh-work")) for name in tree)
    assert (user_project / "hoh-work" / "state" / "journal.jsonl").exists()


def test_a_gitignore_that_unignores_the_workspace_inside_cannot_commit_or_clean_it(user_project, tmp_path):
    # The workspace's own ignore lines are hoh's, but a role's .gitignore outranks them; hoh's pathspecs do not.
    spec = write_spec(tmp_path, 2)
    script = yaml.safe_load((tmp_path / "script.yaml").read_text())
    script["loops"][1]["developer"]["actions"].append({"run": "printf '!/hoh-work/\\n!/hoh-work/**\\n' >> .gitignore"})
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script))
    result = run_hoh("build", spec, "--project", ".", "--loops", "1", "-w", "hoh-work", "-q", cwd=user_project)
    assert result.returncode == 0, result.stderr
    ws = user_project / "hoh-work"
    journal = (ws / "state" / "journal.jsonl").read_text()
    tree = git(ws, "--git-dir", "history.git", "ls-tree", "-r", "--name-only", "loop-0001").split()
    assert "!/hoh-work/" in (user_project / ".gitignore").read_text()  # the Developer's line is in
    assert not any(name.startswith("hoh-work") for name in tree)
    resumed = run_hoh("resume", "-w", ws, "--loops", "1", "-q")    # a reset and clean of the project
    assert resumed.returncode == 0, resumed.stderr
    assert (ws / "state" / "journal.jsonl").read_text().startswith(journal)
    assert run_hoh("status", "-w", ws, "--verify").returncode == 0


@pytest.mark.parametrize("case", ["missing", "file", "workspace", "inside"])
def test_bad_project_dirs_are_one_line_errors(case, tmp_path):
    spec, ws = write_spec(tmp_path, 1), tmp_path / "ws"
    project = {"missing": tmp_path / "nope", "file": spec, "workspace": tmp_path / "other-ws",
               "inside": ws / "project"}[case]
    if case == "workspace":
        assert run_hoh("build", spec, "--loops", "1", "-w", project, "-q").returncode == 0
    result = run_hoh("build", spec, "--project", project, "-w", ws, "-q")
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "--project" in result.stderr
    assert not ws.exists()


def test_a_deleted_project_git_is_rebuilt_and_no_loop_is_lost(user_project, tmp_path):
    spec, ws = write_spec(tmp_path, 2), tmp_path / "ws"
    script = yaml.safe_load((tmp_path / "script.yaml").read_text())
    dev = script["loops"][2]["developer"]
    script["loops"][2]["developer"] = [{**dev, "actions": dev["actions"] + [{"run": "rm -rf .git"}]}, dev]
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script))
    result = run_hoh("build", spec, "--project", user_project, "--loops", "2", "-w", ws, "-q")
    assert result.returncode == 0, result.stderr
    attempt = json.loads((ws / "state" / "loops" / "0002" / "roles" / "developer" / "attempt-1" / "result.json")
                         .read_text())
    assert [v["area"] for v in attempt["violations"]] == ["project .git"]
    # In the jail the Developer's .git is a mount of its own (no hard link joins it to the tree, `changefeed.py`):
    # `rm -rf` empties it but cannot remove it.
    changes = attempt["violations"][0]["changes"]
    assert changes == ["deleted .git"] or "deleted config" in changes
    log = git(user_project, "log", "--format=%s").splitlines()
    assert log == ["hoh loop 2: loop 2", "hoh loop 1: loop 1", "hoh: the project as it was (A_0)", "second", "first"]
    assert git(user_project, "tag").split() == ["loop-0001", "loop-0002"]
