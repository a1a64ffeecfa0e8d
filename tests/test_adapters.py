"""Harness adapters without processes: argv per role, environment, configs, and the parsers on
event streams recorded from the real CLIs (tests/data/harness_streams; re-record them with
HOH_RECORD_STREAMS=1, which needs the CLIs installed, see test_record_streams)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import REPO

from hoh.cli.doctor import credential
from hoh.config import HarnessConfig
from hoh.errors import HarnessUnavailable
from hoh.harness import registry
from hoh.harness.attempt import Outcome, RoleRequest
from hoh.harness.sandbox import PLACEHOLDER_KEY
from hoh.harness.secrets import redact_files

STREAMS = REPO / "tests" / "data" / "harness_streams"
MOCK = dict(model="mock-model", base_url="http://127.0.0.1:9/v1", api_key_env="HOH_TEST_KEY")


def adapter(name, **cfg):
    return registry.create(HarnessConfig(name=name, **cfg))


def request(role, tmp_path, **kw):
    access = "write" if role == "developer" else "read-only"
    writable = (tmp_path / "evidence",) if role == "qa" else ()
    return RoleRequest(role=role, loop=1, attempt=1, prompt="p", workdir=tmp_path / "work", access=access,
                       writable=writable, home=tmp_path / "home", **kw)


def test_codex_argv_maps_roles_onto_its_sandbox(tmp_path):
    codex = adapter("codex", **MOCK)
    planner, dev, qa = (codex.build_argv(request(r, tmp_path)) for r in ("planner", "developer", "qa"))
    assert planner[:2] == ["codex", "exec"] and planner[-1] == "-"
    assert planner[planner.index("-s") + 1] == "read-only"
    assert dev[dev.index("-s") + 1] == "workspace-write" and dev[dev.index("-C") + 1] == str(tmp_path / "work")
    assert qa[qa.index("-s") + 1] == "workspace-write" and qa[qa.index("-C") + 1] == str(tmp_path / "evidence")
    assert "model_providers.hoh.env_key=HOH_TEST_KEY" in planner and "approval_policy=never" in planner
    resumed = codex.build_argv(request("developer", tmp_path, resume_session="thread-1"))
    assert resumed[-3:] == ["resume", "thread-1", "-"] and "-C" not in resumed


def test_codex_home_is_never_under_tmpdir(tmp_path):
    env = adapter("codex", **MOCK).env(request("planner", tmp_path))
    assert not Path(env["CODEX_HOME"]).is_relative_to(env["TMPDIR"])
    assert Path(env["CODEX_HOME"]).is_relative_to(tmp_path / "home")


def test_opencode_permissions_never_resolve_to_ask(tmp_path):
    oc = adapter("opencode", **MOCK)
    configs = {r: oc.opencode_config(request(r, tmp_path)) for r in ("planner", "developer", "qa")}
    for config in configs.values():
        assert "ask" not in json.dumps(config["permission"])
        assert config["provider"]["hoh"]["options"]["apiKey"] == "{env:HOH_TEST_KEY}"
    assert configs["planner"]["permission"]["edit"] == "deny" and configs["planner"]["permission"]["bash"] == "deny"
    assert configs["developer"]["permission"]["edit"] == "allow"
    argv = oc.build_argv(request("developer", tmp_path, resume_session="ses_1"))
    assert argv[:4] == ["opencode", "run", "--format", "json"] and argv[argv.index("-s") + 1] == "ses_1"
    assert argv[argv.index("-m") + 1] == "hoh/mock-model"


def test_pi_read_only_roles_get_no_write_tools(tmp_path):
    pi = adapter("pi", **MOCK)
    tools = {r: pi.build_argv(request(r, tmp_path))[5].split(",") for r in ("planner", "developer", "qa")}
    assert not {"edit", "write", "bash"} & set(tools["planner"])
    assert {"edit", "write", "bash"} <= set(tools["developer"])
    argv = pi.build_argv(request("qa", tmp_path, resume_session="abc"))
    assert argv[argv.index("--session") + 1] == "abc" and argv[argv.index("--provider") + 1] == "hoh"


@pytest.mark.parametrize("name", ["codex", "opencode", "pi"])
def test_only_needed_variables_are_forwarded(name, tmp_path, monkeypatch):
    monkeypatch.setenv("HOH_TEST_KEY", "sk-sentinel-abcdef")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-pass")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid")
    env = adapter(name, **MOCK).env(request("developer", tmp_path))
    assert env["HOH_TEST_KEY"] == "sk-sentinel-abcdef"
    assert "OPENAI_API_KEY" not in env and "HTTPS_PROXY" not in env
    assert env["HOME"] == str(tmp_path / "home")


@pytest.mark.parametrize("name", ["codex", "opencode", "pi", "claude"])
def test_a_key_less_endpoint_gets_a_provider_without_a_real_key(name, tmp_path, monkeypatch):
    """`base_url` without `api_key_env`: each CLI is still configured for the endpoint (Pi refuses a provider
    without an `apiKey`, Claude Code runs only with a key), holding at most hoh's placeholder."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-user-own-key")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-user-own-key")
    a = adapter(name, model="mock-model", base_url="http://127.0.0.1:9/v1")
    req = request("developer", tmp_path)
    a.prepare(req)
    argv, env = a.build_argv(req), a.env(req)
    assert "sk-user-own-key" not in json.dumps([argv, env])
    if name == "pi":
        provider = json.loads((tmp_path / "home/.pi/agent/models.json").read_text())["providers"]["hoh"]
        assert provider["apiKey"] == PLACEHOLDER_KEY and PLACEHOLDER_KEY not in os.environ
        assert provider["baseUrl"] == "http://127.0.0.1:9/v1" and option(argv, "--provider") == "hoh"
    elif name == "opencode":
        options = a.opencode_config(req)["provider"]["hoh"]["options"]
        assert options == {"baseURL": "http://127.0.0.1:9/v1"}
    elif name == "codex":
        assert "model_providers.hoh.base_url=http://127.0.0.1:9/v1" in argv
        assert not [o for o in argv if "env_key" in o]
    else:
        assert env["ANTHROPIC_API_KEY"] == PLACEHOLDER_KEY and env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert credential(a).startswith("none: a key-less endpoint")  # what `hoh doctor` says
    own_login = adapter(name).env(request("developer", tmp_path))  # no endpoint: no placeholder either
    assert PLACEHOLDER_KEY not in own_login.values()


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "key-less"])
@pytest.mark.parametrize("name", ["codex", "opencode", "pi", "claude", "scripted"])
def test_behind_hoh_s_proxy_each_cli_sends_the_attempt_s_token_as_its_key(name, keyed, tmp_path, monkeypatch):
    """The proxy serves only requests that carry the attempt's token, key-less endpoint or not: each CLI holds
    it where it reads its key, and no argv or config file hoh writes holds it (Pi and OpenCode name a variable)."""
    monkeypatch.setenv("HOH_TEST_KEY", "sk-sentinel-abcdef")
    config = MOCK if keyed else {k: v for k, v in MOCK.items() if k != "api_key_env"}
    a = adapter(name, **config, **({"script": str(tmp_path / "s.yaml")} if name == "scripted" else {}))
    token = "hoh-" + "t0k3n" * 8
    req = request("developer", tmp_path, endpoint="http://127.0.0.1:47613/v1", egress_token=token,
                  context={"workspace": str(tmp_path)})
    a.prepare(req)
    argv, env = a.build_argv(req), a.env(req)
    variable = "HOH_TEST_KEY" if keyed else "HOH_EGRESS_TOKEN"
    key_var = "ANTHROPIC_API_KEY" if name == "claude" else variable
    assert env[key_var] == token and "sk-sentinel-abcdef" not in json.dumps([argv, env])
    assert token not in json.dumps(argv) and token not in repr(req)
    assert not [p for p in (tmp_path / "home").rglob("*") if p.is_file() and token.encode() in p.read_bytes()]
    if name == "pi":
        provider = json.loads((tmp_path / "home/.pi/agent/models.json").read_text())["providers"]["hoh"]
        assert provider["apiKey"] == variable and provider["baseUrl"] == "http://127.0.0.1:47613/v1"
    elif name == "opencode":
        assert a.opencode_config(req)["provider"]["hoh"]["options"]["apiKey"] == "{env:" + variable + "}"
    elif name == "codex":
        assert f"model_providers.hoh.env_key={variable}" in argv


