"""CI formats: SARIF 2.1.0 (code scanning) and GitHub workflow annotations (`::warning file=...::...`).

Both are rendered from findings: one finding is one open opportunity (the single-model report, from its JSON
data: `analysis_findings`) or one regression (`diff`, whose findings commands/diff.py builds). A finding names
its rule (the pattern: id, title, message, target, category), a level, the `file:line` it points at (relative
to the tree root: the folder that holds `vllm/`, `vllm_ascend/` or `transformers/`, the root of a checkout of
that repository), a message, a fingerprint and related locations (the evidence). The texts are English; a rule
carries the pattern's Chinese title in its properties. `schemas/sarif-2.1.0.json` is the OASIS schema the tests validate
every SARIF log against.
"""

from __future__ import annotations

import json
from urllib.parse import quote

from .. import __version__
from ..errors import UserError

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def _en(words) -> str:
    if isinstance(words, dict):
        return str(words.get("en") or words.get("zh") or "")
    return str(words or "")


def rule_of(opp: dict) -> dict:
    """A pattern's rule metadata, from an opportunity of a JSON report (which carries the pattern's words)."""
    title = opp.get("title")
    return {"id": opp.get("scenario") or opp["id"].split("@", 1)[0], "title": _en(title),
            "title_zh": title.get("zh") if isinstance(title, dict) else None,
            "message": _en(opp.get("message")), "target": _en(opp.get("target")),
            "category": opp.get("category")}


def analysis_findings(doc: dict) -> list[dict]:
    """One finding per open opportunity of one JSON report, in the report's order."""
    arch = doc["model"]["architecture"]
    out = []
    for o in doc.get("opportunities", []):
        if o.get("status") != "open":
            continue
        rule = rule_of(o)
        benefit = o.get("benefit") or {}
        rejected = benefit.get("rejected")
        parts = [f"{rule['title']} is open in {arch} (`{o['id']}`)."]
        if o.get("note"):
            parts.append(f"{o['note']}.")
        if rule["target"]:
            parts.append(f"Target: {rule['target']}.")
        if rejected:
            parts.append(f"Not costed: {rejected}.")
        out.append({"rule": rule, "level": "note" if rejected else "warning", "file": o.get("file"),
                    "line": o.get("line"), "title": f"{arch}: {rule['title']}",
                    "message": " ".join(parts), "fingerprint": f"{arch}:{o['id']}",
                    "related": [e for e in o.get("evidence", []) if e.get("file")],
                    "properties": {"architecture": arch, "opportunity": o["id"], "priority": benefit.get("priority"),
                                   "cuda": (o.get("cuda") or {}).get("status")}})
    return out


def _rule_name(rule_id: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in rule_id.replace("-", "_").split("_") if part)


# Each tree is a base of its own: a location's uri is relative to the root of the tree it is in (the folder that
# holds `vllm/`, `vllm_ascend/` or `transformers/`), named by its uriBaseId; `originalUriBaseIds` says what each
# base is and, with `--sarif-root NAME=PREFIX`, where the tree lies in the job's repository (%SRCROOT%).
TREE_BASES = {"vllm": "VLLM", "vllm_ascend": "VLLM_ASCEND", "transformers": "TRANSFORMERS"}
SOURCE_OF_BASE = {"VLLM": "vllm", "VLLM_ASCEND": "vllm_ascend", "TRANSFORMERS": "transformers"}
OTHER_BASE = "SRCROOT"


def tree_base(file: str) -> str:
    """The uriBaseId of a tree-relative path: the tree its first folder names."""
    return TREE_BASES.get(file.split("/", 1)[0], OTHER_BASE)


def parse_roots(specs: list[str] | None) -> dict[str, str]:
    """`--sarif-root NAME=PREFIX` values: NAME one of the bases (or the package: vllm, vllm_ascend,
    transformers), PREFIX a repository-relative folder."""
    out: dict[str, str] = {}
    names = {**{b: b for b in SOURCE_OF_BASE}, **TREE_BASES, OTHER_BASE: OTHER_BASE}
    for spec in specs or []:
        name, eq, prefix = spec.partition("=")
        base = names.get(name.strip()) or names.get(name.strip().upper())
        if not eq or base is None:
            raise UserError(f"--sarif-root {spec}: use NAME=PREFIX with NAME one of {', '.join(sorted(SOURCE_OF_BASE))} "
                            f"(e.g. --sarif-root VLLM=third_party/vllm/)")
        prefix = prefix.strip()
        if prefix.startswith("/") or ".." in prefix.split("/"):
            raise UserError(f"--sarif-root {spec}: PREFIX is a folder of the job's repository, relative to its root")
        while prefix.startswith("./"):
            prefix = prefix[2:]
        prefix = "" if prefix == "." else prefix
        out[base] = (prefix.rstrip("/") + "/") if prefix else ""
    return out


