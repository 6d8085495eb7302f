"""What another configuration value would build where the configuration decided a choice: the returns of a
factory's branches it ruled out (`get_rope`'s elif chain on `rope_type`) and the other entries of a registry
keyed by a config string (`_ACTIVATION_AND_MUL_REGISTRY[hidden_act]`), each with the test that selects it and
where. A choice that the code decides without the configuration (a ROCm branch, a parameter's default) has no
such alternatives."""

from __future__ import annotations

import libcst as cst

from .evaluator import Evaluator
from .values import Known, Truth, as_text, join, literal, selecting


class OtherChoices:
    """Mixin of construct.Constructor (it provides evaluate(), index and the `_quiet` counter)."""

    _blind: Evaluator | None = None

    @property
    def blind(self) -> Evaluator:
        """An evaluator that knows the platform, the device and the code but not the configuration (nor `self.x`, whose
        values are cached with the configuration's): a choice it decides too was not the configuration's."""
        if self._blind is None:
            self._blind = Evaluator(self.index.backend, calls=self.evaluator.calls)
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
                        found.append((alt.cls, as_text(short) or "", module.rel, module.line_of(stmt), selects))
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
                value = el.value.body if isinstance(el.value, cst.Lambda) else el.value
                for alt in self.evaluate(value, where, depth + 1):
                    if alt.cls is not None:
                        found.append((alt.cls, f"{key_text} == {k!r}", where.module.rel, where.module.line_of(el),
                                      [(key_text, k)]))
        finally:
            self._quiet -= 1
        return _unique(found)


def _key(el):
    if not isinstance(el, cst.DictElement):
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
