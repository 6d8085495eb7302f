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
from ..ir.texts import Said, Texts, literal, render, say

MAX_MD = 65536
FAIL_ON = ("regression", "any", "status", "opportunities", "ops", "none")  # the first is the default
DEFAULT_FAIL_ON = FAIL_ON[0]

_NO_NOTE = "open, no note"  # the other side's note of a change whose report says none (a key of the JSON too)
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
    # two deployments (compare --base-args / --head-args), or two trees: what the deployment decides
    applies_changed: list = field(default_factory=list)  # a row that applies on one side only (a test decided)
    kernels_changed: list = field(default_factory=list)  # an op whose kernels differ: what replaces what
    moe_comm: dict | None = None  # {"old": {path: class}, "new": {...}} where the comm class of a path differs
    steps: dict = field(default_factory=dict)  # scenario -> step time and open savings on each side (deployments)

    @property
    def regressions(self) -> list:
        return [c for c in self.status_changed if c["old"] in FUSED and c["new"] == "open" and not _moved(c)]

    @property
    def moved_out(self) -> list:
        """Fused → open because the pass that fused it left the tree for npugraph_ex (a release note says so):
        fused by npugraph_ex, outside the trees; not a regression."""
        return [c for c in self.status_changed if c["old"] in FUSED and c["new"] == "open" and _moved(c)]

    @property
    def new_fusions(self) -> list:
        return [c for c in self.status_changed if c["old"] == "open" and c["new"] in FUSED]

    @property
    def other_changes(self) -> list:
        return [c for c in self.status_changed if not (c["old"] in FUSED and c["new"] == "open" and not _moved(c))
                and not (c["old"] == "open" and c["new"] in FUSED)]

    def changed(self) -> bool:
        return bool(self.ops_added or self.ops_removed or self.ops_moved or self.opps_added or self.opps_removed
                    or self.status_changed or self.fuser_changed or self.only_in or self.applies_changed
                    or self.kernels_changed or self.moe_comm or self.steps)

    def to_json(self) -> dict:
        return {"architecture": self.architecture, "only_in": self.only_in,
                "ops": {"added": self.ops_added, "removed": self.ops_removed, "moved": self.ops_moved,
                        "line_moves": self.line_moves},
                "opportunities": {"added": self.opps_added, "removed": self.opps_removed,
                                  "status_changed": self.status_changed, "fuser_changed": self.fuser_changed},
                "regressions": self.regressions, "new_fusions": self.new_fusions, "moved_out": self.moved_out,
                "deployment": {"applies_changed": self.applies_changed, "kernels_changed": self.kernels_changed,
                               "moe_comm": self.moe_comm, "steps": self.steps}}


def _moved(c: dict) -> bool:
    return (c.get("left_tree") or {}).get("how") == "moved_to_npugraph_ex"


class Diffs(list):
    """The ModelDiffs of one comparison, with what each side has (passes, kernels, layer classes) across all of
    its reports: whether the thing that fused a scenario is still there, or was there before; and the releases
    each side's reports were made from (their `sources`)."""

    def __init__(self, items=(), names: dict | None = None, sources: dict | None = None, texts: dict | None = None):
        super().__init__(items)
        self.names = names  # {"old": {"pass": set, "kernel": set, "class": set, "release_notes"}, "new": {...}}
        self.left: dict = {}  # gone pass -> what the new tree's release notes say of it
        self.sources = sources or {}  # {"old": {"vllm": {"version": ...}, ...}, "new": {...}}
        self.texts = texts or {}  # the reports' `texts` tables: English text -> its sentence (ir/texts.py)


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
         "title": _title(title),
         "category": new.get("category"),
         "file": new.get("file"), "line": new.get("line"), "old_file": old.get("file"), "old_line": old.get("line"),
         "old_fuser": _fuser(old), "new_fuser": _fuser(new), "old_note": old.get("note"), "new_note": new.get("note")}
    if was is not None:
        c["was"] = was
    return {k: v for k, v in c.items() if v is not None}


def _title(title):
    """A pattern's title ({zh, en}) as its English text (the JSON's) that knows its Chinese (`literal`)."""
    if not isinstance(title, dict):
        return title
    return literal(title) if title.get("en") and title.get("zh") else title.get("en")


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
    _deployment_changes(d, old, new, o_opp, n_opp, o_ops, n_ops)
    return d