def option(argv, flag):
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_claude_maps_roles_onto_plan_mode_and_its_sandbox(tmp_path):
    claude = adapter("claude", **{**MOCK, "model": "claude-sonnet-4-5"})
    planner, dev, qa = (request(r, tmp_path) for r in ("planner", "developer", "qa"))
    p_argv, d_argv, q_argv = (claude.build_argv(r) for r in (planner, dev, qa))
    assert p_argv[:5] == ["claude", "-p", "--output-format", "stream-json", "--verbose"]
    # Planner: plan mode, read tools, Bash for read-only commands only, no sandbox needed.
    assert option(p_argv, "--permission-mode") == "plan" and option(p_argv, "--tools") == "Read,Grep,Glob,Bash"
    assert "--settings" not in p_argv and "--allowedTools" not in p_argv
    # Developer and QA: file edits in the cwd, Bash allowed only because it runs in the fail-closed sandbox.
    for argv in (d_argv, q_argv):
        assert option(argv, "--permission-mode") == "acceptEdits" and option(argv, "--allowedTools") == "Bash"
        sandbox = json.loads(option(argv, "--settings"))["sandbox"]
        assert sandbox == {"enabled": True, "failIfUnavailable": True, "autoAllowBashIfSandboxed": True,
                           "allowUnsandboxedCommands": False}
        assert "Write" in option(argv, "--tools").split(",") and "WebFetch" not in option(argv, "--tools")
    assert claude.cwd(dev) == tmp_path / "work" and claude.cwd(qa) == tmp_path / "evidence"
    for argv in (p_argv, d_argv, q_argv):  # never the project's own .claude/settings.json (hooks)
        assert option(argv, "--setting-sources") == "user" and option(argv, "--model") == "claude-sonnet-4-5"
        assert not {"bypassPermissions", "--dangerously-skip-permissions"} & set(argv)
    resumed = claude.build_argv(request("planner", tmp_path, resume_session="sess-1"))
    assert option(resumed, "--resume") == "sess-1"
    assert claude.stdin(planner) == b"p"  # the prompt goes on stdin, not into argv


