"""Names visible while code is read statically (an __init__, a factory, a helper), and how a call binds
them: its arguments (each read later where it was written), the defaults it leaves, and the keywords a
`**kwargs` parameter collects for a call that passes them on."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from .signatures import bind_arguments, call_arguments, signature


@dataclass
class Scope:
    """Names visible while evaluating an __init__ or factory body."""

    module: object  # ModuleInfo the code lives in
    params: dict[str, tuple] = field(default_factory=dict)  # name -> (expr, Scope) bound at the call
    defaults: dict[str, cst.BaseExpression] = field(default_factory=dict)
    locals: dict[str, list[tuple]] = field(default_factory=dict)  # name -> [(expr, Condition | None)]
    owner: object = None  # the walk.construction.Instance whose __init__ this is (for self.y)
    values: dict = field(default_factory=dict)  # name -> Value handed in as such (what vLLM's runtime passes)
    star_kwargs: dict = field(default_factory=dict)  # `**kwargs` param -> {keyword: (expr, Scope)} it collected
    fills: dict[str, list[tuple]] = field(default_factory=dict)  # local list -> [(appended expr, Condition | None)]
    version: int = 0  # bumped whenever `locals` changes: the evaluator's memo of names is keyed by it
    fields: dict = field(default_factory=dict)  # attribute -> Value every unknown object carries (Bindings.fields)
    cls: object = None  # the class whose method is read (index.Definition), where no instance is: for `self.m()`
    instances: dict = field(default_factory=dict)  # local -> the Instance it holds (a decoder loop's `layer`)
    objects: dict = field(default_factory=dict)  # local -> the class of the object it holds (Bindings.objects)


def bind_params(fn: cst.FunctionDef, call: cst.Call | None, call_scope: Scope | None, scope: Scope, skip_self: bool) -> None:
    """The parameters of `fn` in `scope`: their defaults, and the argument expressions `call` binds (each read
    later in `call_scope`, where it was written)."""
    positional, kwonly = signature(fn, skip_self)
    for p in positional + kwonly:
        if p.default is not None:
            scope.defaults[p.name.value] = p.default
    if call is None or call_scope is None:
        return
    args, keywords = call_arguments(call)
    given = {k: (v, call_scope) for k, v in keywords.items()}
    for a in call.args:  # f(..., **kwargs) inside a function that collected them: the caller's own keywords
        if a.star == "**" and type(a.value) is cst.Name:
            for k, found in getattr(call_scope, "star_kwargs", {}).get(a.value.value, {}).items():
                given.setdefault(k, found)
    bound = set()
    for name, expr in bind_arguments(fn, args, {k: v for k, (v, _w) in given.items()}, skip_self=skip_self):
        scope.params[name] = (expr, given[name][1]) if name in given and given[name][0] is expr else (expr, call_scope)
        bound.add(name)
    star = fn.params.star_kwarg
    if type(star) is cst.Param:  # the keywords no parameter takes, for a `**kwargs` passed on
        scope.star_kwargs[star.name.value] = {k: w for k, w in given.items() if k not in bound}


def copy_chain(chain: list[tuple]) -> list[tuple]:
    """A bound __init__ chain [(class, fn, Scope)] with scopes of its own (their locals get filled), sharing
    the bindings; an argument read in an earlier scope of the chain is read in that scope's copy."""
    copies: dict[int, Scope] = {}
    out = []
    for c, fn, scope in chain:
        def mine(bound: tuple) -> tuple:
            return (bound[0], copies[id(bound[1])]) if id(bound[1]) in copies else bound
        fresh = Scope(module=scope.module, params={k: mine(v) for k, v in scope.params.items()},
                      defaults=scope.defaults, owner=scope.owner,
                      star_kwargs={k: {kw: mine(v) for kw, v in got.items()} for k, got in scope.star_kwargs.items()})
        copies[id(scope)] = fresh
        out.append((c, fn, fresh))
    return out


def star_kwarg(expr, scope: Scope):
    """(expression, scope) a `**kwargs` parameter collected under a key read as `kwargs["k"]` or
    `kwargs.get("k"[, default])`; None when `expr` is no such read or the key was not seen passed."""
    if type(expr) is cst.Subscript and type(expr.value) is cst.Name and len(expr.slice) == 1 \
            and type(expr.slice[0].slice) is cst.Index:
        star, key = expr.value.value, expr.slice[0].slice.value
    elif (type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value == "get"
          and type(expr.func.value) is cst.Name and 1 <= len(expr.args) <= 2):
        star, key = expr.func.value.value, expr.args[0].value
    else:
        return None
    collected = scope.star_kwargs.get(star)
    if collected is None or type(key) is not cst.SimpleString:
        return None
    name = key.evaluated_value
    # a key the binder did not see passed is not known to be absent (the call may spread a dict it cannot
    # follow): no value is guessed for it, not even the default of `.get`
    return collected.get(name)


_UNKNOWN_VALUE = cst.Name("__not_known_statically__")  # an expression no scope binds: its value is unknown


def forget_assigned(scope: Scope, node) -> None:
    """The locals `node` may assign (a loop, a `try`, a `with`, a tuple unpacking the reader does not follow) are
    no longer known in `scope`: each gets an unconditional assignment of a value nothing binds, so a test read
    after it does not take the value assigned before (`layer = None; for ...: layer = x` then `if layer is None:`)."""
    from ..index.nodes import find_all

    names: set[str] = set()

    def add(target) -> None:
        if type(target) is cst.Name:
            names.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for e in target.elements:
                add(e.value)
        elif type(target) is cst.StarredElement:
            add(target.value)

    for t in find_all(node, cst.AssignTarget):
        add(t.target)
    for t in find_all(node, (cst.AugAssign, cst.AnnAssign)):
        add(t.target)
    for t in find_all(node, cst.For):
        add(t.target)
    for t in find_all(node, cst.NamedExpr):
        add(t.target)
    for t in find_all(node, cst.AsName):
        add(t.name)
    for name in sorted(names):
        scope.locals.setdefault(name, []).append((_UNKNOWN_VALUE, None))
    if names:
        scope.version += 1
