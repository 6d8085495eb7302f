"""`fusion-analyze diff OLD NEW`: what changed between two reports (JSON files or batch folders).

What counts as a change: evidence is compared by file and by what it says, never by line, so code that only
moved within its file is no change at all (an op whose id and file stay is the same op, wherever its line
went; a line number inside an evidence text is ignored too). Ops are matched by their stable id (module path
+ name): an op found in another file is "moved to another file". Opportunities are matched by id (scenario @
qualified scope); a status change from a fused state to `open` is a regression, from `open` to a fused state
a new fusion. A scenario that left one scope and appeared at another with the other side of fused / open (its
unfused form replaced by a fused kernel's call in a patch) is one transition, not a removal plus an addition.
A scenario fused on both sides, but by something else (the first evidence, what fuses it, differs in file or
text), is a change too.

Regressions and new fusions are grouped across models by their cause: what fused the scenario on the side
where it was fused (the graph pass, the kernel, the patch's kernel or the fused layer class of the first
evidence), said once with its old and new evidence, whether the other side still has it, and the models it
touches. The Markdown (sized for a pull-request comment) is that summary, then one collapsible block per
changed model.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError
from ..ir.states import FUSED

MAX_MD = 65536
FAIL_ON = ("regression", "any", "status", "opportunities", "ops", "none")  # the first is the default
DEFAULT_FAIL_ON = FAIL_ON[0]

_LINE_REF = re.compile(r"(\.py):\d+|\bL\d+\b")


def _norm(what: str | None) -> str:
    """An evidence text without the line numbers it quotes (`x.py:65` -> `x.py`, `L65` -> `L`)."""
    return _LINE_REF.sub(lambda m: m.group(1) or "L", what or "").strip()


def _fuser(opp: dict) -> dict | None:
    """What fuses a fused opportunity: its first evidence (file, line, what); None for other states."""
    if opp.get("status") not in FUSED or not opp.get("evidence"):
        return None
    e = opp["evidence"][0]
    return {"file": e.get("file"), "line": e.get("line"), "what": e.get("what") or ""}


def _same(a: dict | None, b: dict | None) -> bool:
    if a is None or b is None:
        return a is b
    return a["file"] == b["file"] and _norm(a["what"]) == _norm(b["what"])


@dataclass
class ModelDiff:
    architecture: str
    ops_added: list = field(default_factory=list)
    ops_removed: list = field(default_factory=list)
    ops_moved: list = field(default_factory=list)  # to another file; a move within a file is no change
    opps_added: list = field(default_factory=list)
    opps_removed: list = field(default_factory=list)
    status_changed: list = field(default_factory=list)
    fuser_changed: list = field(default_factory=list)  # fused on both sides, by something else
    line_moves: int = 0  # ops at another line of the same file: counted, never a change
    only_in: str | None = None  # "old" / "new" when the model is on one side only

    @property
    def regressions(self) -> list:
        return [c for c in self.status_changed if c["old"] in FUSED and c["new"] == "open"]

    @property
    def new_fusions(self) -> list:
        return [c for c in self.status_changed if c["old"] == "open" and c["new"] in FUSED]

    @property
    def other_changes(self) -> list:
        return [c for c in self.status_changed if not (c["old"] in FUSED and c["new"] == "open")
                and not (c["old"] == "open" and c["new"] in FUSED)]

    def changed(self) -> bool:
        return bool(self.ops_added or self.ops_removed or self.ops_moved or self.opps_added or self.opps_removed
                    or self.status_changed or self.fuser_changed or self.only_in)

    def to_json(self) -> dict:
        return {"architecture": self.architecture, "only_in": self.only_in,
                "ops": {"added": self.ops_added, "removed": self.ops_removed, "moved": self.ops_moved,
                        "line_moves": self.line_moves},
                "opportunities": {"added": self.opps_added, "removed": self.opps_removed,
                                  "status_changed": self.status_changed, "fuser_changed": self.fuser_changed},
                "regressions": self.regressions, "new_fusions": self.new_fusions}


class Diffs(list):
    """The ModelDiffs of one comparison, with what each side has (passes, kernels, layer classes) across all of
    its reports: whether the thing that fused a scenario is still there, or was there before; and the releases
    each side's reports were made from (their `sources`)."""

    def __init__(self, items=(), names: dict | None = None, sources: dict | None = None):
        super().__init__(items)
        self.names = names  # {"old": {"pass": set, "kernel": set, "class": set}, "new": {...}}
        self.sources = sources or {}  # {"old": {"vllm": {"version": ...}, ...}, "new": {...}}


