"""`fusion-analyze diff OLD NEW`: what changed between two reports (JSON files or batch folders).

Ops are matched by their stable id (module path + name), not by line: the same id at another file:line is
"moved". Opportunities are matched by id (scenario @ qualified scope); a status change from a fused state
to `open` is a regression. A scenario that left one scope and appeared at another with the other side of
fused / open (its unfused form replaced by a fused kernel's call in a patch) is one transition, not a
removal plus an addition. The Markdown puts the transitions first, across models, and folds line moves.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError
from ..ir.states import FUSED

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
    _pair_forms(d)
    return d


def _fused_side(status: str) -> bool | None:
    return True if status in FUSED else False if status == "open" else None


def _pair_forms(d: ModelDiff) -> None:
    """A removed and an added opportunity of one scenario, one open and the other fused: one transition."""
    for gone in list(d.opps_removed):
        scenario = gone["id"].split("@", 1)[0]
        side = _fused_side(gone["status"])
        match = next((o for o in d.opps_added if o["id"].split("@", 1)[0] == scenario and side is not None
                      and _fused_side(o["status"]) is (not side)), None)
        if match is None:
            continue
        d.opps_removed.remove(gone)
        d.opps_added.remove(match)
        d.status_changed.append({"id": match["id"], "was": gone["id"], "old": gone["status"], "new": match["status"]})
    d.status_changed.sort(key=lambda c: c["id"])


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


def _transition_order(c: dict) -> tuple:
    """Now fused first, then regressions, then the other changes."""
    now_fused = c["new"] in FUSED and c["old"] not in FUSED
    return (0 if now_fused else 1 if c["old"] in FUSED and c["new"] == "open" else 2, c["id"])


def to_markdown(diffs: list[ModelDiff], old: str, new: str, limit: int = MAX_MD) -> str:
    changed = [d for d in diffs if d.changed()]
    lines = ["## fusion-analyze diff", "", f"`{old}` → `{new}`: {len(changed)} of {len(diffs)} model(s) changed.", ""]
    transitions = sorted(((d.architecture, c) for d in diffs for c in d.status_changed),
                         key=lambda ac: (_transition_order(ac[1]), ac[0]))
    regress = [(d.architecture, c) for d in diffs for c in d.regressions]
    if regress:
        lines += ["### ⚠ Status regressions", ""]
        lines += [f"- **{a}** `{c['id']}`: {c['old']} → {c['new']}" for a, c in regress]
        lines.append("")
    if transitions:
        lines += ["### Status transitions", "", "| model | opportunity | old | new |", "|---|---|---|---|"]
        for a, c in transitions:
            was = f" (was `{c['was']}`)" if c.get("was") else ""
            lines.append(f"| {a} | `{c['id']}`{was} | {c['old']} | {c['new']} |")
        lines.append("")
    for d in changed:
        lines.append(f"### {d.architecture}")
        if d.only_in:
            lines += [f"only in the {d.only_in} side", ""]
            continue
        for title, items, fmt in (
            ("opportunities added", d.opps_added, lambda o: f"`{o['id']}` ({o['status']})"),
            ("opportunities removed", d.opps_removed, lambda o: f"`{o['id']}` (was {o['status']})"),
            ("ops added", d.ops_added, lambda o: f"`{o['id']}` {o['kind']} at {o['at']}"),
            ("ops removed", d.ops_removed, lambda o: f"`{o['id']}` {o['kind']} at {o['at']}"),
        ):
            if items:
                lines += ["", f"{title} ({len(items)}):"] + [f"- {fmt(o)}" for o in items]
        if d.ops_moved:  # line shifts only: one count, the list folded
            lines += ["", "<details><summary>" + f"ops moved ({len(d.ops_moved)}): the same ops at other lines"
                      + "</summary>", ""]
            lines += [f"- `{o['id']}` {o['from']} → {o['to']}" for o in d.ops_moved]
            lines += ["", "</details>"]
        if d.status_changed and not (d.opps_added or d.opps_removed or d.ops_added or d.ops_removed or d.ops_moved):
            lines += ["", f"{len(d.status_changed)} status transition(s), listed above."]
        lines.append("")
    text = "\n".join(lines).rstrip() + "\n"
    if len(text) > limit:
        note = f"\n… truncated: the full diff is {len(text)} characters; use --format json for all of it.\n"
        text = text[: limit - len(note) - 12].rsplit("\n", 1)[0] + "\n"
        if text.rfind("<details>") > text.rfind("</details>"):
            text += "</details>\n"  # a cut list still folds
        text += note
    return text


def to_json(diffs: list[ModelDiff], old: str, new: str) -> str:
    return json.dumps({"old": old, "new": new, "models": [d.to_json() for d in diffs if d.changed()]},
                      indent=2, sort_keys=True, ensure_ascii=False) + "\n"
