"""What a jailed role sees of /etc: an allowlist, each entry with its reason, never the machine's /etc whole.

A role runs as uid 0 in its jail, so the file modes that keep a user out of /etc/shadow keep nothing out
there: a Developer once copied /etc/shadow, /etc/gshadow and /etc/pip.conf into the project. So the jail's
/etc holds only `SHOWN`: name resolution, users and groups without their password hashes, CA bundles, the
loader's and the timezone's config, what the interpreters and CLIs read at start. Everything else stays
out, whatever the uid: the shadow files, sudoers, ssh host keys, package managers' credentials (pip.conf,
npmrc, apt's auth.conf.d, Maven's settings.xml), Docker's and the clouds', the system git config (credential
helpers, tokens in URLs), the environment file.

Inside what is shown, two rules hold at every depth: a file or directory others cannot read (no o+r; a
directory also needs o+x) is not shown, since a jailed root is its owner's equal; and a name in `KEPT_OUT`
(private keys, credentials) is not shown whatever its mode.

The shown entries are staged: copied, under the rules, into a private directory of this process (on /dev/shm
when there is one), which the jail binds read-only at /etc in one mount (a bind per entry cost bwrap ~0.2 ms
each, ~8 ms an attempt). The copy is made again when anything it came from changed (each directory's and
file's inode, size, mtimes and mode, checked before every attempt: ~0.4 ms); an older copy stays, since a
running jail may show it.
A link is copied as the same link: in the jail it resolves among what the jail shows, so it shows nothing
else (the /etc/alternatives links, /etc/localtime, /etc/ssl/certs' links into /usr/share). Only a shown
entry that is itself a link leading out of the jail's trees (/etc/resolv.conf → /run/…), where it would
dangle, is replaced by what it leads to, under the same rules.

passwd and group are copied with each password field that holds anything but a marker (x, *, !, or
nothing) masked to x: some systems keep hashes there.

Containers (Harbor environments, `--env`): the container's /etc is its image's, not this machine's; hoh
binds nothing of the host's /etc there.
"""

from __future__ import annotations

import atexit
import fnmatch
import os
import shutil
import stat
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from ...fsutil import remove_dead_process_dirs

ETC = Path("/etc")
"""Where the shown entries come from (a test points it at a fixture tree); they appear at /etc in the jail."""
INSIDE = "/etc"


@dataclass(frozen=True)
class Shown:
    """Entries of /etc a role sees, and why it needs them."""

    names: tuple[str, ...]
    """Paths under /etc; a trailing `*` matches every name that starts with what precedes it."""
    why: str
    masked: bool = False
    """Shown as a copy with its password fields' hashes masked (passwd, group)."""


SHOWN = (
    Shown(("passwd", "group"), "users and groups by name (id, whoami, getent, git, node's os.userInfo)", masked=True),
    Shown(("nsswitch.conf", "hosts", "host.conf", "resolv.conf", "gai.conf", "hostname", "services", "protocols",
           "networks", "rpc"), "name resolution"),
    Shown(("ssl", "ca-certificates", "ca-certificates.conf"), "OpenSSL's config and the CA certificates"),
    Shown(("pki/tls/certs", "pki/tls/cert.pem", "pki/tls/openssl.cnf", "pki/ca-trust/extracted", "pki/java",
           "crypto-policies"), "the CA bundles and OpenSSL's config and policy on Fedora and RHEL (not pki whole)"),
    Shown(("gnutls",), "GnuTLS's config"),
    Shown(("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ld.so.preload"), "the dynamic loader"),
    Shown(("localtime", "timezone", "locale.alias", "locale.conf"), "the timezone and the locale"),
    Shown(("alternatives",), "the system's choices of program (python, java, editor, …)"),
    Shown(("os-release", "lsb-release", "debian_version", "redhat-release", "system-release", "alpine-release"),
          "which OS this is"),
    Shown(("mime.types", "magic", "magic.mime"), "file types"),
    Shown(("bash.bashrc", "inputrc", "terminfo"), "the shell and the terminal"),
    Shown(("mtab",), "the mounts (a link into /proc)"),
    Shown(("python3*",), "Python's startup (Debian's sitecustomize)"),
    Shown(("java-*", "maven"), "Java's security and runtime config, Maven's launcher (not its settings.xml)"),
    Shown(("fonts",), "fontconfig (browsers and renderers in tests)"),
)
"""/etc in the jail: these, where they exist, under the rules below; nothing else."""


