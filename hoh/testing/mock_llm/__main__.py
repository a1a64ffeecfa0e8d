"""`python -m hoh.testing.mock_llm`: run the mock model server until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from .script import ScriptError
from .server import MockLLM
from .settings import FAIL_MODES, TOOL_PREFS


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m hoh.testing.mock_llm", description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 = pick a free port (see --port-file)")
    p.add_argument("--port-file", help="write the bound port here once listening")
    p.add_argument("--log", help="append one JSON line per model request here")
    p.add_argument("--script", help="JSON script of steps per role/loop (default: write hello.txt)")
    p.add_argument("--fail-mode", choices=FAIL_MODES, default="none")
    p.add_argument("--fail-count", type=int, default=-1, help="-1 = forever")
    p.add_argument("--retry-after-ms", type=int)
    p.add_argument("--stall-seconds", type=float, default=30.0)
    p.add_argument("--stall-after-frames", type=int, default=0, help="frames sent before a stall goes silent")
    p.add_argument("--final-text", help="replace every final message")
    p.add_argument("--minimal-sse", action="store_true", help="send the minimal SSE form")
    p.add_argument("--tool-pref", choices=TOOL_PREFS, default="write")
    p.add_argument("--require-key", action="store_true", help="answer 401 to a model request without a key")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        mock = MockLLM(script=args.script, log_path=args.log, host=args.host, port=args.port,
                       fail_mode=args.fail_mode, fail_count=args.fail_count,
                       retry_after_ms=args.retry_after_ms, stall_seconds=args.stall_seconds,
                       stall_after_frames=args.stall_after_frames,
                       final_text=args.final_text, minimal_sse=args.minimal_sse, tool_pref=args.tool_pref,
                       require_key=args.require_key)
    except (ScriptError, ValueError) as exc:
        print(f"mock_llm: {exc}", file=sys.stderr)
        return 2
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    mock.start(port_file=args.port_file)
    print(f"mock_llm listening on {mock.base_url}", file=sys.stderr, flush=True)
    try:
        done.wait()
    finally:
        mock.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
