"""Checks run in QA's Docker environment against QA's local jail: the time to admit and to replay N checks.

Two workspaces, one with local roles and one with `--env docker`, build the same scripted loop: the Planner
sets N acceptance criteria, QA attaches one cheap check to each (`grep`, `test`, `wc`: the commands' own cost
stays small), and the Runtime admits them (runs each once more on the candidate). Every later loop replays the
whole register on its candidate before QA. Both are resumed in turn, `--rounds` times, alternating the order;
the admission and replay seconds are read from the journal (`checks_admitted`, `checks_replayed`).

    python benchmarks/perf/env_checks.py [--checks 100] [--rounds 2]
    python benchmarks/perf/env_checks.py --smoke     # the tests' tiny run: 5 checks, one round, no target

Target (issue 42): replaying the checks in docker takes ≤ 3× their local time. The last line printed is one
JSON object with every figure. Exits 1 when the target is missed, 2 on an error.
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

REPO = Path(__file__).resolve().parents[2]
IMAGE = "localhost/hoh-base:bookworm"
TARGET = 3.0
ENVS = {"local": [], "docker": ["--env", "docker", "--env-image", IMAGE]}
CHECKS = ("grep -q loop data.txt", "test -s data.txt", "wc -l data.txt", "cat data.txt")


class BenchError(Exception):
    """Something the benchmark needs failed: reported as an error (exit 2), never as a figure."""


def attached(n: int) -> dict:
    """Criterion n's check, attached to the register in loop 1 (it holds on every later loop's candidate)."""
    command = f"{CHECKS[n % len(CHECKS)]} && test {n} -gt 0"  # each its own: the register keeps one of twins
    return {"id": f"T1.A{n}", "run": command, "attach": {"command": command}}


def script(checks: int, loops: int) -> dict:
    def loop(t: int) -> dict:
        criteria = [{"id": f"T1.A{n}", "condition": f"check {n} holds", "method": "black-box"}
                    for n in range(1, checks + 1)]
        return {
            "planner": {"reply": {"goal": f"loop {t}", "preserve": [], "out_of_scope": [], "tasks": [
                {"id": "T1", "title": "data", "details": "write data.txt", "issues": [], "acceptance": criteria}]}},
            "developer": {"actions": [{"write": {"path": "data.txt", "content": f"loop {t}\n"}}],
                          "reply": {"summary": "data", "tasks": [{"id": "T1", "status": "done", "notes": ""}],
                                    "self_tests": [], "known_gaps": []}},
            "qa": {"checks": [attached(n) if t == 1 else {"id": f"T1.A{n}", "run": "true"}
                              for n in range(1, checks + 1)]},
        }
    return {"schema_version": 1, "loops": {t: loop(t) for t in range(1, loops + 1)}}


def hoh(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hoh", *args], capture_output=True, text=True, cwd=REPO,
                          stdin=subprocess.DEVNULL)


def journal(ws: Path) -> list[dict]:
    return [json.loads(line) for line in (ws / "state" / "journal.jsonl").read_text().splitlines()]


def seconds_of(ws: Path, kind: str, loops: set[int]) -> list[float]:
    return [e["seconds"] for e in journal(ws) if e["event"] == kind and e["loop"] in loops]


def measure(checks: int, rounds: int) -> dict:
    figures: dict[str, dict[str, list[float]]] = {w: {"admit": [], "replay": []} for w in ENVS}
    with tempfile.TemporaryDirectory(prefix="hoh-envchecks-", dir=os.environ.get("HOH_BENCH_TMP")) as tmp_str:
        tmp = Path(tmp_str)
        (tmp / "spec.md").write_text("# Data\n\nWrite data.txt.\n")
        (tmp / "script.yaml").write_text(yaml.safe_dump(script(checks, 1 + rounds), sort_keys=False))
        workspaces = {}
        for where, extra in ENVS.items():
            ws = tmp / f"{where}-ws"
            built = hoh("build", str(tmp / "spec.md"), "--harness", "scripted", "--loops", "1", "-w", str(ws), "-q",
                        "--set", f"harness.script={tmp / 'script.yaml'}", *extra)
            if built.returncode != 0:
                raise BenchError(f"build {where} failed (exit {built.returncode}): {built.stderr[-2000:]}")
            admitted = [e for e in journal(ws) if e["event"] == "checks_admitted"]
            if [e["added"] for e in admitted] != [checks]:
                raise BenchError(f"{where}: {admitted} admitted, not {checks} checks")
            figures[where]["admit"] += seconds_of(ws, "checks_admitted", {1})
            workspaces[where] = ws
        for r in range(rounds):
            for where in (list(ENVS) if r % 2 == 0 else list(reversed(ENVS))):
                resumed = hoh("resume", "-w", str(workspaces[where]), "--loops", "1", "-q")
                if resumed.returncode != 0:
                    raise BenchError(f"resume {where} failed (exit {resumed.returncode}): {resumed.stderr[-2000:]}")
                replays = [e for e in journal(workspaces[where]) if e["event"] == "checks_replayed"
                           and e["loop"] == r + 2]
                if [(e["replayed"], e["failed"]) for e in replays] != [(checks, 0)]:
                    raise BenchError(f"{where}: loop {r + 2} replayed {replays}, not {checks} passing checks")
                figures[where]["replay"] += [e["seconds"] for e in replays]
    med = {where: {step: round(statistics.median(v), 3) for step, v in steps.items()}
           for where, steps in figures.items()}
    return {"checks": checks, "seconds": med,
            "replay_docker_over_local": round(med["docker"]["replay"] / med["local"]["replay"], 3),
            "admit_docker_over_local": round(med["docker"]["admit"] / med["local"]["admit"], 3)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checks", type=int, default=100)
    p.add_argument("--rounds", type=int, default=2, help="resumes per workspace, alternating the order")
    p.add_argument("--smoke", action="store_true", help="5 checks, one round, no target")
    args = p.parse_args(argv)
    if args.smoke:
        args.checks, args.rounds = 5, 1
    try:
        r = measure(args.checks, args.rounds)
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for where, steps in r["seconds"].items():
        print(f"{where:>7}: admit {steps['admit']:7.3f} s, replay {steps['replay']:7.3f} s for {r['checks']} checks")
    print(f"docker/local: replay {r['replay_docker_over_local']:.2f} (target ≤ {TARGET}), "
          f"admit {r['admit_docker_over_local']:.2f}")
    print(json.dumps(r))
    if r["replay_docker_over_local"] > TARGET and not args.smoke:
        print(f"missed: replay docker/local {r['replay_docker_over_local']:.2f}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
