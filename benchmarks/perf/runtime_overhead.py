"""hoh's own cost per loop against the project's size, next to the physical floor of the same tree.

Method. A project of N files (~20 KB each, default N = 10,000, and 2N) is generated and built with
`hoh build --project` and the scripted agent, whose Developer changes ONE file per loop and whose
Planner and QA do almost nothing. hoh's own time in a loop is the loop's wall time (journal:
loop_started → loop_finished) minus the time spent inside the agent subprocesses (journal:
attempt_finished.seconds, which includes starting the OS jail) and inside the project's own checks;
the first loop, which hashes the new project once, is left out. This machine is noisy and its load
drifts over minutes, so everything compared is measured side by side: once both workspaces exist,
each is resumed for a few loops in turn (the order alternating per round), leaving out each session's
first loop (its caches are cold), and after each resume the **physical floor** is sampled as often:
on a copy of the same N-file tree, with hoh's own git flags and environment, one file changed, then
one `git status`, one `add -A` + `write-tree`, and one `read-tree -m -u` moving a second work tree (a
candidate view) to the new tree — what any tool must pay to learn what changed in a git work tree,
freeze it and show it to a reviewer.

- N vs 2N files: hoh's seconds per loop at each (min / median / max) and the ratio of the medians
  (target ≤ 1.2: hoh's cost does not follow the project's size);
- hoh at N vs the floor at N (target ≤ 1: hoh pays no more than one scan, one freeze and one move);
- peak RSS of the hoh process itself (not its agents) building the 2N project with one extra
  file of 300 MB (target ≤ 150 MB, whatever the largest file).

    python benchmarks/perf/runtime_overhead.py [--files 10000] [--rounds 3] [--loops 3] [--big-mb 300]
    python benchmarks/perf/runtime_overhead.py --tiny      # a few hundred files, one round: the tests' run

The last line printed is one JSON object with every figure. Exits 1 when a target is missed, 2 on an
error (a build or resume that failed: an error, never a figure).
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
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]
FILE_BYTES = 20_000
RSS_PROBE = ("import resource, runpy, sys; sys.argv = ['hoh', *sys.argv[1:]]\n"
             "try:\n    runpy.run_module('hoh', run_name='__main__')\n"
             "finally:\n    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)")
TARGET_SIZE_RATIO, TARGET_FLOOR_RATIO, TARGET_RSS_MB = 1.2, 1.0, 150

from one_file_loops import loop_script, overheads  # noqa: E402


class BenchError(Exception):
    """Something the benchmark needs failed: reported as an error (exit 2), never as a figure."""



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
    return subprocess.run(argv, capture_output=True, text=True, cwd=REPO, stdin=subprocess.DEVNULL)


def build(tmp: Path, name: str, project: Path, loops: int, script_loops: int, rss: bool = False) -> tuple[Path, int | None]:
    spec, script = tmp / f"{name}.md", tmp / f"{name}.yaml"
    spec.write_text("# Overhead\n\nChange one file per loop.\n")
    script.write_text(yaml.safe_dump(loop_script(script_loops), sort_keys=False))
    ws = tmp / f"{name}-ws"
    result = hoh("build", str(spec), "--harness", "scripted", "--loops", str(loops), "-w", str(ws), "-q",
                 "--set", f"harness.script={script}", "--project", str(project), rss=rss)
    if result.returncode != 0:
        raise BenchError(f"build {name} failed (exit {result.returncode}): {result.stderr[-2000:]}")
    peak = int(result.stderr.strip().splitlines()[-1]) // 1024 if rss else None
    return ws, peak



class Floor:
    """The physical floor on a copy of a tree: per sample one file changed, then `git status`, `add -A` +
    `write-tree`, and `read-tree -m -u` moving a second work tree (a view) from the last tree to the new one,
    each through hoh's own `run_git` (its flags, its environment)."""

    def __init__(self, tmp: Path, files: int):
        from hoh.store.gitrun import run_git
        self.run_git = run_git
        self.tree = make_project(tmp / "floor-tree", files)
        self.git_dir, self.view = tmp / "floor.git", tmp / "floor-view"
        self.view.mkdir()
        self.git("init", "-q", "--bare", str(self.git_dir), cwd=tmp, plain=True)
        self.git("add", "-A")
        self.last = self.git("write-tree")
        self.git("read-tree", self.last, view=True)
        self.git("checkout-index", "-u", "--all", "--force", view=True)
        self.git("status", "--porcelain")  # warm, as hoh's own caches are after the session's first loop
        self.n = 0

    def git(self, *args: str, view: bool = False, cwd: Path | None = None, plain: bool = False) -> str:
        if plain:
            return self.run_git(list(args), cwd=cwd)
        tree = self.view if view else self.tree
        index = self.git_dir / ("view-index" if view else "index")
        return self.run_git(["--git-dir", str(self.git_dir), "--work-tree", str(tree), *args], cwd=tree, index=index)

    def sample(self) -> float:
        self.n += 1
        (self.tree / f"src/d{self.n % 10}/f{self.n % 7}.txt").write_text(f"floor {self.n}\n")
        start = time.perf_counter()
        self.git("status", "--porcelain=v1", "-z", "--untracked-files=normal", "--ignored=matching")
        self.git("add", "-A")
        tree = self.git("write-tree")
        self.git("read-tree", "-m", "-u", self.last, tree, view=True)
        seconds = time.perf_counter() - start
        self.last = tree
        return seconds


