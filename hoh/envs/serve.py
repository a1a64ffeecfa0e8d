"""hoh's server in a role's container: hoh's steps run there without an engine call each (`session.py` is hoh's
side). Standard library only; sent after `inside.py`, whose functions it uses (`session.SERVER_SOURCE`).

An engine call (`docker exec`) costs ~0.1 s here, and python3's start with hoh's script as much again: an
attempt paid both, three times a loop. The server is started once, as its environment starts (before anything
of a role ran there), and makes itself undumpable at once: no role without CAP_SYS_PTRACE may trace it, or open
its descriptors (hoh's pipes) through /proc, so what it relays is what hoh's steps printed. Its first line says
its pid and start time, which every sweep spares, and whether that holds; hoh uses it only when it does, and
never again once it ended.

A request is one JSON line, then N bytes (its `size`): the step's stdin. `{"command": ...}` runs as an `exec`'s
would, `bash -c command` in this process's directory and environment; `{"inside": ARGS, "before": ...}` is
hoh's script (`inside.py ARGS`), run by a fork of this process after the shell step `before` (`Forked`). The
step's stdout and stderr are relayed as they come, as frames (a kind byte, `o` or `e`, a 4-byte length, the
bytes), then `x` and its exit code. What a step left holding its pipes after it ended (a role's process that
opened them through /proc) is not waited for: the reply ends `LINGER` after the step.
"""
import json
import os
import select
import struct
import subprocess
import sys
import threading
import time

try:  # hoh's side imports this module; in the environment it follows inside.py, which defines these
    from .inside import main, private, quietly
except (ImportError, SystemError):  # SystemError: python3.5's word for it
    pass

MAX_HEADER = 1 << 20
LINGER = 0.05
CHUNK = 1 << 16


def frame(out, kind, data):
    out.write(kind + struct.pack(">I", len(data)) + data)


def feed(source, sink, size):
    """`size` bytes from hoh to the step's stdin; what the step does not read is read and dropped (the next
    request follows it)."""
    while size > 0:
        chunk = source.read(min(size, CHUNK))
        if not chunk:
            break
        size -= len(chunk)
        if sink is not None:
            try:
                sink.write(chunk)
            except OSError:
                close(sink)
                sink = None
    if sink is not None:
        close(sink)


def close(pipe):
    try:
        pipe.close()
    except OSError:  # what it still buffered has nowhere to go: the step ended
        pass


def relay(step, out):
    """The step's stdout and stderr to hoh as they come, until both end or it ended `LINGER` ago."""
    kinds = {step.stdout.fileno(): b"o", step.stderr.fileno(): b"e"}
    ended = None
    while kinds:
        ready, _, _ = select.select(list(kinds), [], [], LINGER)
        for fd in ready:
            data = os.read(fd, CHUNK)
            if data:
                frame(out, kinds[fd], data)
            else:
                del kinds[fd]
        if step.poll() is not None:
            ended = ended or time.monotonic()
            if not ready or time.monotonic() - ended > LINGER:
                break
    code = step.wait()
    return code if code >= 0 else 128 - code


class Forked:
    """hoh's script run by a fork of this process (`main(args)`), as `subprocess.Popen` would show it: already
    compiled, its modules imported and, as this process, undumpable; `before`, a shell step of hoh's (a sweep),
    runs first and prints first, as `before; exec python3 -c SOURCE args` would."""

    def __init__(self, args, before):
        pipes = [os.pipe() for _ in range(3)]
        sys.stdout.flush()
        self.pid = os.fork()
        if self.pid == 0:
            self._child(pipes, args, before)
        (into, self._in), (self._out, out), (self._err, err) = pipes
        for fd in (into, out, err):
            os.close(fd)
        self.stdin, self.stdout, self.stderr = os.fdopen(self._in, "wb"), os.fdopen(self._out, "rb"), \
            os.fdopen(self._err, "rb")
        self.code = None

    @staticmethod
    def _child(pipes, args, before):
        code = 1
        try:
            for target, fd in zip((0, 1, 2), (pipes[0][0], pipes[1][1], pipes[2][1])):
                os.dup2(fd, target)
            for pair in pipes:
                for fd in pair:
                    os.close(fd)
            sys.stdin, sys.stdout, sys.stderr = os.fdopen(0, "r"), os.fdopen(1, "w"), os.fdopen(2, "w")
            if before:
                sys.stdout.write(quietly(before))
            code = main(args) or 0
        except BaseException:  # noqa: BLE001 - its end is the step's exit code and its stderr, as for a python3
            import traceback
            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os._exit(code)

    def poll(self):
        if self.code is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self._ended(status)
        return self.code

    def wait(self):
        if self.code is None:
            self._ended(os.waitpid(self.pid, 0)[1])
        return self.code

    def _ended(self, status):
        self.code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)


def started():
    """This process's start time, in clock ticks since boot (field 22 of its stat): with its pid, it names the
    server so that no later process with the same pid passes for it."""
    with open("/proc/self/stat") as fh:
        return int(fh.read().rpartition(")")[2].split()[19])


def serve():
    guarded = private()  # first: before hoh says anything of it
    source, out = sys.stdin.buffer, sys.stdout.buffer
    out.write(b"hoh-serve %d %d %d\n" % (os.getpid(), started(), 1 if guarded else 0))
    out.flush()
    while True:
        line = source.readline(MAX_HEADER)
        if not line.endswith(b"\n"):
            return 0  # hoh is gone (or spoke past a header's length): nothing more comes
        request = json.loads(line.decode("utf-8"))
        if request.get("inside"):
            step = Forked(request["inside"], request.get("before"))
        else:
            step = subprocess.Popen(["bash", "-c", request["command"]], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True)
        feeder = threading.Thread(target=feed, args=(source, step.stdin, int(request["size"])))
        feeder.start()
        code = relay(step, out)
        feeder.join()
        for pipe in (step.stdout, step.stderr):
            pipe.close()
        out.write(b"x" + struct.pack(">i", code))
        out.flush()
