"""A jailed role sees no secret of the machine's /etc: only the allowlist of `hoh/envs/local/jail_etc.py`, nothing
others cannot read, passwd and group without a hash, and what it needs still works (users, names, CAs, the
timezone, git and python). Run as root and, by tests/test_as_user.py, as an unprivileged user.

A planted /etc is a fixture tree `jail_etc.ETC` points at (this machine's own /etc is never written, but for
one root-only file planted in /etc/ssl/certs as root and removed after); this machine's real /etc is read
through hoh's real jail too.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import Project, mini_script, run_hoh

from hoh.envs.local import jail_etc
from hoh.envs.local.jail import SYSTEM_DIRS, bwrap_argv
from hoh.harness.sandbox import JailSpec, Network

ETC = Path("/etc")
CA_BUNDLE = "ssl/certs/ca-certificates.crt"
SECRETS = ("shadow", "gshadow", "shadow-", "gshadow-", "pip.conf", "npmrc", ".npmrc", "xdg/pip/pip.conf",
           "apt/auth.conf.d/mirror.conf", "ssh/ssh_host_ed25519_key", "sudoers", "gitconfig", "environment",
           "docker/config.json")
"""What a Developer once copied, and its kin: under /etc, never in a jail."""


def _jailed(tmp_path: Path, script: str) -> tuple[Path, subprocess.CompletedProcess]:
    """`script` run by sh in hoh's real jail with a Developer's spec (its project and home writable), in the project."""
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir(exist_ok=True)
    home.mkdir(exist_ok=True)
    spec = JailSpec(writable=(project, home), network=Network.none)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}
    result = subprocess.run(bwrap_argv(spec, ["sh", "-c", script], project), capture_output=True, text=True, env=env,
                            timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    return project, result


STEAL = ("mkdir -p stolen; for f in {paths}; do cat \"$f\" >> stolen/all 2>/dev/null; done; "
         "cp -a /etc etc-copy 2>/dev/null; find /etc | sort > listing; grep -rl {token} /etc > grep-hits; true")
"""Copy every secret it can name and /etc whole into the project, list /etc, grep it for the token."""


def _split(token: str) -> str:
    """The token as the shell will join it, so that a command line (kept in transcripts) does not hold it."""
    return f'"{token[:8]}""{token[8:]}"'


def _files(tree: Path) -> dict[str, bytes]:
    """Every regular file under `tree` (no link followed), by its path relative to it."""
    return {str(p.relative_to(tree)): p.read_bytes() for p in tree.rglob("*") if p.is_file() and not p.is_symlink()}


def _masked(text: bytes) -> bytes:
    return b"\n".join(b":".join([f[0], b"x", *f[2:]]) if len(f := line.split(b":")) > 1 and
                      f[1] not in (b"", b"x", b"*", b"!", b"!!", b"!*") else line for line in text.split(b"\n"))


@pytest.fixture
def planted_etc(tmp_path, monkeypatch) -> tuple[Path, str, Path]:
    """A /etc holding what a role needs (copied from this one) and secrets of every kind, each with a token:
    at names never shown, at names kept out inside shown directories, and root-only files (0600) there."""
    token = f"hoh-etc-secret-{secrets.token_hex(6)}"
    etc, outside = tmp_path / "etc", tmp_path / "run"
    etc.mkdir()
    outside.mkdir()
    for name in ("group", "nsswitch.conf", "hosts", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives",
                 *(p.name for p in ETC.glob("python3*")), CA_BUNDLE, "ssl/openssl.cnf"):
        if (ETC / name).exists():
            (etc / name).parent.mkdir(parents=True, exist_ok=True)
            copy = shutil.copytree if (ETC / name).is_dir() else shutil.copyfile
            copy(ETC / name, etc / name, **({"symlinks": True} if copy is shutil.copytree else {}))
    user = pwd.getpwuid(os.getuid())
    (etc / "passwd").write_text(f"{user.pw_name}:x:{user.pw_uid}:{user.pw_gid}::{user.pw_dir}:/bin/sh\n"
                                f"hashed:$6$salt${token}:4242:4242::/nonexistent:/bin/false\n"
                                "locked:!:4243:4243::/:/x\n")
    with (etc / "group").open("a") as group:
        group.write(f"hashed:$1${token}:4242:\n")
    (outside / "resolv.conf").write_text("nameserver 192.0.2.53\n")
    (etc / "resolv.conf").symlink_to(outside / "resolv.conf")  # out of the jail's trees: shown as what it leads to
    (etc / "localtime").symlink_to("/usr/share/zoneinfo/Etc/UTC")
    for rel in (*SECRETS, "ssl/certs/server.key", "ssl/private/hoh.pem", "python3/credentials.json"):
        (etc / rel).parent.mkdir(parents=True, exist_ok=True)
        (etc / rel).write_text(f"token = {token}\n")  # readable by all: kept out by name, not by mode
    for rel in ("ssl/certs/hoh-secret", "ssl/certs/nested/deeper/secret", "python3/root-only.py"):
        (etc / rel).parent.mkdir(parents=True, exist_ok=True)
        (etc / rel).write_text(f"token = {token}\n")
        (etc / rel).chmod(0o600)
    (etc / "ssl/certs/nested/deeper/public.pem").write_text("a public certificate\n")
    (etc / "ssl/certs/nested/closed").mkdir()
    (etc / "ssl/certs/nested/closed/cert.pem").write_text(f"{token}\n")
    (etc / "ssl/certs/nested/closed").chmod(0o700)  # a directory others cannot enter
    (etc / "ssl/certs/bundle-link.pem").symlink_to("ca-certificates.crt")
    (etc / "ssl/certs/leak").symlink_to("../../shadow")  # a link to a secret: it dangles in the jail
    monkeypatch.setattr(jail_etc, "ETC", etc)
    return etc, token, outside


def test_a_developer_copying_a_planted_etc_into_the_project_gets_no_secret(planted_etc, tmp_path):
    etc, token, outside = planted_etc
    paths = " ".join(f"/etc/{rel}" for rel in (*SECRETS, "ssl/certs/hoh-secret", "ssl/certs/server.key",
                                               "ssl/private/hoh.pem", "ssl/certs/nested/deeper/secret",
                                               "ssl/certs/nested/closed/cert.pem", "ssl/certs/leak",
                                               "python3/root-only.py", "python3/credentials.json"))
    project, _ = _jailed(tmp_path, STEAL.format(paths=paths, token=_split(token)))
    copied = _files(project)
    assert not [rel for rel, data in copied.items() if token.encode() in data]
    assert (project / "grep-hits").read_text() == "" == (project / "stolen" / "all").read_text()
    listing = set((project / "listing").read_text().split())
    for rel in (*SECRETS, "xdg", "ssh", "apt", "docker", "ssl/private", "ssl/certs/hoh-secret", "ssl/certs/server.key",
                "ssl/certs/nested/deeper/secret", "ssl/certs/nested/closed", "python3/root-only.py",
                "python3/credentials.json"):
        assert f"/etc/{rel}" not in listing, rel
    # What a role needs is there, as it is: byte-equal, the links as links, passwd and group without a hash.
    for rel in ("passwd", "group", "resolv.conf", "localtime", "nsswitch.conf", "ssl/certs/nested/deeper/public.pem",
                "ssl/certs/bundle-link.pem", "ssl/certs/leak", "python3"):
        assert f"/etc/{rel}" in listing, rel
    assert copied["etc-copy/passwd"] == _masked((etc / "passwd").read_bytes()) != (etc / "passwd").read_bytes()
    assert b"hashed:x:4242:4242:" in copied["etc-copy/passwd"] and b"locked:!:4243" in copied["etc-copy/passwd"]
    assert copied["etc-copy/group"] == _masked((etc / "group").read_bytes())
    assert copied["etc-copy/resolv.conf"] == (outside / "resolv.conf").read_bytes()
    assert os.readlink(project / "etc-copy/localtime") == "/usr/share/zoneinfo/Etc/UTC"
    assert os.readlink(project / "etc-copy/ssl/certs/leak") == "../../shadow"
    if (etc / CA_BUNDLE).exists():
        assert copied[f"etc-copy/{CA_BUNDLE}"] == (ETC / CA_BUNDLE).read_bytes()


def test_a_scripted_developer_built_by_hoh_steals_nothing_from_a_planted_etc(planted_etc, tmp_path):
    """The same theft as a role's action in a real build: nothing of it reaches the candidate or history."""
    _, token, _ = planted_etc
    script = mini_script(1)
    script["loops"][1]["developer"]["actions"].append({"run": STEAL.format(
        paths=" ".join(f"/etc/{rel}" for rel in (*SECRETS, "ssl/certs/hoh-secret", "ssl/private/hoh.pem")),
        token=_split(token))})
    root = tmp_path / "build"
    root.mkdir()
    project = Project(root, script)
    project.build(1)
    status = json.loads(run_hoh("status", "-w", project.ws, "--json").stdout)
    assert status["loops"][0]["status"] == "pass", status
    tree = project.ws / "project"
    assert (tree / "greet.py").exists() and (tree / "etc-copy" / "passwd").exists()
    assert not [rel for rel, data in _files(project.ws).items() if token.encode() in data]
    history = subprocess.run(["git", "-C", str(tree), "log", "-p", "--all"], capture_output=True, text=True).stdout
    assert "etc-copy/passwd" in history and token not in history