def test_claude_environment_is_isolated_offline_and_short_on_retries(tmp_path, monkeypatch):
    monkeypatch.setenv("HOH_TEST_KEY", "sk-sentinel-abcdef")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-user-own-key")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid")
    claude = adapter("claude", **MOCK)
    env = claude.env(request("developer", tmp_path, idle_timeout=600))
    home = tmp_path / "home"
    assert env["HOME"] == str(home)
    assert env["CLAUDE_CONFIG_DIR"] == str(home / ".claude") and env["CLAUDE_CODE_TMPDIR"] == str(home / "tmp")
    for switch in ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_TELEMETRY", "DISABLE_AUTOUPDATER",
                   "DISABLE_ERROR_REPORTING"):
        assert env[switch] == "1"
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "1"
    assert int(env["API_TIMEOUT_MS"]) * 2 < 600 * 1000  # two tries end before hoh's idle timeout
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"  # Claude Code appends /v1/messages itself
    assert env["ANTHROPIC_API_KEY"] == "sk-sentinel-abcdef"  # from --api-key-env, not the user's own
    assert "HTTPS_PROXY" not in env and "HOH_TEST_KEY" not in env and "IS_SANDBOX" not in env
    own_login = adapter("claude").env(request("developer", tmp_path))
    assert "ANTHROPIC_API_KEY" not in own_login and "ANTHROPIC_BASE_URL" not in own_login


def test_claude_own_login_copies_only_its_credentials(tmp_path, monkeypatch, isolated_home):
    user = isolated_home / ".claude"
    user.mkdir()
    (user / ".credentials.json").write_text('{"claudeAiOauth": {}}')
    (user / "settings.json").write_text('{"hooks": {}}')
    claude = adapter("claude")
    claude.prepare(request("developer", tmp_path))
    copied = tmp_path / "home" / ".claude"
    assert (copied / ".credentials.json").read_text() == '{"claudeAiOauth": {}}'
    assert (copied / ".credentials.json").stat().st_mode & 0o077 == 0
    assert not (copied / "settings.json").exists()
    adapter("claude", **MOCK).prepare(request("developer", tmp_path / "other"))
    assert not (tmp_path / "other" / "home" / ".claude" / ".credentials.json").exists()


