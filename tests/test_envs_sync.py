"""What comes back from a role's environment is hostile input: `sync.apply` takes only what an honest
`inside.py collect` could have listed, inside the writable roots, never through a link (no Docker needed)."""

from __future__ import annotations

import json
import os

from hoh.envs import sync


def test_a_forged_change_list_changes_nothing_outside_the_writable_root_and_the_honest_changes_land(tmp_path):
    root, outside, came = tmp_path / "w", tmp_path / "outside", tmp_path / "came"
    (root / "sub").mkdir(parents=True)
    (root / "old.txt").write_text("old\n")
    (root / "gone.txt").write_text("gone\n")
    outside.mkdir()
    secret = outside / "secret"
    secret.write_text("keep\n")
    secret.chmod(0o600)
    (root / "out").symlink_to(outside)  # a link the role made earlier, kept as a link here
    files = came / "files"
    files.mkdir(parents=True)
    (files / "0").write_text("new\n")
    (files / "1").symlink_to(secret)  # its "copy" is a link to a file of this machine
    (files / "2").write_text("evil\n")
    changes = [
        ["del", str(root / "gone.txt")],
        ["put", str(root / "new.txt"), "f", 0o4755, None, 0],             # setuid dropped, content lands
        ["put", str(root / "linked.txt"), "f", 0o644, None, 1],           # a copy that is a link: dropped
        ["put", f"{root}/../outside/planted", "f", 0o644, None, 2],        # `..`: dropped
        ["put", str(root / "x.txt"), "f", 0o644, None, "../files/2"],     # a file number that is a path: dropped
        ["put", str(root / "out" / "through"), "f", 0o644, None, 2],      # through a link: dropped
        ["put", str(root / "ln"), "l", 0, "/etc/passwd", None],            # a link is kept as a link
        ["put", str(root / "sub"), "d", 0o700, None, None],
        ["drop", str(root / "fifo")],
    ]
    lines = [json.dumps(c) for c in changes] + ["{not json", "x" * (3 * sync.MAX_LINE)]
    (came / "changes.jsonl").write_text("\n".join(lines) + "\n", encoding="ascii")
    held = sync.Held(digest="h", entries={str(root / "gone.txt"): sync.Entry("f", 0o644, "x")})

    dropped = sync.apply(came / "changes.jsonl", files, [root], [], held)

    assert secret.read_text() == "keep\n" and (secret.stat().st_mode & 0o777) == 0o600
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    assert (root / "new.txt").read_text() == "new\n" and (root / "new.txt").stat().st_mode & 0o7777 == 0o755
    assert not (root / "gone.txt").exists() and not (root / "linked.txt").exists() and not (root / "x.txt").exists()
    assert os.readlink(root / "ln") == "/etc/passwd" and (root / "out").is_symlink()
    assert (root / "sub").stat().st_mode & 0o777 == 0o700 and (root / "old.txt").read_text() == "old\n"
    assert {str(root / "linked.txt"), str(root / "out" / "through"), str(root / "fifo")} <= set(dropped)
    assert len(dropped) >= 7  # the forged lines are named too (cut short), never read whole
    assert str(root / "gone.txt") not in held.entries
    assert held.entries[str(root / "new.txt")] == sync.Entry("f", 0o4755, sync.sha256_file(root / "new.txt"))
    assert held.entries[str(root / "linked.txt")] == sync.JUNK  # removed there before the next attempt


def test_a_directory_forgotten_takes_what_was_under_it_and_a_file_only_itself():
    held = sync.Held(entries={"/w/d": sync.Entry("d", 0o755), "/w/d/a": sync.Entry("f", 0o644, "1"),
                              "/w/dd": sync.Entry("f", 0o644, "2"), "/w/f": sync.Entry("f", 0o644, "3")})
    held.forget("/w/d")
    held.forget("/w/f")
    assert held.entries == {"/w/dd": sync.Entry("f", 0o644, "2")}


def test_what_comes_out_through_a_channel_is_taken_apart_member_by_member(tmp_path):
    """The tar a container's `exec` prints after hoh's mark (`channel.py`) is a role's: names out of the
    directory, links out of it, devices and setuid bits never land; the honest members do, and what a role wrote
    before the mark is only text."""
    import io
    import tarfile

    from hoh.envs import channel

    target = tmp_path / "target"
    target.mkdir()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        def add(name: str, data: bytes = b"", **fields) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            for key, value in fields.items():
                setattr(info, key, value)
            tar.addfile(info, io.BytesIO(data) if data else None)
        add("./streams/events.jsonl", b'{"ok": 1}\n')
        add("./writable/0/run.sh", b"echo\n", mode=0o4755)
        add("../escaped.txt", b"out\n")
        add(str(tmp_path / "absolute.txt"), b"out\n")
        add("./writable/0/up", type=tarfile.SYMTYPE, linkname="../../../..")
        add("./writable/0/up/through.txt", b"through a link\n")
        add("./writable/0/null", type=tarfile.CHRTYPE, devmajor=1, devminor=3)
    mark = channel.Channel.mark()
    out = tmp_path / "stdout"
    out.write_bytes(b"left=0\ncollected={}\n" + f"\n{mark}\n".encode() + buffer.getvalue())
    text, at = channel.split(out, mark)
    assert text == "left=0\ncollected={}\n" and at is not None
    into = tmp_path / "into"
    channel.unpack(out, at, into)
    assert (into / "streams" / "events.jsonl").read_text() == '{"ok": 1}\n'
    assert (into / "writable" / "0" / "run.sh").stat().st_mode & 0o7777 == 0o755
    assert not (into / "writable" / "0" / "up").is_symlink() and not (into / "writable" / "0" / "null").exists()
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "absolute.txt").exists()
    assert list(tmp_path.rglob("through.txt")) == [into / "writable" / "0" / "up" / "through.txt"]
    assert not (tmp_path.parent / "through.txt").exists()
    assert channel.split(out, channel.Channel.mark())[1] is None  # another exec's mark is not this one's


