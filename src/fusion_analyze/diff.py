"""`fusion-analyze diff OLD NEW`: what changed between two reports (JSON files or batch folders).

Ops are matched by their stable id (module path + name), not by line: the same id at another file:line is
"moved". Opportunities are matched by id (scenario @ qualified scope); a status change from a fused state
to `open` is a regression.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UserError
from .status.states import FUSED

MAX_MD = 65536
FAIL_ON = ("any", "regression", "status", "opportunities", "ops", "none")


@dataclass
class ModelDiff:
    architecture: str
    ops_added: list = field(default_factory=list)
    ops_removed: list = field(default_factory=list)
    ops_moved: list = field(default_factory=list)
    opps_added: list = field(default_factory=list)
    opps_removed: list = field(default_factory=list)
    status_changed: list = field(default_factory=list)
    only_in: str | None = None  # "old" / "new" when the model is on one side only

    @property
    def regressions(self) -> list:
        return [c for c in self.status_changed if c["old"] in FUSED and c["new"] == "open"]

    def changed(self) -> bool:
        return bool(self.ops_added or self.ops_removed or self.ops_moved or self.opps_added or self.opps_removed
                    or self.status_changed or self.only_in)

    def to_json(self) -> dict:
        return {"architecture": self.architecture, "only_in": self.only_in,
                "ops": {"added": self.ops_added, "removed": self.ops_removed, "moved": self.ops_moved},
                "opportunities": {"added": self.opps_added, "removed": self.opps_removed,
                                  "status_changed": self.status_changed},
                "regressions": self.regressions}


def _load(path: Path) -> dict[str, dict]:
    """architecture -> report JSON, from one report file or a batch folder of <arch>.json."""
    if path.is_dir():
        files = sorted(f for f in path.glob("*.json") if f.name != "index.json")
        if not files:
            raise UserError(f"{path}: no <arch>.json reports in this folder; run `fusion-analyze all -o {path}` first")
    elif path.is_file():
        files = [path]
    else:
        raise UserError(f"{path}: no such report file or folder")
    out = {}
    for f in files:
        try:
            doc = json.loads(f.read_text(encoding="utf-8"))
            out[doc["model"]["architecture"]] = doc
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
            raise UserError(f"{f}: not a fusion-analyze JSON report ({exc.__class__.__name__}); produce it with --format json")
    return out


def _op_key(op: dict) -> tuple:
    return (op["file"], op["line"])


def diff_model(arch: str, old: dict | None, new: dict | None) -> ModelDiff:
    d = ModelDiff(arch)
    if old is None or new is None:
        d.only_in = "new" if old is None else "old"
        return d
    o_ops = {op["id"]: op for op in old["ops"]}
    n_ops = {op["id"]: op for op in new["ops"]}
    for oid in sorted(n_ops.keys() - o_ops.keys()):
        op = n_ops[oid]
        d.ops_added.append({"id": oid, "kind": op["kind"], "at": f"{op['file']}:{op['line']}"})
    for oid in sorted(o_ops.keys() - n_ops.keys()):
        op = o_ops[oid]
        d.ops_removed.append({"id": oid, "kind": op["kind"], "at": f"{op['file']}:{op['line']}"})
    for oid in sorted(o_ops.keys() & n_ops.keys()):
        a, b = o_ops[oid], n_ops[oid]
        if _op_key(a) != _op_key(b):
            d.ops_moved.append({"id": oid, "from": f"{a['file']}:{a['line']}", "to": f"{b['file']}:{b['line']}"})
    o_opp = {o["id"]: o for o in old.get("opportunities", [])}
    n_opp = {o["id"]: o for o in new.get("opportunities", [])}
    for oid in sorted(n_opp.keys() - o_opp.keys()):
        d.opps_added.append({"id": oid, "status": n_opp[oid]["status"]})
    for oid in sorted(o_opp.keys() - n_opp.keys()):
        d.opps_removed.append({"id": oid, "status": o_opp[oid]["status"]})
    for oid in sorted(o_opp.keys() & n_opp.keys()):
        a, b = o_opp[oid]["status"], n_opp[oid]["status"]
        if a != b:
            d.status_changed.append({"id": oid, "old": a, "new": b})
    return d


def diff_paths(old: str, new: str) -> list[ModelDiff]:
    a, b = _load(Path(old)), _load(Path(new))
    if Path(old).is_file() and Path(new).is_file() and len(a) == len(b) == 1 and a.keys() != b.keys():
        # two single reports of differently named architectures: compare them anyway
        (ka, va), (kb, vb) = next(iter(a.items())), next(iter(b.items()))
        return [diff_model(f"{ka} → {kb}", va, vb)]
    return [diff_model(k, a.get(k), b.get(k)) for k in sorted(a.keys() | b.keys())]


def exit_code(diffs: list[ModelDiff], fail_on: str) -> int:
    if fail_on not in FAIL_ON:
        raise UserError(f"--fail-on {fail_on}: use one of {', '.join(FAIL_ON)}")
    if fail_on == "none":
        return 0
    test = {
        "any": lambda d: d.changed(),
        "regression": lambda d: bool(d.regressions),
        "status": lambda d: bool(d.status_changed),
        "opportunities": lambda d: bool(d.status_changed or d.opps_added or d.opps_removed),
        "ops": lambda d: bool(d.ops_added or d.ops_removed or d.ops_moved),
    }[fail_on]
    return 1 if any(test(d) for d in diffs) else 0


def to_markdown(diffs: list[ModelDiff], old: str, new: str, limit: int = MAX_MD) -> str:
    changed = [d for d in diffs if d.changed()]
    lines = ["## fusion-analyze diff", "", f"`{old}` → `{new}`: {len(changed)} of {len(diffs)} model(s) changed.", ""]
    regress = [(d.architecture, c) for d in diffs for c in d.regressions]
    if regress:
        lines += ["### ⚠ Status regressions", ""]
        lines += [f"- **{a}** `{c['id']}`: {c['old']} → {c['new']}" for a, c in regress]
        lines.append("")
    for d in changed:
        lines.append(f"### {d.architecture}")
        if d.only_in:
            lines += [f"only in the {d.only_in} side", ""]
            continue
        if d.status_changed:
            lines += ["", "| opportunity | old | new |", "|---|---|---|"]
            lines += [f"| `{c['id']}` | {c['old']} | {c['new']} |" for c in d.status_changed]
        for title, items, fmt in (
            ("opportunities added", d.opps_added, lambda o: f"`{o['id']}` ({o['status']})"),
            ("opportunities removed", d.opps_removed, lambda o: f"`{o['id']}` (was {o['status']})"),
            ("ops added", d.ops_added, lambda o: f"`{o['id']}` {o['kind']} at {o['at']}"),
            ("ops removed", d.ops_removed, lambda o: f"`{o['id']}` {o['kind']} at {o['at']}"),
            ("ops moved", d.ops_moved, lambda o: f"`{o['id']}` {o['from']} → {o['to']}"),
        ):
            if items:
                lines += ["", f"{title} ({len(items)}):"] + [f"- {fmt(o)}" for o in items]
        lines.append("")
    text = "\n".join(lines).rstrip() + "\n"
    if len(text) > limit:
        note = f"\n… truncated: the full diff is {len(text)} characters; use --format json for all of it.\n"
        text = text[: limit - len(note)].rsplit("\n", 1)[0] + "\n" + note
    return text


def to_json(diffs: list[ModelDiff], old: str, new: str) -> str:
    return json.dumps({"old": old, "new": new, "models": [d.to_json() for d in diffs if d.changed()]},
                      indent=2, sort_keys=True, ensure_ascii=False) + "\n"
