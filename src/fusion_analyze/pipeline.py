"""The pipeline: sources -> locate -> index -> walk -> match -> status -> estimate -> render."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field

from .errors import UserError
from .locate.resolve import Location
from .session import Session
from .walk.walker import Walker, WalkResult


@dataclass
class Analysis:
    session: Session
    location: Location
    walk: WalkResult
    opportunities: list = field(default_factory=list)
    passes: dict = field(default_factory=dict)


def analyze(model: str, vllm_root, ascend_root, backend, patterns_dir=None) -> Analysis:
    session = Session.open(vllm_root, ascend_root, backend, patterns_dir)
    return analyze_in(session, model)


def analyze_in(session: Session, model: str) -> Analysis:
    from .status.derive import derive

    loc = session.resolver.resolve(model)
    walker = Walker(session.index, session.resolver.patches)
    result = walker.walk_model(loc.definition)
    ascend, cuda = session.passes()
    opps = derive(result.ops, session.patterns, session.backend, ascend, cuda)
    return Analysis(session, loc, result, opps, {"ascend": ascend, "cuda": cuda})


def to_json(a: Analysis) -> dict:
    from . import __version__

    errors = [{"file": e.file, "reason": e.reason} for e in sorted(a.session.index.errors.values(), key=lambda e: e.file)]
    return {
        "schema_version": 1,
        "tool": {"name": "fusion-analyze", "version": __version__},
        "backend": a.session.backend,
        "sources": a.location.sources,
        "model": a.location.to_json(),
        "locations": {k: v.to_json() for k, v in sorted(a.walk.locations.items())},
        "repeat": a.walk.repeat,
        "ops": [op.to_json() for op in a.walk.ops],
        "alternatives": _alternatives(a.walk.alternatives),
        "opportunities": [o.to_json() for o in a.opportunities],
        "passes": {k: [p.to_json() for p in v] for k, v in sorted(a.passes.items())},
        "errors": errors,
        "unknown_callees": sorted(a.walk.unknowns, key=lambda u: (u["file"], u["line"], u["name"])),
    }


def _alternatives(items: list[dict]) -> list[dict]:
    seen, out = set(), []
    for alt in items:
        if alt["path"] not in seen:
            seen.add(alt["path"])
            out.append({**alt, "others": [list(o) for o in alt["others"]]})
    return out


def write_output(a: Analysis, fmt: str, output: str | None) -> None:
    if fmt == "json":
        text = json.dumps(to_json(a), indent=2, sort_keys=True) + "\n"
    elif fmt == "md":
        from .render.markdown import render_markdown

        text = render_markdown(a)
    else:
        raise UserError(f"unknown --format {fmt}: use md or json")
    if output in (None, "-"):
        sys.stdout.write(text)
        return
    from pathlib import Path

    path = Path(output)
    tmp = path.with_name(path.name + ".partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)  # a Ctrl-C never leaves a half-written report
    except OSError as exc:
        tmp.unlink(missing_ok=True) if tmp.exists() else None
        raise UserError(f"cannot write {output}: {exc.strerror or exc}; choose a writable -o path")