@dataclass(frozen=True)
class KeptOut:
    """Names never shown, at any depth of what is shown, whatever their mode."""

    pattern: str
    why: str


KEPT_OUT = (
    KeptOut("private", "private keys (ssl/private, pki/tls/private)"),
    KeptOut("*.key", "a private key"),
    KeptOut("*.keytab", "Kerberos keys"),
    KeptOut("*.p12", "a key store"),
    KeptOut("*.pfx", "a key store"),
    KeptOut("*shadow*", "password hashes"),
    KeptOut("*pip.conf", "pip's config: index credentials"),
    KeptOut("*npmrc", "npm's config: registry tokens"),
    KeptOut("auth.conf*", "apt's credentials"),
    KeptOut("settings.xml", "Maven's settings: server passwords"),
    KeptOut("*credentials*", "credentials"),
    KeptOut(".netrc", "credentials"),
)
UNREADABLE = "others cannot read it"
"""The rule for a file (or directory) without o+r (o+x too for a directory): a jailed root owns everything."""
NEVER = ("shadow, gshadow, sudoers, ssh host keys, pip.conf, npmrc, apt's auth.conf.d, Docker's and the clouds' "
         "credentials, the system gitconfig, environment")
"""What stays out by not being listed, in words (`hoh doctor`)."""
HASH_FREE = frozenset({b"", b"x", b"*", b"!", b"!!", b"!*"})
"""Password fields that hold no hash (a marker, or no password)."""
KERNEL_TREES = (Path("/proc"), Path("/dev"), Path("/sys"))


def kept_out(name: str) -> str | None:
    """Why `name` is never shown (`KEPT_OUT`), or None."""
    return next((rule.why for rule in KEPT_OUT if fnmatch.fnmatchcase(name, rule.pattern)), None)


def readable(mode: int) -> bool:
    """Others may read it (and enter it, a directory)."""
    return bool(mode & stat.S_IROTH) and (not stat.S_ISDIR(mode) or bool(mode & stat.S_IXOTH))


@dataclass(frozen=True)
class EtcView:
    """The jail's /etc: the staged copy bound there, which of `SHOWN` it holds, what was left out of them and why."""

    staged: str
    shown: tuple[str, ...]
    left_out: tuple[tuple[str, str], ...]
    """(the path in the jail, why): inside a shown entry, what a rule kept out."""

    def argv(self) -> list[str]:
        return ["--ro-bind", self.staged, INSIDE]


_Key = tuple[int, int, int, int, int, int] | None


def _key(path: str) -> _Key:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_ino, st.st_dev, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns


@dataclass(frozen=True)
class _Staged:
    view: EtcView
    source: str
    seen: tuple[tuple[str, _Key], ...]
    """Every directory and file the copy was made from (and /etc itself), as they were."""
    followed: tuple[tuple[str, str], ...]
    """(a shown link followed out of the jail's trees, where it led)."""
    made: tuple[tuple[str, _Key], ...]
    """Every directory of the copy, as made: one whose entries a /tmp cleaner removed (or a forked child's
    parent, exiting) is seen."""

    def fresh(self) -> bool:
        return (os.fspath(ETC) == self.source and all(_key(path) == key for path, key in (*self.seen, *self.made))
                and all(os.path.realpath(link) == led for link, led in self.followed))


_LOCK = threading.Lock()
_STAGED: dict[tuple[tuple[str, bool], ...], _Staged] = {}
"""The latest copy for each set of mount points made in it (`room_for`); older ones stay for running jails."""
_PRIVATE: list[str] = []