def _sources(docs) -> dict:
    """The trees one side's reports name (their `sources`): the first report's, with any version another report
    names besides it joined with ' / ' (a folder made from one release pair has one)."""
    out: dict = {}
    for doc in docs:
        for tree, src in sorted((doc.get("sources") or {}).items()):
            version = (src or {}).get("version") if isinstance(src, dict) else None
            if not version:
                continue
            seen = out.setdefault(tree, {"version": version})
            if version not in seen["version"].split(" / "):
                seen["version"] += f" / {version}"
    return out


TREE_NAMES = (("vllm", "vLLM"), ("vllm_ascend", "vllm-ascend"), ("transformers", "transformers"))


def release_label(sources: dict | None) -> str:
    """'vLLM 0.30.0 + vllm-ascend 0.30.0rc2': the releases of one side, from its reports' sources."""
    given = sources or {}
    parts = [f"{name} {given[key]['version']}" for key, name in TREE_NAMES if given.get(key)]
    return " + ".join(parts)


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


def _at(op: dict) -> str:
    return f"{op['file']}:{op['line']}"


def _entry(old: dict, new: dict, was: str | None = None) -> dict:
    """A status change, with what the cause grouping and the CI formats need from both sides."""
    title = new.get("title") or old.get("title")
    c = {"id": new["id"], "old": old["status"], "new": new["status"],
         "scenario": new.get("scenario") or new["id"].split("@", 1)[0],
         "title": title.get("en") if isinstance(title, dict) else title, "category": new.get("category"),
         "file": new.get("file"), "line": new.get("line"), "old_file": old.get("file"), "old_line": old.get("line"),
         "old_fuser": _fuser(old), "new_fuser": _fuser(new), "old_note": old.get("note"), "new_note": new.get("note")}
    if was is not None:
        c["was"] = was
    return {k: v for k, v in c.items() if v is not None}


def diff_model(arch: str, old: dict | None, new: dict | None) -> ModelDiff:
    d = ModelDiff(arch)
    if old is None or new is None:
        d.only_in = "new" if old is None else "old"
        return d
    o_ops = {op["id"]: op for op in old["ops"]}
    n_ops = {op["id"]: op for op in new["ops"]}
    for oid in sorted(n_ops.keys() - o_ops.keys()):
        op = n_ops[oid]
        d.ops_added.append({"id": oid, "kind": op["kind"], "at": _at(op)})
    for oid in sorted(o_ops.keys() - n_ops.keys()):
        op = o_ops[oid]
        d.ops_removed.append({"id": oid, "kind": op["kind"], "at": _at(op)})
    for oid in sorted(o_ops.keys() & n_ops.keys()):
        a, b = o_ops[oid], n_ops[oid]
        if a["file"] != b["file"]:
            d.ops_moved.append({"id": oid, "from": _at(a), "to": _at(b)})
        elif a["line"] != b["line"]:
            d.line_moves += 1
    o_opp = {o["id"]: o for o in old.get("opportunities", [])}
    n_opp = {o["id"]: o for o in new.get("opportunities", [])}
    for oid in sorted(n_opp.keys() - o_opp.keys()):
        d.opps_added.append({"id": oid, "status": n_opp[oid]["status"]})
    for oid in sorted(o_opp.keys() - n_opp.keys()):
        d.opps_removed.append({"id": oid, "status": o_opp[oid]["status"]})
    for oid in sorted(o_opp.keys() & n_opp.keys()):
        a, b = o_opp[oid], n_opp[oid]
        if a["status"] != b["status"]:
            d.status_changed.append(_entry(a, b))
        elif not _same(_fuser(a), _fuser(b)):
            d.fuser_changed.append({"id": oid, "status": b["status"], "old_fuser": _fuser(a), "new_fuser": _fuser(b)})
    _pair_forms(d, o_opp, n_opp)
    return d


