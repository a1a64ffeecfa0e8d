"""A subscription CLI's usage limit ("You've hit your limit · resets 1pm (Europe/Berlin)") and when it resets.

Such a limit is not a rate limit (retrying in seconds is useless) and not a crash: the run waits for the
reset. The messages seen from the real CLIs:

- Claude Code: `You've hit your limit · resets 8pm (Africa/Cairo)`, `You've hit your session limit ·
  resets 12:50am (America/Los_Angeles)`, `You've hit your limit · resets Jan 30, 11:30am (Asia/Calcutta)`.
- Codex: `You've hit your usage limit. Upgrade to Pro (...) or try again in 5 days 22 hours 11 minutes.`,
  `... or try again at Jul 5th, 2026 8:19 PM.`
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone, tzinfo

QUOTA_REGEX = (r"\byou[’']ve hit your (?:\w+ )?limit\b|\busage limit (?:reached|exceeded)\b|\busage_limit_reached\b"
               r"|\bhit your usage limit\b")
"""Words every harness's usage-limit message uses (a pattern each adapter includes)."""

_MONTHS = {m: n for n, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                                       "dec"), 1)}
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_RELATIVE = re.compile(r"\b(?:try again|resets?|retry) in ((?:\d+\s*(?:days?|hours?|hrs?|h|minutes?|mins?|m|seconds?"
                       r"|secs?|s)\b[\s,]*(?:and\s+)?)+)", re.IGNORECASE)
_PART = re.compile(r"(\d+)\s*([a-z]+)", re.IGNORECASE)
_CLOCK = (r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>am|pm)?")
_DATE = r"(?:(?P<month>[A-Za-z]{3})[a-z]*\.? (?P<day>\d{1,2})(?:st|nd|rd|th)?,?(?: (?P<year>\d{4}),?)? )?"
_ABSOLUTE = re.compile(r"\b(?:resets?(?: at)?|try again at|reset at)\s+" + _DATE + _CLOCK
                       + r"(?:\s*\((?P<zone>[A-Za-z_+\-/0-9]+)\))?", re.IGNORECASE)


def _zone(name: str | None, now: datetime) -> tzinfo:
    if name:
        try:
            from zoneinfo import ZoneInfo
            return ZoneInfo(name)
        except Exception:  # noqa: BLE001 - an unknown zone name: the machine's own zone is the best guess
            pass
    return now.astimezone().tzinfo or timezone.utc


def reset_time(message: str, now: datetime | None = None) -> datetime | None:
    """When the limit a message reports resets (aware datetime), or None when it names no time."""
    now = now or datetime.now(timezone.utc)
    if match := _RELATIVE.search(message):
        seconds = sum(int(n) * _UNITS[unit[0].lower()] for n, unit in _PART.findall(match.group(1)))
        return now + timedelta(seconds=seconds)
    match = _ABSOLUTE.search(message)
    if match is None:
        return None
    hour, minute = int(match["hour"]), int(match["minute"] or 0)
    if match["ampm"]:
        hour = hour % 12 + (12 if match["ampm"].lower() == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    zone = _zone(match["zone"], now)
    local_now = now.astimezone(zone)
    month = _MONTHS.get((match["month"] or "").lower()[:3])
    try:
        if month:
            year = int(match["year"]) if match["year"] else local_now.year
            when = local_now.replace(year=year, month=month, day=int(match["day"]), hour=hour, minute=minute,
                                     second=0, microsecond=0)
            if not match["year"] and when < local_now - timedelta(days=1):
                when = when.replace(year=year + 1)  # "Jan 2" seen on Dec 30
            return when
    except ValueError:
        return None
    when = local_now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    return when if when > local_now else when + timedelta(days=1)