def test_the_copy_is_made_again_when_what_it_came_from_changes(planted_etc):
    etc, _, outside = planted_etc
    first = jail_etc.view(SYSTEM_DIRS)
    assert jail_etc.view(SYSTEM_DIRS) is first  # nothing changed: the same copy, no new work
    assert ("/etc/ssl/certs/hoh-secret", jail_etc.UNREADABLE) in first.left_out
    (etc / "nsswitch.conf").chmod(0o600)  # made root-only after the copy: gone from the next
    (outside / "resolv.conf").write_text("nameserver 192.0.2.54\n")  # a followed link's target, rewritten
    (etc / "ssl/certs/nested/deeper/server.key").write_text("new")  # a new name in a shown directory
    (etc / "ssl/certs/hoh-secret").chmod(0o644)  # made readable by all: shown
    second = jail_etc.view(SYSTEM_DIRS)
    staged = Path(second.staged)
    assert second.staged != first.staged and Path(first.staged).is_dir()  # a running jail may still show it
    assert not (staged / "nsswitch.conf").exists() and ("/etc/nsswitch.conf", jail_etc.UNREADABLE) in second.left_out
    assert (staged / "resolv.conf").read_text() == "nameserver 192.0.2.54\n"
    assert not (staged / "ssl/certs/nested/deeper/server.key").exists()
    assert (staged / "ssl/certs/hoh-secret").exists()
    assert jail_etc.view(SYSTEM_DIRS) is second