def _fused_side(status: str) -> bool | None:
    return True if status in FUSED else False if status == "open" else None


def _pair_forms(d: ModelDiff, o_opp: dict, n_opp: dict) -> None:
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
        d.status_changed.append(_entry(o_opp[gone["id"]], n_opp[match["id"]], was=gone["id"]))
    d.status_changed.sort(key=lambda c: c["id"])


def _names(docs) -> dict[str, set]:
    """The passes, kernels and layer classes one side's reports show (for "is it still there")."""
    out: dict[str, set] = {"pass": set(), "kernel": set(), "class": set()}
    for doc in docs:
        passes = doc.get("passes") or {}
        for p in (passes.get("ascend") or []) + (passes.get("cuda") or []):
            out["pass"].add(p.get("name"))
        for op in doc.get("ops", []):
            out["kernel"].update(k.get("name") for k in op.get("kernels") or [])
            out["class"].add(op.get("layer_class"))
            out["class"].add((op.get("attrs") or {}).get("ascend_class"))
        for o in doc.get("opportunities", []):
            f = _fuser(o)
            if f is not None:
                kind, subject = cause_of(o["status"], f)
                out["class" if kind == "class" else "kernel" if kind in ("kernel", "patch") else "pass"].add(subject)
    for names in out.values():
        names.discard(None)
    return out


def diff_paths(old: str, new: str, different_models: bool = False) -> Diffs:
    a, b = _load(Path(old)), _load(Path(new))
    names = {"old": _names(a.values()), "new": _names(b.values())}
    sources = {"old": _sources(a.values()), "new": _sources(b.values())}
    if Path(old).is_file() and Path(new).is_file() and len(a) == len(b) == 1 and a.keys() != b.keys():
        (ka, va), (kb, vb) = next(iter(a.items())), next(iter(b.items()))
        if not different_models:
            raise UserError(f"{old} is a report of {ka}, {new} of {kb}: diff compares one model across trees or "
                            f"deployments; pass --different-models to compare two models anyway")
        return Diffs([diff_model(f"{ka} → {kb}", va, vb)], names, sources)
    return Diffs([diff_model(k, a.get(k), b.get(k)) for k in sorted(a.keys() | b.keys())], names, sources)


def exit_code(diffs: list[ModelDiff], fail_on: str) -> int:
    if fail_on not in FAIL_ON:
        raise UserError(f"--fail-on {fail_on}: use one of {', '.join(FAIL_ON)}")
    if fail_on == "none":
        return 0
    test = {
        "any": lambda d: d.changed(),
        "regression": lambda d: bool(d.regressions),
        "status": lambda d: bool(d.status_changed),
        "opportunities": lambda d: bool(d.status_changed or d.fuser_changed or d.opps_added or d.opps_removed),
        "ops": lambda d: bool(d.ops_added or d.ops_removed or d.ops_moved),
    }[fail_on]
    return 1 if any(test(d) for d in diffs) else 0


# --- causes ---------------------------------------------------------------------------------------------------

KIND_LABEL = {"pass": "Ascend graph pass", "kernel": "Ascend kernel", "patch": "kernel of a vllm-ascend patch",
              "class": "fused layer class", "layer": "fused layer", "unknown": "a fused state without evidence"}


