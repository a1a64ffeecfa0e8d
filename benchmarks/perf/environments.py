"""Throughput of builds whose roles run in Docker environments, with 1, 2 and 4 builds at once.

Each build is `hoh build --env docker` of a one-loop scripted project whose every role waits as a CLI waits on
its model (`--wait` seconds): the roles' environments, not this machine, are the bottleneck, so N builds at
once should finish nearly N times as many builds per minute, and hoh's own CPU per build should stay flat.
Prints builds/min for each N, the N/1 ratios (measured side by side in one run) and hoh's CPU seconds per
build; exits 1 when the 2/1 ratio misses --target.

    python benchmarks/perf/environments.py [--counts 1,2,4] [--wait 4] [--target 1.5]
    python benchmarks/perf/environments.py --smoke        # the tests' tiny run: 1 and 2 builds, no target

Needs hoh[harbor] in this Python and a Docker engine at $DOCKER_HOST with localhost/hoh-base:bookworm
(`.ci/docker-engine base-image`).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

IMAGE = "localhost/hoh-base:bookworm"
SPEC = "# Greeter\n\nPrint a greeting.\n"


def script(wait: float) -> dict:
    nap = [{"sleep": wait}] if wait else []
    reply = {"goal": "greeter", "preserve": [], "out_of_scope": [],
             "tasks": [{"id": "T1", "title": "Greet", "details": "print hello", "issues": [],
                        "acceptance": [{"id": "T1.A1", "condition": "prints hello", "method": "black-box"}]}]}
    return {"schema_version": 1, "loops": {1: {
        "planner": {"actions": nap, "reply": reply},
        "developer": {"actions": [*nap, {"write": {"path": "greet.py", "content": "print('hello')\n"}}],
                      "reply": {"summary": "wrote greet.py", "tasks": [{"id": "T1", "status": "done", "notes": ""}],
                                "self_tests": [], "known_gaps": []}},
        "qa": {"actions": nap, "checks": [{"id": "T1.A1", "run": "python3 greet.py", "expect_stdout": "hello"}]}}}}


def build_all(root: Path, count: int, wait: float) -> tuple[float, float]:
    """`count` builds at once: (wall seconds, hoh's CPU seconds in all of them)."""
    procs = []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    begun = time.monotonic()
    for n in range(count):
        project = root / f"n{count}-{n}"
        project.mkdir(parents=True)
        (project / "spec.md").write_text(SPEC)
        (project / "script.yaml").write_text(yaml.safe_dump(script(wait)))
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "hoh", "build", str(project / "spec.md"), "--harness", "scripted", "--loops", "1",
             "-w", str(project / "ws"), "-q", "--env", "docker", "--env-image", IMAGE],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL))
    for proc in procs:
        _, stderr = proc.communicate(timeout=1800)
        if proc.returncode != 0:
            raise SystemExit(f"a build failed (exit {proc.returncode}): {stderr.strip()[-500:]}")
    wall = time.monotonic() - begun
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    for n in range(count):
        events = [json.loads(line) for line in (root / f"n{count}-{n}" / "ws" / "state" / "journal.jsonl").open()]
        if not any(e["event"] == "loop_finished" and e["status"] == "pass" for e in events):
            raise SystemExit(f"build {n} of {count} did not pass its loop")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1,2,4", help="builds at once, comma-separated")
    parser.add_argument("--wait", type=float, default=4.0, help="a role's model latency, seconds")
    parser.add_argument("--target", type=float, default=1.5, help="required 2/1 ratio of builds per minute")
    parser.add_argument("--smoke", action="store_true", help="1 and 2 builds, no waiting, no target")
    args = parser.parse_args()
    counts = [1, 2] if args.smoke else [int(c) for c in args.counts.split(",")]
    wait = 0.0 if args.smoke else args.wait
    rates: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="hoh-bench-envs-") as tmp:
        for count in counts:
            wall, cpu = build_all(Path(tmp), count, wait)
            rates[count] = count / wall * 60
            print(f"{count} at once: {wall:6.1f} s wall, {rates[count]:5.2f} builds/min, "
                  f"hoh CPU {cpu / count:5.2f} s per build")
    base = rates[counts[0]]
    for count in counts[1:]:
        print(f"ratio {count}/{counts[0]}: {rates[count] / base:.2f}")
    if args.smoke or 2 not in rates or 1 not in rates:
        return 0
    return 0 if rates[2] / rates[1] >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
