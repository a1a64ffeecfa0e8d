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

from hoh.harness.sandbox import JailSpec

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


# -- the Developer: the kernel's feed, and the full scan when it cannot be sure -----------------------------

def _developer_does(script: dict, loop: int, command: str) -> dict:
    dev = script["loops"][loop]["developer"]
    script["loops"][loop]["developer"] = {**dev, "actions": [*dev["actions"], {"run": command}]}
    return script


def _candidate_files(ws: Path, commit: str) -> dict[str, str]:
    out = _git(ws, "ls-tree", "-r", "-z", "--name-only", commit)
    return {name: _git(ws, "show", f"{commit}:{name}") for name in out.split("\0") if name}


def _frozen_exactly(p, loop: int) -> dict[str, str]:
    """The candidate of `loop`, the last, holds exactly the project tree as it is (ignored files apart)."""
    files = _candidate_files(p.ws, p.loop_json(loop, "candidate")["commit"])
    on_disk = _files(p.ws / "project")
    ignored = set(on_disk) - set(files)
    assert all(name.endswith(".ignored") for name in ignored), ignored
    assert {k: v for k, v in on_disk.items() if k not in ignored} == files
    return files


JAIL = {"sandbox.mode": "bwrap"}


def test_the_freeze_takes_every_path_the_developer_touched_from_the_feed_without_a_full_scan(make_project):
    moves = ("mkdir -p deep/a/b/c && echo x > deep/a/b/c/f && mv deep moved; "
             "for i in $(seq 60); do mkdir -p n$i/x/y && echo $i > n$i/x/y/f; done; "
             "mkdir -p .git/elsewhere && echo y > .git/elsewhere/g && mv .git/elsewhere from-git; "
             "echo tmp > t.tmp && mv t.tmp renamed.txt; chmod +x renamed.txt; "
             "echo '*.ignored' > .gitignore; echo s > keep.ignored; ln -s greet.py link.py; true")
    p = make_project(_developer_does(mini_script(2), 1, moves))
    p.script = _developer_does(p.script, 2, "rm -r n7 moved/a/b; mkdir -p n8/new && echo z > n8/new/q; mv n9 n9b; "
                                            "echo more >> renamed.txt; rm link.py; true")
    p.write_script()
    assert p.build(loops=2, sets=JAIL).status == "finished"
    first = _candidate_files(p.ws, p.loop_json(1, "candidate")["commit"])
    assert {"moved/a/b/c/f", "n60/x/y/f", "from-git/g", "renamed.txt", ".gitignore", "link.py"} <= set(first)
    assert "deep/a/b/c/f" not in first and "keep.ignored" not in first
    second = _frozen_exactly(p, 2)
    assert "n7/x/y/f" not in second and "moved/a/b/c/f" not in second and "n9b/x/y/f" in second
    assert second["n8/new/q"] == "z\n" and second["renamed.txt"] == "tmp\nmore\n" and "link.py" not in second
    # Loop 1 wrote an ignore file (only a full scan finds what it unignores); loop 2's freeze is the feed's.
    assert [e for e in _full_scans(p) if e[1] == "freeze"] == [(1, "freeze", "project", "feed_unsure")]


def test_a_write_through_a_hard_link_is_never_hidden_from_the_freeze(make_project):
    # Every link's target is a file the Developer does not write by its own name in that loop.
    p = make_project(_developer_does(mini_script(3), 1, "echo a > a.txt && ln a.txt b.txt; echo c > c.txt; true"))
    p.script = _developer_does(p.script, 2, "echo evil >> b.txt; true")  # a.txt changes without a name of its own
    p.script = _developer_does(p.script, 3, "ln c.txt .hidden && echo evil2 >> .hidden && rm .hidden; "
                                            "ln c.txt .git/x 2>/dev/null || echo cross-mount-refused > refused; true")
    p.write_script()
    assert p.build(loops=3, sets=JAIL).status == "finished"
    assert _candidate_files(p.ws, p.loop_json(2, "candidate")["commit"])["a.txt"] == "a\nevil\n"
    third = _frozen_exactly(p, 3)
    assert third["c.txt"] == "c\nevil2\n" and third["refused"] == "cross-mount-refused\n"
    scans = _full_scans(p)
    assert (2, "freeze", "project", "feed_unsure") in scans and (3, "freeze", "project", "feed_unsure") in scans