def cause_of(status: str, fuser: dict | None) -> tuple[str, str]:
    """(kind, subject): the graph pass, kernel, patch kernel or layer class that fuses a scenario."""
    if fuser is None:
        return "unknown", status
    what = _norm(fuser["what"])
    head = re.split(r" \(|; ", what, maxsplit=1)[0].strip()
    if status == "fused_by_ascend_graph_pass":
        return "pass", head
    if status == "fused_by_ascend_kernel":
        return ("patch" if (fuser.get("file") or "").startswith("vllm_ascend/patch/") else "kernel"), head
    if what.startswith("class "):
        return "class", what[len("class "):].split(":", 1)[0].strip()
    return "layer", what


def _presence(kind: str, subject: str, names: dict | None, regression: bool) -> str | None:
    """Whether the other side still has (a regression) or already had (a new fusion) what fuses."""
    if names is None or kind in ("layer", "unknown"):
        return None
    side = names["new" if regression else "old"]
    there = subject in side["kernel" if kind == "patch" else kind]
    if kind == "pass":
        return ("still in the new tree" if there else "gone: the new tree has no such pass") if regression else \
            ("in the old tree already" if there else "new: the old tree had no such pass")
    if regression:
        return "still used by other models of the new side" if there else "gone: no model of the new side uses it"
    return "used by other models of the old side already" if there else "new: no model of the old side used it"


def group_causes(diffs: list[ModelDiff], regression: bool = True) -> list[dict]:
    """Regressions (or new fusions) of every model, grouped by what fused them; the largest cause first."""
    names = getattr(diffs, "names", None)
    causes: dict[tuple, dict] = {}
    for d in diffs:
        for c in (d.regressions if regression else d.new_fusions):
            fuser = c.get("old_fuser") if regression else c.get("new_fuser")
            status = c["old"] if regression else c["new"]
            kind, subject = cause_of(status, fuser)
            cause = causes.setdefault((kind, subject), {
                "kind": kind, "subject": subject, "status": Counter(), "evidence": {}, "other_side": Counter(),
                "scenarios": Counter(), "models": [], "opportunities": [],
                "presence": _presence(kind, subject, names, regression)})
            cause["status"][status] += 1
            if fuser is not None:
                cause["evidence"].setdefault((fuser["file"], _norm(fuser["what"])), fuser)
            note = c.get("new_note") if regression else c.get("old_note")
            cause["other_side"][note or "open, no note"] += 1
            cause["scenarios"][c["scenario"]] += 1
            if d.architecture not in cause["models"]:
                cause["models"].append(d.architecture)
            cause["opportunities"].append({"architecture": d.architecture, "id": c["id"], "old": c["old"],
                                           "new": c["new"]})
    out = sorted(causes.values(), key=lambda c: (-len(c["opportunities"]), c["kind"], c["subject"]))
    for i, c in enumerate(out, 1):
        c["number"] = i
    return out


def _cause_json(c: dict) -> dict:
    return {"number": c["number"], "kind": c["kind"], "subject": c["subject"], "presence": c["presence"],
            "status": dict(sorted(c["status"].items())), "evidence": list(c["evidence"].values()),
            "other_side": [{"note": n, "count": k} for n, k in c["other_side"].most_common()],
            "scenarios": dict(sorted(c["scenarios"].items())), "models": c["models"],
            "opportunities": c["opportunities"]}


def cause_label(c: dict) -> str:
    return f"{KIND_LABEL[c['kind']]} `{c['subject']}`" if c["kind"] != "unknown" else f"`{c['subject']}` without evidence"


# --- Markdown -------------------------------------------------------------------------------------------------