def _rejected(opp: dict) -> str | None:
    """Why the deployment rules a row out (`tp_size = 1: there is no all-reduce to fuse`), None where it applies."""
    return (opp.get("benefit") or {}).get("rejected")


def _comm(doc: dict) -> dict:
    return {p: c["class"] for c in ((doc.get("deployment") or {}).get("moe_comm") or []) for p in c.get("paths") or []}


def _deployed(doc: dict) -> tuple:
    d = doc.get("deployment") or {}
    return tuple(d.get("stated") or ()), d.get("device")


def _open_savings(doc: dict, scenario: str) -> float:
    """The step time the open rows that apply would save on one scenario (the report's estimate)."""
    total = 0.0
    for o in doc.get("opportunities", []):
        if o.get("status") != "open" or _rejected(o):
            continue
        model = (((o.get("benefit") or {}).get("numbers") or {}).get(scenario) or {}).get("model") or {}
        total += float(model.get("time_us") or 0)
    return round(total, 1)


def _deployment_changes(d: ModelDiff, old: dict, new: dict, o_opp: dict, n_opp: dict, o_ops: dict, n_ops: dict) -> None:
    """What the deployment decides: rows that apply on one side only (a test on the deployment, such as TP 1's
    "no all-reduce to fuse"), ops whose kernels differ (the kernels that replace the removed ones: the MoE comm
    class, a quantised GEMM, an all-reduce), the MoE comm class per path, and, where the deployments differ,
    the step time and the open rows' savings per scenario."""
    for oid in sorted(o_opp.keys() & n_opp.keys()):
        a, b = _rejected(o_opp[oid]), _rejected(n_opp[oid])
        if (a is None) != (b is None):
            d.applies_changed.append({"id": oid, "status": n_opp[oid]["status"], "applies_in": "new" if a else "old",
                                      "reason": a or b})
    for oid in sorted(o_ops.keys() & n_ops.keys()):
        ka = {k.get("name") for k in o_ops[oid].get("kernels") or []}
        kb = {k.get("name") for k in n_ops[oid].get("kernels") or []}
        if ka != kb:
            d.kernels_changed.append({"id": oid, "kind": n_ops[oid].get("kind"), "added": sorted(kb - ka),
                                      "removed": sorted(ka - kb), "class": n_ops[oid].get("layer_class")})
    for oid in sorted(n_ops.keys() - o_ops.keys()):  # an op of another class (the comm class) brings its kernels
        ks = sorted({k.get("name") for k in n_ops[oid].get("kernels") or []})
        if ks:
            d.kernels_changed.append({"id": oid, "kind": n_ops[oid].get("kind"), "added": ks, "removed": [],
                                      "class": n_ops[oid].get("layer_class")})
    for oid in sorted(o_ops.keys() - n_ops.keys()):
        ks = sorted({k.get("name") for k in o_ops[oid].get("kernels") or []})
        if ks:
            d.kernels_changed.append({"id": oid, "kind": o_ops[oid].get("kind"), "added": [], "removed": ks,
                                      "class": o_ops[oid].get("layer_class")})
    ca, cb = _comm(old), _comm(new)
    if ca != cb:
        d.moe_comm = {"old": ca, "new": cb}
    if _deployed(old) != _deployed(new):
        sa, sb = (old.get("estimate") or {}).get("steps") or {}, (new.get("estimate") or {}).get("steps") or {}
        for scen in sorted(sa.keys() & sb.keys()):
            row = {"old_step_us": sa[scen].get("step_us"), "new_step_us": sb[scen].get("step_us"),
                   "old_mode": sa[scen].get("mode"), "new_mode": sb[scen].get("mode"),
                   "old_savings_us": _open_savings(old, scen), "new_savings_us": _open_savings(new, scen)}
            if (row["old_step_us"], row["old_savings_us"], row["old_mode"]) != \
                    (row["new_step_us"], row["new_savings_us"], row["new_mode"]):
                d.steps[scen] = row


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
    out: dict = {"pass": set(), "kernel": set(), "class": set()}
    notes = None
    for doc in docs:
        notes = notes or (doc.get("compile") or {}).get("release_notes")
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
    out["release_notes"] = notes
    return out