def test_taking_apart_what_comes_out_keeps_no_member_in_memory(tmp_path):
    """A role that leaves many files: hoh's memory while it takes their tar apart does not grow with their number."""
    import io
    import tarfile
    import tracemalloc

    from hoh.envs import channel

    def peak(count: int) -> int:
        out = tmp_path / f"stdout-{count}"
        with open(out, "wb") as fh:
            fh.write(b"\nMARK\n")
            with tarfile.open(fileobj=fh, mode="w|") as tar:
                info = tarfile.TarInfo("./writable/0/d")
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
                for n in range(count):
                    info = tarfile.TarInfo(f"./writable/0/d/file-with-a-longer-name-{n:06d}.txt")
                    info.size = 1
                    tar.addfile(info, io.BytesIO(b"x"))
        tracemalloc.start()
        channel.unpack(out, len(b"\nMARK\n"), tmp_path / f"into-{count}")
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        into = tmp_path / f"into-{count}" / "writable" / "0" / "d"
        assert len(list(into.iterdir())) == count
        return top

    small, large = peak(200), peak(4_000)
    assert large < small + (1 << 20), (small, large)  # every member kept: ~1 KB each


def test_what_goes_in_is_one_whole_tar_and_packing_it_keeps_no_member_in_memory(tmp_path):
    """`pack` then `add` (hoh's job last): every staged entry as it was, root's, the last member's trailing zero
    blocks intact; packing and adding keep nothing per member (tarfile's own append reads them all first)."""
    import tarfile
    import tracemalloc

    import pytest

    from hoh.envs import channel

    def staged(count: int) -> tuple:
        staging = tmp_path / f"staging-{count}"
        (staging / "files").mkdir(parents=True)
        (staging / "plan.json").write_text("{}")
        for n in range(count):
            (staging / "files" / str(n)).write_bytes(b"x")
        (staging / "tree" / "deep").mkdir(parents=True)
        (staging / "tree" / "deep" / "zeros").write_bytes(b"\0" * 4096)  # ends in what looks like a tar's end
        (staging / "tree" / "link").symlink_to("deep/zeros")
        (staging / "tree" / "deep").chmod(0o750)
        sent = tmp_path / f"in-{count}.tar"
        tracemalloc.start()
        channel.pack(staging, sent)
        channel.add(sent, "job.json", b'{"job": 1}')
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return sent, top

    sent, small = staged(200)
    with tarfile.open(sent) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert tar.extractfile("tree/deep/zeros").read() == b"\0" * 4096
        assert tar.extractfile("job.json").read() == b'{"job": 1}'
        assert tar.getnames()[-1] == "job.json"
    assert len(members) == 200 + 7  # files/ and its 200, plan.json, tree/, deep/, zeros, link, job.json
    assert members["tree/link"].issym() and members["tree/link"].linkname == "deep/zeros"
    assert members["tree/deep"].isdir() and members["tree/deep"].mode == 0o750
    assert all(m.uid == 0 and m.uname == "root" for m in members.values())
    _, large = staged(4_000)
    assert large < small + (1 << 20), (small, large)
    (tmp_path / "other.tar").write_bytes(b"x" * 2048)
    with pytest.raises(OSError, match="not a tar hoh's pack wrote"):
        channel.add(tmp_path / "other.tar", "job.json", b"{}")


def test_a_file_too_large_for_a_freeze_never_comes_out_of_an_environment():
    """`inside.py collect` drops what the freeze would leave out, so a sparse file is never copied dense."""
    from hoh.envs import inside
    from hoh.store.sizes import MAX_FILE_BYTES
    assert inside.LARGEST == MAX_FILE_BYTES


