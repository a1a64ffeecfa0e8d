"""`python3 -m hoh.taskrun`: run hoh on a task's workdir inside its environment (started by hoh.harbor)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..paths import TaskRunPaths
from .driver import TaskRunSettings, run


def parse_args(argv: list[str] | None = None) -> TaskRunSettings:
    p = argparse.ArgumentParser(prog="python3 -m hoh.taskrun", description=__doc__)
    p.add_argument("--spec", required=True, type=Path, help="the task's instruction (hoh's spec)")
    p.add_argument("--project", required=True, type=Path, help="the task's working directory")
    p.add_argument("--config", required=True, type=Path, help="the hoh.yaml to start from")
    p.add_argument("--loops", required=True, type=int)
    p.add_argument("--logs", default="/logs/agent", help="Harbor's agent log dir (the workspace goes here)")
    p.add_argument("--artifacts", default="/logs/artifacts", help="Harbor's artifacts dir (one candidate per loop)")
    p.add_argument("--budget", type=float, help="seconds for the whole run, from now")
    p.add_argument("--mock-llm", type=Path, help="serve this mock model script here and use it")
    args = p.parse_args(argv)
    if args.loops < 1:
        p.error("--loops must be at least 1")
    absolute = lambda path: Path(path).resolve() if path else None  # noqa: E731
    return TaskRunSettings(spec=absolute(args.spec), project=absolute(args.project), config=absolute(args.config),
                           loops=args.loops, paths=TaskRunPaths(absolute(args.logs), absolute(args.artifacts)),
                           budget_seconds=args.budget, mock_llm=absolute(args.mock_llm))


if __name__ == "__main__":
    sys.exit(run(parse_args()))