def diff_paths(old: str, new: str, different_models: bool = False) -> Diffs:
    a, b = _load(Path(old)), _load(Path(new))
    names = {"old": _names(a.values()), "new": _names(b.values())}
    sources = {"old": _sources(a.values()), "new": _sources(b.values())}
    texts: dict = {}  # what the reports' sentences say in each language (their notes, evidence, reasons)
    for doc in (*a.values(), *b.values()):
        for text, spec in (doc.get("texts") or {}).items():
            texts.setdefault(text, spec)
    if Path(old).is_file() and Path(new).is_file() and len(a) == len(b) == 1 and a.keys() != b.keys():
        (ka, va), (kb, vb) = next(iter(a.items())), next(iter(b.items()))
        if not different_models:
            raise UserError(f"{old} is a report of {ka}, {new} of {kb}: diff compares one model across trees or "
                            f"deployments; pass --different-models to compare two models anyway")
        return _left_tree(Diffs([diff_model(f"{ka} → {kb}", va, vb)], names, sources, texts))
    return _left_tree(Diffs([diff_model(k, a.get(k), b.get(k)) for k in sorted(a.keys() | b.keys())], names, sources,
                            texts))


def _left_tree(diffs: Diffs) -> Diffs:
    """Each fused → open change whose graph pass the new side no longer has, with what the new tree's release
    notes say of it since the old tree's (passes/compile_path.py left_the_tree): moved to npugraph_ex (then
    not a regression), removed, or unknown."""
    from ..passes.compile_path import left_the_tree

    names = diffs.names or {}
    said: dict[str, dict] = {}
    for d in diffs:
        for c in d.status_changed:
            if not (c["old"] in FUSED and c["new"] == "open"):
                continue
            kind, subject = cause_of(c["old"], c.get("old_fuser"))
            if kind != "pass" or subject in names.get("new", {}).get("pass", ()):
                continue
            if subject not in said:
                said[subject] = left_the_tree(subject, names.get("old", {}).get("release_notes"),
                                              names.get("new", {}).get("release_notes"))
            c["left_tree"] = said[subject]
    diffs.left = said
    return diffs


def exit_code(diffs: list[ModelDiff], fail_on: str) -> int:
    if fail_on not in FAIL_ON:
        raise UserError(f"--fail-on {fail_on}: use one of {', '.join(FAIL_ON)}")
    if fail_on == "none":
        return 0
    test = {
        "any": lambda d: d.changed(),
        "regression": lambda d: bool(d.regressions),
        "status": lambda d: bool(d.status_changed),
        "opportunities": lambda d: bool(d.status_changed or d.fuser_changed or d.opps_added or d.opps_removed
                                        or d.applies_changed),
        "ops": lambda d: bool(d.ops_added or d.ops_removed or d.ops_moved),
    }[fail_on]
    return 1 if any(test(d) for d in diffs) else 0


# --- causes ---------------------------------------------------------------------------------------------------

def _labels(lang: str) -> dict:
    """The diff's words in `lang`: templates/labels.yaml `<lang>.diff`."""
    from ..render.markdown import labels

    return labels(lang)["diff"]


def _count(D: dict, key: str, n: int) -> str:
    """`n` things as `D[key]` says them: one text, or {one, many} (English)."""
    said = D[key]
    if isinstance(said, dict):
        said = said["one"] if n == 1 else said["many"]
    return said.format(n=n)


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


def _presence(kind: str, subject: str, names: dict | None, regression: bool, left: dict | None = None) -> Said | None:
    """Whether the other side still has (a regression) or already had (a new fusion) what fuses; for a pass
    the new tree no longer has, what its release notes say (`left`: removed, or not said: unknown). A sentence
    of labels.yaml `texts`: English in the JSON, said again in the Markdown's language."""
    if names is None or kind in ("layer", "unknown"):
        return None
    side = names["new" if regression else "old"]
    there = subject in side["kernel" if kind == "patch" else kind]
    if kind == "pass":
        if regression and not there and left:
            return _left_said(left)
        return say(("diff_still_in_new_tree" if there else "diff_pass_gone") if regression else
                   ("diff_pass_in_old_tree" if there else "diff_pass_new"))
    if regression:
        return say("diff_still_used" if there else "diff_no_longer_used")
    return say("diff_used_before" if there else "diff_not_used_before")


