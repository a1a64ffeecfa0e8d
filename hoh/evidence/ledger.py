"""The evidence state E_t that crosses loops: the issue ledger and the verified-behaviour register.

Written only by the Runtime, from QA reports and (for `fixed_pending_verify` only) Developer
claims. Rules that make it trustworthy:
- only QA evidence closes an issue; `insufficient_evidence` never changes anything;
- a closed issue found failing again is `reopened`, its history kept, its regression count raised;
- a verified behaviour that QA finds broken reopens the issues it was verified for, or else
  becomes a new regression issue; a QA finding that names the behaviour it breaks (`behaviour_id`)
  is that same regression, never a second issue for the one defect;
- a check that fails on replay (`checks.py`) breaks its behaviour like a QA failure, its run's output the
  evidence; it is folded first, so the issue it reopens cites the replay before anything QA said;
- a finding that names no id is the issue of the same title (`title_key`: case, whitespace and punctuation
  folded) when that issue is active or was closed within `same_defect_loops` loops: one defect, one issue.
Each issue gets one history entry per loop that touched it, carrying the loop's final status.
"""

from __future__ import annotations

import bisect
import re
from pathlib import Path
from typing import Any, Mapping

from ..errors import StateError
from ..fsutil import atomic_write_bytes, load_state
from ..records import CheckResult, DeveloperReport, Finding, Plan, QaReport, record_of
from .checks import BrokenCheck
from .ledger_file import LEDGER_SCHEMA_VERSION, LastCopy, SavedLines, shape_problem

SEVERITY_RANK = {"blocker": 0, "major": 1, "minor": 2, "note": 3}
STATUS_RANK = {"reopened": 0, "open": 1, "fixed_pending_verify": 2, "closed": 3}
ACTIVE = ("reopened", "open", "fixed_pending_verify")


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower())


def title_key(title: str) -> str:
    """A finding's title as the ledger compares it: "Divide-by-zero CRASHES!" is "divide by zero crashes"."""
    return " ".join(re.sub(r"[\W_]+", " ", title.casefold()).split())


def _rank(issue: dict[str, Any]) -> tuple[int, int, int, str]:
    """The order of `ranked_active_issues`: reopened, open, awaiting verification; then severity, then age
    (ids are `I-` and a zero-padded number: by length, then by text, is their numeric order)."""
    return (STATUS_RANK[issue["status"]], SEVERITY_RANK.get(issue["severity"], len(SEVERITY_RANK)),
            len(issue["id"]), issue["id"])


def _id_order(item_id: str) -> tuple[int, str]:
    return len(item_id), item_id


_LAST: LastCopy["Ledger"] = LastCopy()


