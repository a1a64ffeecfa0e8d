"""hoh's server in a role's container: hoh's shell steps run there without an engine call each (`session.py` is
hoh's side). Standard library only; sent after `inside.py`, whose `private` it uses (`SERVER_SOURCE`).

An engine call (`docker exec`) costs ~0.1 s here, and an attempt makes one: three a loop. The server is started
once, as its environment starts (before anything of a role ran there), and makes itself undumpable at once: no
role without CAP_SYS_PTRACE may trace it, or open its descriptors (hoh's pipes) through /proc, so what it relays
is what hoh's steps printed. Its first line says its pid, which hoh spares from every sweep while the server
lives, and whether that holds; hoh uses it only when it does, and forgets it, and its pid, once it ends.

A request is one JSON line, `{"command": ..., "size": N}`, then N bytes: the step's stdin. The step runs as an
`exec`'s would, `bash -c command` in this process's directory and environment; its stdout and stderr are
relayed as they come, as frames (a kind byte, `o` or `e`, a 4-byte length, the bytes), then `x` and its exit
code. What a step left holding its pipes after it ended (a role's process that opened them through /proc) is
not waited for: the reply ends `LINGER` after the step.
"""

import json
import os
import select
import struct
import subprocess
import sys
import threading
import time

try:  # hoh's side imports this module; in the environment it follows inside.py, which defines `private`
    from .inside import private
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
                sink = None
    if sink is not None:
        try:
            sink.close()
        except OSError:
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
        step = subprocess.Popen(["bash", "-c", request["command"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, close_fds=True)
        feeder = threading.Thread(target=feed, args=(source, step.stdin, int(request["size"])))
        feeder.start()
        code = relay(step, out)
        feeder.join()
        for pipe in (step.stdout, step.stderr):
            pipe.close()
        out.write(b"x" + struct.pack(">i", code))
        out.flush()
