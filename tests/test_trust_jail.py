"""The jail's shape, the settings around it and what `hoh doctor` says of it (the hostile behaviours
themselves run in tests/test_hostile.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import run_hoh

from hoh.envs.attempt import run_attempt
from hoh.envs.local.jail import FIRMWARE, bwrap_argv, identity
from hoh.harness.pi import PiAdapter
from hoh.harness.sandbox import JailSpec, Network


def test_the_jail_drops_every_capability_and_shows_an_allowlist_not_the_machine(tmp_path):
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    argv = bwrap_argv(JailSpec(writable=(project, home)), ["true"], project)
    pairs = list(zip(argv, argv[1:], argv[2:]))
    assert "--cap-drop" in argv and argv[argv.index("--cap-drop") + 1] == "ALL"
    assert "--unshare-net" in argv and "--new-session" in argv
    assert ("--ro-bind", "/", "/") not in pairs and ("--bind", "/", "/") not in pairs
    assert ("--ro-bind", "/proc/sys", "/proc/sys") in pairs and ("--ro-bind", "/sys", "/sys") in pairs
    assert ("--bind", str(project), str(project)) in pairs and ("--bind", str(home), str(home)) in pairs
    assert argv[argv.index("--") - 3:argv.index("--") - 1] == ["/", "--chdir"]  # the root read-only last
    for hidden in ("/run", "/var", "/home", "/root", str(tmp_path)):
        assert hidden not in argv  # nothing of theirs but what is listed
    assert "--unshare-net" not in bwrap_argv(JailSpec(network=Network.shared), ["true"], project)


def test_nested_binds_and_hundreds_of_hidden_dirs_are_mounted_outer_first_each_where_it_belongs(tmp_path):
    """The Planner's jail: earlier loops read-only, each loop's roles/ hidden (one per loop), a writable dir inside
    a read-only one, a read-only one inside a writable one, a hidden dir reached through a symlinked parent."""
    loops, work, real = tmp_path / "loops", tmp_path / "work", tmp_path / "real"
    for t in range(1, 301):
        (loops / f"{t:04d}" / "roles").mkdir(parents=True)
        (loops / f"{t:04d}" / "roles" / "prompt.md").write_text("secret")
        (loops / f"{t:04d}" / "plan.json").write_text("{}")
    (work / "inputs").mkdir(parents=True)
    (work / "inputs" / "spec.md").write_text("spec")
    (real / "hidden").mkdir(parents=True)
    (real / "hidden" / "x").write_text("x")
    (tmp_path / "link").symlink_to(real)
    (loops / "0007" / "mine").mkdir()
    spec = JailSpec(writable=(work, loops / "0007" / "mine"), read_only=(loops, work / "inputs", tmp_path / "link"),
                    hidden=(*(loops / f"{t:04d}" / "roles" for t in range(1, 301)), tmp_path / "link" / "hidden"))
    argv = bwrap_argv(spec, ["sh", "-c", f"cat {loops}/0001/plan.json; echo; (ls -A {loops}/0150/roles; ls -A {real}/hidden) | wc -w; "
                             f"echo w > {loops}/0007/mine/f && echo w > {work}/f && ! echo w 2>/dev/null > "
                             f"{work}/inputs/g && ! echo w 2>/dev/null > {loops}/0001/g && echo ok"], work)
    mounts = [(argv[n], argv[n + 1]) for n in range(len(argv) - 1) if argv[n] in ("--ro-bind", "--bind", "--tmpfs")]
    order = [path for _, path in mounts]
    assert order.index(str(loops)) < min(order.index(str(loops / "0007" / "mine")), order.index(str(loops / "0150" / "roles")))
    assert order.index(str(work)) < order.index(str(work / "inputs"))  # read-only inside writable: after it
    assert ("--tmpfs", str(real / "hidden")) in mounts and str(tmp_path / "link") not in order  # resolved
    firmware = sum(1 for d in FIRMWARE if os.path.isdir(d))
    assert sum(1 for how, _ in mounts if how == "--tmpfs") == 300 + 1 + 2 + firmware  # + /dev/shm, /tmp, /sys's
    result = subprocess.run(argv, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["{}", "0", "ok"]  # nothing of roles/ or the hidden dir shows


def test_inside_the_jail_a_process_has_no_capability_and_no_new_privileges():
    inside = identity()
    assert inside is not None
    assert int(inside["CapEff"], 16) == 0 and inside["NoNewPrivs"] == "1"


def test_an_api_key_without_a_base_url_is_refused_where_the_proxy_cannot_place_it(tmp_path):
    (tmp_path / "spec.md").write_text("# x\n")
    fake_pi = tmp_path / "pi"
    fake_pi.write_text(f"#!/bin/sh\necho {PiAdapter.capabilities.tested_version}\n")
    fake_pi.chmod(0o755)
    result = run_hoh("build", tmp_path / "spec.md", "--harness", "pi", "--api-key-env", "SOME_KEY", "-w", tmp_path / "ws",
                     "--set", f"harness.command={fake_pi}")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "needs a base URL" in result.stderr and "sandbox.network=shared" in result.stderr
    assert not (tmp_path / "ws").exists()


def test_doctor_reports_each_roles_capabilities_view_network_credential_and_limits(tmp_path):
    report = json.loads(run_hoh("doctor", "--json").stdout)
    roles = report["roles"]
    assert set(roles) == {"planner", "developer", "qa"}
    for role, facts in roles.items():
        assert facts["capabilities"].startswith("none (uid "), facts["capabilities"]
        assert facts["filesystem"]["writes"][-1] == "its own harness home"
        assert "egress" in facts["network"] and facts["limits"]["tmp_mb"] == 1024
    assert roles["developer"]["filesystem"]["writes"][0].startswith("the project")
    assert "nothing else" in roles["planner"]["network"] and "nothing else" in roles["qa"]["network"]
    scripted = next(h for h in report["harnesses"] if h["harness"] == "scripted")
    assert scripted["credential"] == "none needed"
    # A workspace's own settings: a key behind the proxy, other limits.
    (tmp_path / "spec.md").write_text("# x\n")
    built = run_hoh("build", tmp_path / "spec.md", "-w", tmp_path / "ws", "--loops", "1", "-q",
                    "--set", f"harness.script={Path(__file__).parent.parent / 'examples/demo/script.yaml'}",
                    "--set", "harness.api_key_env=HOH_DOCTOR_KEY", "--set", "harness.base_url=http://127.0.0.1:9/v1",
                    "--set", "sandbox.limits.tmp_mb=64")
    assert built.returncode in (0, 1), built.stderr
    report = json.loads(run_hoh("doctor", "--json", "-w", tmp_path / "ws", "-H", "scripted").stdout)
    assert report["roles"]["qa"]["limits"]["tmp_mb"] == 64
    assert "attempt's token" in report["harnesses"][0]["credential"]
    assert "http://127.0.0.1:9/v1" in report["roles"]["developer"]["network"]


def _scripted_request(tmp_path: Path, jail: JailSpec):
    from hoh.harness.attempt import RoleRequest
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir(exist_ok=True)
    home.mkdir(exist_ok=True)
    script = tmp_path / "script.yaml"
    script.write_text("loops:\n  1:\n    planner: {reply: {goal: g}}\n")
    return RoleRequest(role="planner", loop=1, attempt=1, prompt="p", workdir=work, access="read-only", home=home,
                       context={"workspace": tmp_path}, jail=jail)


def test_a_jail_that_fails_to_set_up_is_tried_again_and_then_reported_as_what_it_is(tmp_path, monkeypatch):
    from hoh.config import HarnessConfig
    from hoh.harness import registry
    from hoh.harness.attempt import Outcome
    real = __import__("shutil").which("bwrap")
    fake_dir = tmp_path / "bin"
    fake_dir.mkdir()
    count = tmp_path / "tries"
    # bwrap's own failure, as when another program's mount vanishes mid-setup: twice, then the real one.
    (fake_dir / "bwrap").write_text(f"#!/bin/sh\necho x >> {count}\n[ $(wc -l < {count}) -le 2 ] && "
                                    f"{{ echo 'bwrap: Can not mount tmpfs on /newroot/x: No such file' >&2; exit 1; }}\n"
                                    f"exec {real} \"$@\"\n")
    (fake_dir / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_dir}{os.pathsep}{os.environ['PATH']}")
    adapter = registry.create(HarnessConfig(name="scripted", script=str(tmp_path / "script.yaml")))
    attempt = tmp_path / "attempt"
    attempt.mkdir()
    result = run_attempt(adapter, _scripted_request(tmp_path, JailSpec(network=Network.none)), attempt)
    assert result.outcome is Outcome.ok and count.read_text().count("x") == 3
    count.write_text("")
    (fake_dir / "bwrap").write_text("#!/bin/sh\necho 'bwrap: Can not mount tmpfs on /newroot/x: No such file' >&2\nexit 1\n")
    result = run_attempt(adapter, _scripted_request(tmp_path, JailSpec(network=Network.none)), attempt)
    assert result.outcome is Outcome.jail_error and "could not be set up (bwrap: Can not mount" in result.error
    assert result.outcome.transient  # rerun with backoff by the role runner before it costs an attempt


def test_a_clis_home_is_scrubbed_of_its_login_tokens_and_the_login_itself_kept(tmp_path, monkeypatch):
    from hoh.config import HarnessConfig
    from hoh.harness import registry
    from hoh.harness.attempt import RoleRequest
    user = tmp_path / "user"
    (user / ".codex").mkdir(parents=True)
    token = "eyJhbGciOiJSUzI1NiJ9.sentinel-login-token-31337"
    (user / ".codex" / "auth.json").write_text(json.dumps({"tokens": {"access_token": token, "id": "x"}}))
    monkeypatch.setenv("HOME", str(user))
    codex = registry.create(HarnessConfig(name="codex"))
    home = tmp_path / "home"
    request = RoleRequest(role="developer", loop=1, attempt=1, prompt="p", workdir=tmp_path, access="write", home=home)
    codex.prepare(request)
    assert token in codex.secrets(request)
    rollout = home / ".codex" / "sessions" / "rollout.jsonl"
    rollout.parent.mkdir(parents=True)
    rollout.write_bytes(b'{"output": "printed ' + token.encode() + b'"}\n')
    from hoh.harness.secrets import scrub_tree
    size = rollout.stat().st_size
    assert scrub_tree(home, codex.secrets(request), keep=[c for _, c in codex.logins(request)]) == [
        ".codex/sessions/rollout.jsonl"]
    assert token.encode() not in rollout.read_bytes() and rollout.stat().st_size == size  # sqlite pages keep their place
    assert token in (home / ".codex" / "auth.json").read_text()  # the CLI still logs in next time


def test_links_a_role_left_in_its_home_are_gone_before_hoh_writes_there(tmp_path):
    from hoh.config import HarnessConfig
    from hoh.harness import registry
    outside = tmp_path / "outside"
    outside.mkdir()
    request = _scripted_request(tmp_path, JailSpec(network=Network.none))
    (request.home / ".pi").symlink_to(outside)  # what hoh's prepare of a CLI would write through, as root
    adapter = registry.create(HarnessConfig(name="scripted", script=str(tmp_path / "script.yaml")))
    attempt = tmp_path / "attempt"
    attempt.mkdir()
    run_attempt(adapter, request, attempt)
    assert not (request.home / ".pi").is_symlink() and list(outside.iterdir()) == []
