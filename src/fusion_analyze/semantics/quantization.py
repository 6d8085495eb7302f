"""A quantised checkpoint's layers, as vllm-ascend builds them (walk.yaml `runtime.quantization`).

vllm-ascend's msmodelslim config (`quantization/configs/modelslim_config.py`) gives each layer the scheme its
weights were quantised with: `get_quant_type_for_layer` reads the checkpoint's `quant_model_description.json`
by the layer's prefix (a packed layer by its shards, which must agree; "FLOAT" is no quantisation), and
`create_scheme_for_layer` takes the class registered for (type, layer kind) with `@register_scheme`. Here:
- the packed-module mapping is read from the trees: the model class's `packed_modules_mapping` (its class
  body and the entries its `__init__` adds), vllm-ascend's per-model-type additions, and the experts' shards
  found in the description, as `_update_packed_modules_mapping` does;
- the scheme classes are read from the `register_scheme` decorators of the trees;
- a layer is found in the description by its path in the walk (`model.layers.mlp.experts`) against the keys
  with their layer numbers taken out: the keys whose module path shares the longest suffix with the layer's.
  The types of those keys (every layer of the model) must agree; where layers differ, the layer's type is not
  known, and the report says so.
Nothing is guessed: a layer without keys is unquantised (as vllm-ascend builds it), one with mixed types is
unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import libcst as cst

from ..index.nodes import find_all
from .values import Known, literal


@dataclass(frozen=True)
class LayerQuant:
    quant_type: str | None  # "W8A8_DYNAMIC"; None: FLOAT or not in the description (unquantised)
    scheme: Any  # index.Definition of the registered scheme class, None where none
    keys: tuple = ()  # the description's keys read (up to a few, as evidence)
    types: dict = field(default_factory=dict)  # quant type -> number of keys, where the layers do not agree
    why: str = ""

    @property
    def mixed(self) -> bool:
        return len(self.types) > 1


class Quantization:
    """One per analysis of a quantised deployment: the description, the packed mapping, the schemes."""

    def __init__(self, env, model_cls, ctor):
        from ..catalog import catalog

        self.env, self.index, self.model_cls, self.ctor = env, env.index, model_cls, ctor
        self.spec = (catalog().typed.walk.runtime.quantization or {}).get(env.deployment.quantization) or {}
        self.description = env.deployment.quant_description or {}
        self._cache: dict = {}

    @property
    def active(self) -> bool:
        return bool(self.spec) and bool(self.description)

    @cached_property
    def packed(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for cls in self.ctor.mro(self.model_cls) if self.model_cls is not None else ():
            for name, shards in _class_mapping(cls, self.spec.get("packed_attr", "packed_modules_mapping")).items():
                out.setdefault(name, shards)
        by_type = self._module_dict(self.spec.get("packed_by_model_type", ""))
        model_type = self._model_type()
        if model_type and isinstance(by_type.get(model_type), dict):
            out.update({k: list(v) for k, v in by_type[model_type].items() if isinstance(v, (list, tuple))})
        if "experts" not in out:  # the experts' shards found in the description (`experts.0.<name>`)
            names = sorted({m.group(1) for k in self.description
                            if (m := re.search(r"\.experts\.\d+\.(\w+)\.weight$", k))})
            if names:
                out["experts"] = [f"experts.0.{n}" for n in names]
        return out

    def _model_type(self) -> str | None:
        got = self.env.config.attr("model_type") if self.env.config is not None else None
        return got.value if isinstance(got, Known) and isinstance(got.value, str) else None

    def _module_dict(self, qualname: str) -> dict:
        mod, _, name = qualname.rpartition(".")
        info = self.index.get(mod) if mod else None
        defs = [d for d in (info.defs.get(name, ()) if info is not None else ()) if d.kind == "assign"]
        if len(defs) != 1:
            return {}
        got = _literal_dict(defs[0].node)
        return got if isinstance(got, dict) else {}

    @cached_property
    def schemes(self) -> dict[tuple[str, str], object]:
        """(quant type, layer kind) -> the class the trees register for it (`@register_scheme("W8A8", "linear")`)."""
        package, decorator = self.spec.get("schemes_in", ""), self.spec.get("register", "register_scheme")
        out: dict = {}
        for _info, d, call in self.index.decorated_classes(package, decorator):
            if len(call.args) >= 2:
                qt, kind = literal(call.args[0].value), literal(call.args[1].value)
                if qt is not None and kind is not None:
                    out.setdefault((qt.value, kind.value), d)
        return out

    @cached_property
    def _keys(self) -> dict[str, list[tuple[str, str, list[str]]]]:
        """The description's weight keys by their module's last name: (key, type, module path without layer
        and expert numbers), read once."""
        out: dict = {}
        for k, v in self.description.items():
            if k.endswith(".weight") and isinstance(v, str):
                have = [p for p in k[: -len(".weight")].split(".") if not p.isdigit()]
                if have:
                    out.setdefault(have[-1], []).append((k, v, have))
        return out

    def for_layer(self, path: str, kind: str) -> LayerQuant:
        """What the layer at walk path `path` is quantised with, as a layer of `kind` ("linear", "moe")."""
        key = (path, kind)
        if key not in self._cache:
            self._cache[key] = self._for_layer(path, kind)
        return self._cache[key]

    def _for_layer(self, path: str, kind: str) -> LayerQuant:
        parts = [p for p in path.split(".") if p and not p.isdigit()]
        if not parts:
            return LayerQuant(None, None, why="no path")
        name = parts[-1]
        shards = self.packed.get(name, [name])
        types: dict[str, int] = {}
        keys: list[str] = []
        for shard in shards:
            want = parts[:-1] + [p for p in shard.split(".") if not p.isdigit()]
            best, chosen = 0, []
            for k, v, have in self._keys.get(want[-1], ()):
                score = _common_suffix(want, have)
                if score < len(want[-1:]) or score == 0:
                    continue
                if score > best:
                    best, chosen = score, [(k, v)]
                elif score == best:
                    chosen.append((k, v))
            for k, v in chosen:
                types[v] = types.get(v, 0) + 1
            keys += [k for k, _v in chosen[:2]]
        if not types:
            return LayerQuant(None, None, tuple(keys), why="no key of the description names it: unquantised")
        if len(types) > 1:
            said = ", ".join(f"{t} × {n}" for t, n in sorted(types.items()))
            return LayerQuant(None, None, tuple(keys), dict(types), why=f"the layers differ ({said})")
        (qt,) = types
        if qt == "FLOAT":
            return LayerQuant(None, None, tuple(keys), why="FLOAT: unquantised")
        scheme = self.schemes.get((qt, kind))
        return LayerQuant(qt, scheme, tuple(keys),
                          why="" if scheme is not None else f"no scheme registered for ({qt}, {kind})")


def _common_suffix(a: list[str], b: list[str]) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def _literal_dict(node) -> dict | None:
    """A dict literal of string keys and list-of-string (or nested dict) values."""
    if type(node) is not cst.Dict:
        return None
    out: dict = {}
    for el in node.elements:
        if type(el) is not cst.DictElement:
            continue
        k = literal(el.key)
        if k is None or not isinstance(k.value, str):
            continue
        if type(el.value) is cst.Dict:
            out[k.value] = _literal_dict(el.value) or {}
        else:
            v = _strings(el.value)
            if v is not None:
                out[k.value] = v
    return out


def _strings(node) -> list[str] | None:
    """`["q_proj", "k_proj"]` (a list or tuple of string literals) as a list; None for anything else."""
    if type(node) not in (cst.List, cst.Tuple):
        return None
    out = []
    for el in node.elements:
        v = literal(el.value)
        if v is None or not isinstance(v.value, str):
            return None
        out.append(v.value)
    return out


def _class_mapping(cls, attr: str) -> dict[str, list[str]]:
    """The class body's `attr = {...}` and its `__init__`'s `self.<attr>["k"] = [...]` (every one of them: an
    entry for a layer the model does not build is never asked for)."""
    out: dict[str, list[str]] = {}
    node = cls.skeleton
    for stmt in node.body.body if type(node.body) is cst.IndentedBlock else []:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else []:
            if isinstance(small, cst.Assign) and small.targets:
                target, value = small.targets[0].target, small.value
            elif isinstance(small, cst.AnnAssign):
                target, value = small.target, small.value
            else:
                continue
            if isinstance(target, cst.Name) and target.value == attr and value is not None:
                out.update(_literal_dict(value) or {})
    for assign in find_all(cls.node, cst.Assign):
        target = assign.targets[0].target if assign.targets else None
        if (type(target) is cst.Subscript and type(target.value) is cst.Attribute
                and type(target.value.value) is cst.Name and target.value.value.value == "self"
                and target.value.attr.value == attr and len(target.slice) == 1
                and type(target.slice[0].slice) is cst.Index):
            k, v = literal(target.slice[0].slice.value), _strings(assign.value)
            if k is not None and isinstance(k.value, str) and v is not None:
                out.setdefault(k.value, v)
    return out