def test_a_path_the_settings_show_under_etc_is_mounted_on_the_copy_and_only_in_that_jail(tmp_path):
    extra = next((ETC / name for name in ("debconf.conf", "adduser.conf", "issue", "shells", "login.defs")
                  if (ETC / name).is_file() and os.stat(ETC / name).st_mode & stat.S_IROTH), None)
    if extra is None:
        pytest.skip("no file of /etc outside the allowlist that others may read, to show by the settings")
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    # A role's read_only paths hold the settings' (`sandbox.read_only_paths`, runtime/jobs.py).
    spec = JailSpec(writable=(project, home), read_only=(extra,), network=Network.none)
    with_it = subprocess.run(bwrap_argv(spec, ["cat", str(extra)], project), capture_output=True, timeout=60)
    assert with_it.returncode == 0 and with_it.stdout == extra.read_bytes()
    without = subprocess.run(bwrap_argv(JailSpec(writable=(project, home), network=Network.none), ["cat", str(extra)],
                                        project), capture_output=True, timeout=60)
    assert without.returncode != 0


def test_a_developer_in_the_real_jail_reads_no_secret_of_this_machines_etc(tmp_path):
    """This machine's own /etc: the shadow files and the package managers' configs are not there, nothing shown
    is unreadable to others (a 0600 file planted in /etc/ssl/certs as root), passwd has no hash, and users,
    names, the CA bundle, the timezone, git and python work — as root and as the user."""
    token = f"hoh-etc-secret-{secrets.token_hex(6)}"
    planted = ETC / "ssl" / "certs" / f"hoh-secret-{token}"
    if os.getuid() == 0:
        planted.write_text(f"{token}\n")
        planted.chmod(0o600)
    try:
        project, result = _jailed(tmp_path, STEAL.format(
            paths=" ".join(f"/etc/{rel}" for rel in (*SECRETS, f"ssl/certs/{planted.name}")), token=_split(token))
            + "; id -un; whoami; getent passwd $(id -u) | cut -d: -f1; getent hosts localhost | wc -l; "
              "readlink /etc/localtime; git --version | cut -d' ' -f1; "
              "python3 -c 'import ssl; print(len(ssl.create_default_context().get_ca_certs()) > 0)'")
    finally:
        planted.unlink(missing_ok=True)
    name = pwd.getpwuid(os.getuid()).pw_name
    localtime = os.readlink(ETC / "localtime") if (ETC / "localtime").is_symlink() else ""
    assert result.stdout.splitlines() == [name, name, name, "1", *([localtime] if localtime else []), "git", "True"]
    listing = set((project / "listing").read_text().split())
    assert not [rel for rel in SECRETS if f"/etc/{rel}" in listing] and f"/etc/ssl/certs/{planted.name}" not in listing
    assert (project / "stolen" / "all").read_text() == "" == (project / "grep-hits").read_text()
    copied = project / "etc-copy"
    assert (copied / "passwd").read_bytes() == _masked((ETC / "passwd").read_bytes())
    for rel in ("resolv.conf", CA_BUNDLE, "nsswitch.conf"):
        if (ETC / rel).exists():
            assert (copied / rel).read_bytes() == (ETC / rel).read_bytes(), rel
    for path in copied.rglob("*"):  # everything shown, others may read on the machine
        if not path.is_symlink():
            mode = os.stat(ETC / path.relative_to(copied)).st_mode
            assert jail_etc.readable(mode), (path, oct(mode))