def _left_said(left: dict) -> Said:
    at = f"{left['file']}:{left['line']}" if left.get("line") else "None"
    text = _cut(left.get("text") or "", 140)
    if left["how"] == "moved_to_npugraph_ex":
        return say("diff_moved_to_npugraph_ex", at=at, text=text)
    if left["how"] == "removed":
        return say("diff_pass_removed", at=at, text=text)
    return say("diff_pass_gone_why_unknown", note=left.get("note") or say("diff_no_release_note_says"))


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
                "presence": _presence(kind, subject, names, regression, getattr(diffs, "left", {}).get(subject))})
            cause["status"][status] += 1
            if fuser is not None:
                cause["evidence"].setdefault((fuser["file"], _norm(fuser["what"])), fuser)
            note = c.get("new_note") if regression else c.get("old_note")
            cause["other_side"][note or _NO_NOTE] += 1
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


def cause_label(c: dict, lang: str = "en") -> str:
    D = _labels(lang)
    if c["kind"] == "unknown":
        return D["cause_no_evidence"].format(subject=c["subject"])
    return D["cause_label"].format(kind=D["kinds"][c["kind"]], subject=c["subject"])


def _said(text, lang: str, texts: dict | None = None, md: bool = True) -> str:
    """A text of the reports (a note, an evidence line, a reason) or of the diff (`Said`) in `lang`; any other
    text as it is."""
    if text is None:
        return ""
    if isinstance(text, Said):
        return render(text.spec, lang, md)
    return Texts(texts, lang, md)(text)


# --- Markdown -------------------------------------------------------------------------------------------------

def _cut(text: str, n: int = 160) -> str:
    text = " ".join(str(text).split())
    if len(text) <= n:
        return text
    cut = text[: n - 1].rstrip() + "…"
    return cut + "`" if cut.count("`") % 2 else cut  # a code span cut in two is still closed


def _names_list(names: list[str], cap: int | None, lang: str = "en") -> str:
    if cap is None or len(names) <= cap:
        return ", ".join(names)
    return ", ".join(names[:cap]) + ", " + _labels(lang)["and_more"].format(n=len(names) - cap)


def _cause_md(c: dict, regression: bool, cap: int | None, lang: str = "en", texts: dict | None = None) -> list[str]:
    D = _labels(lang)
    n, models = len(c["opportunities"]), c["models"]
    head = f"**{'R' if regression else 'F'}{c['number']}. {cause_label(c, lang)}**"
    if c["presence"]:
        head += f": {_said(c['presence'], lang, texts)}"
    lines = [head + " · " + D["cause_count"].format(scenarios=_count(D, "scenarios", n),
                                                     models=_count(D, "models", len(models)))]
    evidence = list(c["evidence"].values())
    said = "; ".join(f"`{e['file']}` L{e['line']}: {_cut(_said(e['what'], lang, texts))}" for e in evidence[:3])
    if len(evidence) > 3:
        said += "; " + D["more_places"].format(n=len(evidence) - 3)
    states = ", ".join(f"{s} ({k})" if len(c["status"]) > 1 else s for s, k in sorted(c["status"].items()))
    fused_line = f"{states}: {said}" if said else states
    other = c["other_side"].most_common()

    def note(text: str) -> str:
        return D["open_no_note"] if text == _NO_NOTE else _cut(_said(text, lang, texts))

    other_said = "; ".join(f"{note(t)} ({k})" if len(other) > 1 else note(t) for t, k in other[:3])
    if len(other) > 3:
        other_said += "; " + D["other_notes"].format(n=len(other) - 3)
    sides = D["sides"]
    if regression:
        lines += [f"- {sides['old']}: {fused_line}", f"- {sides['new']}: {other_said}"]
    else:
        lines += [f"- {sides['old']}: {other_said}", f"- {sides['new']}: {fused_line}"]
    lines.append(f"- {D['scenarios_line']}: " + ", ".join(f"`{s}` ({k})" for s, k in sorted(c["scenarios"].items())))
    lines += [f"- {D['models_line']}: {_names_list(models, cap, lang)}", ""]
    return lines


