"""Fusion patterns: one YAML file per scenario under patterns/<category>/, validated with file:line errors.

A pattern declares op shapes (`forms`) over the walker's op kinds, matched on dataflow. A form marked
`fused_in_model` means the model code already does the fusion; `inactive` forms only appear under a
non-default configuration, given in `when`. `covers` lists the primitive ops a fused kernel or a graph
pass must do to count as this fusion (see patterns/catalog/kernels.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import UserError
from ..resources import data_dir, load_yaml_lines, plain, yaml_error_line
from ..ir.states import STATUSES
from ..ir.texts import LANGS, literal

CATEGORIES = ("norm", "matmul", "moe", "attention", "activation", "vector")
SEVERITIES = ("high", "medium", "low")

_TOP = {
    "id": (str, True), "category": (str, True), "title": (dict, True), "message": (dict, True),
    "severity": (str, True), "covers": (list, True), "optional": (list, False), "forms": (list, True),
    "inactive": (list, False), "interface": (dict, True), "examples": (list, True), "metadata": (dict, False),
    "target": (dict, False), "subsumed_by": (list, False), "estimate": (dict, True), "interfaces": (dict, False),
}
_ESTIMATE = {"saved": (list, True), "launches": (int, True), "needs_tp": (bool, False), "takes": (dict, False)}
_PARAM = {"name": (str, True), "type": (str, True), "shape": (str, False), "dtype": (str, False), "note": (str, False),
          "default": (str, False), "example": (str, False), "weight_of": (str, False)}
_RETURN = {"name": (str, True), "shape": (str, True), "dtype": (str, False), "note": (str, False)}
_FORM = {"id": (str, True), "nodes": (list, True), "skip": (list, False), "fused_in_model": ((str, dict), False),
         "when": ((str, dict), False), "anchor": (str, False), "interface": (str, False), "saved": (list, False)}
_NODE = {"as": (str, True), "kind": ((str, list), True), "from": ((str, list), False),
         "same_input": (str, False), "attrs": (dict, False), "name": (str, False), "kernel": (str, False),
         "not_attrs": (dict, False), "through": (list, False)}
_EXAMPLE = {"name": (str, True), "code": (str, True), "expect": (str, True), "class": (str, False),
            "backend": (str, False)}
_INTERFACE = {"name": (str, True), "params": (list, True), "returns": (list, True), "notes": (list, False),
              "reference": (str, False)}


@dataclass
class Node:
    name: str
    kinds: tuple[str, ...]
    sources: tuple[str, ...] = ()
    same_input: str | None = None
    attrs: dict = field(default_factory=dict)
    not_attrs: dict = field(default_factory=dict)
    op_name: str | None = None
    kernel: str | None = None
    covers: tuple[str, ...] = ()  # one of the op's kernels does at least these primitives (kernels.yaml)
    # op kinds its `from` edges also look through, whose ops may be the producers named there: a branch of
    # those kinds from that producer (a shared expert MLP: its GEMMs, activation and gate, from its first GEMM)
    through: tuple[str, ...] = ()


# The fused form every pattern of two or more primitives has without writing it: a call of one kernel that
# does them all (a patch calling triton_split_qkv_rmsnorm_mrope), so a scenario that got fused stays in the
# report, at that call, instead of vanishing with its unfused ops.
FUSED_KERNEL_FORM = "fused_kernel"
_ONE_KERNEL = literal({"zh": "一次kernel调用完成全部计算", "en": "one kernel call does all of it"})


@dataclass
class Form:
    id: str
    nodes: list[Node]
    skip: tuple[str, ...] = ("view",)
    fused_in_model: str | None = None  # what the model does, in words (a `literal` where the file gives zh and en)
    when: str | None = None  # set for inactive forms
    anchor: str | None = None  # the node whose scope names the opportunity (default: the last)
    # the pattern's other interface (`interfaces.<name>`) a match of this form is given (the MoE experts' grouped
    # GEMM: per expert, not the dense layer's), and what it stops moving in that interface's dimensions
    interface: str | None = None
    saved: tuple[str, ...] = ()

    @property
    def anchor_node(self) -> str:
        return self.anchor or self.nodes[-1].name


@dataclass
class Example:
    name: str
    code: str
    expect: str
    cls: str | None
    backend: str
    line: int


@dataclass
class Pattern:
    id: str
    category: str
    title: dict
    message: dict  # zh, en
    severity: str
    covers: tuple[str, ...]
    optional: tuple[str, ...]
    forms: list[Form]
    inactive: list[Form]
    interface: dict
    examples: list[Example]
    target: dict
    metadata: dict
    file: str
    subsumed_by: tuple[str, ...] = ()
    estimate: dict = field(default_factory=dict)
    interfaces: dict = field(default_factory=dict)  # name -> an interface some forms' matches have instead (Form.interface)

    def interface_of(self, match=None) -> dict:
        """The fused operator's interface for a match: its form's (`interfaces.<name>`) where the form names one,
        else the pattern's."""
        form = getattr(match, "form", None)
        name = getattr(form, "interface", None)
        return self.interfaces[name] if name else self.interface

    def saved_of(self, match=None) -> tuple[str, ...]:
        """What the fusion stops moving (estimate.saved), in the dimensions of the match's interface."""
        form = getattr(match, "form", None)
        return tuple(getattr(form, "saved", ()) or ()) or tuple((self.estimate or {}).get("saved", ()))


