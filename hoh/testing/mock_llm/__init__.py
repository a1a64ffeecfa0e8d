"""A scripted, stateless model server for tests (stdlib only): OpenAI Responses and Chat
Completions, and the Anthropic Messages API.

Real harness CLIs (Codex CLI, OpenCode, Pi, Claude Code) run end to end against it; see
HARNESSES.md §1 and HARNESS-claude-code.md §2.

    from hoh.testing.mock_llm import MockLLM
    with MockLLM(script={"developer": {"1": steps}}, log_path="requests.jsonl") as m:
        ...  # point the CLI at m.base_url; m.control(fail_mode="500"); m.requests()

Or as a process: `python -m hoh.testing.mock_llm --port 0 --port-file F --log L.jsonl --script S.json`.

Modules: `server` (HTTP, failure injection, `MockLLM`), `script` (script format and the
stateless decision), `tools` (tool-call arguments from advertised schemas), `responses_api`,
`chat_api` and `messages_api` (the three wire formats), `model` (API-neutral types), `settings` (runtime
settings), `reqlog` (redacted JSONL log), `record` (re-records tests/data/harness_streams
with the real CLIs).
"""

from .script import Script, ScriptError
from .server import MockLLM
from .settings import Settings

__all__ = ["MockLLM", "Script", "ScriptError", "Settings"]
