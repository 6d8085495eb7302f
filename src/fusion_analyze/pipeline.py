"""The pipeline: sources -> locate -> index -> walk -> match -> status -> estimate -> render."""

from __future__ import annotations

import json

from .session import Session


def analyze(model: str, vllm_root, ascend_root, backend):
    session = Session.open(vllm_root, ascend_root, backend)
    loc = session.resolver.resolve(model)
    return {"model": loc.to_json()}


def write_output(result, fmt: str, output):
    import sys
    sys.stdout.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
