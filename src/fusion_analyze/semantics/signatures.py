"""How a call binds a function's parameters, read from the function's signature: below the values and the
function-body tables, which both bind calls (values.Bindings.for_call, function_bodies' readers)."""

from __future__ import annotations

import libcst as cst


def signature(fn: cst.FunctionDef, skip_self: bool = True) -> tuple[list[cst.Param], list[cst.Param]]:
    """(positional parameters, positional-only ones included, less a leading self/cls; keyword-only ones)."""
    positional = list(fn.params.posonly_params) + list(fn.params.params)
    if skip_self and positional and positional[0].name.value in ("self", "cls"):
        positional = positional[1:]
    return positional, list(fn.params.kwonly_params)


def bind_arguments(fn: cst.FunctionDef, args: list, kwargs: dict, skip_self: bool = True) -> list[tuple[str, object]]:
    """(parameter name, argument) as Python binds a call: positional arguments in order, then keywords that name
    a parameter (positional-only parameters take no keyword). The one binder every reader of calls uses."""
    positional, kwonly = signature(fn, skip_self)
    out = [(p.name.value, a) for p, a in zip(positional, args)]
    by_keyword = {p.name.value for p in positional if p not in fn.params.posonly_params} | {p.name.value for p in kwonly}
    return out + [(k, v) for k, v in kwargs.items() if k in by_keyword]


def none_defaults(fn: cst.FunctionDef, skip_self: bool = True) -> list[str]:
    """Parameters whose default is None."""
    positional, kwonly = signature(fn, skip_self)
    return [p.name.value for p in positional + kwonly if type(p.default) is cst.Name and p.default.value == "None"]


def call_arguments(call: cst.Call) -> tuple[list, dict]:
    """The positional and keyword argument expressions of a call (starred ones are not bound statically)."""
    return ([a.value for a in call.args if a.keyword is None and not a.star],
            {a.keyword.value: a.value for a in call.args if a.keyword is not None})