def side_by_side(workspaces: dict[str, Path], floor: Floor, rounds: int, loops_per_round: int) -> dict[str, list[float]]:
    """Resume each workspace for `loops_per_round` loops in turn, `rounds` times, and after each resume as many
    floor samples; per workspace, hoh's own seconds in each of those loops but the first of every session."""
    samples: dict[str, list[float]] = {name: [] for name in (*workspaces, "floor")}
    for r in range(rounds):
        for name in (list(workspaces) if r % 2 == 0 else list(reversed(workspaces))):
            ws = workspaces[name]
            last = max(overheads(ws))
            result = hoh("resume", "-w", str(ws), "--loops", str(loops_per_round), "-q")
            if result.returncode != 0:
                raise BenchError(f"resume {name} failed (exit {result.returncode}): {result.stderr[-2000:]}")
            over = overheads(ws)
            missing = [t for t in range(last + 2, last + loops_per_round + 1) if t not in over]
            if missing:
                raise BenchError(f"resume {name}: loops {missing} did not finish")
            samples[name] += [over[t] for t in range(last + 2, last + loops_per_round + 1)]
            samples["floor"] += [floor.sample() for _ in range(max(1, loops_per_round - 1))]
    return samples


def spread(values: list[float]) -> dict[str, float]:
    return {"min": round(min(values), 4), "median": round(statistics.median(values), 4), "max": round(max(values), 4),
            "n": len(values)}


def shown(s: dict[str, float]) -> str:
    return f"min {s['min']:.3f} / median {s['median']:.3f} / max {s['max']:.3f} s (n={s['n']})"


def measure(args: argparse.Namespace) -> dict:
    n, n2 = args.files, 2 * args.files
    loops_per_round = max(2, args.loops)  # a session's first loop is left out: at least one more
    extra = args.rounds * loops_per_round
    with tempfile.TemporaryDirectory(prefix="hoh-overhead-", dir=os.environ.get("HOH_BENCH_TMP")) as tmp_str:
        tmp = Path(tmp_str)
        ws_n, _ = build(tmp, f"n{n}", make_project(tmp / f"p{n}", n), 2, 2 + extra)
        ws_2n, peak = build(tmp, f"n{n2}", make_project(tmp / f"p{n2}", n2, big_mb=args.big_mb), 2, 2 + extra, rss=True)
        floor = Floor(tmp, n)
        samples = side_by_side({"N": ws_n, "2N": ws_2n}, floor, args.rounds, loops_per_round)
    hoh_n, hoh_2n, floor_n = spread(samples["N"]), spread(samples["2N"]), spread(samples["floor"])
    for name, value in (("hoh at N", hoh_n), ("hoh at 2N", hoh_2n), ("floor at N", floor_n)):
        if not value["median"] > 0:
            raise BenchError(f"{name}: a median of {value['median']} s is not a time")
    return {"files": n, "mb": n * FILE_BYTES // 10**6, "hoh_n_s": hoh_n, "hoh_2n_s": hoh_2n, "floor_n_s": floor_n,
            "ratio_2n_n": round(hoh_2n["median"] / hoh_n["median"], 3),
            "ratio_n_floor": round(hoh_n["median"] / floor_n["median"], 3),
            "peak_rss_mb": peak, "big_mb": args.big_mb}


def report(r: dict) -> list[str]:
    n = r["files"]
    print(f"{n:>6} files ({r['mb']} MB): hoh's own time per loop {shown(r['hoh_n_s'])}")
    print(f"{2 * n:>6} files ({2 * r['mb']} MB): hoh's own time per loop {shown(r['hoh_2n_s'])}")
    print(f"{n:>6} files: physical floor (git status + add -A/write-tree + read-tree -m -u) {shown(r['floor_n_s'])}")
    print(f"2N/N ratio {r['ratio_2n_n']:.2f} (target ≤ {TARGET_SIZE_RATIO}); hoh/floor at N {r['ratio_n_floor']:.2f} "
          f"(target ≤ {TARGET_FLOOR_RATIO}); peak RSS of hoh {r['peak_rss_mb']} MB with a {r['big_mb']} MB file "
          f"(target ≤ {TARGET_RSS_MB})")
    misses = [f"2N/N {r['ratio_2n_n']:.2f} > {TARGET_SIZE_RATIO}"] if r["ratio_2n_n"] > TARGET_SIZE_RATIO else []
    misses += [f"hoh/floor {r['ratio_n_floor']:.2f} > {TARGET_FLOOR_RATIO}"] if r["ratio_n_floor"] > TARGET_FLOOR_RATIO else []
    misses += [f"peak RSS {r['peak_rss_mb']} MB > {TARGET_RSS_MB}"] if r["peak_rss_mb"] > TARGET_RSS_MB else []
    return misses


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=3, help="resumes per side, alternating")
    p.add_argument("--loops", type=int, default=3, help="loops per resume (the first is left out)")
    p.add_argument("--big-mb", type=int, default=300)
    p.add_argument("--tiny", action="store_true", help="300 files, one round of two loops, a 1 MB big file")
    args = p.parse_args(argv)
    if args.tiny:
        args.files, args.rounds, args.loops, args.big_mb = 300, 1, 2, 1
    from hoh.store.gitrun import GitError
    try:
        result = measure(args)
    except (BenchError, GitError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    misses = report(result)
    print(json.dumps({**result, "missed": misses}))
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