def _cell(file: str, what: str) -> str:
    return f"`{file}`: {what}".replace("|", "\\|")


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def _header(columns: dict, keys: tuple) -> list[str]:
    return [_row(*(columns[k] for k in keys)), "|" + "---|" * len(keys)]


def _other_md(diffs: list[ModelDiff], cap: int | None, lang: str = "en", texts: dict | None = None) -> list[str]:
    """Status changes that are neither regressions nor new fusions, and scenarios fused on both sides by
    something else, each kind of change once with its models."""
    D = _labels(lang)
    rows: dict[str, list] = {}
    for d in diffs:
        for c in d.other_changes:
            change = f"{c['old']} → {c['new']}"
            if _moved(c):  # the pass left for npugraph_ex: said as such, never open
                left = c["left_tree"]
                change = f"{c['old']} → " + D["npugraph_ex_at"].format(at=f"{left['file']}:{left['line']}")
            rows.setdefault(change, []).append(d.architecture)
    fusers: dict[tuple, list] = {}
    shown: dict[tuple, tuple] = {}  # the group's texts, as its first member says them in `lang`
    for d in diffs:
        for c in d.fuser_changed:
            o, n = c["old_fuser"], c["new_fuser"]
            key = (c["status"], o["file"], _cut(_norm(o["what"]), 90), n["file"], _cut(_norm(n["what"]), 90))
            fusers.setdefault(key, []).append(d.architecture)
            shown.setdefault(key, (_cut(_norm(_said(o["what"], lang, texts)), 90),
                                   _cut(_norm(_said(n["what"], lang, texts)), 90)))
    lines = []
    if rows:
        lines += [f"### {D['other_changes_title']}", ""] + _header(D["other_columns"], ("change", "scenarios", "models"))
        for change, archs in sorted(rows.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            lines.append(_row(change, str(len(archs)), _names_list(sorted(set(archs)), cap, lang)))
        lines.append("")
    if fusers:
        lines += [f"### {D['fused_else_title']}", ""]
        lines += _header(D["fused_else_columns"], ("status", "old", "new", "scenarios", "models"))
        for key, archs in sorted(fusers.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            (status, of, _, nf, _), (ow, nw) = key, shown[key]
            lines.append(_row(status, _cell(of, ow), _cell(nf, nw), str(len(archs)),
                              _names_list(sorted(set(archs)), cap, lang)))
        lines.append("")
    return lines


def _deployment_md(diffs: list[ModelDiff], cap: int | None, lang: str = "en", texts: dict | None = None) -> list[str]:
    """What the deployment (or the tree) decides, grouped by cause: the test that rules rows in or out, the MoE
    comm class per path, each kernel that comes or goes with the ops that run it, the step time and savings."""
    D = _labels(lang)
    lines: list[str] = []
    reasons: dict[tuple, list] = {}
    for d in diffs:
        for c in d.applies_changed:
            reasons.setdefault((c["applies_in"], c["reason"]), []).append((d.architecture, c))
    if reasons:
        lines += [f"### {D['applies_title']}", ""]
        for n, ((side, reason), items) in enumerate(sorted(reasons.items(), key=lambda kv: (-len(kv[1]), kv[0])), 1):
            other = "old" if side == "new" else "new"
            models = sorted({a for a, _ in items})
            count = D["cause_count"].format(scenarios=_count(D, "scenarios", len(items)),
                                            models=_count(D, "models", len(models)))
            lines.append(D["applies_head"].format(n=n, side=D["sides"][side], other=D["sides"][other],
                                                  reason=_cut(_said(reason, lang, texts), 200), count=count))
            ids = [f"`{c['id']}` ({c['status']})" for _, c in items]
            lines += [f"- {_names_list(ids, cap, lang)}", f"- {D['models_line']}: {_names_list(models, cap, lang)}", ""]
    comm = [(d.architecture, d.moe_comm) for d in diffs if d.moe_comm]
    if comm:
        lines += [f"### {D['moe_title']}", ""]
        for arch, c in comm:
            paths = sorted(c["old"].keys() | c["new"].keys())
            said = "; ".join(f"{p}: `{c['old'].get(p, '-')}` → `{c['new'].get(p, '-')}`" for p in paths
                             if c["old"].get(p) != c["new"].get(p))
            lines.append(f"- {arch}: {said}")
        lines.append("")
    kernels: dict[tuple, list] = {}
    for d in diffs:
        for c in d.kernels_changed:
            for k in c["added"]:
                kernels.setdefault(("added", k), []).append((d.architecture, c["id"]))
            for k in c["removed"]:
                kernels.setdefault(("removed", k), []).append((d.architecture, c["id"]))
    if kernels:
        lines += [f"### {D['kernels_title']}", ""] + _header(D["kernels_columns"], ("kernel", "change", "ops", "models"))
        for (change, k), items in sorted(kernels.items(), key=lambda kv: (kv[0][0], -len(kv[1]), kv[0][1])):
            ops = [f"`{i}`" for _, i in items]
            lines.append(_row(f"`{k}`", D["kernel_change"][change], _names_list(ops, cap if cap is not None else 6, lang),
                              _names_list(sorted({a for a, _ in items}), cap, lang)).replace("\n", " "))
        lines.append("")
    steps = [(d.architecture, d.steps) for d in diffs if d.steps]
    if steps:
        from ..render.markdown import labels

        L = labels(lang)
        names, modes = L.get("step_names") or {}, L.get("modes") or {}
        lines += [f"### {D['steps_title']}", ""] + _header(D["steps_columns"], ("model", "scenario", "step", "savings"))
        for arch, rows in steps:
            for scen, r in rows.items():
                mode = (f" ({modes.get(r['old_mode'], r['old_mode'])} → {modes.get(r['new_mode'], r['new_mode'])})"
                        if r["old_mode"] != r["new_mode"] else "")
                lines.append(_row(arch, f"{names.get(scen, scen)}{mode}",
                                  f"{_ms(r['old_step_us'])} → {_ms(r['new_step_us'])}",
                                  f"{_ms(r['old_savings_us'])} → {_ms(r['new_savings_us'])}"))
        lines.append("")
    return lines


def _ms(us) -> str:
    if not isinstance(us, (int, float)):
        return "-"
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} µs"


_SUMMARY = ("regressions", "new_fusions", "other_changes", "fuser_changed", "opps_added", "opps_removed", "ops_added",
            "ops_removed", "ops_moved", "applies_changed", "kernels_changed", "steps")  # ModelDiff's, in this order


def _model_summary(d: ModelDiff, lang: str = "en") -> str:
    D = _labels(lang)
    return " · ".join(_count(D, key, len(getattr(d, key))) for key in _SUMMARY if getattr(d, key))


def _listed(title: str, items: list, fmt, cap: int, lang: str = "en") -> list[str]:
    """`title`: a list of labels.yaml `diff.lists` ("ops added"), its count, then the first `cap` items."""
    if not items:
        return []
    if cap == 0:  # the block's summary says the count
        return []
    D = _labels(lang)
    lines = [f"- {D['lists'][title]} ({len(items)}):"] + [f"  - {fmt(o)}" for o in items[:cap]]
    if len(items) > cap:
        lines.append(f"  - {D['and_more'].format(n=len(items) - cap)}")
    return lines


def _model_md(d: ModelDiff, numbers: dict, cap: int, lang: str = "en", texts: dict | None = None) -> str:
    """One model's changes in a <details> block; lists of ops and opportunities show `cap` items each."""
    D = _labels(lang)
    lines = [f"<details><summary><b>{d.architecture}</b>: {_model_summary(d, lang)}</summary>", ""]
    for c in d.status_changed:
        regression, fusion = c["old"] in FUSED and c["new"] == "open", c["old"] == "open" and c["new"] in FUSED
        regression = regression and not _moved(c)
        mark = "⚠ " if regression else "✅ " if fusion else ""
        was = f" ({D['was'].format(id=c['was'])})" if c.get("was") else ""
        cause = numbers.get((d.architecture, c["id"]))
        because = f" ({D['because'].format(cause=cause)})" if cause else ""
        new = D["npugraph_ex"] if _moved(c) else c["new"]
        lines.append(f"- {mark}`{c['id']}`{was}: {c['old']} → {new}{because}")
    for c in d.fuser_changed:
        o, n = c["old_fuser"], c["new_fuser"]
        lines.append(f"- `{c['id']}` ({c['status']}): " + D["fuser_line"].format(
            old_file=o["file"], old_what=_cut(_said(o["what"], lang, texts), 100),
            new_file=n["file"], new_what=_cut(_said(n["what"], lang, texts), 100)))
    lines += _listed("opps_added", d.opps_added, lambda o: f"`{o['id']}` ({o['status']})", cap and cap + 3, lang)
    lines += _listed("opps_removed", d.opps_removed,
                     lambda o: f"`{o['id']}` ({D['was_status'].format(status=o['status'])})", cap and cap + 3, lang)
    lines += _listed("ops_added", d.ops_added, lambda o: D["op_at"].format(**o), cap, lang)
    lines += _listed("ops_removed", d.ops_removed, lambda o: D["op_at"].format(**o), cap, lang)
    lines += _listed("ops_moved", d.ops_moved, lambda o: f"`{o['id']}` {o['from']} → {o['to']}", cap, lang)
    if len(lines) == 2:  # nothing listed: the summary says it all
        return f"- **{d.architecture}**: {_model_summary(d, lang)}\n"
    return "\n".join(lines + ["", "</details>", "", ""])  # a blank line after it: Markdown again


def _detail_order(d: ModelDiff) -> tuple:
    return (0 if d.regressions else 1 if d.new_fusions else 2 if d.status_changed or d.fuser_changed else
            3 if d.opps_added or d.opps_removed else 4, d.architecture)


def to_markdown(diffs: list[ModelDiff], old: str, new: str, limit: int = MAX_MD, lang: str = "en") -> str:
    """A summary that fits a pull-request comment (every cause once), then per-model detail in <details>
    blocks, as many as fit in `limit` characters; every line in `lang` (labels.yaml `<lang>.diff`, the reports'
    own sentences through their `texts` tables)."""
    D = _labels(lang)
    texts = getattr(diffs, "texts", None) or {}
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
        said = [D["summary_changed"].format(named=named, models=_count(D, "models", len(diffs)), n=len(changed))]
        if n_reg:
            said.append(D["summary_regressions"].format(
                regressions=_count(D, "regressions", n_reg),
                models=_count(D, "models", sum(1 for d in diffs if d.regressions)),
                causes=_count(D, "causes", len(regress))))
        if n_fus:
            said.append(D["summary_fusions"].format(
                fusions=_count(D, "new_fusions", n_fus),
                models=_count(D, "models", sum(1 for d in diffs if d.new_fusions)),
                causes=_count(D, "causes", len(fusions))))
        others = sum(len(d.other_changes) for d in diffs)
        if others:
            said.append(_count(D, "other_changes", others))
        refused = sum(len(d.fuser_changed) for d in diffs)
        if refused:
            said.append(D["summary_fused_else"].format(scenarios=_count(D, "scenarios", refused)))
        if only["old"] or only["new"]:
            said.append(D["summary_only"].format(old=len(only["old"]), new=len(only["new"])))
        applies = sum(len(d.applies_changed) for d in diffs)
        if applies:
            said.append(D["summary_applies"].format(rows=_count(D, "rows", applies)))
        lines = [f"## {D['title']}", "", D["summary_sep"].join(said) + D["summary_end"], ""]
        if regress:
            lines += [f"### {D['regressions_by_cause']}", ""]
            for c in regress:
                lines += _cause_md(c, True, cap, lang, texts)
        if fusions:
            lines += [f"### {D['fusions_by_cause']}", ""]
            for c in fusions:
                lines += _cause_md(c, False, cap, lang, texts)
        lines += _other_md(diffs, cap, lang, texts)
        lines += _deployment_md(diffs, cap, lang, texts)
        if only["old"] or only["new"]:
            lines += [f"### {D['one_side']}", ""]
            lines += [f"- {D['only_in'].format(side=D['sides'][side])} ({len(archs)}): {_names_list(archs, cap, lang)}"
                      for side, archs in (("old", only["old"]), ("new", only["new"])) if archs]
            lines.append("")
        return lines

    text = "\n".join(head(None))
    if len(text) > limit * 3 // 4:  # the model lists shortened so that every cause still fits
        text = "\n".join(head(12))
    if changed:
        text += f"\n### {D['per_model'].format(n=len(changed))}\n\n"
    reserve = 400
    blocks = sorted(changed, key=_detail_order)
    # every block with counts only, then longer lists, block by block in order, while they fit
    rendered = [_model_md(d, numbers, 0, lang, texts) for d in blocks]
    room = limit - reserve - len(text) - sum(map(len, rendered))
    for cap in (1, 3, 10):
        for i, d in enumerate(blocks):
            longer = _model_md(d, numbers, cap, lang, texts)
            if room >= len(longer) - len(rendered[i]) > 0:
                room -= len(longer) - len(rendered[i])
                rendered[i] = longer
    for i, block in enumerate(rendered):
        if len(text) + len(block) > limit - reserve:
            rest = [b.architecture for b in blocks[i:]]
            note = D["left_out"].format(n=len(rest), limit=f"{limit:,}")
            room = max(0, limit - reserve // 2 - len(text) - len(note))
            listed: list[str] = []
            for name in rest:
                if sum(len(x) + 2 for x in listed) + len(name) + 20 > room:
                    break
                listed.append(name)
            text += note + _names_list(rest, len(listed), lang) + "\n"
            break
        if block.startswith("<details>") and not text.endswith("\n\n"):
            text += "\n"  # a blank line before it too (after a one-line model)
        text += block
    text = text.rstrip() + "\n"
    if len(text) > limit:  # only a tiny limit gets here: a hard cut at a line
        note = "\n" + D["truncated"].format(n=len(text)) + "\n"
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
               "applies_changed": sum(len(d.applies_changed) for d in diffs),
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

def findings(diffs: list[ModelDiff], spread: bool = False, lang: str = "en") -> list[dict]:
    """One finding per regression cause (render/sarif.py), as the Markdown summary groups them: at the place, in
    the new tree, that most of its regressions share, naming every model and scenario it covers, with what fused
    them in the old tree (and the cause's other places) as related locations. The largest cause first. (`spread`
    is kept for callers: one finding per cause needs no spreading.) Every message in `lang`."""
    del spread
    D = _labels(lang)
    texts = getattr(diffs, "texts", None) or {}
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
        title = _said(first.get("title"), lang, md=False) or first["scenario"]
        said = f"; {_said(cause['presence'], lang, texts, md=False)}" if cause["presence"] else ""
        models = cause["models"]
        shown = ", ".join(models[:12]) + (", " + D["and_more"].format(n=len(models) - 12) if len(models) > 12 else "")
        label = cause_label(cause, lang)
        regressions, in_models = _count(D, "regressions", len(regs)), _count(D, "models", len(models))
        msg = D["finding"].format(regressions=regressions, models=in_models, label=label, presence=said,
                                  scenarios=", ".join(scenarios), models_named=shown)
        notes = [n for n, _ in cause["other_side"].most_common() if n != _NO_NOTE]
        if notes:
            msg += D["finding_now"].format(note=_said(notes[0], lang, texts, md=False))
        related = [{"file": e["file"], "line": e.get("line"),
                    "what": D["finding_old_tree"].format(what=_said(e["what"], lang, texts, md=False))}
                   for e in cause["evidence"].values() if e.get("file")]
        related += [{"file": f, "line": ln or None, "what": D["finding_also_here"]}
                    for (f, ln) in places if f and (f, ln) != (file, line)]
        out.append({"rule": {"id": first["scenario"] if len(scenarios) == 1 else f"regression-{cause['kind']}",
                             "title": title if len(scenarios) == 1 else
                             D["finding_rule"].format(kind=D["kinds"][cause["kind"]]),
                             "category": first.get("category") if len(scenarios) == 1 else None},
                    "level": "warning", "file": file, "line": line or None,
                    "title": D["finding_title"].format(label=label, regressions=regressions, models=in_models),
                    "message": msg, "fingerprint": f"{cause['kind']}:{cause['subject']}", "related": related,
                    "properties": {"cause": f"{cause['kind']}:{cause['subject']}", "models": models,
                                   "scenarios": scenarios, "regressions": len(regs),
                                   "opportunities": [f"{a}:{c['id']}" for a, c in regs]}})
    return out