class PatternError(UserError):
    pass


def _fail(file: str, line: int, msg: str) -> None:
    raise PatternError(f"{file}:{line}: {msg}")


def _check(mapping, spec: dict, file: str, where: str) -> None:
    if not isinstance(mapping, dict):
        _fail(file, getattr(mapping, "line", 1), f"{where} must be a mapping")
    line = getattr(mapping, "line", 1)
    lines = getattr(mapping, "key_lines", {})
    for key in mapping:
        if key not in spec:
            _fail(file, lines.get(key, line), f"{where}: unknown key `{key}`; allowed: {', '.join(sorted(spec))}")
    for key, (typ, required) in spec.items():
        if key not in mapping:
            if required:
                _fail(file, line, f"{where}: missing key `{key}`")
            continue
        if not isinstance(mapping[key], typ):
            tname = " or ".join(t.__name__ for t in typ) if isinstance(typ, tuple) else typ.__name__
            _fail(file, lines.get(key, line), f"{where}: `{key}` must be a {tname}")


def _as_tuple(v) -> tuple[str, ...]:
    if v is None:
        return ()
    return (v,) if isinstance(v, str) else tuple(str(x) for x in v)


def _form(raw, file: str, where: str, inactive: bool) -> Form:
    _check(raw, _FORM, file, where)
    if inactive and "when" not in raw:
        _fail(file, raw.line, f"{where}: an inactive form needs `when` (the configuration it needs)")
    names: list[str] = []
    nodes = []
    for i, n in enumerate(raw["nodes"]):
        _check(n, _NODE, file, f"{where}.nodes[{i}]")
        for ref_key in ("from", "same_input"):
            for ref in _as_tuple(n.get(ref_key)):
                if ref not in names:
                    _fail(file, n.key_lines.get(ref_key, n.line),
                          f"{where}.nodes[{i}]: `{ref_key}: {ref}` names no earlier node (have: {', '.join(names) or 'none'})")
        names.append(n["as"])
        nodes.append(Node(n["as"], _as_tuple(n["kind"]), _as_tuple(n.get("from")), n.get("same_input"),
                          dict(n.get("attrs") or {}), dict(n.get("not_attrs") or {}), n.get("name"), n.get("kernel"),
                          through=_as_tuple(n.get("through"))))
    if raw.get("anchor") is not None and raw["anchor"] not in names:
        _fail(file, raw.key_lines["anchor"], f"{where}: `anchor: {raw['anchor']}` names no node (have: {', '.join(names)})")
    return Form(raw["id"], nodes, _as_tuple(raw.get("skip")) or ("view",), _words(raw, "fused_in_model", file, where),
                _words(raw, "when", file, where), raw.get("anchor"), raw.get("interface"), _as_tuple(raw.get("saved")))


def _words(raw, key: str, file: str, where: str) -> str | None:
    """A form's text: a plain string, or {zh, en} (said in the report's language)."""
    value = raw.get(key)
    if not isinstance(value, dict):
        return value
    for lang in LANGS:
        if not isinstance(value.get(lang), str):
            _fail(file, raw.key_lines[key], f"{where}: `{key}` needs a `{lang}` string")
    return literal({lang: " ".join(value[lang].split()) for lang in LANGS})