def view(elsewhere: tuple[Path, ...] = (), room_for: tuple[tuple[str, bool], ...] = ()) -> EtcView:
    """The jail's /etc from `ETC` as it is now, staged again only when something it came from changed.
    `elsewhere`: the machine's trees the jail shows whole (/usr, …), where a shown link may lead and stay a
    link. `room_for`: (a path under /etc, whether a directory) where the jail mounts something later (a
    path `sandbox.read_only_paths` shows), which a read-only /etc cannot get made: an empty one is in this
    copy, and only in this one. Reads the allowlist's entries, never anything else of /etc."""
    with _LOCK:
        staged = _STAGED.get(room_for)
        if staged is not None and staged.fresh():
            return staged.view
        into = tempfile.mkdtemp(prefix="etc-", dir=_private_dir())
        os.chmod(into, 0o755)
        stage = _Stage(os.fspath(ETC), into, tuple(os.fspath(p) for p in (*elsewhere, *KERNEL_TREES)))
        stage.all()
        for path, is_dir in room_for:
            _make_room(into, path, is_dir)
        _STAGED[room_for] = stage.result()
        return _STAGED[room_for].view


def _make_room(into: str, path: str, is_dir: bool) -> None:
    """An empty file or directory at `path` (under /etc) in the copy `into`; never through a link of the copy
    (then the mount fails in bwrap, as it would have)."""
    parts = path[len(INSIDE) + 1:].split("/")
    where = into
    for n, part in enumerate(parts):
        where = f"{where}/{part}"
        try:
            if n == len(parts) - 1 and not is_dir:
                os.close(os.open(where, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644))
            else:
                os.mkdir(where, 0o755)
        except FileExistsError:
            pass
        except OSError:
            return
        if stat.S_ISLNK(os.lstat(where).st_mode):
            return


class _Stage:
    """One copy of the shown entries into `into`, recording what it was made from."""

    def __init__(self, source: str, into: str, trees: tuple[str, ...]) -> None:
        self.source, self.into, self.trees = source, into, (*trees, INSIDE)
        self.shown: list[str] = []
        self.left_out: list[tuple[str, str]] = []
        self.seen: list[tuple[str, _Key]] = [(source, _key(source))]
        self.followed: list[tuple[str, str]] = []

    def result(self) -> _Staged:
        made = [(root, _key(root)) for root, _, _ in os.walk(self.into)]
        return _Staged(EtcView(self.into, tuple(self.shown), tuple(self.left_out)), self.source, tuple(self.seen),
                       tuple(self.followed), tuple(made))

    def all(self) -> None:
        try:
            names = os.listdir(self.source)
        except OSError:
            names = []
        for entry in SHOWN:
            for pattern in entry.names:
                for name in sorted(fnmatch.filter(names, pattern)) if pattern.endswith("*") else [pattern]:
                    if self._plain_parents(name) and self.entry(name, entry.masked):
                        self.shown.append(name)

    def _plain_parents(self, name: str) -> bool:
        """A nested entry (pki/tls/certs) only under real directories (a linked parent could lead anywhere),
        made in the copy; each parent recorded, so a new entry there is seen."""
        rel = ""
        for part in name.split("/")[:-1]:
            rel = f"{rel}/{part}"
            self.seen.append((self.source + rel, key := _key(self.source + rel)))
            if key is None or not stat.S_ISDIR(key[2]):
                return False
            os.makedirs(self.into + rel, mode=0o755, exist_ok=True)
        return True

    def entry(self, name: str, masked: bool) -> bool:
        path, rel = f"{self.source}/{name}", f"/{name}"
        try:
            st = os.lstat(path)
        except OSError:
            return False
        if stat.S_ISLNK(st.st_mode) and kept_out(name) is None and (masked or not self._inside(os.readlink(path), rel)):
            # A link out of the jail's trees would dangle there (resolv.conf → /run/…); passwd and group are
            # always a copy to mask: what it leads to, under the same rules.
            path = os.path.realpath(path)
            self.followed.append((f"{self.source}/{name}", path))
            try:
                st = os.lstat(path)
            except OSError:
                return False
            if masked and not stat.S_ISREG(st.st_mode):
                self.left_out.append((INSIDE + rel, "not a file"))
                return False
        return self.node(path, rel, st, masked)

    def node(self, path: str, rel: str, st: os.stat_result, masked: bool = False) -> bool:
        """Copy `path` (lstat `st`) to `rel` in the copy under the rules; whether anything was."""
        if (why := kept_out(os.path.basename(path))) is not None:
            self.left_out.append((INSIDE + rel, why))
            return False
        dest = self.into + rel
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(path), dest)  # its directory's record covers it: a link is only ever replaced
            return True
        self.seen.append((path, (st.st_ino, st.st_dev, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)))
        if not readable(st.st_mode):
            self.left_out.append((INSIDE + rel, UNREADABLE))
            return False
        if stat.S_ISREG(st.st_mode):
            if _copy(path, dest, _mask if masked else None):
                return True
            self.left_out.append((INSIDE + rel, UNREADABLE))
            return False
        if not stat.S_ISDIR(st.st_mode):
            self.left_out.append((INSIDE + rel, "not a file or a directory"))
            return False
        os.makedirs(dest, mode=0o755, exist_ok=True)
        try:
            with os.scandir(path) as entries:
                children = sorted((e.name, e.stat(follow_symlinks=False)) for e in entries)
        except OSError:
            self.left_out.append((INSIDE + rel, UNREADABLE))
            return True
        for name, child in children:
            self.node(f"{path}/{name}", f"{rel}/{name}", child)
        return True

    def _inside(self, target: str, rel: str) -> bool:
        """Whether a shown link at /etc`rel` → `target` leads into the jail's trees, read from its text."""
        where = os.path.normpath(target if target.startswith("/") else f"{INSIDE}{os.path.dirname(rel)}/{target}")
        return any(where == t or where.startswith(t + "/") for t in self.trees)


