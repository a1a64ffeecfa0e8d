"""hoh's own cost per loop, measured against the project's size and the history's length.

Method. A project of N files (~20 KB each, default N = 10,000 and 2N) is generated and built
with `hoh build --project` and the scripted agent, whose Developer changes ONE file per loop and
whose Planner and QA do almost nothing. hoh's own time in a loop is the loop's wall time (journal:
loop_started → loop_finished) minus the time spent inside the agent subprocesses (journal:
attempt_finished.seconds, which includes starting the OS jail); the first loop, which hashes
the new project once, is left out. This machine is noisy and its load drifts over minutes, so the
two sides of each ratio are measured side by side: once both workspaces exist, each is resumed
for a few loops in turn (the order alternating per round), and per side the median of those
loops is taken, leaving out each session's first loop (its caches are cold).

- N vs 2N files: hoh's seconds per loop at each, and their ratio (target ≤ 1.2);
- history: a trivial project built for 200 loops next to one built for 5; the median overhead of
  the loops each then runs, long vs short (target ≤ 1.2);
- peak RSS of the hoh process itself (not its agents) building the 2N project with one extra
  file of 300 MB (target ≤ 150 MB, whatever the largest file);
- `hoh --help`, and `hoh status` on a 500-loop workspace (median of 5 runs; targets 150 / 300 ms).

    python benchmarks/perf/runtime_overhead.py [--files 10000] [--history 200] [--rounds 3] [--loops 3]

Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
FILE_BYTES = 20_000
RSS_PROBE = ("import resource, runpy, sys; sys.argv = ['hoh', *sys.argv[1:]]\n"
             "try:\n    runpy.run_module('hoh', run_name='__main__')\n"
             "finally:\n    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)")


def loop_script(loops: int) -> dict:
    def loop(t: int) -> dict:
        return {
            "planner": {"reply": {"goal": f"change one file ({t})", "preserve": [], "out_of_scope": [], "tasks": [
                {"id": "T1", "title": "touch", "details": "change one file", "issues": [],
                 "acceptance": [{"id": "T1.A1", "condition": "the file holds the loop number", "method": "black-box"}]}]}},
            "developer": {"actions": [{"write": {"path": f"src/d{t % 10}/f{t % 7}.txt", "content": f"loop {t}\n"}}],
                          "reply": {"summary": "one file", "tasks": [{"id": "T1", "status": "done", "notes": ""}],
                                    "self_tests": [], "known_gaps": []}},
            "qa": {"checks": [{"id": "T1.A1", "run": f"grep -q 'loop {t}' src/d{t % 10}/f{t % 7}.txt"}]},
        }
    return {"schema_version": 1, "loops": {t: loop(t) for t in range(1, loops + 1)}}


def make_project(root: Path, files: int, big_mb: int = 0) -> Path:
    block = (b"0123456789abcdef" * (FILE_BYTES // 16 + 1))[:FILE_BYTES]
    for n in range(files):
        path = root / f"src/d{n % 100}/f{n}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(block[:-8] + f"{n:08d}".encode())
    if big_mb:
        with open(root / "big.bin", "wb") as fh:
            chunk = os.urandom(1 << 20)
            for _ in range(big_mb):
                fh.write(chunk)
    return root


def hoh(*args: str, rss: bool = False) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-c", RSS_PROBE, *args] if rss else [sys.executable, "-m", "hoh", *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd=REPO)


def build(tmp: Path, name: str, project: Path | None, loops: int, rss: bool = False,
          script_loops: int | None = None) -> tuple[Path, int | None]:
    spec, script = tmp / f"{name}.md", tmp / f"{name}.yaml"
    spec.write_text("# Overhead\n\nChange one file per loop.\n")
    script.write_text(yaml.safe_dump(loop_script(script_loops or loops), sort_keys=False))
    ws = tmp / f"{name}-ws"
    args = ["build", str(spec), "--harness", "scripted", "--loops", str(loops), "-w", str(ws), "-q", "--set", f"harness.script={script}"]
    if project is not None:
        args += ["--project", str(project)]
    result = hoh(*args, rss=rss)
    if result.returncode != 0:
        sys.exit(f"build {name} failed: {result.stderr}")
    peak = int(result.stderr.strip().splitlines()[-1]) // 1024 if rss else None
    return ws, peak


def overheads(ws: Path) -> dict[int, float]:
    """loop → hoh's own seconds in it, from the journal's one fold: neither a role's time nor the replay and
    admission of checks (the project's own tests, run by the Runtime)."""
    sys.path.insert(0, str(REPO))
    from hoh.store.journal import Journal, RunHistory
    history = RunHistory.read(Journal(ws / "state" / "journal.jsonl"))
    return {t: round(s.seconds - sum(s.role_seconds.values()) - sum(s.check_step_seconds.values()), 3)
            for t, s in history.loops.items()
            if s.finished is not None}


def side_by_side(workspaces: dict[str, Path], rounds: int, loops_per_round: int) -> dict[str, list[float]]:
    """Resume each workspace for `loops_per_round` loops in turn, `rounds` times; per workspace, hoh's own
    seconds in each of those loops but the first of every session."""
    samples: dict[str, list[float]] = {name: [] for name in workspaces}
    for r in range(rounds):
        for name in (list(workspaces) if r % 2 == 0 else list(reversed(workspaces))):
            ws = workspaces[name]
            last = max(overheads(ws))
            result = hoh("resume", "-w", str(ws), "--loops", str(loops_per_round), "-q")
            if result.returncode != 0:
                sys.exit(f"resume {name} failed: {result.stderr}")
            over = overheads(ws)
            samples[name] += [over[t] for t in range(last + 2, last + loops_per_round + 1)]
    return samples


def timed(args: list[str], runs: int = 5) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "hoh", *args], capture_output=True, cwd=REPO)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=3, help="resumes per side, alternating")
    p.add_argument("--loops", type=int, default=3, help="loops per resume")
    p.add_argument("--history", type=int, default=200)
    p.add_argument("--big-mb", type=int, default=300)
    args = p.parse_args(argv)
    misses = []
    with tempfile.TemporaryDirectory(prefix="hoh-overhead-", dir=os.environ.get("HOH_BENCH_TMP")) as tmp_str:
        tmp = Path(tmp_str)
        extra = args.rounds * args.loops
        sizes, peak = {}, None
        for n in (args.files, 2 * args.files):
            project = make_project(tmp / f"p{n}", n, big_mb=args.big_mb if n == 2 * args.files else 0)
            sizes[n], rss = build(tmp, f"n{n}", project, 2, rss=n == 2 * args.files, script_loops=2 + extra)
            peak = rss if rss is not None else peak
        samples = side_by_side({str(n): ws for n, ws in sizes.items()}, args.rounds, args.loops)
        per_loop = {n: statistics.median(samples[str(n)]) for n in sizes}
        for n in sizes:
            print(f"{n:>6} files ({n * FILE_BYTES // 10**6} MB): hoh's own time per loop {per_loop[n]:.3f} s "
                  f"(median of {len(samples[str(n)])})"
                  + (f"; peak RSS of hoh {peak} MB (with a {args.big_mb} MB file)" if n == 2 * args.files else ""))
        if peak is not None and peak > 150:
            misses.append(f"peak RSS {peak} MB > 150 MB")
        ratio = per_loop[2 * args.files] / per_loop[args.files]
        print(f"2N/N ratio: {ratio:.2f} (target ≤ 1.2); at N: {per_loop[args.files]:.3f} s (target ≤ 1 s)")
        misses += [f"2N/N {ratio:.2f} > 1.2"] if ratio > 1.2 else []
        misses += [f"{per_loop[args.files]:.2f} s per loop > 1 s"] if per_loop[args.files] > 1 else []

        long_ws, _ = build(tmp, "history", None, args.history, script_loops=args.history + extra)
        short_ws, _ = build(tmp, "short", None, 5, script_loops=5 + extra)
        samples = side_by_side({"long": long_ws, "short": short_ws}, args.rounds, args.loops)
        early, late = statistics.median(samples["short"]), statistics.median(samples["long"])
        print(f"history: after 5 loops {early:.3f} s, after {args.history} loops {late:.3f} s, "
              f"ratio {late / early:.2f} (target ≤ 1.2)")
        misses += [f"history ratio {late / early:.2f} > 1.2"] if late / early > 1.2 else []

        sys.path.insert(0, str(REPO / "tests"))
        from long_run import make_long_workspace
        long_ws = make_long_workspace(tmp / "long500", loops=500)
        help_ms, status_ms = timed(["--help"]), timed(["status", "-w", str(long_ws)])
        print(f"hoh --help {help_ms:.0f} ms (target ≤ 150); hoh status at 500 loops {status_ms:.0f} ms (target ≤ 300)")
        misses += [f"--help {help_ms:.0f} ms"] if help_ms > 150 else []
        misses += [f"status {status_ms:.0f} ms"] if status_ms > 300 else []
    print(json.dumps({"missed": misses}))
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