def load_pattern(path: Path, rel: str) -> Pattern:
    try:
        raw = load_yaml_lines(path.read_text(encoding="utf-8"))
    except yaml.MarkedYAMLError as exc:
        _fail(rel, yaml_error_line(exc), f"not valid YAML: {exc.problem or exc}")
    except (OSError, UnicodeDecodeError) as exc:
        raise PatternError(f"{rel}: cannot read pattern file: {exc}")
    _check(raw, _TOP, rel, "pattern")
    kl = raw.key_lines
    if raw["category"] not in CATEGORIES:
        _fail(rel, kl["category"], f"`category: {raw['category']}` is not one of {', '.join(CATEGORIES)}")
    if raw["severity"] not in SEVERITIES:
        _fail(rel, kl["severity"], f"`severity` must be one of {', '.join(SEVERITIES)}")
    if path.parent.name != raw["category"]:
        _fail(rel, kl["category"], f"pattern of category `{raw['category']}` must live in patterns/{raw['category']}/")
    for key in ("title", "message"):
        for lang in LANGS:
            if not isinstance(raw[key].get(lang), str):
                _fail(rel, kl[key], f"`{key}` needs a `{lang}` string")
    _check_interface(raw["interface"], rel, "interface")
    for name, itf in (raw.get("interfaces") or {}).items():
        _check_interface(itf, rel, f"interfaces.{name}")
    _check(raw["estimate"], _ESTIMATE, rel, "estimate")
    forms = [_form(f, rel, f"forms[{i}]", False) for i, f in enumerate(raw["forms"])]
    inactive = [_form(f, rel, f"inactive[{i}]", True) for i, f in enumerate(raw.get("inactive") or [])]
    for key, made in (("forms", forms), ("inactive", inactive)):
        for i, (f, raw_f) in enumerate(zip(made, raw.get(key) or ())):
            if f.interface is not None and f.interface not in (raw.get("interfaces") or {}):
                _fail(rel, raw_f.key_lines["interface"], f"{key}[{i}]: `interface: {f.interface}` names no entry of "
                      f"`interfaces` (have: {', '.join(raw.get('interfaces') or {}) or 'none'})")
    covers = _as_tuple(raw["covers"])
    if len(covers) >= 2:
        forms.append(Form(FUSED_KERNEL_FORM, [Node("fused", ("kernel",), covers=covers)], skip=(),
                          fused_in_model=_ONE_KERNEL))
    examples = []
    for i, e in enumerate(raw["examples"]):
        _check(e, _EXAMPLE, rel, f"examples[{i}]")
        if e["expect"] not in STATUSES + ("none",):
            _fail(rel, e.key_lines["expect"], f"examples[{i}]: `expect` must be one of {', '.join(STATUSES)}, none")
        backend = e.get("backend", "cuda")
        if backend not in ("cuda", "ascend"):
            _fail(rel, e.key_lines["backend"], f"examples[{i}]: `backend` must be cuda or ascend")
        examples.append(Example(e["name"], e["code"], e["expect"], e.get("class"), backend, e.line))
    message = {lang: " ".join(raw["message"][lang].split()) for lang in LANGS}
    return Pattern(raw["id"], raw["category"], dict(raw["title"]), message, raw["severity"],
                   _as_tuple(raw["covers"]), _as_tuple(raw.get("optional")), forms, inactive,
                   plain(raw["interface"]), examples, plain(raw.get("target") or {}),
                   plain(raw.get("metadata") or {}), rel, _as_tuple(raw.get("subsumed_by")), plain(raw["estimate"]),
                   {str(k): plain(v) for k, v in (raw.get("interfaces") or {}).items()})


def _check_interface(itf, rel: str, where: str) -> None:
    _check(itf, _INTERFACE, rel, where)
    for i, note in enumerate(itf.get("notes") or ()):
        if not isinstance(note, str):  # `[a: b]` in a flow list is a mapping: the note would print as a dict
            _fail(rel, itf.key_lines.get("notes", itf.line), f"{where}.notes[{i}] must be a string (quote a note that holds `: `)")
    for i, prm in enumerate(itf["params"]):
        _check(prm, _PARAM, rel, f"{where}.params[{i}]")
    for i, ret in enumerate(itf["returns"]):
        _check(ret, _RETURN, rel, f"{where}.returns[{i}]")


def builtin_dir() -> Path:
    return data_dir("patterns")


def load_patterns(extra: str | Path | None = None) -> list[Pattern]:
    """The built-in patterns, then those of `extra` (a directory) adding to or replacing them by id."""
    found: dict[str, Pattern] = {}
    roots = [(builtin_dir(), "patterns")]
    if extra is not None:
        p = Path(extra)
        if not p.is_dir():
            raise PatternError(f"--patterns {extra}: not a directory; give a folder with <category>/<id>.yaml files")
        roots.append((p, str(extra).rstrip("/")))
    for root, label in roots:
        local: dict[str, str] = {}
        for f in sorted(root.glob("*/*.yaml")):
            if f.parent.name == "catalog":
                continue
            rel = f"{label}/{f.relative_to(root).as_posix()}"
            pat = load_pattern(f, rel)
            if pat.id in local:
                raise PatternError(f"{rel}:1: pattern id `{pat.id}` is also defined in {local[pat.id]}; ids must be unique")
            local[pat.id] = rel
            found[pat.id] = pat
    for pat in found.values():
        for other in pat.subsumed_by:
            if other not in found:
                raise PatternError(f"{pat.file}:1: `subsumed_by` names unknown pattern `{other}`")
    return [found[k] for k in sorted(found)]
