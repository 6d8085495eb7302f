"""Decide branch conditions statically where the facts allow it; otherwise say 'unknown' (None)."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from .taxonomy import assumed


@dataclass
class Facts:
    """What is known at one call: which parameters are None, which attributes hold which classes."""

    none: dict[str, bool] = field(default_factory=dict)  # param -> is None?
    attr_classes: dict[str, list[str]] = field(default_factory=dict)  # "self.rotary_emb" -> class + bases

    def key(self) -> tuple:
        return (tuple(sorted(self.none.items())), tuple(sorted((k, tuple(v)) for k, v in self.attr_classes.items())))

    def for_call(self, fn: cst.FunctionDef, call: cst.Call, module) -> "Facts":
        """Facts for a helper called with `call`: None-ness of its parameters from the arguments."""
        params = [p for p in list(fn.params.params) if p.name.value not in ("self", "cls")]
        new = Facts(dict(), dict(self.attr_classes))
        for p in params + list(fn.params.kwonly_params):
            if p.default is not None and isinstance(p.default, cst.Name) and p.default.value == "None":
                new.none[p.name.value] = True
        pos = [a for a in call.args if a.keyword is None and not a.star]
        for p, a in zip(params, pos):
            state = self._arg_none(a.value)
            if state is not None:
                new.none[p.name.value] = state
            else:
                new.none.pop(p.name.value, None)
        for a in call.args:
            if a.keyword is not None:
                state = self._arg_none(a.value)
                if state is not None:
                    new.none[a.keyword.value] = state
                else:
                    new.none.pop(a.keyword.value, None)
        return new

    def _arg_none(self, expr) -> bool | None:
        if isinstance(expr, cst.Name):
            if expr.value == "None":
                return True
            return self.none.get(expr.value)
        return False


def evaluate(expr: cst.BaseExpression, module, facts: Facts) -> bool | None:
    """True / False when the facts or the assume-table decide it, else None."""
    text = module.code(expr).strip()
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        inner = evaluate(expr.expression, module, facts)
        return None if inner is None else not inner
    if isinstance(expr, cst.BooleanOperation):
        left = evaluate(expr.left, module, facts)
        right = evaluate(expr.right, module, facts)
        if isinstance(expr.operator, cst.And):
            if left is False or right is False:
                return False
            return True if left is True and right is True else None
        if left is True or right is True:
            return True
        return False if left is False and right is False else None
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        comp = expr.comparisons[0]
        op = comp.operator
        if isinstance(comp.comparator, cst.Name) and comp.comparator.value == "None" and isinstance(expr.left, cst.Name):
            state = facts.none.get(expr.left.value)
            if state is not None:
                if isinstance(op, cst.Is):
                    return state
                if isinstance(op, cst.IsNot):
                    return not state
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "isinstance" and len(expr.args) == 2:
        subject = module.code(expr.args[0].value).strip()
        classes = facts.attr_classes.get(subject)
        if classes is not None:
            wanted = expr.args[1].value
            names = [e.value for e in wanted.elements] if isinstance(wanted, cst.Tuple) else [wanted]
            tails = {module.code(n).strip().rsplit(".", 1)[-1] for n in names}
            return bool(tails & set(classes))
    return assumed(text)
