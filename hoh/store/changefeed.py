"""What changed in a work tree, asked of the jail or the kernel instead of a scan of the whole tree.

A role's guard and the freeze must know every change to the project (and QA's view). Scanning the tree
for it costs the project's size, every time. Two things answer for less:
- the jail: a role whose jail mounts a tree read-only (or not at all) cannot have changed it; no scan;
- the kernel: where a role may write (the Developer), an inotify watch on every directory of the
  project reports each path touched (`ProjectFeed`), and the freeze looks at those paths only.
Whatever cannot be answered so is scanned whole, and `ScanReason` says why in the journal.
"""

from __future__ import annotations

from enum import Enum


class ScanReason(str, Enum):
    """Why a whole work tree was scanned (journal: full_scan)."""

    no_jail = "no_jail"
    """The role ran without the OS jail, or its jail could write the tree."""
    feed_unavailable = "feed_unavailable"
    """No kernel change feed could be set up (no inotify, the watch limit reached, a tree not walkable)."""
    feed_overflow = "feed_overflow"
    """The kernel's event queue overflowed (IN_Q_OVERFLOW): some changes were not reported."""
    feed_unsure = "feed_unsure"
    """The feed saw something the changed paths alone cannot account for: a hard link, a changed ignore
    file, a change above a workspace inside the project, a file made and removed again."""
    not_fed = "not_fed"
    """The Developer ran before this session (a resume): no feed watched it."""
