"""hoh's script inside a role's environment: it keeps the role's view there between attempts, so that only what
changed crosses (`sync.py` is hoh's side). Standard library only, for any python3 an image has (3.6 on); hoh
sends its source with every call (`python3 -I -c SOURCE`), so nothing a role left in the environment runs in its
place, and it runs only after every process an attempt left there is killed (`supervise.sweep`).

The record of what hoh holds there (`HELD`: every entry of the view by its path, kind, mode, inode, ctime and
size) is checked against the sha256 hoh kept of it before it is read: a record a role rewrote is not believed.
ctime cannot be set by a process (only the clock can move it, and a container may not set the clock), and a
role starts only after a tick in which nothing of the view can change (`settle`), so every change a role makes
to an entry changes its key.

    place PLAN EXPECT   check the view against the record (EXPECT: its sha256, `-` for none: an empty view),
                        remove what differs, apply hoh's plan (deletions, then entries put from PLAN's files),
                        record it, and print `placed={"held": SHA, "tampered": []}`. When something differed:
                        it is removed, nothing is placed, `tampered` lists it, and the exit is 3 (hoh plans
                        again); 4 (`held` null) when the record cannot be believed. /tmp is emptied but for the
                        way to the view.
    collect OUT EXPECT ROOT...   after the attempt: what changed in each writable ROOT since the record, as
                        OUT/changes.jsonl (deletions first, then entries, files copied as OUT/files/N), and
                        `collected={"held": SHA, "believed": BOOL}`. Run by `attempt` once every process the
                        attempt left is killed, where nothing but the environment's own processes is left, it
                        lists the rest of the view too and, found as recorded, seals the record: no process is
                        left that could change the view, so the next `place` need not list it.
    pack DIR            DIR as a tar on stdout.
    attempt DIR         a whole attempt in one `exec` (`channel.py`): hoh's tar on stdin into DIR, its
                        `job.json` read, the view placed, the attempt's files moved into place, its supervisor
                        started, and its end awaited (`window` seconds at most); if it ended, every process it
                        left killed and what it wrote collected, as `collect` does, then printed as a tar after
                        the job's mark. Collected in place only where no role can reach into this process
                        (`private`), which it says (`guarded=`) before anything of the role runs.
    batch DIR           many short runs (a check step's checks) in one `exec` (`batch.py`), guarded as `attempt`
                        is: the view placed once, then each run in turn, every process it left killed, /tmp
                        emptied, and, before the next starts, the view and hoh's programs checked unchanged
                        (else it stops there: `stopped.json`). Each run's streams and its `result.json` go out
                        in one tar after the job's mark, written as it ends.
"""

import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time

HELD = "/opt/hoh/held"
TICK = "/opt/hoh/tick"
LARGEST = 2**30
"""A larger file a role wrote does not come back (a sparse one costs it nothing, and the copy every byte): the
freeze would leave it out (`store/sizes.py`); hoh removes it there before the next attempt."""
DEFAULT_CAPS = 0xA80425FB
"""Docker's default capabilities (Podman's are fewer). With more (CAP_SYS_PTRACE, CAP_SYS_ADMIN) a role could
reach into a process that made itself undumpable: `attempt` then leaves the collecting to an `exec` of its own."""


def key(st):
    mode = st.st_mode
    if stat.S_ISDIR(mode):  # a directory's ctime moves with every entry made in it: its entries say that
        return ["d", stat.S_IMODE(mode), st.st_ino]
    kind = "f" if stat.S_ISREG(mode) else "l" if stat.S_ISLNK(mode) else "o"
    return [kind, stat.S_IMODE(mode), st.st_ino, st.st_ctime_ns, st.st_size]


def listing(root, skip=()):
    """path -> key of the root and everything under it, never following a link; nothing at or under `skip`."""
    found = {}
    try:
        st = os.lstat(root)
    except OSError:
        return found
    if root in skip:
        return found
    found[root] = key(st)
    stack = [root] if stat.S_ISDIR(st.st_mode) else []
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.path in skip:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            found[entry.path] = key(st)
            if stat.S_ISDIR(st.st_mode):
                stack.append(entry.path)
    return found


