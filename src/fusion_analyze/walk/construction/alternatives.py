"""What another configuration value would build where the configuration decided a choice: the returns of a
factory's branches it ruled out (`get_rope`'s elif chain on `rope_type`) and the other entries of a registry
keyed by a config string (`_ACTIVATION_AND_MUL_REGISTRY[hidden_act]`), each with the test that selects it and
where. A choice that the code decides without the configuration (a ROCm branch, a parameter's default) has no
such alternatives. Also the registry lookup itself (`REGISTRY[key]`, the registry named directly, by a local,
or as `types or DEFAULT_TYPES`)."""

from __future__ import annotations

from typing import NamedTuple

import libcst as cst

from ...catalog import catalog
from ...index.modules import Definition
from ...semantics.evaluator import Evaluator
from ...semantics.scope import Scope
from ...semantics.values import Known, literal, selecting
from ...ir.conditions import Condition, Truth, as_text, join

MAX_DEPTH = catalog().limit("construct_depth")


def literal_key(expr):
    """The Python value of a dict key literal ("silu"), else None."""
    known = literal(expr) if expr is not None else None
    return known.value if known is not None else None


class OtherChoice(NamedTuple):
    """What another value of the configuration would build here: the class, the test that selects it, where
    (file, line), and the (key, value) pairs that select it."""

    cls: object  # index.Definition of the class
    condition: str
    file: str
    line: int
    selects: list


class OtherChoices:
    """Mixin of constructor.Constructor (it provides evaluate(), index and the `_quiet` counter)."""

    _blind: Evaluator | None = None

    @property
    def blind(self) -> Evaluator:
        """An evaluator that knows the platform, the device and the code but not the configuration (nor `self.x`, whose
        values are cached with the configuration's): a choice it decides too was not the configuration's."""
        if self._blind is None:
            self._blind = Evaluator(self.evaluator.env.without_config())
        return self._blind

    def _others(self, module, ruled_out: list, scope, depth: int) -> list[tuple]:
        """(class, condition, file, line, selecting values) of what the returns the configuration ruled out
        build."""
        found: list[tuple] = []
        self._quiet += 1  # what those build lists no choices of its own
        try:
            for value, cond, stmt in ruled_out:
                if self.blind.condition_truth(cond, scope=scope) is Truth.FALSE:
                    continue
                for alt in self.evaluate(value, scope, depth + 1):
                    if alt.cls is not None:
                        short, selects = selecting(join(cond, alt.condition))
                        found.append(OtherChoice(alt.cls, as_text(short) or "", module.rel, module.line_of(stmt), selects))
        finally:
            self._quiet -= 1
        return _unique(found)

    def _registry_others(self, node: cst.Dict, where, chosen_key, key, key_text: str, scope, depth: int) -> list[tuple]:
        """The entries of a registry dict other than the one a configuration value selected."""
        if self._quiet or isinstance(self.blind.infer(key, scope), Known):
            return []
        found: list[tuple] = []
        self._quiet += 1
        try:
            for el in node.elements:
                k = _key(el)
                if k is None or k == chosen_key:
                    continue
                value = el.value.body if type(el.value) is cst.Lambda else el.value
                for alt in self.evaluate(value, where, depth + 1):
                    if alt.cls is not None:
                        found.append(OtherChoice(alt.cls, f"{key_text} == {k!r}", where.module.rel, where.module.line_of(el),
                                      [(key_text, k)]))
        finally:
            self._quiet -= 1
        return _unique(found)

    def _dict_values(self, expr, key, scope: Scope, depth: int) -> list:
        """A registry lookup `REGISTRY[key]` (a dict literal, or `LazyDict({...: lambda: Layer()})`): the entry
        the key selects when the evaluator knows it, else every entry (alternatives, with their key)."""
        node = None
        if type(expr) is cst.BooleanOperation and type(expr.operator) is cst.Or:  # `types or DEFAULT_TYPES`
            left = self.evaluator.infer(expr.left, scope)
            return self._dict_values(expr.right if isinstance(left, Known) and not left.value else expr.left, key,
                                     scope, depth + 1) if depth < MAX_DEPTH else []
        if type(expr) is cst.Name and len(scope.locals.get(expr.value, ())) == 1 and depth < MAX_DEPTH:
            return self._dict_values(scope.locals[expr.value][0][0], key, scope, depth + 1)  # a local naming it
        if type(expr) is cst.Name:
            target = self.index.lookup(scope.module.name, expr.value)
            if isinstance(target, Definition) and target.kind == "assign":
                value = target.node
                if type(value) is cst.Call and value.args and isinstance(value.args[0].value, (cst.Dict, cst.Name)):
                    value = value.args[0].value  # LazyDict({...}), ClassInstantier(ACT2CLS)
                    if type(value) is cst.Name:
                        inner = self.index.lookup(target.module.name, value.value)
                        value = inner.node if isinstance(inner, Definition) and inner.kind == "assign" else None
                if type(value) is cst.Dict:
                    node, where = value, Scope(module=target.module)
        if node is None:
            return []
        known = self.evaluator.infer(key, scope) if key is not None else None
        entries = [(literal_key(el.key), el.value) for el in node.elements if type(el) is cst.DictElement]
        chosen = isinstance(known, Known) and any(k == known.value for k, _v in entries)
        if chosen:
            entries = [(k, v) for k, v in entries if k == known.value]
        origin = self.evaluator.origin(key, scope) if key is not None else None
        key_text = origin[1].module.code(origin[0]).strip() if origin is not None else None
        out = []
        for k, value in entries:
            if type(value) is cst.Lambda:
                value = value.body  # a lazy entry: the lambda builds it when asked
            if type(value) is cst.Tuple and value.elements:
                value = value.elements[0].value  # (class, its keyword arguments)
            for alt in self.evaluate(value, where, depth + 1):
                if not chosen and key_text and k is not None:  # which value of the key selects this entry
                    alt.condition = join(Condition.note(f"{key_text} == {k!r}"), alt.condition)
                out.append(alt)
        if chosen and key_text:
            for alt in out:
                alt.decided = self._registry_others(node, where, known.value, key, key_text, scope, depth)
        return out



def _key(el):
    if not type(el) is cst.DictElement:
        return None
    known = literal(el.key)
    return known.value if known is not None else None


def _unique(found: list[tuple]) -> list[tuple]:
    seen, out = set(), []
    for item in found:
        if (item[0].qualname, item[1]) not in seen:
            seen.add((item[0].qualname, item[1]))
            out.append(item)
    return out
