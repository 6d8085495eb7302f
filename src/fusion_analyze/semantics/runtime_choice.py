"""Choices the runtime makes per forward from the deployment, decided by running the tree's own selection code
with the evaluator: vllm-ascend's MoE communication method (`select_moe_comm_method(num_tokens, vllm_config)`,
walk.yaml `runtime.moe_comm`), once per runtime path (decode, prefill: their token counts differ, and MC2 has
a token capacity). The selection function's locals are read in order, its parameters are the deployment's
`vllm_config` (ir/deployment.py) and the path's token count, and what it calls of vLLM's runtime
(`get_ep_group()`, `get_mc2_tokens_capacity()`, `get_ascend_config()`, the hardware profile) is answered by
the environment. Nothing is guessed: a choice the code does not decide with these values is reported open.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst

from ..index.nodes import find_all
from .function_bodies import tables
from .scope import Scope
from .values import Known


@dataclass(frozen=True)
class CommChoice:
    path: str  # decode, prefill
    tokens: int
    member: str | None  # "MoECommType.MC2"; None: not decided
    cls: Any  # index.Definition of the comm class registered for it (None: not decided)
    why: str = ""  # what was not known, where member is None


def moe_comm_choices(env, evaluator, scenarios: dict, num_experts: int | None) -> list[CommChoice] | None:
    """The comm class per runtime path, or None where the deployment states no parallel sizes or the tree has
    no such selection (older designs: one comm method, or the choice made elsewhere)."""
    from ..catalog import catalog

    spec = catalog().typed.walk.runtime.moe_comm or {}
    index, deployment = env.index, env.deployment
    if not spec or index is None or env.parallel_value("ep") is None:
        return None
    mod, _, name = str(spec.get("select", "")).rpartition(".")
    fn_def = index.lookup(mod, name)
    reg_mod, _, reg_name = str(spec.get("registry", "")).rpartition(".")
    registry = index.lookup(reg_mod, reg_name)
    if getattr(fn_def, "kind", None) != "function" or getattr(registry, "kind", None) != "function":
        return None
    registered = _registered_by_member(registry, index, evaluator)
    config = Known(deployment.vllm_config(num_experts))
    out = []
    for path, scen in sorted(scenarios.items(), key=lambda kv: (kv[0] != "decode", kv[0])):
        tokens = int(scen.get("num_tokens") or 0)
        value = _select(evaluator, fn_def, {"num_tokens": Known(tokens), "vllm_config": config,
                                            "is_draft_model": Known(False)})
        found = registered.get(repr(value.value)) if isinstance(value, Known) else None
        if found is None:
            why = getattr(value, "why", "") or f"{value!r} names no registered class"
            out.append(CommChoice(path, tokens, None, None, why))
            continue
        out.append(CommChoice(path, tokens, found[0], found[1]))
    return out


def _select(evaluator, fn_def, params: dict):
    """The value the selection function returns: its one `return <local>` read from the locals it assigns
    under their tests (an early `return` for another kind of model is not this one's path)."""
    fn, module = fn_def.node, fn_def.module
    table = tables(fn, module)
    scope = Scope(module=module, values=dict(params))
    for p in fn.params.params:  # parameters not handed: their defaults
        if p.name.value not in params and p.default is not None:
            scope.defaults[p.name.value] = p.default
    for name, value, cond, _pos in table.local_assignments:
        scope.locals.setdefault(name, []).append((value, cond))
    last = fn.body.body[-1] if fn.body.body else None
    ret = last.body[-1] if type(last) is cst.SimpleStatementLine and last.body else None
    if type(ret) is not cst.Return or ret.value is None:
        from .values import Unknown

        return Unknown(f"{fn_def.name} does not end in a return")
    return evaluator.infer(ret.value, scope)


def _registered_by_member(registry, index, evaluator) -> dict:
    """`_MoECommMethods[key(MoECommType.MC2, ...)] = MC2CommImpl(...)`: the member's value (repr) -> (the
    member as written, the class registered for it), read from the registry function's statements."""
    out: dict = {}
    where = Scope(module=registry.module)
    for stmt in find_all(registry.node, cst.Assign):
        target = stmt.targets[0].target if stmt.targets else None
        if type(target) is not cst.Subscript or type(stmt.value) is not cst.Call:
            continue
        members = [a for a in find_all(target, cst.Attribute) if type(a.value) is cst.Name]
        cls = index.resolve_expr(registry.module, stmt.value.func)
        if not members or getattr(cls, "kind", None) != "class":
            continue
        value = evaluator.infer(members[0], where)
        if isinstance(value, Known):
            out.setdefault(repr(value.value), (f"{members[0].value.value}.{members[0].attr.value}", cls))
    return out


def decided_return(evaluator, owner, fn: cst.FunctionDef, fields: dict):
    """What a method of `owner` (a class) returns where `self.<field>` is `fields[field]` (a Value), its
    first return whose tests hold; None where no return is decided."""
    from .values import Bindings

    scope = Scope(module=owner.module, fields=dict(fields), cls=owner)
    table = tables(fn, owner.module)
    for name, value, cond, _pos in table.local_assignments:
        scope.locals.setdefault(name, []).append((value, cond))
    returns = table.returns_decided(Bindings(), evaluator, scope)
    if returns and returns[0][1] is None:
        got = evaluator.infer(returns[0][0], scope)
        return got.value if isinstance(got, Known) else None
    return None
