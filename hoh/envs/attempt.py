"""One role attempt, wherever it runs: the one path every attempt of every harness takes.

    the request placed (`Executor.placed`: hoh's proxy, the program site)
      → the adapter's files and launch (`prepare`, `build_argv`, `env`, `stdin`; the jail's paths for its CLI)
      → run by the executor (this machine's jail or an environment)
      → the streams scrubbed of every secret and the attempt's token
      → parsed by the adapter, classified, priced

None of it depends on the CLI beyond the adapter's pure methods, and the adapter never sees the executor.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

from ..harness.attempt import HarnessResult, Outcome, ParsedRun, RoleRequest
from ..harness.base import HarnessAdapter
from ..harness.pricing import cost_usage
from ..harness.secrets import redact, redact_files, scrub_attempt, unlink_links
from .base import Executor, Launch
from .egress.route import proxy_env
from .local.executor import LOCAL


def run_attempt(adapter: HarnessAdapter, request: RoleRequest, attempt_dir: Path, executor: Executor = LOCAL,
                on_spawn: Callable[[int], None] | None = None) -> HarnessResult:
    """One attempt of `adapter`'s CLI for `request`, run by `executor`, its files in `attempt_dir`.

    Raises:
        EnvironmentUnavailable: the executor's place cannot run anything (`Executor.placed`). What the CLI
        did, however it failed, is the result's outcome, never raised.
    """
    with executor.placed(adapter, request, attempt_dir) as placed:
        result = _run(adapter, placed, attempt_dir, executor, on_spawn)
    adapter.tidy(request)
    return result


def launch_of(adapter: HarnessAdapter, request: RoleRequest) -> Launch:
    """The process of one attempt as the adapter builds it, with the jail's paths its CLI needs to read."""
    argv, env = adapter.build_argv(request), adapter.env(request)
    if request.proxy_url:
        env.update(proxy_env(request.proxy_url))
    jail = request.jail
    if jail is not None:
        jail = dataclasses.replace(jail, read_only=(*jail.read_only, *adapter.jail_paths(request)))
    return Launch(argv, adapter.cwd(request), env, adapter.stdin(request), jail)


def _run(adapter: HarnessAdapter, request: RoleRequest, attempt_dir: Path, executor: Executor,
         on_spawn: Callable[[int], None] | None) -> HarnessResult:
    if request.home is not None:
        unlink_links(request.home)
    adapter.prepare(request)
    execution = executor.execute(launch_of(adapter, request), request, attempt_dir, on_spawn)
    proc = execution.process
    secrets = adapter.secrets(request)
    scrub_attempt([proc.stdout_path, proc.stderr_path], request.home, secrets,
                  keep=[copy for _source, copy in adapter.logins(request)])
    if request.egress_token:  # dead now that the attempt is over, yet no file of hoh's keeps it
        redact_files([proc.stdout_path, proc.stderr_path], [request.egress_token])
        secrets = [*secrets, request.egress_token]
    proc = dataclasses.replace(proc, stderr_excerpt=redact(proc.stderr_excerpt, secrets))
    with open(proc.stdout_path, encoding="utf-8", errors="replace") as fh:
        try:
            parsed = adapter.parse_events(fh)
        except Exception as err:  # noqa: BLE001 - an agent controls this stream; hoh must survive any of it
            parsed = ParsedRun(error=f"unreadable event stream ({type(err).__name__})", error_outcome=Outcome.crashed)
    if execution.setup_error:
        outcome, error = Outcome.jail_error, execution.setup_error
    else:
        outcome, error = adapter.classify(proc, parsed)
    error = redact(error, secrets) if error else error
    usage, source = cost_usage(parsed.usage, adapter.config, adapter.reported_cost_counts())
    return HarnessResult(outcome, parsed.final_message, usage, parsed.tool_calls, parsed.session_id,
                         proc.exit_code, proc.duration_s, error, parsed.denials, source)
