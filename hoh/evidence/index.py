"""INDEX.md: the short, categorized summary the Planner reads first (progressive disclosure).

Each section is a headline plus the file that holds its details. The whole index is held under
a byte budget whatever the length of the history: lists shrink first, then whole sections are
cut to their headline. Building it reads only the ledger and the last few loops' reports.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..config import IndexConfig
from ..paths import WorkspacePaths
from ..records import Plan, QaReport, read_candidate, read_plan, read_qa
from .checks import CheckRegister
from .ledger import Ledger


@dataclass
class IndexLoop:
    """A loop's line in the index (not `records.LoopSummary`: this one is read from the loop's files)."""

    loop: int
    verdict: str
    verified: int
    total: int
    candidate_id: str | None
    goal: str


def spec_outline(spec: str, limit: int) -> list[str]:
    headings = [line.strip() for line in spec.splitlines() if re.match(r"^#{1,3} ", line)]
    return headings[:limit]


def render_index(*, spec: str, ledger: Ledger, loops: list[IndexLoop], last_loop: int,
                 budget_bytes: int, top_issues: int, recent_loops: int, checks: list[str] = (),
                 packages: list[str] = ()) -> str:
    """The index after `last_loop`, at most `budget_bytes` long; `checks`: the check register's section;
    `packages`: the last loop's work packages (Developers working at once)."""
    for issues_shown, behaviours_shown, outline in ((top_issues, 10, 12), (top_issues // 2, 5, 6), (3, 0, 3), (0, 0, 0)):
        shown = list(checks) if behaviours_shown else list(checks[:1])
        if packages and behaviours_shown:  # cut with the behaviours: the packages' detail is in merge.json
            shown += ([""] if shown else []) + list(packages)
        text = _render(spec, ledger, loops[-recent_loops:], last_loop, issues_shown, behaviours_shown, outline,
                       shown)
        if len(text.encode()) <= budget_bytes:
            return text
    return text.encode()[: budget_bytes - 40].decode("utf-8", "ignore") + "\n… (index cut to its byte budget)\n"


def _render(spec: str, ledger: Ledger, loops: list[IndexLoop], last_loop: int,
            issues_shown: int, behaviours_shown: int, outline_lines: int, checks: list[str]) -> str:
    out = [f"# Evidence index after loop {last_loop}", ""]
    current = loops[-1].candidate_id if loops else None
    out += [f"Current candidate: {current or 'none yet (empty project)'}", ""]

    out += ["## Spec outline — details: `spec.md`"]
    out += [f"- {h.lstrip('#').strip()}" for h in spec_outline(spec, outline_lines)] or ["- (see spec.md)"]
    out.append("")

    out += ["## Recent loops — details: `state/loops/NNNN/qa.json`"]
    if loops:
        out += ["| loop | verdict | criteria verified | goal |", "|---|---|---|---|"]
        out += [f"| {s.loop} | {s.verdict} | {s.verified}/{s.total} | {s.goal[:60]} |" for s in loops]
    else:
        out.append("- no loop has finished yet")
    out.append("")

    counts = ledger.counts()
    active, n_active = ledger.ranked_active_issues(issues_shown), ledger.active_count()
    out += [f"## Issues — {counts['reopened']} reopened, {counts['open']} open, "
            f"{counts['fixed_pending_verify']} awaiting verification, {counts['closed']} closed "
            f"— details: `state/ledger.json` (`hoh show ISSUE_ID`)"]
    for issue in active:
        regress = f", regressed ×{issue['regressions']}" if issue["regressions"] else ""
        out.append(f"- {issue['id']} [{issue['status']}, {issue['severity']}{regress}] {issue['title'][:90]} "
                   f"(last seen loop {issue['last_loop']})")
    if n_active > issues_shown:
        out.append(f"- … {n_active - issues_shown} more active issues in `state/ledger.json`")
    out.append("")

    verified = ledger.verified_behaviours()
    out += [f"## Verified behaviours — {len(verified)} to preserve, {len(ledger.behaviours) - len(verified)} broken "
            f"— details: `state/ledger.json` (key `behaviours`; carry every verified one into `preserve`)"]
    for b in verified[:behaviours_shown]:
        out.append(f"- {b['id']}: {b['behaviour'][:90]}")
    if len(verified) > behaviours_shown:
        out.append(f"- … {len(verified) - behaviours_shown} more in `state/ledger.json`")
    out.append("")

    if checks:
        out += [*checks, ""]

    if loops:
        out += [f"## Last plan — details: `state/loops/{loops[-1].loop:04d}/plan.md`", f"- goal: {loops[-1].goal[:200]}", ""]
    return "\n".join(out)


def index_loop(loop: int, plan: Plan | None, qa: QaReport | None, candidate_id: str | None, status: str) -> IndexLoop:
    return IndexLoop(
        loop=loop,
        verdict=qa.verdict.value if qa else status,
        verified=qa.verified_count if qa else 0,
        total=len(plan.acceptance) if plan else 0,
        candidate_id=candidate_id,
        goal=plan.goal if plan else "(no plan)",
    )


def build_index(paths: WorkspacePaths, spec: str, ledger: Ledger, last_loop: int, cfg: IndexConfig) -> str:
    """The index after `last_loop`; reads only the last `cfg.recent_loops` loops' files."""
    summaries = []
    for loop in range(max(1, last_loop - cfg.recent_loops + 1), last_loop + 1):
        lp = paths.loop(loop)
        summaries.append(index_loop(loop, read_plan(lp.plan) if lp.plan.exists() else None,
                                    read_qa(lp.qa) if lp.qa.exists() else None,
                                    read_candidate(lp.candidate).candidate_id if lp.candidate.exists() else None,
                                    "no QA report"))
    return render_index(spec=spec, ledger=ledger, loops=summaries, last_loop=last_loop, budget_bytes=cfg.budget_bytes,
                        top_issues=cfg.top_issues, recent_loops=cfg.recent_loops,
                        checks=checks_section(paths, last_loop), packages=packages_section(paths, last_loop, ledger))


def packages_section(paths: WorkspacePaths, last_loop: int, ledger: Ledger) -> list[str]:
    """The last loop's work packages, when Developers worked at once: each one merged (how) or dropped (why), its
    tasks' criteria as QA found them on the merged candidate, and the issues its tasks were to fix."""
    lp = paths.loop(last_loop)
    if not lp.merge.exists() or not lp.plan.exists():
        return []
    merge = json.loads(lp.merge.read_text(encoding="utf-8"))
    plan = read_plan(lp.plan)
    qa = read_qa(lp.qa) if lp.qa.exists() else None
    status = {c.id: c.status for c in qa.criteria} if qa else {}
    how = {m["package"]: f"merged ({m['how']})" for m in merge.get("merged", [])}
    how.update({d["package"]: f"dropped to this loop: {d['reason'][:120]}" for d in merge.get("dropped", [])})
    tasks = {t.id: t for t in plan.tasks}
    lines = [f"## Work packages of loop {last_loop} — details: `state/loops/{last_loop:04d}/merge.json`"]
    for package in plan.packages:
        mine = [tasks[t] for t in package.tasks if t in tasks]
        criteria = [a.id for t in mine for a in t.acceptance]
        verified = sum(str(status.get(a)) == "verified" for a in criteria)
        issues = sorted({i for t in mine for i in t.issues})
        fixed = [i for i in issues if (ledger.issue(i) or {}).get("status") == "closed"]
        line = (f"- {package.id}: {how.get(package.id, 'not merged')}; tasks {', '.join(package.tasks)}; "
                f"criteria {verified}/{len(criteria)} verified")
        if issues:
            line += f"; issues {', '.join(issues)} ({len(fixed)} closed)"
        lines.append(line)
    return lines


def checks_section(paths: WorkspacePaths, last_loop: int) -> list[str]:
    """The register in a headline, and the last replay's failures (what the next plan must fix first)."""
    register = CheckRegister.load(paths.checks)
    if not register.checks:
        return []
    active = len(register.active())
    lines = [f"## Executable checks — {active} active, {len(register.checks) - active} retired — details: "
             f"`state/checks.json`, each loop's `replay.json`"]
    replay_file = paths.loop(last_loop).replay
    if replay_file.exists():
        data = json.loads(replay_file.read_text(encoding="utf-8"))
        results = data.get("results", [])
        bad = [r for r in results if r["status"] not in ("passed", "skipped")]
        lines.append(f"- replay on loop {last_loop}'s candidate: {len(results)} checks, "
                     f"{sum(r['status'] in ('failed', 'timed_out') for r in results)} failed, "
                     f"{sum(r['status'] == 'flaky' for r in results)} flaky, "
                     f"{sum(r['status'] == 'skipped' for r in results)} skipped "
                     f"— `state/loops/{last_loop:04d}/replay.json`")
        lines += [f"- {r['id']} ({r.get('behaviour_id') or 'no behaviour'}) {r['status']}: "
                  f"{(r.get('reason') or '')[:100]}" for r in bad[:5]]
    return lines