def _cut(text: str, n: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def _names_list(names: list[str], cap: int | None) -> str:
    if cap is None or len(names) <= cap:
        return ", ".join(names)
    return ", ".join(names[:cap]) + f", … and {len(names) - cap} more"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _cause_md(c: dict, regression: bool, cap: int | None) -> list[str]:
    n, models = len(c["opportunities"]), c["models"]
    head = f"**{'R' if regression else 'F'}{c['number']}. {cause_label(c)}**"
    if c["presence"]:
        head += f": {c['presence']}"
    lines = [head + f" · {_plural(n, 'scenario')} in {_plural(len(models), 'model')}"]
    evidence = list(c["evidence"].values())
    said = "; ".join(f"`{e['file']}` L{e['line']}: {_cut(e['what'])}" for e in evidence[:3])
    if len(evidence) > 3:
        said += f"; and {len(evidence) - 3} more places"
    states = ", ".join(f"{s} ({k})" if len(c["status"]) > 1 else s for s, k in sorted(c["status"].items()))
    fused_line = f"{states}: {said}" if said else states
    other = c["other_side"].most_common()
    other_said = "; ".join(f"{_cut(note)} ({k})" if len(other) > 1 else _cut(note) for note, k in other[:3])
    if len(other) > 3:
        other_said += f"; {len(other) - 3} other notes"
    if regression:
        lines += [f"- old: {fused_line}", f"- new: {other_said}"]
    else:
        lines += [f"- old: {other_said}", f"- new: {fused_line}"]
    lines.append("- scenarios: " + ", ".join(f"`{s}` ({k})" for s, k in sorted(c["scenarios"].items())))
    lines += [f"- models: {_names_list(models, cap)}", ""]
    return lines


def _cell(file: str, what: str) -> str:
    return f"`{file}`: {what}".replace("|", "\\|")


def _other_md(diffs: list[ModelDiff], cap: int | None) -> list[str]:
    """Status changes that are neither regressions nor new fusions, and scenarios fused on both sides by
    something else, each kind of change once with its models."""
    rows: dict[str, list] = {}
    for d in diffs:
        for c in d.other_changes:
            rows.setdefault(f"{c['old']} → {c['new']}", []).append(d.architecture)
    fusers: dict[tuple, list] = {}
    for d in diffs:
        for c in d.fuser_changed:
            o, n = c["old_fuser"], c["new_fuser"]
            fusers.setdefault((c["status"], o["file"], _cut(_norm(o["what"]), 90), n["file"], _cut(_norm(n["what"]), 90)),
                              []).append(d.architecture)
    lines = []
    if rows:
        lines += ["### Other status changes", "", "| change | scenarios | models |", "|---|---|---|"]
        for change, archs in sorted(rows.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            lines.append(f"| {change} | {len(archs)} | {_names_list(sorted(set(archs)), cap)} |")
        lines.append("")
    if fusers:
        lines += ["### Fused on both sides, by something else", "", "| status | old | new | scenarios | models |",
                  "|---|---|---|---|---|"]
        for (status, of, ow, nf, nw), archs in sorted(fusers.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            lines.append(f"| {status} | {_cell(of, ow)} | {_cell(nf, nw)} | {len(archs)} | "
                         f"{_names_list(sorted(set(archs)), cap)} |")
        lines.append("")
    return lines


def _model_summary(d: ModelDiff) -> str:
    parts = [(len(d.regressions), "regression", "regressions"), (len(d.new_fusions), "new fusion", "new fusions"),
             (len(d.other_changes), "other status change", "other status changes"),
             (len(d.fuser_changed), "fused by something else", "fused by something else"),
             (len(d.opps_added), "opportunity added", "opportunities added"),
             (len(d.opps_removed), "opportunity removed", "opportunities removed"),
             (len(d.ops_added), "op added", "ops added"), (len(d.ops_removed), "op removed", "ops removed"),
             (len(d.ops_moved), "op moved to another file", "ops moved to another file")]
    return " · ".join(f"{n} {one if n == 1 else many}" for n, one, many in parts if n)


def _listed(title: str, items: list, fmt, cap: int) -> list[str]:
    if not items:
        return []
    if cap == 0:  # the block's summary says the count
        return []
    lines = [f"- {title} ({len(items)}):"] + [f"  - {fmt(o)}" for o in items[:cap]]
    if len(items) > cap:
        lines.append(f"  - … and {len(items) - cap} more")
    return lines


def _model_md(d: ModelDiff, numbers: dict, cap: int) -> str:
    """One model's changes in a <details> block; lists of ops and opportunities show `cap` items each."""
    lines = [f"<details><summary><b>{d.architecture}</b>: {_model_summary(d)}</summary>", ""]
    for c in d.status_changed:
        regression, fusion = c["old"] in FUSED and c["new"] == "open", c["old"] == "open" and c["new"] in FUSED
        mark = "⚠ " if regression else "✅ " if fusion else ""
        was = f" (was `{c['was']}`)" if c.get("was") else ""
        cause = numbers.get((d.architecture, c["id"]))
        because = f" (cause {cause})" if cause else ""
        lines.append(f"- {mark}`{c['id']}`{was}: {c['old']} → {c['new']}{because}")
    for c in d.fuser_changed:
        o, n = c["old_fuser"], c["new_fuser"]
        lines.append(f"- `{c['id']}` ({c['status']}): was `{o['file']}`: {_cut(o['what'], 100)}; "
                     f"now `{n['file']}`: {_cut(n['what'], 100)}")
    lines += _listed("opportunities added", d.opps_added, lambda o: f"`{o['id']}` ({o['status']})", cap and cap + 3)
    lines += _listed("opportunities removed", d.opps_removed, lambda o: f"`{o['id']}` (was {o['status']})", cap and cap + 3)
    lines += _listed("ops added", d.ops_added, lambda o: f"`{o['id']}` {o['kind']} at {o['at']}", cap)
    lines += _listed("ops removed", d.ops_removed, lambda o: f"`{o['id']}` {o['kind']} at {o['at']}", cap)
    lines += _listed("ops moved to another file", d.ops_moved, lambda o: f"`{o['id']}` {o['from']} → {o['to']}", cap)
    if len(lines) == 2:  # nothing listed: the summary says it all
        return f"- **{d.architecture}**: {_model_summary(d)}\n"
    return "\n".join(lines + ["", "</details>", "", ""])  # a blank line after it: Markdown again


def _detail_order(d: ModelDiff) -> tuple:
    return (0 if d.regressions else 1 if d.new_fusions else 2 if d.status_changed or d.fuser_changed else
            3 if d.opps_added or d.opps_removed else 4, d.architecture)


def to_markdown(diffs: list[ModelDiff], old: str, new: str, limit: int = MAX_MD) -> str:
    """A summary that fits a pull-request comment (every cause once), then per-model detail in <details>
    blocks, as many as fit in `limit` characters."""
    regress, fusions = group_causes(diffs, True), group_causes(diffs, False)
    numbers = {(o["architecture"], o["id"]): f"R{c['number']}" for c in regress for o in c["opportunities"]}
    numbers.update({(o["architecture"], o["id"]): f"F{c['number']}" for c in fusions for o in c["opportunities"]})
    changed = [d for d in diffs if d.changed() and not d.only_in]
    only = {side: [d.architecture for d in diffs if d.only_in == side] for side in ("old", "new")}

    def head(cap: int | None) -> list[str]:
        n_reg = sum(len(c["opportunities"]) for c in regress)
        n_fus = sum(len(c["opportunities"]) for c in fusions)
        sides = getattr(diffs, "sources", None) or {}
        rel_old, rel_new = release_label(sides.get("old")), release_label(sides.get("new"))
        named = (f"{rel_old} (`{old}`) → {rel_new} (`{new}`)" if rel_old and rel_new and rel_old != rel_new
                 else f"`{old}` → `{new}`" + (f" ({rel_new})" if rel_new else ""))
        said = [f"{named}: {_plural(len(diffs), 'model')}, {len(changed)} changed"]
        if n_reg:
            said.append(f"**⚠ {_plural(n_reg, 'regression')}** (fused → open) in "
                        f"{_plural(sum(1 for d in diffs if d.regressions), 'model')} from {_plural(len(regress), 'cause')}")
        if n_fus:
            said.append(f"{_plural(n_fus, 'new fusion')} in {_plural(sum(1 for d in diffs if d.new_fusions), 'model')}"
                        f" from {_plural(len(fusions), 'cause')}")
        others = sum(len(d.other_changes) for d in diffs)
        if others:
            said.append(_plural(others, "other status change"))
        refused = sum(len(d.fuser_changed) for d in diffs)
        if refused:
            said.append(f"{_plural(refused, 'scenario')} fused by something else")
        if only["old"] or only["new"]:
            said.append(f"{len(only['old'])} only in old, {len(only['new'])} only in new")
        lines = ["## fusion-analyze diff", "", "; ".join(said) + ". Lines that only moved are not changes.", ""]
        if regress:
            lines += ["### ⚠ Regressions by cause", ""]
            for c in regress:
                lines += _cause_md(c, True, cap)
        if fusions:
            lines += ["### ✅ New fusions by cause", ""]
            for c in fusions:
                lines += _cause_md(c, False, cap)
        lines += _other_md(diffs, cap)
        if only["old"] or only["new"]:
            lines += ["### Architectures on one side only", ""]
            lines += [f"- only in `{side}` ({len(archs)}): {_names_list(archs, cap)}"
                      for side, archs in (("old", only["old"]), ("new", only["new"])) if archs]
            lines.append("")
        return lines

    text = "\n".join(head(None))
    if len(text) > limit * 3 // 4:  # the model lists shortened so that every cause still fits
        text = "\n".join(head(12))
    if changed:
        text += f"\n### Per model ({len(changed)} changed)\n\n"
    reserve = 400
    blocks = sorted(changed, key=_detail_order)
    # every block with counts only, then longer lists, block by block in order, while they fit
    rendered = [_model_md(d, numbers, 0) for d in blocks]
    room = limit - reserve - len(text) - sum(map(len, rendered))
    for cap in (1, 3, 10):
        for i, d in enumerate(blocks):
            longer = _model_md(d, numbers, cap)
            if room >= len(longer) - len(rendered[i]) > 0:
                room -= len(longer) - len(rendered[i])
                rendered[i] = longer
    for i, block in enumerate(rendered):
        if len(text) + len(block) > limit - reserve:
            rest = [b.architecture for b in blocks[i:]]
            note = (f"… {len(rest)} more changed models left out to fit {limit:,} characters "
                    f"(`--format json` has all): ")
            room = max(0, limit - reserve // 2 - len(text) - len(note))
            listed: list[str] = []
            for name in rest:
                if sum(len(x) + 2 for x in listed) + len(name) + 20 > room:
                    break
                listed.append(name)
            text += note + _names_list(rest, len(listed)) + "\n"
            break
        if block.startswith("<details>") and not text.endswith("\n\n"):
            text += "\n"  # a blank line before it too (after a one-line model)
        text += block
    text = text.rstrip() + "\n"
    if len(text) > limit:  # only a tiny limit gets here: a hard cut at a line
        note = f"\n… truncated: the full diff is {len(text)} characters; use --format json for all of it.\n"
        text = text[: max(0, limit - len(note) - 12)].rsplit("\n", 1)[0] + "\n"
        if text.rfind("<details>") > text.rfind("</details>"):
            text += "</details>\n"  # a cut list still folds
        text += note
    return text


def to_json(diffs: list[ModelDiff], old: str, new: str) -> str:
    regress, fusions = group_causes(diffs, True), group_causes(diffs, False)
    summary = {"models": len(diffs), "changed": sum(1 for d in diffs if d.changed() and not d.only_in),
               "regressions": sum(len(d.regressions) for d in diffs),
               "new_fusions": sum(len(d.new_fusions) for d in diffs),
               "regression_causes": len(regress), "fusion_causes": len(fusions),
               "only_in_old": [d.architecture for d in diffs if d.only_in == "old"],
               "only_in_new": [d.architecture for d in diffs if d.only_in == "new"]}
    sides = getattr(diffs, "sources", None) or {}
    return json.dumps({"old": old, "new": new, "summary": summary,
                       "releases": {side: release_label(sides.get(side)) for side in ("old", "new")},
                       "causes": {"regressions": [_cause_json(c) for c in regress],
                                  "new_fusions": [_cause_json(c) for c in fusions]},
                       "models": [d.to_json() for d in diffs if d.changed()]},
                      indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# --- CI formats -----------------------------------------------------------------------------------------------

def findings(diffs: list[ModelDiff], spread: bool = False) -> list[dict]:
    """One finding per regression cause (render/sarif.py), as the Markdown summary groups them: at the place, in
    the new tree, that most of its regressions share, naming every model and scenario it covers, with what fused
    them in the old tree (and the cause's other places) as related locations. The largest cause first. (`spread`
    is kept for callers: one finding per cause needs no spreading.)"""
    del spread
    causes = group_causes(diffs, True)
    by_key = {(d.architecture, c["id"]): c for d in diffs for c in d.regressions}
    out = []
    for cause in causes:
        regs = [(o["architecture"], by_key[(o["architecture"], o["id"])]) for o in cause["opportunities"]]
        places: Counter = Counter()
        for _, c in regs:
            file = c.get("file") or c.get("old_file")
            line = c.get("line") if c.get("file") else c.get("old_line")
            places[(file, line if isinstance(line, int) else 0)] += 1
        (file, line), _ = max(places.items(), key=lambda kv: (kv[1], -list(places).index(kv[0])))
        scenarios = sorted(cause["scenarios"])
        first = regs[0][1]
        title = first.get("title") or first["scenario"]
        said = f"; {cause['presence']}" if cause["presence"] else ""
        models = cause["models"]
        shown = ", ".join(models[:12]) + (f" and {len(models) - 12} more" if len(models) > 12 else "")
        msg = (f"{_plural(len(regs), 'regression')} (fused → open) in {_plural(len(models), 'model')} from one cause: "
               f"{cause_label(cause)}{said}. Scenarios: {', '.join(scenarios)}. Models: {shown}.")
        notes = [n for n, _ in cause["other_side"].most_common() if n != "open, no note"]
        if notes:
            msg += f" Now: {notes[0]}."
        related = [{"file": e["file"], "line": e.get("line"), "what": f"old tree: {e['what']}"}
                   for e in cause["evidence"].values() if e.get("file")]
        related += [{"file": f, "line": ln or None, "what": "also here"} for (f, ln) in places if f and (f, ln) != (file, line)]
        out.append({"rule": {"id": first["scenario"] if len(scenarios) == 1 else f"regression-{cause['kind']}",
                             "title": title if len(scenarios) == 1 else f"fusions lost with a {KIND_LABEL[cause['kind']]}",
                             "category": first.get("category") if len(scenarios) == 1 else None},
                    "level": "warning", "file": file, "line": line or None,
                    "title": f"{cause_label(cause)}: {_plural(len(regs), 'regression')} in {_plural(len(models), 'model')}",
                    "message": msg, "fingerprint": f"{cause['kind']}:{cause['subject']}", "related": related,
                    "properties": {"cause": f"{cause['kind']}:{cause['subject']}", "models": models,
                                   "scenarios": scenarios, "regressions": len(regs),
                                   "opportunities": [f"{a}:{c['id']}" for a, c in regs]}})
    return out