class Ledger:
    """The ledger, indexed for every lookup the loop makes (by id, title, behaviour text, status, the
    behaviour a regression issue stands for, the loop that touched an item), so a loop's evidence step
    and its roles' expectations cost the same at 2,000 issues as at none. The indexes follow the
    ledger's own updates; the dicts its queries return are its own, to be read, not changed."""

    def __init__(self, data: dict[str, Any] | None = None):
        self.data = data or {"schema_version": LEDGER_SCHEMA_VERSION, "issues": [], "behaviours": []}
        self._issues = {i["id"]: i for i in self.data["issues"]}
        self._behaviours = {b["id"]: b for b in self.data["behaviours"]}
        self._by_text = {_norm(b["behaviour"]): b for b in self.data["behaviours"]}
        self._by_title: dict[str, list[dict[str, Any]]] = {}
        self._by_behaviour: dict[str, list[str]] = {}
        """Behaviour id → its own regression issues (`behaviour_id`)."""
        self._by_loop: dict[int, tuple[set[str], set[str]]] = {}
        """Loop → (issue ids, behaviour ids) with a history entry of that loop (or first verified in it)."""
        self._counts = {s: 0 for s in STATUS_RANK}
        self._ranked: list[tuple[int, int, int, str]] = []
        """`_rank` of every active issue, sorted."""
        self._verified: list[dict[str, Any]] | None = None
        self._lines = SavedLines()
        self._dirty = False
        """Changed since it was read or saved: `load` reads the file again rather than return it."""
        for issue in self.data["issues"]:
            self._by_title.setdefault(title_key(issue["title"]), []).append(issue)
            if "behaviour_id" in issue:
                self._by_behaviour.setdefault(issue["behaviour_id"], []).append(issue["id"])
            self._counts[issue["status"]] += 1
            for entry in issue["history"]:
                self._touched(entry["loop"])[0].add(issue["id"])
        self._ranked = sorted(_rank(i) for i in self.data["issues"] if i["status"] in ACTIVE)
        for b in self.data["behaviours"]:
            self._touched(b["first_verified"]["loop"])[1].add(b["id"])
            for entry in b["history"]:
                self._touched(entry["loop"])[1].add(b["id"])

    def _touched(self, loop: int) -> tuple[set[str], set[str]]:
        return self._by_loop.setdefault(loop, (set(), set()))

    # ---- persistence -------------------------------------------------------------------------
    @classmethod
    def load(cls, path: Path) -> "Ledger":
        """The ledger at `path`; the very object this process last read or saved there when the file still holds
        the same bytes and nothing changed the object unsaved, so the Runtime's load at every loop is free."""
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return cls()
        except OSError:
            raw = b""  # load_state says what is wrong with it
        if (known := _LAST.get(path, raw)) is not None and not known._dirty:
            return known
        data = load_state(path, ("schema_version", "issues", "behaviours"), LEDGER_SCHEMA_VERSION)
        if problem := shape_problem(data, STATUS_RANK):
            raise StateError(f"{path}: corrupt ledger ({problem}); nothing was overwritten")
        ledger = cls(data)
        _LAST.put(path, raw, ledger)
        return ledger

    def save(self, path: Path) -> None:
        """One issue or behaviour per line; only what changed since the last save is encoded again
        (`ledger_file.SavedLines`). Written whole and atomically: a crash leaves the old file."""
        data = self._lines.encode(self.data)
        atomic_write_bytes(path, data)
        self._dirty = False
        _LAST.put(path, data, self)

    def _change(self, section: str, item_id: str) -> None:
        self._lines.changed.add((section, item_id))
        self._dirty = True
        if section == "behaviours":
            self._verified = None

    # ---- queries -----------------------------------------------------------------------------
    @property
    def issues(self) -> list[dict[str, Any]]:
        return self.data["issues"]

    @property
    def behaviours(self) -> list[dict[str, Any]]:
        return self.data["behaviours"]

    def issue(self, issue_id: str) -> dict[str, Any] | None:
        return self._issues.get(issue_id)

    def behaviour(self, behaviour_id: str) -> dict[str, Any]:
        return self._behaviours[behaviour_id]

    def behaviour_of(self, text: str) -> str | None:
        """The id of the behaviour with this text (an acceptance condition once verified), if any."""
        found = self._by_text.get(_norm(text))
        return found["id"] if found else None

    def issue_ids(self) -> set[str]:
        return set(self._issues)

    def behaviour_ids(self) -> set[str]:
        return set(self._behaviours)

    def verified_behaviours(self) -> list[dict[str, Any]]:
        if self._verified is None:
            self._verified = [b for b in self.behaviours if b["status"] == "verified"]
        return list(self._verified)

    def ranked_active_issues(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Reopened first, then open, then awaiting verification; each by severity, then age (the first
        `limit` of them)."""
        return [self._issues[key[-1]] for key in self._ranked[:limit]]

    def active_count(self) -> int:
        return len(self._ranked)

    def regression_issues(self, behaviour_id: str) -> list[str]:
        """The ids of the issues opened for this behaviour breaking (`behaviour_id`), oldest first."""
        return sorted(self._by_behaviour.get(behaviour_id, ()), key=_id_order)

    def touched_in(self, loop: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The issues and behaviours with a history entry of `loop` (or first verified in it), in ledger order."""
        issues, behaviours = self._by_loop.get(loop, ((), ()))
        return ([self._issues[i] for i in sorted(issues, key=_id_order)],
                [self._behaviours[b] for b in sorted(behaviours, key=_id_order)])

    def progress(self, loop: int) -> dict[str, int]:
        """What `loop` added to the evidence: new verified behaviours, broken ones verified again, issues closed
        (each read from the histories, so it is the same when asked again after a resume)."""
        issues, behaviours = self.touched_in(loop)
        added = reverified = 0
        for b in behaviours:
            if b["first_verified"]["loop"] == loop:
                added += 1
                continue
            entries = b["history"]
            for before, now in zip(entries, entries[1:]):
                if now["loop"] == loop and now["status"] == "verified" and before["status"] == "broken":
                    reverified += 1
        closed = sum(1 for i in issues if any(h["loop"] == loop and h["status"] == "closed" for h in i["history"]))
        return {"behaviours_added": added, "reverified": reverified, "issues_closed": closed}

    def counts(self) -> dict[str, int]:
        return dict(self._counts)

    # ---- updates -----------------------------------------------------------------------------
    def _set_status(self, issue: dict[str, Any], status: str) -> None:
        if issue["status"] in ACTIVE:
            del self._ranked[bisect.bisect_left(self._ranked, _rank(issue))]
        self._counts[issue["status"]] -= 1
        issue["status"] = status
        self._counts[status] += 1
        if status in ACTIVE:
            bisect.insort(self._ranked, _rank(issue))
        self._change("issues", issue["id"])

    def _new_issue(self, title: str, severity: str, loop: int, behaviour_id: str | None = None) -> dict[str, Any]:
        issue = {"id": f"I-{len(self.issues) + 1:04d}", "title": title, "severity": severity, "status": "open",
                 "first_loop": loop, "last_loop": loop, "regressions": 0, "history": []}
        self.issues.append(issue)
        self._issues[issue["id"]] = issue
        self._by_title.setdefault(title_key(title), []).append(issue)
        self._counts["open"] += 1
        bisect.insort(self._ranked, _rank(issue))
        if behaviour_id:
            self._link(issue, behaviour_id)
        self._change("issues", issue["id"])
        return issue

    def _link(self, issue: dict[str, Any], behaviour_id: str) -> None:
        """Make `issue` the regression issue of `behaviour_id`, unless it already stands for a behaviour."""
        if "behaviour_id" not in issue:
            issue["behaviour_id"] = behaviour_id
            self._by_behaviour.setdefault(behaviour_id, []).append(issue["id"])
            self._change("issues", issue["id"])

    def same_defect(self, title: str, loop: int, within: int) -> dict[str, Any] | None:
        """The issue a finding of this title that names no id stands for: an active issue of the same
        `title_key`, else the one closed most recently if that was within `within` loops of `loop`."""
        same = self._by_title.get(title_key(title), ())
        active = [i for i in same if i["status"] in ACTIVE]
        if active:
            return min(active, key=lambda i: i["id"])
        recent = [i for i in same if i["status"] == "closed" and loop - i["last_loop"] <= within]
        return max(recent, key=lambda i: (i["last_loop"], i["id"])) if recent else None

    def _behaviour_for(self, text: str, loop: int, candidate_id: str) -> dict[str, Any]:
        found = self._by_text.get(_norm(text))
        if found is None:
            found = {"id": f"V-{len(self.behaviours) + 1:04d}", "behaviour": text, "status": "verified",
                     "first_verified": {"loop": loop, "candidate_id": candidate_id}, "issues": [], "history": []}
            self.behaviours.append(found)
            self._behaviours[found["id"]] = found
            self._by_text[_norm(text)] = found
            self._touched(loop)[1].add(found["id"])
            self._change("behaviours", found["id"])
        return found

    def apply_loop(self, loop: int, plan: Plan | Mapping[str, Any], developer: DeveloperReport | Mapping | None,
                   candidate_id: str | None, qa: QaReport | Mapping | None, same_defect_loops: int = 10,
                   broken_checks: tuple[BrokenCheck, ...] = ()) -> None:
        """Fold one loop's Developer claims, replay failures and QA report into the ledger (records, or their
        JSON); `same_defect_loops`: `ledger.same_defect_loops`."""
        plan = record_of(Plan, plan)
        developer = record_of(DeveloperReport, developer) if developer is not None else None
        qa = record_of(QaReport, qa) if qa is not None else None
        self._dirty = True  # until saved, even when an error stops it half-way
        touched: dict[str, dict[str, Any]] = {}

        def touch(issue: dict[str, Any], status: str, source: str, evidence: list[str], note: str = "") -> None:
            entry = touched.setdefault(issue["id"], {"loop": loop, "candidate_id": candidate_id, "status": issue["status"],
                                                     "sources": [], "evidence": [], "notes": []})
            if source not in entry["sources"]:
                entry["sources"].append(source)
            entry["evidence"] += [e for e in evidence if e not in entry["evidence"]]
            if note:
                entry["notes"].append(note)
            entry["status"] = status

        claimed = developer.done() if developer else set()
        for task in plan.tasks:
            if task.id in claimed:
                for issue_id in task.issues:
                    issue = self._issues.get(issue_id)
                    if issue and issue["status"] in ("open", "reopened"):
                        touch(issue, "fixed_pending_verify", "developer", [],
                              f"developer claims task {task.id} done{_by_package(plan, task.id)}")

        if qa is not None or broken_checks:
            self._apply_qa(loop, plan, candidate_id, qa, touch, same_defect_loops, broken_checks)

        for issue_id, entry in touched.items():
            issue = self._issues[issue_id]
            if entry["status"] == "reopened" and issue["status"] == "closed":
                issue["regressions"] += 1
            self._set_status(issue, entry["status"])
            issue["last_loop"] = loop
            entry["notes"] = "; ".join(entry["notes"])
            issue["history"].append(entry)
            self._touched(loop)[0].add(issue_id)

    def _apply_qa(self, loop: int, plan: Plan, candidate_id: str | None, qa: QaReport | None, touch,
                  same_defect_loops: int, broken_checks: tuple[BrokenCheck, ...]) -> None:
        def refs(item: CheckResult | Finding) -> list[str]:
            return [e.label for e in item.evidence]

        criteria = {c.id: c for c in qa.criteria} if qa else {}
        findings = qa.findings if qa else ()
        failing: dict[str, tuple[list[str], str]] = {}  # issue id → evidence, note; failure beats success
        passing: dict[str, list[str]] = {}

        fixed_by: dict[str, str] = {}  # issue id → the work package whose task QA verified for it
        for task in plan.tasks:
            results = [criteria[a.id] for a in task.acceptance if a.id in criteria]
            statuses = {r.status for r in results}
            evidence = [x for r in results for x in refs(r)]
            for issue_id in task.issues:
                if "failed" in statuses:
                    failing.setdefault(issue_id, (evidence, f"acceptance of task {task.id} failed"
                                                            f"{_by_package(plan, task.id)}"))
                elif statuses == {"verified"}:
                    passing[issue_id] = evidence
                    fixed_by[issue_id] = _by_package(plan, task.id)
            for acc in task.acceptance:
                result = criteria.get(acc.id)
                if result and result.verified:
                    behaviour = self._behaviour_for(acc.condition, loop, candidate_id)
                    self._mark_behaviour(behaviour, "verified", loop, candidate_id)
                    for issue_id in task.issues:
                        if issue_id not in behaviour["issues"]:
                            behaviour["issues"].append(issue_id)
                            self._change("behaviours", behaviour["id"])

        # A finding that names the behaviour it breaks describes that regression: its title and severity
        # name the regression issue when one is opened, and it adds no issue of its own.
        named: dict[str, Finding] = {}
        for finding in findings:
            if finding.behaviour_id in self._behaviours and finding.issue_id is None:
                named.setdefault(finding.behaviour_id, finding)

        def regression_issues(behaviour: dict[str, Any], evidence: list[str], note: str) -> None:
            linked = self._linked(behaviour)
            if not linked:
                finding = named.get(behaviour["id"])
                title, severity = (finding.title, finding.severity) if finding else \
                    (f"Regression: {behaviour['behaviour']}", "major")
                issue = self.same_defect(title, loop, same_defect_loops)
                if issue is None:
                    issue = self._new_issue(title, severity, loop, behaviour["id"])
                self._link(issue, behaviour["id"])
                linked = [issue["id"]]
            for issue_id in linked:
                failing.setdefault(issue_id, (evidence, note))

        for broken in broken_checks:
            if behaviour := self._behaviours.get(broken.behaviour_id):
                self._mark_behaviour(behaviour, "failed", loop, candidate_id)
                regression_issues(behaviour, [f"replay:{broken.evidence}"],
                                  f"check {broken.check_id} failed on replay: {broken.reason}")

        replay_broke = {b.behaviour_id for b in broken_checks}
        for item in (qa.preserved if qa else ()):
            behaviour = self._behaviours.get(item.id)
            if behaviour is None or item.status == "insufficient_evidence":
                continue
            if item.verified and item.id in replay_broke:
                continue  # a check failing on replay outweighs a model's word; QA retires a check it disputes
            self._mark_behaviour(behaviour, item.status, loop, candidate_id)
            if item.verified:
                for issue_id in self._linked(behaviour):
                    if self._issues[issue_id].get("behaviour_id") == behaviour["id"]:
                        passing.setdefault(issue_id, refs(item))
            else:
                regression_issues(behaviour, refs(item), f"verified behaviour {behaviour['id']} broke")

        for finding in findings:
            if issue := self._issues.get(finding.issue_id or ""):
                failing.setdefault(issue["id"], (refs(finding), finding.title))
            elif behaviour := self._behaviours.get(finding.behaviour_id or ""):
                self._mark_behaviour(behaviour, "failed", loop, candidate_id)
                regression_issues(behaviour, refs(finding), finding.title)
            else:
                issue = self.same_defect(finding.title, loop, same_defect_loops) \
                    or self._new_issue(finding.title, finding.severity, loop)
                failing.setdefault(issue["id"], (refs(finding), finding.title))

        for issue_id, evidence in passing.items():
            if issue_id not in failing and self._issues[issue_id]["status"] != "closed":
                touch(self._issues[issue_id], "closed", "qa", evidence, f"verified by QA{fixed_by.get(issue_id, '')}")
        for issue_id, (evidence, note) in failing.items():
            issue = self._issues[issue_id]
            new_status = {"closed": "reopened", "reopened": "reopened"}.get(issue["status"], "open")
            touch(issue, new_status, "qa", evidence, note)

    def _linked(self, behaviour: dict[str, Any]) -> list[str]:
        """The issues a behaviour stands for: those it was verified for, and its own regression issues."""
        own = self.regression_issues(behaviour["id"])
        return behaviour["issues"] + [i for i in own if i not in behaviour["issues"]]

    def _mark_behaviour(self, behaviour: dict[str, Any], status: str, loop: int, candidate_id: str) -> None:
        behaviour["status"] = "verified" if status == "verified" else "broken"
        if status == "verified":
            behaviour["last_verified"] = {"loop": loop, "candidate_id": candidate_id}
        history = behaviour["history"]
        if history and history[-1]["loop"] == loop:
            history[-1]["status"] = behaviour["status"]
        else:
            history.append({"loop": loop, "candidate_id": candidate_id, "status": behaviour["status"]})
        self._touched(loop)[1].add(behaviour["id"])
        self._change("behaviours", behaviour["id"])


def _by_package(plan: Plan, task_id: str) -> str:
    """" (package P1)" when Developers worked at once and `task_id` was P1's; else nothing (the ledger's notes say
    which package fixed or broke what)."""
    owner = next((p.id for p in plan.packages if task_id in p.tasks), None)
    return f" (package {owner})" if owner else ""