def test_the_view_followed_by_the_kernel_lists_what_a_whole_listing_would_after_every_kind_of_change(tmp_path):
    """hoh's side of a kept view (`viewwatch.py`) is listed whole once, then only where inotify reported a change:
    after each change below it must equal a listing of the whole view, hidden paths left out; a hard link, which
    the feed cannot follow, makes it list the whole view again."""
    import shutil

    from hoh.envs.viewwatch import ViewWatch
    from hoh.store.hashcache import HashCache

    root = tmp_path / "view"
    for d in ("a/b", ".git", "hidden"):
        (root / d).mkdir(parents=True)
    for i in range(20):
        (root / "a" / f"f{i}").write_text(str(i))
    cache, hidden = HashCache(), [root / "hidden"]
    watch = ViewWatch(cache)

    def same() -> bool:
        return watch.entries([root], hidden) == dict(sync.view([root], hidden, cache))

    changes = [
        lambda: (root / "a" / "f3").write_text("changed"),
        lambda: (root / "a" / "f4").unlink(),
        lambda: (root / ".git" / "HEAD").write_text("a repository of the project's own is part of its view"),
        lambda: (root / "n" / "m").mkdir(parents=True),
        lambda: (root / "n" / "m" / "z").write_text("in a directory made after the watches"),
        lambda: os.rename(root / "a" / "b", root / "moved"),
        lambda: os.chmod(root / "a" / "f5", 0o700),
        lambda: (root / "hidden" / "secret").write_text("never listed"),
        lambda: os.symlink("/etc", root / "link"),
        lambda: shutil.rmtree(root / "n"),
        lambda: os.chmod(root, 0o711),
        lambda: (root / "a" / "f6").unlink() or (root / "a" / "f6").mkdir(),
    ]
    assert same() and watch.listed_whole == 1
    for change in changes:
        change()
        assert same()
    assert watch.listed_whole == 1  # every change above was followed, none listed the view whole
    os.link(root / "a" / "f7", root / "hard")
    assert same() and watch.listed_whole == 2
    (root / "a" / "f7").write_text("through the other name")
    assert same()
    watch.close()


def test_roots_made_per_loop_never_pile_up_feeds(tmp_path):
    from hoh.envs.viewwatch import MOST_FOLLOWED, ViewWatch
    from hoh.store.hashcache import HashCache

    watch = ViewWatch(HashCache())
    for loop in range(3 * MOST_FOLLOWED):
        evidence = tmp_path / f"loop-{loop}"
        evidence.mkdir()
        (evidence / "log").write_text(str(loop))
        assert watch.entries([evidence], []) == dict(sync.view([evidence], [], watch.cache))
    assert len(watch._followed) == MOST_FOLLOWED
    watch.close()


def test_a_record_is_sealed_only_when_the_view_beyond_what_was_just_listed_is_as_recorded(tmp_path):
    """`inside.py collect` seals the record (the next `place` lists nothing) only when the rest of the view,
    listed again, is exactly as recorded: a file changed, added or removed there, even by a mode, breaks it;
    the writable roots, listed just before, are not looked at again."""
    from hoh.envs import inside

    inputs, project = tmp_path / "inputs", tmp_path / "project"
    for root in (inputs, project):
        (root / "sub").mkdir(parents=True)
        (root / "sub" / "a.txt").write_text("a")
    roots = [str(inputs), str(project)]
    record = lambda: {"roots": roots, "keys": {**inside.listing(str(inputs)), **inside.listing(str(project))}}  # noqa: E731

    held = record()
    (project / "new.txt").write_text("the role's")  # under a root listed just now: not this check's
    assert inside.unchanged(held, [str(project)])
    for change in (lambda: os.chmod(inputs / "sub" / "a.txt", 0o600), lambda: (inputs / "b.txt").write_text("b"),
                   lambda: (inputs / "sub" / "a.txt").unlink()):
        held = record()
        change()
        assert not inside.unchanged(held, [str(project)])
    assert not inside.unchanged({"roots": roots, "keys": {}}, [str(project)])  # an empty record: nothing matches


def test_only_hoh_s_own_processes_leave_a_view_alone(tmp_path):
    """A record is sealed only where nothing but hoh's own processes lives (an init, hoh's server by its pid and
    start time, zombies): any other process could still change the view after it was listed."""
    from hoh.envs import inside

    def process(pid: int, state: str, start: int) -> None:
        (tmp_path / str(pid)).mkdir()
        fields = [state, "1", *["0"] * 17, str(start)]  # the 3rd field of a stat line on; the 22nd its start
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (a) name) {' '.join(fields)}\n")

    process(1, "S", 10)
    process(40, "S", 500)
    process(77, "Z", 900)
    (tmp_path / "self").mkdir()
    assert inside.alone({"1", "40/500"}, proc=str(tmp_path))
    assert not inside.alone({"1", "40/501"}, proc=str(tmp_path))  # its pid, another start: not the server
    assert not inside.alone({"1"}, proc=str(tmp_path))
    process(41, "D", 600)  # being killed, not dead yet
    assert not inside.alone({"1", "40/500"}, proc=str(tmp_path))


def test_a_server_whose_engine_client_cannot_start_leaves_plain_execs(tmp_path):
    """No server (the steps go by an `exec` each, as before it existed), never an environment reported lost."""
    import asyncio

    from hoh.envs.session import Session
    missing = tmp_path / "no-such-engine-client"
    assert asyncio.run(Session.open((str(missing),), "some-container")) is None
    script = tmp_path / "engine"  # starts, but is no server: says nothing and ends
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    assert asyncio.run(Session.open((str(script),), "some-container")) is None
