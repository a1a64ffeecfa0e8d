"""Secrets hoh knows, kept out of every file a role leaves behind.

With an API key the key never enters a role (hoh's egress proxy adds it outside the jail). What a CLI
must read itself — a login copied into its home — it can print into its own transcript, so after every
attempt each file of the CLI's home (sessions, rollouts, sqlite databases) is scrubbed of every secret
hoh knows, the login files themselves excepted. The scrub keeps each file's length (a sqlite page
must not shift), so a secret becomes a run of `*`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

from . import keys

MIN_SECRET_CHARS = 12
"""Shorter strings of a login file are ids and flags, not credentials; masking them would mangle text."""
MAX_SCRUB_BYTES = 256 * 2**20
"""A CLI's home holds transcripts and small databases; a larger file there (a role can make a sparse one of
any size) is removed rather than read."""
CHUNK = 1 << 20


def redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "<redacted>")
    return text


def redact_files(paths: list[Path], secrets: list[str]) -> None:
    """Replace secret values in saved logs, in place."""
    if not secrets:
        return
    for path in paths:
        data = path.read_bytes()
        cleaned = data
        for secret in secrets:
            cleaned = cleaned.replace(secret.encode(), b"<redacted>")
        if cleaned != data:
            path.write_bytes(cleaned)


def known_secrets(api_key_env: str | None, login_files: Iterable[Path]) -> list[str]:
    """Values that must never reach a file: the API key named by `api_key_env`, and the tokens of the
    user's login files a CLI is given."""
    value = keys.value(api_key_env) or ""
    found = [value] if len(value) >= 4 else []
    for source in login_files:
        found += login_secrets(source)
    return found


def scrub_attempt(logs: list[Path], home: Path | None, secrets: list[str], keep: Iterable[Path]) -> None:
    """After an attempt: its saved logs redacted, and every file of the CLI's home masked but the logins."""
    redact_files(logs, secrets)
    if home is not None:
        scrub_tree(home, secrets, keep=keep)


def copy_credentials(source: Path, dest: Path) -> None:
    """Copy the user's login for a harness into its isolated home once, readable by the owner only (the
    CLI may refresh its tokens there afterwards)."""
    if source.is_file() and not dest.exists() and not dest.is_symlink():
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(source.read_bytes())


def unlink_links(home: Path) -> None:
    """Remove every link a role left in its home (and the home itself if it is one): hoh writes the CLI's
    configuration there as root, and must never follow a link out of it."""
    if home.is_symlink():
        home.unlink()
    home.mkdir(parents=True, exist_ok=True)
    for directory, dirs, files in os.walk(home):
        for name in (*dirs, *files):
            path = os.path.join(directory, name)
            if os.path.islink(path):
                os.unlink(path)


def login_secrets(path: Path) -> list[str]:
    """The token-like strings of a login file (JSON): what a transcript must never keep."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    found: list[str] = []
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += item.values()
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str) and len(item) >= MIN_SECRET_CHARS and " " not in item:
            found.append(item)
    return found


def scrub_tree(root: Path, secrets: Iterable[str], keep: Iterable[Path] = ()) -> list[str]:
    """Mask every secret in every regular file under `root` (links are not followed), in place and at the
    same length; `keep` (the login files) stays as it is. Returns the files changed, relative to root."""
    needles = sorted({s.encode() for s in secrets if s}, key=len, reverse=True)
    if not needles or not root.is_dir():
        return []
    kept = {str(p) for p in keep}
    changed = []
    for directory, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            if path in kept or os.path.islink(path) or not os.path.isfile(path):
                continue
            try:
                if os.path.getsize(path) > MAX_SCRUB_BYTES:
                    os.unlink(path)
                    changed.append(os.path.relpath(path, root))
                elif _scrub_file(path, needles):
                    changed.append(os.path.relpath(path, root))
            except OSError:
                continue
    return changed


def _scrub_file(path: str, needles: list[bytes]) -> bool:
    """Mask the needles in place, a chunk at a time; chunks overlap by the longest needle, so a secret that
    straddles two chunks is found too."""
    overlap = max(len(n) for n in needles) - 1
    changed = False
    with open(path, "r+b") as fh:
        offset = 0
        while True:
            fh.seek(offset)
            data = fh.read(CHUNK + overlap)
            if not data:
                return changed
            cleaned = data
            for needle in needles:
                cleaned = cleaned.replace(needle, b"*" * len(needle))
            if cleaned != data:
                fh.seek(offset)
                fh.write(cleaned)
                changed = True
            if len(data) <= CHUNK:
                return changed
            offset += CHUNK