@pytest.mark.parametrize("flag", ["--dangerously-skip-permissions", "--permission-mode=bypassPermissions",
                                  "--allow-dangerously-skip-permissions"])
def test_claude_refuses_a_configuration_that_bypasses_permissions(flag):
    with pytest.raises(HarnessUnavailable, match="never bypasses"):
        adapter("claude", extra_args=[flag]).check_available()


@pytest.mark.parametrize("name", ["codex", "opencode", "pi", "claude"])
def test_configs_written_to_the_isolated_home_hold_no_key_value(name, tmp_path, monkeypatch):
    monkeypatch.setenv("HOH_TEST_KEY", "sk-sentinel-abcdef")
    a = adapter(name, **MOCK)
    for role in ("planner", "developer", "qa"):
        a.prepare(request(role, tmp_path))
        assert "sk-sentinel" not in " ".join(a.build_argv(request(role, tmp_path)))
    home = tmp_path / "home"
    # codex takes its whole endpoint config as -c flags, claude as flags and environment (the key's value only
    # in the child's ANTHROPIC_API_KEY); the others get config files that name the variable.
    expected = {"codex": [], "claude": [], "opencode": [f"opencode-{r}.json" for r in ("planner", "developer", "qa")],
                "pi": [".pi/agent/models.json", ".pi/agent/settings.json"]}[name]
    assert all((home / rel).is_file() for rel in expected)
    assert name != "codex" or (home / ".codex").is_dir()
    written = {p.relative_to(home).as_posix(): p.read_bytes() for p in home.rglob("*") if p.is_file()}
    assert sorted(written) == sorted(expected)
    assert not any(b"sk-sentinel" in data for data in written.values())
    if name not in ("codex", "claude"):
        assert any(b"HOH_TEST_KEY" in data for data in written.values())