def test_a_hard_link_made_inside_a_new_unwatched_directory_is_never_hidden_either(make_project):
    p = make_project(_developer_does(mini_script(3), 1, "echo o > other.txt"))
    p.script = _developer_does(p.script, 2, "mkdir -p gone/x && ln other.txt gone/x/l && echo evil2 >> gone/x/l && "
                                            "rm -r gone; true")
    p.script = _developer_does(p.script, 3, "mkdir kept && ln other.txt kept/l && echo evil3 >> kept/l; true")
    p.write_script()
    assert p.build(loops=3, sets=JAIL).status == "finished"
    assert _candidate_files(p.ws, p.loop_json(2, "candidate")["commit"])["other.txt"] == "o\nevil2\n"
    third = _frozen_exactly(p, 3)
    assert third["other.txt"] == "o\nevil2\nevil3\n" and third["kept/l"] == third["other.txt"]
    scans = _full_scans(p)
    assert (2, "freeze", "project", "feed_unsure") in scans and (3, "freeze", "project", "feed_unsure") in scans


def test_an_ignore_file_changed_by_the_developer_is_a_full_scan_that_finds_what_it_unignored(make_project):
    p = make_project(_developer_does(mini_script(2), 1, "echo secret.txt > .gitignore && echo s > secret.txt"))
    p.script = _developer_does(p.script, 2, ": > .gitignore")
    p.write_script()
    assert p.build(loops=2, sets=JAIL).status == "finished"
    assert "secret.txt" not in _candidate_files(p.ws, p.loop_json(1, "candidate")["commit"])
    assert _frozen_exactly(p, 2)["secret.txt"] == "s\n"
    assert (2, "freeze", "project", "feed_unsure") in _full_scans(p)


def test_a_flood_that_overflows_the_kernel_queue_is_a_full_scan_that_takes_every_file(make_project):
    queued = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    n = queued // 2 + 100  # each new file is at least a create and a close-after-write
    # Into a directory that is watched (one made in this loop is taken whole, without events inside it).
    flood = f"python3 -c \"[open(f'flood/f{{i}}', 'w').write(str(i)) for i in range({n})]\""
    p = make_project(_developer_does(mini_script(2), 1, "mkdir flood && echo 0 > flood/first"))
    p.script = _developer_does(p.script, 2, flood)
    p.write_script()
    assert p.build(loops=2, sets=JAIL).status == "finished"
    assert len(_frozen_exactly(p, 2)) == n + 2  # greet.py, flood/first, the flood
    assert (2, "freeze", "project", "feed_overflow") in _full_scans(p)


def test_a_developer_without_the_jail_is_frozen_by_a_journaled_full_scan(make_project):
    p = make_project(_developer_does(mini_script(1), 1, "mkdir -p x && echo 1 > x/y"))
    assert p.build(loops=1, sets={"sandbox.mode": "off"}).status == "finished"
    assert _frozen_exactly(p, 1)["x/y"] == "1\n"
    assert (1, "freeze", "project", "no_jail") in _full_scans(p)


def test_a_feed_that_goes_on_from_one_freeze_to_the_next_misses_nothing(make_project):
    """The watches set up once go on from loop to loop while no directory is made, moved or removed; what
    happened between two freezes is all reported, hoh's own reset of a Developer that failed included."""
    p = make_project(_developer_does(mini_script(4), 1, "mkdir -p d/e && echo 1 > d/e/one.txt && echo 1 > two.txt"))
    dev = p.script["loops"][2]["developer"]
    bad = {**dev, "reply": {"summary": 7}}
    p.script["loops"][2]["developer"] = [{**bad, "actions": [*dev["actions"], {"run": "echo junk > d/e/one.txt; "
                                                                                      "echo junk > two.txt"}]},
                                         {"reply": bad["reply"]}]
    p.script = _developer_does(p.script, 3, "echo 3 > three.txt")
    p.script = _developer_does(p.script, 4, "echo 4 >> d/e/one.txt")
    p.write_script()
    assert p.build(loops=4, sets={**JAIL, "policy.max_retries": 1,
                                          "policy.on_role_failure": "continue"}).status == "finished"
    assert not p.state("loops", "0002", "candidate.json").exists()  # its Developer failed: reset, not frozen
    third = _candidate_files(p.ws, p.loop_json(3, "candidate")["commit"])
    assert third["d/e/one.txt"] == "1\n" and third["two.txt"] == "1\n" and third["three.txt"] == "3\n"
    assert _frozen_exactly(p, 4)["d/e/one.txt"] == "1\n4\n"
    assert [e for e in _full_scans(p) if e[1] == "freeze"] == []
