"""Role outputs: extract the final JSON object, check it against its schema, then its meaning.

Every rule here returns messages precise enough to send back to the role verbatim when it is
asked again. A semantic violation is treated exactly like a schema violation.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..evidence.checks import spec_errors
from ..records import DeveloperReport, Plan, QaReport, record_of
from ..resources import schema_errors
from ..statuses import Verdict

FENCE = re.compile(r"```(?:json)?[ \t]*\n(.*?)\n?```", re.DOTALL)
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
MAX_EVIDENCE_FILE_BYTES = 16 * 1024 * 1024
MAX_EVIDENCE_TOTAL_BYTES = 64 * 1024 * 1024
"""Limits on what a role hands over: a reply, one evidence file, QA's whole evidence dir."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def extract_json(message: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """The one JSON object in a final message: the whole message, or its last ```json fence.

    Total over anything an agent can send: too large, too deep, NaN or broken text is an error
    message for the re-ask, never an exception."""
    if not message or not message.strip():
        return None, "the final message is empty; reply with one JSON object"
    if len(message.encode("utf-8", "surrogatepass")) > MAX_MESSAGE_BYTES:
        return None, f"the final message is over {MAX_MESSAGE_BYTES // 2**20} MiB; reply with one compact JSON object"
    candidates = [message.strip()] + [m.strip() for m in reversed(FENCE.findall(message))]
    for text in candidates:
        try:
            value = json.loads(text, parse_constant=_no_constant)
        except RecursionError:
            return None, "the final message is JSON nested too deeply; reply with the flat object the schema asks for"
        except ValueError:
            continue
        if isinstance(value, dict):
            return value, None
        return None, f"the final message is JSON but a {type(value).__name__}, not an object"
    return None, "the final message is not a JSON object (bare, or in a ```json fence)"


@dataclass
class Expectations:
    """What the Runtime knows that a role's output must agree with."""

    loop: int
    plan: Plan | None = None
    candidate_id: str | None = None
    evidence_dir: Path | None = None
    issue_ids: set[str] | None = None
    behaviour_ids: set[str] | None = None
    active_issue_ids: set[str] | None = None
    """Open, reopened and fixed-pending issues: a plan that calls the spec complete leaves none behind."""
    verified_ids: set[str] | None = None
    check_ids: set[str] | None = None
    """The register's active checks: what QA may retire."""
    developers: int = 1
    """`policy.developers`: how many work packages a plan may have."""

    def __post_init__(self) -> None:
        if self.plan is not None:
            self.plan = record_of(Plan, self.plan)  # a plan's JSON (tests build them by hand) is read as one


def _duplicates(ids: list[str]) -> list[str]:
    return sorted(i for i, n in Counter(ids).items() if n > 1)


def plan_ids(plan: Plan) -> tuple[list[str], list[str], list[str]]:
    return [t.id for t in plan.tasks], [a.id for a in plan.acceptance], [p.id for p in plan.preserve]


def check_plan(plan: Plan, exp: Expectations) -> list[str]:
    errors = []
    tasks, acceptance, preserve = plan_ids(plan)
    if dups := _duplicates(tasks):
        errors.append(f"task ids must be unique; repeated: {', '.join(dups)}")
    if dups := _duplicates(acceptance):
        errors.append(f"acceptance ids must be unique across the plan; repeated: {', '.join(dups)}")
    if dups := _duplicates(preserve):
        errors.append(f"preserve ids must be unique; repeated: {', '.join(dups)}")
    if exp.issue_ids is not None:
        unknown = sorted({i for t in plan.tasks for i in t.issues} - exp.issue_ids)
        if unknown:
            errors.append(f"tasks cite issue ids that are not in the ledger: {', '.join(unknown)}")
    if exp.behaviour_ids is not None:
        unknown = sorted(set(preserve) - exp.behaviour_ids)
        if unknown:
            errors.append(f"preserve cites behaviour ids that are not verified behaviours: {', '.join(unknown)}")
    errors += check_packages(plan, exp.developers)
    if plan.spec_complete:
        if exp.active_issue_ids:
            errors.append("spec_complete is impossible while issues are open: plan tasks for "
                          f"{', '.join(sorted(exp.active_issue_ids))} first")
        if exp.verified_ids is not None and not exp.verified_ids:
            errors.append("spec_complete needs verified behaviours for QA to check again; none is verified yet, so "
                          "plan tasks with acceptance conditions first")
    return errors