def test_redaction_rewrites_saved_logs(tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_text('{"auth": "Bearer sk-sentinel-abcdef"}\n')
    redact_files([log], ["sk-sentinel-abcdef"])
    assert log.read_text() == '{"auth": "Bearer <redacted>"}\n'


def parse(name, case):
    with open(STREAMS / name / f"{case}.jsonl") as fh:
        return adapter(name).parse_events(fh)


@pytest.mark.parametrize("name", ["codex", "opencode", "pi", "claude"])
def test_parsers_read_recorded_successful_runs(name):
    run = parse(name, "success")
    assert run.error_outcome is None
    assert json.loads(run.final_message)["status"] == "done"
    assert run.tool_calls >= 3  # two file writes and one command, through the CLI's own tools
    assert run.usage.input_tokens > 0 and run.usage.output_tokens > 0
    assert run.session_id


def test_claude_parser_reads_cost_and_session_from_the_result_event():
    events = [json.loads(line) for line in (STREAMS / "claude" / "success.jsonl").read_text().splitlines()]
    result = events[-1]
    run = parse("claude", "success")
    assert run.final_message == result["result"] and run.session_id == result["session_id"]
    assert run.usage.cost_usd == result["total_cost_usd"] > 0
    assert run.usage.output_tokens == result["usage"]["output_tokens"]
    assert run.tool_calls == 5 and run.denials == []  # read, write, read, write, bash


def test_claude_parser_records_a_denied_write():
    run = parse("claude", "denied")  # a plan-mode Planner tried `echo hacked > calc.py`; exit code 0
    assert run.error_outcome is None and json.loads(run.final_message) == {"status": "planned"}
    assert [(d["tool"], d["target"]) for d in run.denials] == [("Bash", "echo hacked > calc.py")]
    assert "approval" in run.denials[0]["reason"]


def test_claude_parser_types_a_missing_login():
    run = parse("claude", "nokey")
    assert run.final_message is None and run.error_outcome is Outcome.auth_error and "Not logged in" in run.error
    assert run.usage.cost_usd == 0  # reported by the CLI: nothing was sent, so nothing was spent


def test_claude_parser_keeps_usage_of_a_run_killed_before_its_result():
    lines = (STREAMS / "claude" / "success.jsonl").read_text().splitlines()[:-1]
    run = adapter("claude").parse_events(lines)
    assert run.final_message is None and run.usage.input_tokens > 0 and run.usage.cost_usd is None


RECORDED_OUTCOMES = {"http500": Outcome.model_error, "http400": Outcome.model_error,
                     "http429": Outcome.rate_limited, "close": Outcome.network_error}


@pytest.mark.parametrize("name", ["codex", "opencode", "pi", "claude"])
@pytest.mark.parametrize("case", sorted(RECORDED_OUTCOMES))
def test_parsers_type_recorded_failures(name, case):
    # Each CLI words these differently (and pi exits 0); the adapter's own patterns type them.
    run = parse(name, case)
    assert run.final_message is None
    assert run.error_outcome is RECORDED_OUTCOMES[case] and run.error


def test_pi_model_error_is_caught_although_pi_exits_zero():
    # pi exits 0 in json mode when the model call failed; only the last message says so.
    run = parse("pi", "http500")
    assert run.error_outcome is Outcome.model_error and "500" in run.error


@pytest.mark.parametrize("name", ["codex", "opencode", "pi", "claude"])
def test_parsers_survive_garbage(name):
    lines = ["not json\n", "[1,2]\n", "\x00\xff garbage\n", '{"type": 42}\n']
    lines += (STREAMS / name / "success.jsonl").read_text().splitlines(keepends=True)
    run = adapter(name).parse_events(lines)
    assert json.loads(run.final_message)["status"] == "done"


ERROR_TEXTS = [  # (harness, message, status, outcome): what each CLI really prints (HARNESSES.md)
    ("codex", "exceeded retry limit, last status: 429 Too Many Requests", None, Outcome.rate_limited),
    ("codex", "Missing environment variable: `MOCK_API_KEY`.", None, Outcome.auth_error),
    ("codex", "stream disconnected before completion: error sending request", None, Outcome.network_error),
    ("codex", "We're currently experiencing high demand, which may cause temporary errors.", None, Outcome.model_error),
    ("opencode", "anything", 429, Outcome.rate_limited),
    ("opencode", "Cannot connect to API: The socket connection was closed unexpectedly", None, Outcome.network_error),
    ("opencode", "Incorrect API key provided", 401, Outcome.auth_error),
    ("pi", "429 rate limited", None, Outcome.rate_limited),
    ("pi", "Connection error.", None, Outcome.network_error),
    ("pi", "terminated", None, Outcome.network_error),
    ("pi", "500 mock injected HTTP 500", None, Outcome.model_error),
    ("claude", "API Error: Request rejected (429) · mock injected HTTP 429", 429, Outcome.rate_limited),
    ("claude", "API Error: 529 Overloaded", 529, Outcome.rate_limited),
    ("claude", "Not logged in · Please run /login", None, Outcome.auth_error),
    ("claude", "API Error: Connection dropped (ECONNRESET). Check the gateway set in ANTHROPIC_BASE_URL", None,
     Outcome.network_error),
    ("claude", "API Error: Connection to the API was lost (ECONNRESET). This is usually temporary", None,
     Outcome.network_error),
    ("claude", "Request timed out", None, Outcome.network_error),
    ("claude", "API Error: 500 mock injected HTTP 500. This is a server-side issue", 500, Outcome.model_error),
]


@pytest.mark.parametrize("name,message,status,expected", ERROR_TEXTS)
def test_error_typing_per_harness(name, message, status, expected):
    if name == "pi":
        from hoh.harness.pi import status_of
        status = status_of(message)
    assert adapter(name).outcome_of(message, status) is expected


@pytest.mark.parametrize("name", ["codex", "opencode", "pi", "claude"])
@pytest.mark.parametrize("message", ["the prompt is 14290 tokens long", "file 4013.txt is too big",
                                     "reconnect the socket-less renderer", "a connection string in config"])
def test_numbers_and_words_inside_other_words_are_no_error_class(name, message):
    # Bare substrings once typed "14290 tokens" as a rate limit (and retried it for minutes).
    assert adapter(name).outcome_of(message) is Outcome.model_error


@pytest.mark.skipif(not os.environ.get("HOH_RECORD_STREAMS"), reason="set HOH_RECORD_STREAMS=1 to re-record")
def test_record_streams(harness_bin):
    """Re-record the golden streams from the installed CLIs (HOH_RECORD_STREAMS=1 pytest -k record)."""
    from hoh.testing.mock_llm.record import main as record
    assert record(["--clis", str(harness_bin.parent.parent), "--out", str(STREAMS)]) == 0