def test_doctor_lists_what_of_etc_is_shown_and_what_was_kept_out():
    report = json.loads(run_hoh("doctor", "--json", "-H", "scripted").stdout)["jail"]["etc"]
    assert {"passwd", "group", "resolv.conf"} <= set(report["shown"]) and "shadow" not in report["shown"]
    assert "pip.conf" in report["never"] and "others cannot read" in report["rules"]
    if (ETC / "ssl" / "private").is_dir():
        assert "/etc/ssl/private" in [k["path"] for k in report["kept_out"]]
    text = run_hoh("doctor", "-H", "scripted").stdout
    assert "/etc shown" in text and "kept out" in text and "shadow" in text


def test_the_copies_of_a_process_killed_before_its_exit_are_removed_by_the_next(tmp_path, monkeypatch):
    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid runs nothing now
    orphan, alive = tmp_path / f"{jail_etc.PREFIX}{gone.pid}-x", tmp_path / f"{jail_etc.PREFIX}{os.getppid()}-y"
    for copy in (orphan, alive):
        (copy / "etc-1").mkdir(parents=True)
        (copy / "etc-1" / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    monkeypatch.setattr(jail_etc, "SHM", str(tmp_path))
    monkeypatch.setattr(jail_etc, "_PRIVATE", [])
    own = Path(jail_etc._private_dir())
    assert not orphan.exists() and alive.is_dir() and own.parent == tmp_path
    assert own.name.startswith(f"{jail_etc.PREFIX}{os.getpid()}-") and stat.S_IMODE(own.stat().st_mode) == 0o700


def test_what_pip_conf_and_npmrc_configure_reaches_the_jail_without_their_credentials(tmp_path, monkeypatch):
    """The jail shows neither pip.conf nor npmrc, so a jailed pip or npm would lose this machine's mirror and
    its CA file (a TLS-inspecting network): they come as the clients' variables instead, each URL without its
    user and password, a CA file only where the jail shows it."""
    from hoh.envs.base import Launch
    from hoh.envs.local.executor import LOCAL
    from hoh.harness import registries
    from hoh.harness.attempt import RoleRequest

    token = f"hoh-index-secret-{secrets.token_hex(6)}"
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nindex-url = https://ci:{token}@mirror.test/simple\n"
                    f"extra-index-url = https://{token}@extra.test/simple http://plain.test/s\n"
                    f"cert = /etc/{CA_BUNDLE}\ntrusted-host = mirror.test\n"
                    f"[install]\ntrusted-host = mirror.test  extra.test\n")
    monkeypatch.setattr(registries, "PIP_FILES", (conf,))
    for var in registries.PIP_SETTINGS.values():
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(registries, "_npm_config",
                        lambda: {"registry": f"https://u:{token}@npm.test:8443/", "cafile": str(tmp_path / "ca.pem")})
    work = tmp_path / "work"
    work.mkdir()
    jail = JailSpec(network=Network.none, writable=(work,))
    request = RoleRequest(role="developer", loop=1, attempt=1, prompt="", workdir=work, access="read-write",
                          jail=jail, wall_timeout=60, idle_timeout=60)
    attempt = tmp_path / "attempt"
    attempt.mkdir()
    done = LOCAL.execute(Launch(["env"], work, {"PATH": os.environ["PATH"]}, None, jail), request, attempt, None)
    assert done.setup_error is None and done.process.exit_code == 0, done
    seen = dict(line.split("=", 1) for line in (attempt / "events.jsonl").read_text().splitlines() if "=" in line)
    assert seen["PIP_INDEX_URL"] == "https://mirror.test/simple"
    assert seen["PIP_EXTRA_INDEX_URL"] == "https://extra.test/simple http://plain.test/s"
    assert seen["PIP_TRUSTED_HOST"] == "mirror.test extra.test"  # [install] over [global], as pip reads them
    assert seen["npm_config_registry"] == "https://npm.test:8443/"
    if (ETC / CA_BUNDLE).exists():
        assert seen["PIP_CERT"] == f"/etc/{CA_BUNDLE}"
    assert "npm_config_cafile" not in seen and "NODE_EXTRA_CA_CERTS" not in seen  # a file the jail does not show
    assert token not in (attempt / "events.jsonl").read_text() and token not in (attempt / "command.json").read_text()


def test_a_jailed_root_reads_no_firmware_table_or_serial_number(tmp_path):
    """/sys is shown read-only, but its root-only files (ACPI tables, DMI serial numbers) a jailed uid 0 would read
    as their owner: an empty directory stands over each."""
    from hoh.envs.local.jail import FIRMWARE
    shown = [d for d in FIRMWARE if Path(d).is_dir()]
    if not shown:
        pytest.skip("this machine's /sys shows no firmware directory")
    listing = " ".join(shown)
    project, result = _jailed(tmp_path, f"find {listing} -mindepth 1 | head -n 5 > found; "
                                        "cat /sys/firmware/acpi/tables/* > tables 2>/dev/null; true")
    assert (project / "found").read_text() == "" and (project / "tables").read_bytes() == b""
    assert any(next(Path(d).iterdir(), None) is not None for d in shown)  # on the machine they hold something
