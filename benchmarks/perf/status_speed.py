"""The CPU time of `hoh status` against the run's length, and of `hoh --help`.

Method. Two finished workspaces are synthesized (`tests/long_run.py`: the real event classes, ledger and git
history), one of 5 loops and one of 500, each with the checkpoint the Runtime leaves when a loop ends
(`state/fold.json`). Each command runs as a child process, and its CPU time is the child's user + system
time (`os.wait4`), which a loaded machine inflates far less than wall time. The commands run side by side in
interleaved rounds (the order rotating per round); each figure is reported as min / median / max over the
rounds, and the targets are checked on the medians:

- `hoh status` at 500 loops ≤ 150 ms CPU, and ≤ 1.2 × the same at 5 loops;
- `hoh status --json` and `hoh --help` are reported beside them.

    python benchmarks/perf/status_speed.py [--loops 5,500] [--rounds 7] [--tiny]

Prints the figures, then one JSON line `{"missed": [...], ...}`; exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

TARGET_MS = 150.0
TARGET_RATIO = 1.2


def cpu_ms(argv: list[str]) -> float:
    """User + system CPU of one `python -m hoh ARGV` child, in ms; a failed command is an error, not a figure."""
    proc = subprocess.Popen([sys.executable, "-m", "hoh", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"hoh {' '.join(argv)} failed: {err.strip()}")
    return (usage.ru_utime + usage.ru_stime) * 1000


def spread(samples: list[float]) -> dict[str, float]:
    return {"min": min(samples), "median": statistics.median(samples), "max": max(samples)}


def make(root: Path, loops: int) -> Path:
    from long_run import make_long_workspace

    from hoh.paths import WorkspacePaths
    from hoh.store import fold
    ws = make_long_workspace(root / f"ws{loops}", loops=loops)
    if not fold.save(WorkspacePaths(ws)):  # what the Runtime writes when a loop ends
        sys.exit(f"no checkpoint could be written for {ws}")
    return ws


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--loops", default="5,500", help="the short and the long run's loops, comma-separated")
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    p.add_argument("--tiny", action="store_true", help="the smoke size: --loops 3,20 --rounds 1")
    args = p.parse_args(argv)
    short, long_ = (3, 20) if args.tiny else (int(n) for n in args.loops.split(","))
    rounds = 1 if args.tiny else args.rounds
    if not 1 <= short < long_ or rounds < 1:
        p.error("--loops needs SHORT,LONG with 1 ≤ SHORT < LONG, and --rounds ≥ 1")
    with tempfile.TemporaryDirectory(prefix="hoh-status-", dir=os.environ.get("HOH_BENCH_TMP")) as tmp:
        ws = {n: make(Path(tmp), n) for n in (short, long_)}
        commands = {"help": ["--help"], **{f"status {n}": ["status", "-w", str(ws[n])] for n in ws},
                    **{f"json {n}": ["status", "-w", str(ws[n]), "--json"] for n in ws}}
        for argv_ in commands.values():  # warm the page cache and the .pyc files once
            cpu_ms(argv_)
        samples: dict[str, list[float]] = {name: [] for name in commands}
        names = list(commands)
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                samples[name].append(cpu_ms(commands[name]))
        shutil.rmtree(tmp, ignore_errors=True)
    figures = {name: spread(s) for name, s in samples.items()}

    def line(label: str, f: dict[str, float]) -> str:
        return f"{label:<28} {f['min']:6.0f} / {f['median']:6.0f} / {f['max']:6.0f} ms CPU (min / median / max)"

    print(f"{rounds} interleaved rounds, CPU of the child (user + sys):")
    print(line("hoh --help", figures["help"]))
    for n in (short, long_):
        print(line(f"hoh status at {n} loops", figures[f"status {n}"]))
    for n in (short, long_):
        print(line(f"hoh status --json at {n} loops", figures[f"json {n}"]))
    at_long, at_short = figures[f"status {long_}"]["median"], figures[f"status {short}"]["median"]
    ratio = at_long / at_short
    print(f"status {long_}/{short} loops: {ratio:.2f} (target ≤ {TARGET_RATIO}); at {long_} loops {at_long:.0f} ms "
          f"(target ≤ {TARGET_MS:.0f} ms)")
    misses = [f"status at {long_} loops {at_long:.0f} ms > {TARGET_MS:.0f} ms"] if at_long > TARGET_MS else []
    misses += [f"status {long_}/{short} {ratio:.2f} > {TARGET_RATIO}"] if ratio > TARGET_RATIO else []
    print(json.dumps({"missed": misses, "rounds": rounds, "ms": figures}))
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
