"""hoh's time per loop with roles in Docker against local roles, and in a simulated remote sandbox, at N and
10N project files, with the bytes each attempt moves.

Each workspace is a scripted build on a `--project` tree of N files of 20 KB whose Developer changes one line per
loop (`one_file_loops.py`); then every workspace is resumed in turn, `--rounds` times, alternating the order, and a
loop's wall time is read from the journal. The first loop of every session is left out: it starts the roles'
environments and sends them the whole view. Bytes moved are each attempt's `bytes_in` + `bytes_out` in its
`command.json`, in the loops measured. The remote sandbox is `remote_sim.py`: Docker behind 50 ms per call and
100 Mbit/s.

    python benchmarks/perf/env_transfer.py [--files 1000] [--rounds 2] [--loops 3]
    python benchmarks/perf/env_transfer.py --smoke      # the tests' tiny run: 20 and 200 files, one round, no targets

Targets (issue 42): at 10N files docker/local ≤ 2, the remote sandbox at 10N / at N ≤ 2, and ≤ 1 MB per attempt.
The last line printed is one JSON object with every figure. Exits 1 when a target is missed, 2 on an error.
Needs hoh[harbor] in this Python and a Docker engine at $DOCKER_HOST with localhost/hoh-base:bookworm.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(REPO), str(HERE)]
IMAGE = "localhost/hoh-base:bookworm"
TARGET_DOCKER_RATIO, TARGET_REMOTE_RATIO, TARGET_BYTES = 2.0, 2.0, 1 << 20
ENVS = {"local": [], "docker": ["--env", "docker", "--env-image", IMAGE],
        "remote": ["--env", "remote_sim:RemoteSandbox", "--env-image", IMAGE]}

from one_file_loops import loop_script  # noqa: E402
from runtime_overhead import make_project  # noqa: E402


class BenchError(Exception):
    """Something the benchmark needs failed: reported as an error (exit 2), never as a figure."""


def hoh(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "hoh", *args], capture_output=True, text=True, cwd=REPO,
                          stdin=subprocess.DEVNULL, env=env)


def build(tmp: Path, name: str, project: Path, where: str, script_loops: int) -> Path:
    spec, script = tmp / f"{name}.md", tmp / f"{name}.yaml"
    spec.write_text("# Transfer\n\nChange one line per loop.\n")
    script.write_text(yaml.safe_dump(loop_script(script_loops), sort_keys=False))
    ws = tmp / f"{name}-ws"
    result = hoh("build", str(spec), "--harness", "scripted", "--loops", "1", "-w", str(ws), "-q",
                 "--set", f"harness.script={script}", "--project", str(project), *ENVS[where])
    if result.returncode != 0:
        raise BenchError(f"build {name} failed (exit {result.returncode}): {result.stderr[-2000:]}")
    return ws


def loop_seconds(ws: Path) -> dict[int, float]:
    from hoh.store.journal import Journal, RunHistory
    history = RunHistory.read(Journal(ws / "state" / "journal.jsonl"))
    return {t: s.seconds for t, s in history.loops.items() if s.finished is not None}


def bytes_moved(ws: Path, loops: set[int]) -> list[int]:
    moved = []
    for command in (ws / "state" / "loops").glob("*/**/command.json"):
        loop = int(command.relative_to(ws / "state" / "loops").parts[0])
        record = json.loads(command.read_text())
        if loop in loops and "bytes_in" in record:
            moved.append(record["bytes_in"] + record["bytes_out"])
    return moved


def side_by_side(workspaces: dict[str, Path], rounds: int, loops: int) -> tuple[dict[str, list[float]],
                                                                                  dict[str, list[int]]]:
    seconds: dict[str, list[float]] = {name: [] for name in workspaces}
    moved: dict[str, list[int]] = {name: [] for name in workspaces}
    for r in range(rounds):
        for name in (list(workspaces) if r % 2 == 0 else list(reversed(workspaces))):
            ws = workspaces[name]
            last = max(loop_seconds(ws))
            result = hoh("resume", "-w", str(ws), "--loops", str(loops), "-q")
            if result.returncode != 0:
                raise BenchError(f"resume {name} failed (exit {result.returncode}): {result.stderr[-2000:]}")
            done, measured = loop_seconds(ws), set(range(last + 2, last + loops + 1))
            if not measured <= set(done):
                raise BenchError(f"resume {name}: loops {sorted(measured - set(done))} did not finish")
            seconds[name] += [done[t] for t in sorted(measured)]
            moved[name] += bytes_moved(ws, measured)
    return seconds, moved


def median(values: list[float]) -> float:
    if not values:
        raise BenchError("no loop was measured")
    return round(statistics.median(values), 3)


def measure(args: argparse.Namespace) -> dict:
    sizes = (args.files, 10 * args.files)
    with tempfile.TemporaryDirectory(prefix="hoh-envbench-", dir=os.environ.get("HOH_BENCH_TMP")) as tmp_str:
        tmp = Path(tmp_str)
        script_loops = 1 + args.rounds * args.loops
        workspaces = {}
        for size in sizes:
            for where in args.envs:
                name = f"{where}-{size}"
                workspaces[name] = build(tmp, name, make_project(tmp / f"p-{name}", size), where, script_loops)
        seconds, moved = side_by_side(workspaces, args.rounds, max(2, args.loops))
    figures = {"files": list(sizes), "loop_s": {n: median(v) for n, v in seconds.items()},
               "max_bytes_per_attempt": {n: max(v, default=0) for n, v in moved.items()},
               "median_bytes_per_attempt": {n: int(statistics.median(v)) if v else 0 for n, v in moved.items()}}
    big = sizes[1]
    loop = figures["loop_s"]
    if "docker" in args.envs:
        figures["docker_over_local"] = round(loop[f"docker-{big}"] / loop[f"local-{big}"], 3)
    if "remote" in args.envs:
        figures["remote_10n_over_n"] = round(loop[f"remote-{big}"] / loop[f"remote-{sizes[0]}"], 3)
    return figures


def report(r: dict) -> list[str]:
    for name, seconds in r["loop_s"].items():
        print(f"{name:>14}: {seconds:7.3f} s per loop; bytes per attempt median "
              f"{r['median_bytes_per_attempt'][name]:,} max {r['max_bytes_per_attempt'][name]:,}")
    misses = []
    if "docker_over_local" in r:
        print(f"docker/local at {r['files'][1]} files: {r['docker_over_local']:.2f} (target ≤ {TARGET_DOCKER_RATIO})")
        if r["docker_over_local"] > TARGET_DOCKER_RATIO:
            misses.append(f"docker/local {r['docker_over_local']:.2f}")
    if "remote_10n_over_n" in r:
        print(f"remote sandbox, {r['files'][1]} over {r['files'][0]} files: {r['remote_10n_over_n']:.2f} "
              f"(target ≤ {TARGET_REMOTE_RATIO})")
        if r["remote_10n_over_n"] > TARGET_REMOTE_RATIO:
            misses.append(f"remote 10N/N {r['remote_10n_over_n']:.2f}")
    worst = max((v for n, v in r["max_bytes_per_attempt"].items() if not n.startswith("local")), default=0)
    if worst > TARGET_BYTES:
        misses.append(f"{worst:,} bytes in one attempt")
    return misses


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", type=int, default=1000, help="N: the small project; the large one has 10N")
    p.add_argument("--rounds", type=int, default=2, help="resumes per workspace, alternating the order")
    p.add_argument("--loops", type=int, default=3, help="loops per resume (the first is left out)")
    p.add_argument("--envs", default="local,docker,remote")
    p.add_argument("--smoke", action="store_true", help="20 and 200 files, one round of two loops, no targets")
    args = p.parse_args(argv)
    args.envs = args.envs.split(",")
    if args.smoke:
        args.files, args.rounds, args.loops = 20, 1, 2
    try:
        figures = measure(args)
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    misses = report(figures)
    print(json.dumps(figures))
    if misses and not args.smoke:
        print("missed: " + "; ".join(misses), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