def _owned_path(raw: str) -> str | None:
    """A package's owned path as a normalised project-relative path (a directory ends in /); None: outside."""
    path = PurePosixPath(raw)
    if path.is_absolute() or ".." in path.parts or raw.strip() in ("", ".", "./") or path.parts[:1] == (".git",):
        return None
    return path.as_posix() + ("/" if raw.endswith("/") else "")


def _overlap(a: str, b: str) -> bool:
    """Two owned paths overlap when they are the same or one is a directory holding the other."""
    return a == b or (a.endswith("/") and b.startswith(a)) or (b.endswith("/") and a.startswith(b))


def check_packages(plan: Plan, developers: int) -> list[str]:
    """Work packages: at most `developers`, every task in exactly one, owned paths inside the project and
    never shared by two packages."""
    if not plan.packages:
        return []
    if developers < 2:
        return ["packages are only for Developers working at once (policy.developers > 1); leave packages out"]
    errors = []
    if len(plan.packages) > developers:
        errors.append(f"at most {developers} packages (policy.developers); the plan has {len(plan.packages)}")
    if dups := _duplicates([p.id for p in plan.packages]):
        errors.append(f"package ids must be unique; repeated: {', '.join(dups)}")
    placed = [task for p in plan.packages for task in p.tasks]
    if dups := _duplicates(placed):
        errors.append(f"every task in exactly one package; in several: {', '.join(dups)}")
    tasks = [t.id for t in plan.tasks]
    if unknown := sorted(set(placed) - set(tasks)):
        errors.append(f"packages name tasks that are not in the plan: {', '.join(unknown)}")
    if missing := [t for t in tasks if t not in placed]:
        errors.append(f"every task in exactly one package; in none: {', '.join(missing)}")
    owned: list[tuple[str, str]] = []
    for package in plan.packages:
        for raw in package.owns:
            path = _owned_path(raw)
            if path is None:
                errors.append(f"package {package.id} owns {raw!r}, which is not a path inside the project")
                continue
            for other, theirs in owned:
                if other != package.id and _overlap(path, theirs):
                    errors.append(f"packages {other} and {package.id} overlap: both own {theirs!r} / {path!r}")
            owned.append((package.id, path))
    return errors


def check_developer(report: DeveloperReport, exp: Expectations) -> list[str]:
    planned, _, _ = plan_ids(exp.plan)
    reported = [t.id for t in report.tasks]
    errors = []
    if unknown := sorted(set(reported) - set(planned)):
        errors.append(f"tasks not in the plan: {', '.join(unknown)}")
    if missing := [t for t in planned if t not in reported]:
        errors.append(f"report every plan task once; missing: {', '.join(missing)}")
    if dups := _duplicates(reported):
        errors.append(f"tasks reported more than once: {', '.join(dups)}")
    return errors


def _evidence_ref_error(ref: str, evidence_dir: Path) -> str | None:
    path = Path(ref)
    if path.is_absolute() or ".." in path.parts:
        return f"file evidence '{ref}' must be a relative path inside the evidence dir"
    full = evidence_dir / path
    if any((evidence_dir / Path(*path.parts[:n])).is_symlink() for n in range(1, len(path.parts) + 1)):
        return f"file evidence '{ref}' is a symlink; copy the file itself into the evidence dir"
    try:
        resolved = full.resolve(strict=True)
    except (FileNotFoundError, RuntimeError):
        return f"file evidence '{ref}' does not exist in the evidence dir {evidence_dir}"
    if not resolved.is_relative_to(evidence_dir.resolve()):
        return f"file evidence '{ref}' points outside the evidence dir"
    if not resolved.is_file():
        return f"file evidence '{ref}' is not a regular file"
    if resolved.stat().st_size > MAX_EVIDENCE_FILE_BYTES:
        return (f"file evidence '{ref}' is over {MAX_EVIDENCE_FILE_BYTES // 2**20} MiB; "
                "save an excerpt (head and tail) instead")
    return None


def evidence_size(evidence_dir: Path) -> int:
    """Bytes of regular files in the evidence dir (links and special files are never taken)."""
    total = 0
    for dirpath, _, names in os.walk(evidence_dir):
        for name in names:
            st = os.lstat(os.path.join(dirpath, name))
            total += st.st_size if stat.S_ISREG(st.st_mode) else 0
    return total


