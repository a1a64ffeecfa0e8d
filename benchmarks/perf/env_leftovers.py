"""hoh's peak memory when a role leaves a huge tree behind: a Developer that writes N small files and a sparse
file of S GB into the project, with local roles and with the Developer in Docker, side by side.

Each run is a one-loop scripted build; hoh's peak resident memory is its process's high-water mark
(`VmHWM`), read until it exits. Also printed: each run's wall time, and whether the sparse file reached the
project (it must not: a freeze leaves out a file over 1 GiB, and an environment never copies it out).

    python benchmarks/perf/env_leftovers.py [--files 300000] [--sparse-gb 5]
    python benchmarks/perf/env_leftovers.py --smoke     # the tests' run: 2,000 files, 2 GB sparse, no target

Target (issue 42): hoh's peak memory ≤ 500 MB with the Developer in Docker. The last line printed is one JSON
object with every figure. Exits 1 when the target is missed, 2 on an error.
Needs hoh[harbor] in this Python and a Docker engine at $DOCKER_HOST with localhost/hoh-base:bookworm.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
IMAGE = "localhost/hoh-base:bookworm"
TARGET_MB = 500
ENVS = {"local": [], "docker": ["--env", "docker", "--env-image", IMAGE]}


class BenchError(Exception):
    """Something the benchmark needs failed: reported as an error (exit 2), never as a figure."""


def script(files: int, sparse_gb: int) -> dict:
    make = (f"python3 -c \"import os\nfor d in range({max(1, files // 1000)}):\n"
            f"    os.makedirs('left/%d' % d, exist_ok=True)\n"
            f"    for i in range({min(files, 1000)}):\n"
            f"        open('left/%d/%d' % (d, i), 'w').write('x')\" && truncate -s {sparse_gb}G big.bin")
    return {"schema_version": 1, "loops": {1: {
        "planner": {"reply": {"goal": "leave a tree", "preserve": [], "out_of_scope": [], "tasks": [
            {"id": "T1", "title": "tree", "details": "write files", "issues": [],
             "acceptance": [{"id": "T1.A1", "condition": "done.txt exists", "method": "black-box"}]}]}},
        "developer": {"actions": [{"run": make}, {"write": {"path": "done.txt", "content": "done\n"}}],
                      "reply": {"summary": "tree", "tasks": [{"id": "T1", "status": "done", "notes": ""}],
                                "self_tests": [], "known_gaps": []}},
        "qa": {"checks": [{"id": "T1.A1", "run": "test -s done.txt"}]}}}}


def peak_of(argv: list[str]) -> tuple[int, float, subprocess.CompletedProcess]:
    """Run `argv`; (its peak resident memory in bytes, its wall time, what it printed)."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=REPO)
        peak = 0
        while process.poll() is None:
            try:
                status = Path(f"/proc/{process.pid}/status").read_text()
            except OSError:
                break
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) * 1024)
            time.sleep(0.1)  # a high-water mark: a late look still sees the peak
        process.wait()
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(argv, process.returncode, out.read().decode(errors="replace"),
                                           err.read().decode(errors="replace"))
    return peak, round(time.monotonic() - started, 1), done


def measure(files: int, sparse_gb: int) -> dict:
    figures: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="hoh-leftovers-", dir=os.environ.get("HOH_BENCH_TMP")) as tmp_str:
        tmp = Path(tmp_str)
        spec, plan = tmp / "spec.md", tmp / "script.yaml"
        spec.write_text("# Leftovers\n\nLeave a tree.\n")
        plan.write_text(yaml.safe_dump(script(files, sparse_gb), sort_keys=False))
        for where, extra in ENVS.items():
            ws = tmp / f"{where}-ws"
            peak, seconds, done = peak_of([sys.executable, "-m", "hoh", "build", str(spec), "--harness", "scripted",
                                           "--loops", "1", "-w", str(ws), "-q", "--set", f"harness.script={plan}",
                                           *extra])
            if done.returncode not in (0, 1) or not (ws / "project" / "done.txt").is_file():
                raise BenchError(f"{where}: hoh build failed ({done.returncode}): {done.stderr.strip()[-400:]}")
            left = sum(1 for _ in (ws / "project" / "left").rglob("*")) if (ws / "project" / "left").is_dir() else 0
            figures[where] = {"peak_mb": round(peak / 2**20, 1), "seconds": seconds, "files_back": left,
                              "sparse_back": (ws / "project" / "big.bin").exists()}
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=300_000)
    parser.add_argument("--sparse-gb", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="the tests' tiny run; no target")
    args = parser.parse_args()
    files, sparse = (2000, 2) if args.smoke else (args.files, args.sparse_gb)
    try:
        figures = measure(files, sparse)
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for where, f in figures.items():
        print(f"{where:>7}: peak {f['peak_mb']:7.1f} MB, {f['seconds']:6.1f} s, {f['files_back']} entries back, "
              f"sparse file back: {f['sparse_back']}")
    met = figures["docker"]["peak_mb"] <= TARGET_MB and not figures["docker"]["sparse_back"]
    print(f"docker peak {figures['docker']['peak_mb']} MB (target ≤ {TARGET_MB} MB)")
    print(json.dumps({"files": files, "sparse_gb": sparse, "figures": figures, "met": met}))
    return 0 if met or args.smoke else 1


if __name__ == "__main__":
    sys.exit(main())
