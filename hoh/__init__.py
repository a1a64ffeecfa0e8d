"""hoh — Harness-of-Harness: a deterministic runtime that drives a coding-agent CLI
through Planner → Developer → QA loops."""

__version__ = "0.1.0"