def check_qa(report: QaReport, exp: Expectations) -> list[str]:
    errors = []
    if exp.evidence_dir is not None and (exp.evidence_dir.is_symlink() or not exp.evidence_dir.is_dir()):
        return [f"the evidence dir {exp.evidence_dir} was replaced or removed; write evidence files inside it, "
                "as created"]
    if report.candidate_id != exp.candidate_id:
        errors.append(f"candidate_id is '{report.candidate_id}' but the frozen candidate is '{exp.candidate_id}'")
    _, acceptance, preserve = plan_ids(exp.plan)
    for key, results, expected, what in (("criteria", report.criteria, acceptance, "acceptance condition"),
                                         ("preserved", report.preserved, preserve, "preserved behaviour")):
        got = [c.id for c in results]
        if unknown := sorted(set(got) - set(expected)):
            errors.append(f"{key} has ids that are not a plan {what}: {', '.join(unknown)}")
        if missing := [i for i in expected if i not in got]:
            errors.append(f"{key} must cover every plan {what} exactly once; missing: {', '.join(missing)}")
        if dups := _duplicates(got):
            errors.append(f"{key} reports ids more than once: {', '.join(dups)}")
        for item in results:
            if item.verified and not item.evidence:
                errors.append(f"{key} '{item.id}' is verified but cites no evidence; missing evidence is not a pass")
    if exp.evidence_dir is not None and (total := evidence_size(exp.evidence_dir)) > MAX_EVIDENCE_TOTAL_BYTES:
        errors.append(f"the evidence dir holds {total // 2**20} MiB, over the limit of "
                      f"{MAX_EVIDENCE_TOTAL_BYTES // 2**20} MiB; keep excerpts, not whole outputs")
    for item in (*report.criteria, *report.preserved, *report.findings):
        for ev in item.evidence:
            if ev.kind == "file" and (err := _evidence_ref_error(ev.ref, exp.evidence_dir)):
                errors.append(err)
    for item in (*report.criteria, *report.preserved):
        if item.check is not None:
            errors += spec_errors(item.check, f"the check of '{item.id}'")
            if (name := item.check.get("stdin_file")) and exp.evidence_dir is not None and \
                    (err := _evidence_ref_error(name, exp.evidence_dir)):
                errors.append(f"the check of '{item.id}': its stdin_file: {err}")
    if exp.check_ids is not None:
        if unknown := sorted({r.id for r in report.retire} - exp.check_ids):
            errors.append(f"retire names checks that are not active in the register: {', '.join(unknown)}")
    if exp.issue_ids is not None:
        unknown = sorted({f.issue_id for f in report.findings if f.issue_id is not None} - exp.issue_ids)
        if unknown:
            errors.append(f"findings cite issue ids that are not in the ledger: {', '.join(unknown)}")
    if exp.behaviour_ids is not None:
        unknown = sorted({f.behaviour_id for f in report.findings if f.behaviour_id is not None} - exp.behaviour_ids)
        if unknown:
            errors.append(f"findings cite behaviour ids that are not in the register: {', '.join(unknown)}")
    if report.verdict is Verdict.PASS:
        open_items = [c.id for c in (*report.criteria, *report.preserved) if not c.verified]
        serious = [f.title for f in report.findings if f.severity in ("blocker", "major")]
        if open_items:
            errors.append(f"verdict 'pass' is impossible with unverified items: {', '.join(open_items)}")
        if serious:
            errors.append(f"verdict 'pass' is impossible with blocker/major findings: {'; '.join(serious)}")
    return errors


SEMANTICS = {"planner": check_plan, "developer": check_developer, "qa": check_qa}
SCHEMAS = {"planner": "plan", "developer": "developer", "qa": "qa"}
RECORDS: dict[str, type[Plan] | type[DeveloperReport] | type[QaReport]] = {
    "planner": Plan, "developer": DeveloperReport, "qa": QaReport}
RoleOutput = Plan | DeveloperReport | QaReport


def validate_output(role: str, message: str | None, exp: Expectations) -> tuple[RoleOutput | None, list[str]]:
    """Return (output, []) when valid, else (None, errors). The output is the role's record; its meaning is
    checked on the record (the schema check has made it total)."""
    output, error = extract_json(message)
    if error:
        return None, [error]
    errors = schema_errors(SCHEMAS[role], output)
    if errors:
        return None, [f"schema: {e}" for e in errors]
    if output["loop"] != exp.loop:
        return None, [f"loop is {output['loop']} but this is loop {exp.loop}"]
    record = RECORDS[role].from_json(output)
    errors = SEMANTICS[role](record, exp)
    return (None, errors) if errors else (record, [])
