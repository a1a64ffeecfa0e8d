"""hoh's one way to run git: a hardened command line and an environment built from nothing.

Every git hoh runs (on history.git, on the project's own repository, on a task's candidate) goes through
`run_git`, so no repository's configuration, no user setting and no secret of hoh's can make git run a
program or reach a network, and the same trees give the same commits.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import HohError
from ..harness.process import call

GIT_TIMEOUT_SECONDS = 1800
EPOCH = 1_700_000_000  # 2023-11-14; commit dates are EPOCH + loop, never the wall clock
# A work tree of tens of thousands of files: git's untracked cache skips directories that did not change.
FAST = ("-c", "core.untrackedCache=true", "-c", "gc.auto=0", "-c", "maintenance.auto=false")
# Configuration on the command line beats a repository's for the same key, so whatever a repository's
# config says (a role may have written one), hoh's git runs no hook, fsmonitor, pager, editor, askpass,
# credential helper, ssh or proxy command or signing program; talks no protocol but local files; never
# enters a submodule; reads no user-level ignore or attributes file, and no commit-graph or
# multi-pack-index a role could forge. What `-c` cannot undo (a list like `url.*.insteadOf`, a remote
# named after hoh's path with its own `uploadpack`, a filter driver) only a repository's own config can
# set: history.git's is hoh's, and PROJECT/.git's must be the one hoh accepted (`mirror.py`).
HARDENING = tuple(a for kv in (
    "core.hooksPath=/dev/null", "core.fsmonitor=false", "core.sshCommand=false", "core.gitProxy=none",
    "core.askPass=", "credential.helper=", "core.pager=cat", "core.editor=false", "sequence.editor=false",
    "gpg.program=false", "gpg.ssh.program=false", "gpg.x509.program=false", "commit.gpgsign=false",
    "tag.gpgsign=false", "core.autocrlf=false", "core.excludesFile=/dev/null", "core.attributesFile=/dev/null",
    "core.commitGraph=false", "core.multiPackIndex=false", "protocol.allow=never", "protocol.file.allow=always",
    *(f"protocol.{name}.allow=never" for name in ("ssh", "git", "http", "https", "ext")),
    "submodule.recurse=false", "fetch.recurseSubmodules=false", "diff.ignoreSubmodules=all",
    "status.submoduleSummary=false") for a in ("-c", kv))
NO_SUBMODULES = "--ignore-submodules=all"
"""For every status and diff of a work tree: a nested repository's own config (a filter) never runs."""


class GitError(HohError):
    def __init__(self, message: str, *, code: int | None = None, stderr: str = ""):
        super().__init__(message)
        self.code, self.stderr = code, stderr
        """git's exit status (None: it did not run to an end) and what it printed on stderr."""


def git_env(loop: int = 0, index: Path | None = None) -> dict[str, str]:
    """git's whole environment, built from nothing: no secret of hoh's reaches git or anything it runs,
    no user or system configuration is read, and the same input gives the same commits."""
    date = f"@{EPOCH + loop} +0000"
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": os.devnull, "LANG": "C", "LC_ALL": "C",
           "GIT_AUTHOR_NAME": "hoh", "GIT_AUTHOR_EMAIL": "hoh@localhost", "GIT_COMMITTER_NAME": "hoh",
           "GIT_COMMITTER_EMAIL": "hoh@localhost", "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date,
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_ATTR_NOSYSTEM": "1",
           "GIT_NO_REPLACE_OBJECTS": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": "",
           "GIT_SSH_COMMAND": "false", "GIT_PROTOCOL_FROM_USER": "0"}
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    return env


def run_git(args: list[str], *, cwd: Path, loop: int = 0, index: Path | None = None, binary: bool = False,
            max_stdout: int = 256 * 1024 * 1024, stdin: bytes | None = None) -> str | bytes:
    argv = ["git", *HARDENING, *FAST, *args]
    try:
        proc = call(argv, cwd=cwd, env=git_env(loop, index), timeout=GIT_TIMEOUT_SECONDS, max_stdout=max_stdout,
                    stdin=stdin)
    except OSError as err:
        raise GitError(f"git {' '.join(args[:3])} could not run in {cwd}: {err}") from None
    if not proc.ok:
        why = "timed out" if proc.exit_code is None else (proc.stderr.strip()
                                                           or proc.stdout[-2000:].decode(errors="replace").strip())
        raise GitError(f"git {' '.join(args)} failed in {cwd}: {why}", code=proc.exit_code, stderr=proc.stderr)
    return proc.stdout if binary else proc.stdout.decode(errors="surrogateescape").strip()
