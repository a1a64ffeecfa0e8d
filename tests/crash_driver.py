"""Run `hoh resume` in-process and die like `kill -9` right after the K-th journal append or state write.

With K = 0 it dies nowhere and prints how many such points the run had.

Used by test_resume.py to interrupt a loop at every step deterministically: the process ends
with os._exit, so no finally block, flush or lock release runs — exactly what a kill leaves.
"""

import os
import sys
from pathlib import Path

from hoh import api, fsutil
from hoh.store.journal import Journal

mode, target, workspace = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
seen = 0


def tick() -> None:
    global seen
    seen += 1
    if seen == target:
        os._exit(137)


if mode == "journal":
    original_append = Journal.append

    def append(self, *args, **kwargs):
        record = original_append(self, *args, **kwargs)
        tick()
        return record

    Journal.append = append
else:
    original_write = fsutil.atomic_write_bytes

    def write(path, data, *args, **kwargs):
        original_write(path, data, *args, **kwargs)
        tick()

    fsutil.atomic_write_bytes = write

api.resume(workspace, more_loops=1)
print(seen)
sys.exit(3)  # the crash point was never reached