def under(path, root):
    return path == root or path.startswith(root.rstrip("/") + "/")


def remove(path):
    try:
        st = os.lstat(path)
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        os.unlink(path)


def forget(held, path):
    """`path` and, for a directory, everything hoh recorded under it."""
    if held.pop(path, ["o"])[0] == "d":
        for known in [p for p in held if under(p, path)]:
            del held[known]


WRITTEN = {}
"""The record this process wrote last, by its sha256: an attempt's collect reads it from memory, not again."""


def read_held(expect):
    """The record, when its sha256 is the one hoh kept; None when it is not."""
    if expect == "-":
        return {"roots": [], "keys": {}}
    if expect in WRITTEN:
        return WRITTEN.pop(expect)
    try:
        with open(HELD, "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    if hashlib.sha256(raw).hexdigest() != expect:
        return None
    return json.loads(raw.decode("ascii"))


def write_held(held):
    raw = json.dumps(held, separators=(",", ":")).encode("ascii")  # its sha256 is hoh's only check: no order
    with open(HELD + ".part", "wb") as fh:
        fh.write(raw)
    os.replace(HELD + ".part", HELD)
    digest = hashlib.sha256(raw).hexdigest()
    WRITTEN.clear()
    WRITTEN[digest] = held
    return digest


def real_ancestors(path):
    """Every directory above `path` is one (made where missing), none a link."""
    parts = path.strip("/").split("/")[:-1]
    current = ""
    for part in parts:
        current += "/" + part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            os.mkdir(current)
            continue
        if not stat.S_ISDIR(st.st_mode):
            return False
    return True


def settle(newest):
    """Wait until the clock's ctime has passed every ctime just recorded: a change from here on is seen."""
    deadline = time.time() + 2
    while time.time() < deadline:
        with open(TICK, "w") as fh:
            fh.write("")
        if os.lstat(TICK).st_ctime_ns > newest:
            return
        time.sleep(0.001)


def prune(roots):
    """/tmp, where a view may be kept, is emptied but for the way to each root (`supervise.sweep` left it)."""
    way = set()
    for root in roots:
        path = os.path.dirname(root)
        while path != "/":
            way.add(path)
            path = os.path.dirname(path)
    for directory in ["/tmp"] + sorted(p for p in way if under(p, "/tmp") and p != "/tmp"):
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.path not in way and entry.path not in roots:
                remove(entry.path)


def place(plan_dir, expect):
    """The exit code (0: placed), and the record's sha256 when placed."""
    with open(os.path.join(plan_dir, "plan.json")) as fh:
        plan = json.load(fh)
    held = read_held(expect)
    if held is not None:
        prune(set(plan["roots"]) | set(held["roots"]))
    if held is None or not all(real_ancestors(root) for root in plan["roots"]):
        print("placed=" + json.dumps({"held": None, "tampered": []}))
        return 4, None
    keys, tampered = held["keys"], []
    if expect == "-":
        for root in plan["roots"]:
            remove(root)
    # A sealed record was listed whole after the last attempt here, with no process left that could change the
    # view (`collect`): nothing has run here since but hoh's steps, so the view is still what it says.
    for root in [] if held.pop("sealed", False) else held["roots"]:  # what a role changed: removed, sent again
        now = listing(root)
        changed = [p for p, k in now.items() if keys.get(p) != k]
        changed += [p for p in keys if under(p, root) and p not in now]
        for path in sorted(changed):
            if path in keys or path in now:
                remove(path)
                forget(keys, path)
                tampered.append(path)
    if tampered:  # hoh's plan assumed the record: it makes another
        print("placed=" + json.dumps({"held": write_held(held), "tampered": tampered}))
        return 3, None
    for path in sorted(plan["delete"], reverse=True):  # hoh names every path under a directory it deletes
        remove(path)
        keys.pop(path, None)
    newest = 0
    for path, kind, mode, target, index in plan["put"]:
        if not real_ancestors(path):
            print("placed=" + json.dumps({"held": None, "tampered": []}))
            return 4, None
        try:
            st = os.lstat(path)
        except OSError:
            st = None
        if st is not None and (kind != "d" or not stat.S_ISDIR(st.st_mode)):
            remove(path)
            forget(keys, path)
            st = None
        if kind == "d":
            if st is None:
                os.mkdir(path)
            os.chmod(path, mode)
        elif kind == "f":
            os.rename(os.path.join(plan_dir, "files", str(index)), path)
            os.chmod(path, mode)
        else:
            os.symlink(target, path)
        st = os.lstat(path)
        keys[path] = key(st)
        newest = max(newest, st.st_ctime_ns)
    held["roots"] = plan["roots"]
    for path in [p for p in keys if not any(under(p, root) for root in plan["roots"])]:
        del keys[path]
    digest = write_held(held)
    settle(max(newest, os.lstat(HELD).st_ctime_ns))
    print("placed=" + json.dumps({"held": digest, "tampered": []}))
    return 0, digest


def collect(out, expect, roots, keep=None):
    """`keep` (the environment's own processes, after a sweep): where no other process is left alive here, the
    rest of the view is listed too and, found as recorded, the record is sealed (`place` need not list it)."""
    held = read_held(expect)
    believed = held is not None
    if held is None:  # a record a role rewrote: everything writable comes back as if new
        held = {"roots": roots, "keys": {}}
    held.pop("sealed", None)
    sealable = believed and keep is not None and alone(keep)  # before listing: nothing can change it after
    keys = held["keys"]
    os.makedirs(os.path.join(out, "files"), exist_ok=True)
    deletions, puts, count = [], [], 0
    for root in roots:
        now = listing(root)
        deletions += [["del", p] for p in keys if under(p, root) and p not in now]
        for path in sorted(now):
            k = now[path]
            if keys.get(path) == k:
                continue
            if k[0] == "o" or k[0] == "f" and k[4] > LARGEST:
                puts.append(["drop", path])
                continue
            target, index = None, None
            if k[0] == "f":
                index, count = count, count + 1
                # A copy, not a link: a link (and its removal) would move the file's ctime, its key.
                shutil.copyfile(path, os.path.join(out, "files", str(index)))
            elif k[0] == "l":
                target = os.readlink(path)
            puts.append(["put", path, k[0], k[1], target, index])
        for path in [p for p in keys if under(p, root)]:
            del keys[path]
        keys.update(now)
    deletions.sort(key=lambda change: change[1], reverse=True)
    with open(os.path.join(out, "changes.jsonl"), "w") as fh:
        for change in deletions + puts:
            fh.write(json.dumps(change) + "\n")
    if sealable and unchanged(held, roots):
        held["sealed"] = True
    print("collected=" + json.dumps({"held": write_held(held), "believed": believed}))
    return 0


def unchanged(held, listed):
    """The view's roots, but the roots `listed` just now, are as the record says."""
    skip, tops = set(listed), tuple(root.rstrip("/") + "/" for root in listed)
    now = {}
    for root in held["roots"]:
        if root not in skip and not root.startswith(tops):
            now.update(listing(root, skip))
    keys = held["keys"]
    rest = sum(1 for p in keys if p not in skip and not p.startswith(tops))
    return rest == len(now) and all(keys.get(p) == k for p, k in now.items())


def alone(keep, proc="/proc"):
    """No process is alive here but this one and `keep` (pids, or `pid/start time`: hoh's server)."""
    me = str(os.getpid())
    for name in os.listdir(proc):
        if not name.isdigit() or name == me or name in keep:
            continue
        try:
            with open("%s/%s/stat" % (proc, name)) as fh:
                fields = fh.read().rpartition(")")[2].split()
        except OSError:
            continue  # ended
        if fields[0] != "Z" and "%s/%s" % (name, fields[19]) not in keep:
            return False
    return True


def unpack(into):
    """hoh's staged files, a tar on stdin (hoh's own, from `channel.py`), into `into`."""
    import tarfile
    os.makedirs(into, exist_ok=True)
    trusted = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
    with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as tar:
        tar.extractall(into, **trusted)
    return 0


def pack(directory):
    """`directory` as a tar on stdout, for hoh to take apart as hostile input (`channel.py`)."""
    import tarfile
    sys.stdout.flush()
    with tarfile.open(fileobj=sys.stdout.buffer, mode="w|") as tar:
        tar.add(directory, arcname=".")
    return 0


def private():
    """Make this process one a role cannot reach into: undumpable, no process without CAP_SYS_PTRACE may trace
    it, read or write its memory, or open its descriptors (its stdout: hoh's channel) through /proc. True when
    that holds: it is undumpable and the container has no capability beyond Docker's default."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(4, 0, 0, 0, 0) != 0 or libc.prctl(3, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE, PR_GET_DUMPABLE
            return False
        with open("/proc/self/status") as fh:
            bounding = [int(line.split()[1], 16) for line in fh if line.startswith("CapBnd:")]
    except (OSError, ValueError, AttributeError, ImportError):
        return False
    return len(bounding) == 1 and bounding[0] & ~DEFAULT_CAPS == 0


def quietly(command):
    """A shell step of hoh's, its output kept from the channel (a role alive while it runs could write there)."""
    done = subprocess.run(["sh", "-c", command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL)
    return done.stdout.decode("ascii", "replace")


def moved(moves):
    """What was copied in put in place (`supervise.moves`), in this process: a shell's rm, mkdir and mv, one
    process each, cost the attempt ~20 ms. As the shell's, a step that fails leaves its root missing."""
    for path in moves["remove"]:
        try:
            remove(path)
        except OSError:
            pass
    for staged, root in moves["put"]:
        if os.path.lexists(staged):
            try:
                os.makedirs(os.path.dirname(root), exist_ok=True)
                shutil.move(staged, root)
            except OSError:
                pass
    shutil.rmtree(moves["then"], ignore_errors=True)


def digits(text):
    return bool(text) and all(c in "0123456789" for c in text)


def ended(exit_file, streams, window, max_output):
    """Wait up to `window` seconds for the attempt's exit code (None: not yet) or more output than `max_output`."""
    end, pause = time.monotonic() + window, 0.002
    while True:
        size = 0
        for path in streams:
            try:
                size += os.stat(path).st_size
            except OSError:
                pass
        try:
            with open(exit_file) as fh:
                code = fh.read(32).strip()
            return (code if digits(code) else "1"), size  # the supervisor writes digits; a role, anything
        except OSError:
            pass
        if size > max_output or time.monotonic() >= end:
            return None, size
        time.sleep(pause)
        pause = min(pause * 1.25, 0.01)  # an end seen 10 ms late at most: ~100 stats a second


def attempt(incoming):
    guarded = private()  # before anything of the role runs, so its answer holds
    unpack(incoming)
    with open(os.path.join(incoming, "job.json")) as fh:
        job = json.load(fh)
    print("guarded=" + ("1" if guarded else "0"), flush=True)
    digest = None
    if job["place"]:
        code, digest = place(*job["place"])
        sys.stdout.flush()
        if code:
            shutil.rmtree(os.path.dirname(incoming), ignore_errors=True)
            return 0
    moved(job["moves"])
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup: an exec's end must not end the attempt
    subprocess.Popen(job["start"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, close_fds=True)
    code, size = ended(job["exit"], job["streams"], job["window"], job["max_output"])
    print("%s\n|\n%d" % (code or "", size), flush=True)
    gather = job.get("collect")
    if code is None or not gather or not guarded:
        return 0
    left = [line for line in quietly(gather["steps"]).splitlines() if line.startswith("left=")]
    print(left[0] if left and digits(left[0][5:]) else "left=0", flush=True)
    if gather["roots"] is not None:
        collect(gather["out"], digest or "?", gather["roots"], set(gather["keep"]))
    sys.stdout.write("\n%s\n" % gather["mark"])
    return pack(gather["outgoing"])


def regular(path, limit):
    """At most `limit` bytes of the regular file at `path`; nothing of a link, a FIFO or a device a role left."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def supervised(run):
    """Wait for one run's end, its wall or idle timeout, or its output cap: (exit code, limit)."""
    begun = last = time.monotonic()
    seen = 0
    while True:
        now = time.monotonic()
        window = max(0.0, min(run["wall"] - (now - begun), run["idle"] - (now - last)))
        code, size = ended(run["dir"] + "/exit", [run["dir"] + "/stdout", run["dir"] + "/stderr"], window,
                           run["max_output"])
        if code is not None:
            return int(code), None
        now = time.monotonic()
        if size != seen:
            seen, last = size, now
        if size > run["max_output"]:
            return None, "output"
        if now - begun >= run["wall"]:
            return None, "wall"
        if now - last >= run["idle"]:
            return None, "idle"


def listed(roots):
    found = {}
    for root in roots:
        found.update(listing(root))
    return found


def batch(incoming):
    guarded = private()
    unpack(incoming)
    with open(os.path.join(incoming, "job.json")) as fh:
        job = json.load(fh)
    print("guarded=" + ("1" if guarded else "0"), flush=True)
    if not guarded:  # hoh runs them one by one, each collected by an `exec` of its own
        shutil.rmtree(os.path.dirname(incoming), ignore_errors=True)
        return 0
    code, _ = place(*job["place"])
    sys.stdout.flush()
    if code:
        shutil.rmtree(os.path.dirname(incoming), ignore_errors=True)
        return 0
    runs = job["runs"]
    given = [(regular(incoming + r["dir"] + "/stdin", 1 << 30), regular(incoming + r["dir"] + "/env", 1 << 30))
             for r in runs]  # read before anything of a role runs: a run may rewrite what a later one reads
    moved(job["moves"])
    watched = job["roots"] + job["programs"]
    expected = listed(watched)  # as placed: nothing of a role runs yet
    import io
    import tarfile
    sys.stdout.write("\n%s\n" % job["mark"])
    sys.stdout.flush()
    end = time.monotonic() + job["budget"] if job["budget"] is not None else None
    with tarfile.open(fileobj=sys.stdout.buffer, mode="w|") as tar:
        def emit(name, data):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))

        for i, run in enumerate(runs):
            if i and end is not None and time.monotonic() >= end:
                break
            if not real_ancestors(run["dir"]):  # a link on the way would put this run's files elsewhere
                emit("stopped.json", json.dumps({"at": i, "changed": [os.path.dirname(run["dir"])]}).encode())
                break
            remove(run["dir"])
            os.mkdir(run["dir"])
            for name, data in zip(("stdin", "env"), given[i]):
                with open(os.path.join(run["dir"], name), "wb") as fh:
                    fh.write(data)
            now = listed(watched)
            changed = sorted(p for p in set(now) | set(expected) if now.get(p) != expected.get(p))
            if changed:  # an earlier run changed what this one would see: hoh runs the rest afresh
                emit("stopped.json", json.dumps({"at": i, "changed": changed[:100]}).encode())
                break
            begun = time.monotonic()
            subprocess.Popen(["sh", "-c", job["supervisor"], "sh", run["dir"], run["cwd"], "--"] + run["argv"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             close_fds=True)
            code, limit = supervised(run)
            seconds = time.monotonic() - begun
            left = [line for line in quietly(run["sweep"]).splitlines() if line.startswith("left=")]
            prune(set(job["roots"]))
            emit("%d/events.jsonl" % i, regular(run["dir"] + "/stdout", run["max_output"]))
            emit("%d/stderr.log" % i, regular(run["dir"] + "/stderr", run["max_output"]))
            emit("%d/result.json" % i, json.dumps({
                "code": code, "limit": limit, "seconds": round(seconds, 3),
                "left": int(left[0][5:]) if left and digits(left[0][5:]) else 0}).encode())
    return 0


def main(argv):
    if argv[0] == "batch":
        return batch(argv[1])
    if argv[0] == "place":
        return place(argv[1], argv[2])[0]
    if argv[0] == "attempt":
        return attempt(argv[1])
    if argv[0] == "pack":
        return pack(argv[1])
    return collect(argv[1], argv[2], argv[3:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
