"""A long run's workspace, generated in seconds: what `hoh report` must handle at 200 loops.

A real scripted build costs about a second per loop, so a 200-loop history is synthesized instead,
through the real pieces wherever they exist: `create_workspace` (identity, config, spec, git repo),
`Ledger.apply_loop` (issues opened, closed, reopened; behaviours verified and broken), `plan_markdown`,
`dump_json`, and a real git history (one commit and tag per candidate, via `git fast-import`). The
journal carries the Runtime's own event classes (`hoh.store.events`) on a simulated clock, and every state
file validates against `schemas/` (checked in test_report.py), so drift from the real format shows.

Shape: three tasks per loop, QA checks with evidence files (some long, to exercise cutting), 0–3
findings per loop (some re-finding a closed issue), a Developer retried now and then, a Developer
that fails outright every 67th loop, a harness that reports cost, and a resume at the halfway mark.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

from hoh.config import HohConfig, apply_overrides
from hoh.evidence.ledger import Ledger
from hoh.fsutil import dump_json
from hoh.usage import Usage
from hoh.paths import WorkspacePaths
from hoh.store import events as ev
from hoh.store.gitrun import EPOCH
from hoh.runtime.planmd import plan_markdown
from hoh.store.workspace import create_workspace

SPEC = "# Spire of Numbers\n\nA turn-based deck-building game, built over many loops.\n"
MODEL = "openai/gpt-5.5"


def failed_loop(t: int) -> bool:
    return t % 67 == 0


def make_long_workspace(root: Path, loops: int = 200, seed: int = 7) -> Path:
    """Create a finished `loops`-loop workspace at `root` (which must not exist); return it."""
    rng = random.Random(seed)
    spec = root.parent / f"{root.name}-spec.md"
    spec.write_text(SPEC)
    config = apply_overrides(HohConfig(), [f"harness.model={MODEL}", f"loops={loops}"], {"harness.name": "pi"})
    ws = create_workspace(root, spec, config)
    paths = ws.paths
    root_commit = ws.identity["root_commit"]
    commits = _history(paths, root_commit, loops, rng)
    journal = _JournalWriter(paths, start=EPOCH + 10_000)
    ledger = Ledger()
    half = loops // 2
    journal.add(ev.RunStarted(target_loops=half, resumed=False, harness="pi"))
    for t in range(1, loops + 1):
        if t == half + 1:
            journal.add(ev.RunFinished(status="finished", loops_finished=half))
            journal.add(ev.RunStarted(target_loops=loops, resumed=True, harness="pi"))
        _loop(paths, t, commits, root_commit, ledger, journal, rng)
    journal.add(ev.RunFinished(status="finished", loops_finished=loops))
    ledger.data["applied_through"] = loops
    ledger.save(paths.ledger)
    journal.write()
    return root


def _history(paths: WorkspacePaths, root_commit: str, loops: int,
             rng: random.Random) -> dict[int, tuple[str, str, str]]:
    """loop → (commit, tree, parent) for every loop with a candidate, as real git objects."""
    files: dict[str, list[str]] = {}
    stream: list[bytes] = []
    parent_mark: str = root_commit
    made = []
    for t in range(1, loops + 1):
        if failed_loop(t):
            continue
        changes = {}
        for _ in range(rng.randint(1, 3)):
            path = f"src/feature_{rng.randrange(max(2, t // 4))}.py"
            lines = files.setdefault(path, [f'"""{path}"""'])
            lines += [f"def step_{t}_{len(lines)}():", f"    return {rng.randrange(1000)}"]
            if len(lines) > 40 and rng.random() < 0.3:
                del lines[1:5]
            changes[path] = "\n".join(lines) + "\n"
        message = f"hoh loop {t}: increment {t}".encode()
        stream.append(f"commit refs/heads/main\nmark :{t}\ncommitter hoh <hoh@localhost> {EPOCH + t} +0000\n"
                      f"data {len(message)}\n".encode() + message + f"\nfrom {parent_mark}\n".encode())
        for path, content in sorted(changes.items()):
            data = content.encode()
            stream.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")
        stream.append(f"reset refs/tags/loop-{t:04d}\nfrom :{t}\n\n".encode())
        made.append(t)
        parent_mark = f":{t}"
    marks = paths.root / "scratch" / "marks"
    git = ["git", "--git-dir", str(paths.history), "--work-tree", str(paths.project)]
    subprocess.run([*git, "fast-import", "--quiet", f"--export-marks={marks}"], cwd=paths.project,
                   input=b"".join(stream), check=True, capture_output=True)
    by_mark = dict(line.split() for line in marks.read_text().splitlines())
    marks.unlink()
    subprocess.run([*git, "reset", "-q", "--hard", "main"], cwd=paths.project, check=True)
    trees = subprocess.run([*git, "log", "--format=%H %T", "main"], cwd=paths.project, check=True,
                           capture_output=True, text=True).stdout
    tree_of = dict(line.split() for line in trees.splitlines())
    out, parent = {}, root_commit
    for t in made:
        commit = by_mark[f":{t}"]
        out[t] = (commit, tree_of[commit], parent)
        parent = commit
    return out


class _JournalWriter:
    """Journal records as `Journal.append` shapes them, on a simulated clock, written in one go."""

    def __init__(self, paths: WorkspacePaths, start: float):
        self.path = paths.journal
        self.seq = sum(1 for _ in self.path.open())
        self.clock = start
        self.lines: list[str] = []

    def add(self, event: ev.Event, elapsed: float = 0.0) -> None:
        self.clock += elapsed
        self.seq += 1
        record = {"v": 1, "seq": self.seq, "time": round(self.clock, 3), **event.to_json()}
        self.lines.append(json.dumps(record, ensure_ascii=False) + "\n")

    def write(self) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write("".join(self.lines))


def _attempts(journal: _JournalWriter, t: int, role: str, rng: random.Random, fail_all: bool = False) -> int:
    tries = 3 if fail_all else (2 if rng.random() < 0.08 else 1)
    for attempt in range(1, tries + 1):
        ok = not fail_all and attempt == tries
        errors = [] if ok else ["(root): 'summary' is a required property"]
        tokens_in = {"planner": 9000, "developer": 30000, "qa": 16000}[role] + rng.randrange(4000) + 40 * t
        tokens_out = {"planner": 900, "developer": 6000, "qa": 1800}[role] + rng.randrange(800)
        cost = round(tokens_in * 1.25e-6 + tokens_out * 1e-5, 6)
        seconds = round({"planner": 40, "developer": 300, "qa": 120}[role] * rng.uniform(0.5, 1.8), 3)
        journal.add(ev.AttemptStarted(loop=t, role=role, attempt=attempt))
        usage = Usage(tokens_in, tokens_in // 3, tokens_out, 0, cost)
        journal.add(ev.AttemptFinished(loop=t, role=role, attempt=attempt, ok=ok, outcome="ok", errors=errors,
                                       usage=usage.to_json(), violations=0, seconds=seconds), elapsed=seconds)
    return tries


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_json(data) if not isinstance(data, str) else data, encoding="utf-8")


def _loop(paths: WorkspacePaths, t: int, commits, root_commit: str, ledger: Ledger, journal: _JournalWriter,
          rng: random.Random) -> None:
    lp = paths.loop(t)
    base = next((commits[k][0] for k in range(t - 1, 0, -1) if k in commits), root_commit)
    journal.add(ev.LoopStarted(loop=t, base_commit=base), elapsed=1.0)
    active = ledger.ranked_active_issues()[:3]
    tasks = [{"id": f"T{k + 1}", "title": f"Feature {t}.{k + 1}: `card {t * 3 + k}` can be played",
              "details": f"Implement card {t * 3 + k} and its effect on the board.", "issues": [],
              "acceptance": [{"id": f"T{k + 1}.A{a + 1}", "condition": f"`python game.py play {t * 3 + k}` shows effect {a}",
                              "method": "black-box"} for a in range(rng.randint(1, 2))]} for k in range(3)]
    for task, issue in zip(tasks, active):
        task["issues"] = [issue["id"]]
    verified = ledger.verified_behaviours()
    preserve = [{"id": b["id"], "behaviour": b["behaviour"]} for b in rng.sample(verified, min(4, len(verified)))]
    plan = {"schema_version": 1, "loop": t, "goal": f"Cards {t * 3}–{t * 3 + 2} and the fixes they need",
            "tasks": tasks, "preserve": preserve, "out_of_scope": ["multiplayer"]}
    _attempts(journal, t, "planner", rng)
    _write(lp.plan, plan)
    _write(lp.plan_md, plan_markdown(plan))
    journal.add(ev.StepFinished(loop=t, step="planner", reused_plan=False))

    if failed_loop(t):
        attempts = _attempts(journal, t, "developer", rng, fail_all=True)
        errors = ["(root): 'summary' is a required property"]
        journal.add(ev.RoleFailed(loop=t, role="developer", attempts=attempts, errors=errors))
        journal.add(ev.StepFinished(loop=t, step="developer", status="failed"))
        ledger.apply_loop(t, plan, None, None, None)
        journal.add(ev.StepFinished(loop=t, step="evidence", status="developer_failed"))
        journal.add(ev.LoopFinished(loop=t, status="developer_failed", candidate_id=None, verified=0, criteria=0,
                                    issues=ledger.counts()))
        return

    developer = {"schema_version": 1, "loop": t, "summary": f"implemented cards {t * 3}–{t * 3 + 2}",
                 "tasks": [{"id": task["id"], "status": "done", "notes": ""} for task in tasks],
                 "self_tests": [{"command": "python game.py --selftest", "exit_code": 0, "summary": "all green"}],
                 "known_gaps": []}
    _attempts(journal, t, "developer", rng)
    _write(lp.developer, developer)
    journal.add(ev.StepFinished(loop=t, step="developer"))

    commit, tree, parent = commits[t]
    candidate_id = f"loop-{t:04d}-{tree[:12]}"
    _write(lp.candidate, {"schema_version": 1, "loop": t, "candidate_id": candidate_id, "commit": commit,
                          "tree": tree, "parent": parent, "tag": f"loop-{t:04d}"})
    journal.add(ev.StepFinished(loop=t, step="freeze", candidate_id=candidate_id))

    def check(item_id: str, ok: bool) -> list[dict[str, str]]:
        name = f"{item_id}.txt"
        body = f"$ python game.py check {item_id}\nexit code: {0 if ok else 1}\n--- stdout ---\n"
        body += "".join(f"turn {n}: board ok\n" for n in range(300 if t % 10 == 0 else 6))
        _write(lp.evidence / name, body)
        return [{"kind": "command", "ref": f"python game.py check {item_id}", "detail": f"exit {0 if ok else 1}"},
                {"kind": "file", "ref": name, "detail": "command and output"}]

    criteria = []
    for task in tasks:
        for acc in task["acceptance"]:
            ok = rng.random() < 0.85
            criteria.append({"id": acc["id"], "status": "verified" if ok else "failed", "evidence": check(acc["id"], ok)})
    preserved = []
    for item in preserve:
        ok = rng.random() < 0.93
        preserved.append({"id": item["id"], "status": "verified" if ok else "failed", "evidence": check(item["id"], ok)})
    findings = []
    closed = [i for i in ledger.issues if i["status"] == "closed"]
    for k in range(rng.choice([0, 1, 1, 2, 3])):
        finding = {"title": f"Defect {t}.{k + 1}: the `card {rng.randrange(3 * t + 3)}` effect is off by one",
                   "severity": rng.choice(["blocker", "major", "minor", "note"]), "repro": "python game.py play 3",
                   "evidence": [{"kind": "observation", "ref": "the board shows 4 instead of 3", "detail": ""}]}
        if closed and rng.random() < 0.15:
            finding["issue_id"] = rng.choice(closed)["id"]
        findings.append(finding)
    statuses = [c["status"] for c in criteria + preserved]
    verdict = "pass" if all(s == "verified" for s in statuses) and not findings else \
        "partial" if "verified" in statuses else "fail"
    qa = {"schema_version": 1, "loop": t, "candidate_id": candidate_id, "verdict": verdict, "criteria": criteria,
          "preserved": preserved, "findings": findings, "summary": f"{statuses.count('verified')} of {len(statuses)} hold"}
    _attempts(journal, t, "qa", rng)
    _write(lp.qa, qa)
    journal.add(ev.StepFinished(loop=t, step="qa", verdict=verdict))
    ledger.apply_loop(t, plan, developer, candidate_id, qa)
    journal.add(ev.StepFinished(loop=t, step="evidence", status=verdict))
    journal.add(ev.LoopFinished(loop=t, status=verdict, candidate_id=candidate_id,
                                verified=sum(1 for c in criteria if c["status"] == "verified"), criteria=len(criteria),
                                issues=ledger.counts()))
