"""The runtime paths of an attention backend (decode and prefill of a text-generation decoder): on which of
them each kernel of an attention op can run, and what is left of its condition there. The values each path
hands the backend's forward are data (walk.yaml `runtime.attention_paths`), read as code of the backend's
module by the one evaluator; a kernel whose tests fail on a path does not run there (the pooling-only
`npu_fusion_attention` of an encoder runs on neither). status/derive.py cites the first path's kernel."""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from ...index.facts import FactTable
from ...catalog import catalog
from ...ir.ops import Kernel
from ...semantics.scope import Scope
from ...semantics.values import Known, NotNone, Unknown, Value
from ...ir.conditions import Truth, any_of_text

ATTENTION_PATHS = FactTable("attention_paths", "a backend -> {path: {name: the value the path hands the backend}}")


def attention_paths(index, evaluator) -> dict[str, dict[str, Value]]:
    """path name -> {name: value} for the index's backend, in the data's order; {} when it has none. Read once
    per session (the values are the backend's, not a model's)."""
    key = index.backend
    if key not in ATTENTION_PATHS.of(index):
        spec = catalog().typed.walk.runtime.attention_paths.get(index.backend or "")
        module = index.get(spec.module) if spec is not None else None
        out: dict[str, dict[str, Value]] = {}
        for name, values in spec.paths.items() if spec is not None and module is not None else ():
            out[name] = {k: _value(v, module, evaluator) for k, v in values.items()}
        ATTENTION_PATHS.of(index)[key] = out
    return ATTENTION_PATHS.of(index)[key]


def _value(spec, module, evaluator) -> Value:
    if isinstance(spec, dict):  # an object whose attributes the code reads (attn_metadata.attn_state)
        fields = {k: _value(v, module, evaluator) for k, v in spec.items()}
        return Known({k: v.value for k, v in fields.items() if isinstance(v, Known)})
    if spec == "not None":
        return NotNone("handed in by the runtime")
    try:
        expr = cst.parse_expression(str(spec))
    except cst.ParserSyntaxError:
        return Unknown(f"`{spec}` is not an expression")
    return evaluator.infer(expr, Scope(module=module))


def place_on_paths(kernels: list[Kernel], paths: dict[str, dict[str, Value]], evaluator) -> list[Kernel]:
    """Each kernel with the paths its condition can hold on: (path, the undecided rest of the condition there,
    how many of those tests must hold rather than fail: the branch a default configuration takes is the one
    whose tests all fail, `else` after `else`)."""
    if not paths:
        return kernels
    scopes: dict = {}  # (path, module) -> Scope: one per module the terms are in, kept alive for the memo
    out = []
    def on(cond, name, values):
        """(runs, the rest of `cond` there, how many of those tests must hold) on one path."""
        rest, positive = [], 0
        for term in cond.terms if cond else ():
            scope = scopes.get((name, id(term.module)))
            if scope is None:
                scope = scopes[(name, id(term.module))] = Scope(module=term.module, values=values)
            truth = evaluator.term_truth(term, scope=scope) if term.expr is not None else Truth.UNKNOWN
            if truth is Truth.FALSE:
                return False, None, 0
            if truth is Truth.UNKNOWN:
                rest.append(" ".join(term.render().split()))
                positive += not (term.negated or term.text.startswith("not "))
        return True, " and ".join(rest) or None, positive

    for k in kernels:
        placed = []
        for name, values in paths.items():
            if not k.alts:
                runs, rest, positive = on(k.cond, name, values)
                if runs:
                    placed.append((name, rest, positive))
                continue
            # reached on several call paths: it runs on this runtime path when one of them can
            there = [on(c, name, values) for c in k.alts]
            there = [(rest, positive) for runs, rest, positive in there if runs]
            if there:
                rests = sorted({rest for rest, _p in there}, key=str)
                rest = None if None in rests else rests[0] if len(rests) == 1 else any_of_text(rests)
                placed.append((name, rest, min(p for _r, p in there)))
        out.append(replace(k, paths=tuple(placed)))
    return out