def _base_ids(used: set[str], roots: dict[str, str], sources: dict | None) -> dict:
    out = {}
    for base in sorted(used):
        src = (sources or {}).get(SOURCE_OF_BASE.get(base, ""), {}) or {}
        version = src.get("version") if isinstance(src, dict) else None
        package = SOURCE_OF_BASE.get(base)
        what = (f"the root of the {package} {version} tree" if version else f"the root of the {package} tree") \
            if package else "the root of the analysed trees"
        if base in roots:
            entry: dict = {"uri": roots[base], "uriBaseId": "%SRCROOT%"} if roots[base] else {"uriBaseId": "%SRCROOT%"}
            entry["description"] = {"text": f"{what}, at this folder of the job's repository"}
        else:
            entry = {"description": {"text": f"{what} (the folder that holds {package or 'the package'}/); "
                                             f"map it into the repository with --sarif-root {base}=PREFIX"}}
        out[base] = entry
    return out


def _location(file: str | None, line, message: str | None = None, ident: int | None = None) -> dict | None:
    if not file:
        return None
    loc: dict = {"physicalLocation": {"artifactLocation": {"uri": quote(file, safe="/"), "uriBaseId": tree_base(file)}}}
    if isinstance(line, int) and line >= 1:
        loc["physicalLocation"]["region"] = {"startLine": line}
    if message:
        loc["message"] = {"text": message}
    if ident is not None:
        loc["id"] = ident
    return loc


def to_sarif(findings: list[dict], properties: dict | None = None, roots: dict[str, str] | None = None,
             sources: dict | None = None) -> str:
    """A SARIF 2.1.0 log of one run: the rules of the findings' patterns, one result per finding; every location
    names its tree's base (`roots`: where `--sarif-root` put a tree in the job's repository; `sources`: the
    report's versions, said in each base's description)."""
    rules: list[dict] = []
    index: dict[str, int] = {}
    for f in findings:
        r = f["rule"]
        if r["id"] in index:
            continue
        index[r["id"]] = len(rules)
        desc = {"id": r["id"], "name": _rule_name(r["id"]), "shortDescription": {"text": r["title"] or r["id"]},
                "defaultConfiguration": {"level": "warning"},
                "properties": {"tags": ["fusion"] + ([r["category"]] if r.get("category") else [])}}
        if r.get("message"):
            desc["fullDescription"] = {"text": r["message"]}
        if r.get("target"):
            desc["help"] = {"text": f"Fused kernel to write: {r['target']}"}
        if r.get("category"):
            desc["properties"]["category"] = r["category"]
        if r.get("title_zh"):
            desc["properties"]["title_zh"] = r["title_zh"]
        rules.append(desc)
    results = []
    for f in findings:
        res: dict = {"ruleId": f["rule"]["id"], "ruleIndex": index[f["rule"]["id"]], "level": f["level"],
                     "message": {"text": f["message"]}}
        loc = _location(f.get("file"), f.get("line"))
        if loc is not None:
            res["locations"] = [loc]
        related = [_location(e["file"], e.get("line"), e.get("what"), i) for i, e in enumerate(f.get("related", []))]
        related = [r for r in related if r is not None]
        if related:
            res["relatedLocations"] = related
        if f.get("fingerprint"):
            res["partialFingerprints"] = {"fusionAnalyze/v1": f["fingerprint"]}
        if f.get("properties"):
            res["properties"] = {k: v for k, v in f["properties"].items() if v is not None}
        results.append(res)
    run: dict = {"tool": {"driver": {"name": "fusion-analyze", "version": __version__, "rules": rules}},
                 "columnKind": "unicodeCodePoints", "results": results}
    used = {loc["physicalLocation"]["artifactLocation"]["uriBaseId"]
            for res in results for loc in res.get("locations", []) + res.get("relatedLocations", [])}
    if used:
        run["originalUriBaseIds"] = _base_ids(used, roots or {}, sources)
    if properties:
        run["properties"] = properties
    log = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
    return json.dumps(log, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


_COMMAND = {"error": "error", "warning": "warning", "note": "notice"}
SHOWN_PER_STEP = 10  # GitHub: 10 warning, 10 error and 10 notice annotations per step, 50 per job


def to_annotations(findings: list[dict], roots: dict[str, str] | None = None) -> str:
    """GitHub workflow commands, one line per finding: `::warning file=F,line=N,title=T::message`; a file of a tree
    that `--sarif-root` placed in the repository is named by its path there."""
    lines = []
    for f in findings:
        props = []
        if f.get("file"):
            prefix = (roots or {}).get(tree_base(f["file"]), "")
            props.append(f"file={_prop(prefix + f['file'])}")
            if isinstance(f.get("line"), int) and f["line"] >= 1:
                props.append(f"line={f['line']}")
        props.append(f"title={_prop(f.get('title') or f['rule']['title'] or f['rule']['id'])}")
        lines.append(f"::{_COMMAND.get(f['level'], 'warning')} {','.join(props)}::{_data(f['message'])}")
    if len(lines) > SHOWN_PER_STEP:  # GitHub shows 10 annotations of a kind per step: say how many there are
        lines.append(f"::notice title=fusion-analyze::{len(lines)} annotations; a step shows the first "
                     f"{SHOWN_PER_STEP} of each kind, the SARIF log and the report have all of them")
    return "\n".join(lines) + ("\n" if lines else "")