def _copy(path: str, dest: str, change=None) -> bool:
    """The file's bytes at `dest` (changed by `change`) with its mode's permission bits (no setuid, no write
    but the owner's); checked again on the descriptor read, so a file swapped since its lstat is not copied
    unless it passes too (no link followed: O_NOFOLLOW)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    with open(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not readable(st.st_mode):
            return False
        data = f.read()
    with open(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), "wb") as out:
        out.write(change(data) if change else data)
    os.chmod(dest, stat.S_IMODE(st.st_mode) & 0o755)
    return True


def _mask(data: bytes) -> bytes:
    """passwd or group with every password field that holds a hash masked to x."""
    return b"\n".join(_mask_line(line) for line in data.split(b"\n"))


def _mask_line(line: bytes) -> bytes:
    fields = line.split(b":")
    if len(fields) < 2 or fields[1] in HASH_FREE:
        return line
    return b":".join([fields[0], b"x", *fields[2:]])


def _private_dir() -> str:
    """This process's own directory (0700) for the copies, removed when it exits; those of processes that died
    without removing theirs (kill -9) are removed first."""
    if not _PRIVATE:
        tmp = tempfile.gettempdir()
        base = SHM if os.path.isdir(SHM) and os.access(SHM, os.W_OK | os.X_OK) else tmp
        remove_dead_process_dirs(base, PREFIX)
        _PRIVATE.append(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=base))
        atexit.register(_remove_own, os.getpid(), _PRIVATE[0])
    return _PRIVATE[0]


SHM = "/dev/shm"
"""Where the copies go when it is there: a tmpfs. On a disk under load, the ~1,000 links and files of one copy
took ~0.8 s to make in /tmp, ~50 ms here; and no /tmp cleaner ages them."""
PREFIX = "hoh-etc-"


def _remove_own(pid: int, path: str) -> None:
    if os.getpid() == pid:  # not in a forked child
        shutil.rmtree(path, ignore_errors=True)
