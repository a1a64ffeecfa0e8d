"""Find the packaged `prompts/` and `schemas/` folders and load from them.

In a wheel they live inside the package (`hoh/prompts`); in a source checkout or an editable
install they are the repository's top-level folders.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

_PACKAGE = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"hoh resource folder '{name}' is missing from the installation")


@cache
def schema(name: str) -> dict[str, Any]:
    """Load `schemas/<name>.schema.json` (e.g. `plan`, `qa`, `ledger`)."""
    return json.loads((resource_dir("schemas") / f"{name}.schema.json").read_text(encoding="utf-8"))


@cache
def validator(name: str) -> jsonschema.protocols.Validator:
    s = schema(name)
    cls = jsonschema.validators.validator_for(s)
    cls.check_schema(s)
    return cls(s)


def schema_errors(name: str, instance: Any) -> list[str]:
    """Every violation of schema `name`, each as `path: message`, in a stable order."""
    errors = sorted(validator(name).iter_errors(instance), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors]
