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
    function: cst.FunctionDef | None = None  # the function whose parameters bind_params bound here
    # `**kwargs` param -> the keys it may hold beyond those star_kwargs gives, with no value read here, where
    # every key the call can pass it is known (a key in neither is surely absent); no entry: not known
    star_maybe: dict = field(default_factory=dict)
    # `**kwargs` param -> {key: (expr, Scope) of a `kwargs["key"] = expr` before the call being read, or None where
    # that fill's test is not decided}: what a call spreading `**kwargs` passes besides what the caller gave
    kwarg_fills: dict = field(default_factory=dict)
    # local -> {attribute: [(expr, Condition | None)]} of each `local.attr = expr` before the statement being
    # read (`upstream_config.mla_use_output_gate = use_output_gate` on a copy of the configuration)
    attr_sets: dict = field(default_factory=dict)
    loops: dict = field(default_factory=dict)  # name a loop binds -> (iterable, item) (FunctionTables.loop_names)
    # `*args` param -> [(expr, Scope it is read in)] of the positional arguments past the named ones it collected,
    # where the call wrote every positional argument out (a wrapper passing them on: `f(*args, ...)` binds them)
    star_args: dict = field(default_factory=dict)
    # the TypeError the call bound here raises before its body runs (a keyword naming a parameter a positional
    # argument already took: `f(*args, num_experts=n)` where args holds the caller's positionals)
    raises: str | None = None
    # names the function declares `global` and alone assigns in its module (`global _aux_stream`): where none of
    # its own assignments runs, the module's binding is the value (Evaluator._name)
    globals_owned: frozenset = frozenset()


def _spread(call: cst.Call, call_scope: Scope) -> list[tuple] | None:
    """The call's positional arguments in order as (expr, the scope it is read in), a `*name` spread where
    `name` is the calling function's `*args` with what it collected known (star_args); None where the call
    spreads nothing so known (or nothing at all: call_arguments reads it)."""
    if not any(a.star == "*" for a in call.args if a.keyword is None):
        return None
    out: list[tuple] = []
    for a in call.args:
        if a.keyword is not None or a.star == "**":
            continue
        if a.star == "*":
            found = call_scope.star_args.get(a.value.value) if type(a.value) is cst.Name else None
            if found is None:
                return None
            out += found
        else:
            out.append((a.value, call_scope))
    return out


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
    spread = _spread(call, call_scope)
    if spread is not None:  # `f(*args, ...)` of a wrapper whose own call wrote its positionals out
        args = [e for e, _w in spread]
    # every positional argument known: none spread, or each spread one's items known
    written_out = spread is not None or not any(a.star == "*" for a in call.args if a.keyword is None)
    given = {k: (v, call_scope) for k, v in keywords.items()}
    for a in call.args:  # f(..., **kwargs) inside a function that collected them: the caller's own keywords
        if a.star == "**" and type(a.value) is cst.Name:
            for k, found in getattr(call_scope, "star_kwargs", {}).get(a.value.value, {}).items():
                given.setdefault(k, found)
            for k, found in (getattr(call_scope, "kwarg_fills", None) or {}).get(a.value.value, {}).items():
                if k in keywords:
                    continue  # (passed twice: Python refuses the call)
                if found is None:  # filled under a test not decided: what it holds is not said
                    given.pop(k, None)
                else:  # `kwargs["k"] = v` before the call: v, whatever the caller gave
                    given[k] = found
    bound = set()
    where = {id(e): w for e, w in spread or ()}
    taken = {p.name.value for p in positional[:len(args)]} if written_out else set()
    twice = [k for k in keywords if k in taken]
    if twice:  # Python refuses the call: the positional arguments took that parameter already
        scope.raises = f"TypeError: {fn.name.value}() got multiple values for argument '{twice[0]}'"
    for name, expr in bind_arguments(fn, args, {k: v for k, (v, _w) in given.items()}, skip_self=skip_self):
        scope.params[name] = (expr, given[name][1]) if name in given and given[name][0] is expr else (
            expr, where.get(id(expr), call_scope))
        bound.add(name)
    scope.function = fn
    star_arg = fn.params.star_arg
    if type(star_arg) is cst.Param and written_out:
        scope.star_args[star_arg.name.value] = [(e, where.get(id(e), call_scope)) for e in args[len(positional):]]
    star = fn.params.star_kwarg
    if type(star) is cst.Param:  # the keywords no parameter takes, for a `**kwargs` passed on
        scope.star_kwargs[star.name.value] = {k: w for k, w in given.items() if k not in bound}
        maybe = _spread_keys(call, call_scope)
        if maybe is not None:
            scope.star_maybe[star.name.value] = maybe


_MUTATORS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__"})


def _spread_keys(call: cst.Call, call_scope: Scope) -> frozenset | None:
    """The keys the dicts a call spreads (`**extra`) may hold with no value read by the binder, where every key
    they can hold is known: a `**kwargs` of the calling function whose own collection is known (star_maybe), or
    a local dict of it written out (`{} if sinks is None else {"sinks": sinks}`), each with the string keys the
    function sets on it (`extra["topk_indices_buffer"] = ...` under a test); None where one is not known."""
    maybe: set = set()
    for a in call.args:
        if a.star != "**":
            continue
        if type(a.value) is not cst.Name or call_scope.function is None:
            return None
        name = a.value.value
        if name in call_scope.star_kwargs:
            held = call_scope.star_maybe.get(name)
            if held is None:
                return None
            maybe |= held
        else:
            written = _local_dict_keys(call_scope.function, call_scope.module, name)
            if written is None:
                return None
            maybe |= written
        added = _keys_set_on(call_scope.function, name)
        if added is None:
            return None
        maybe |= added
    return frozenset(maybe)


def _local_dict_keys(fn: cst.FunctionDef, module, name: str) -> set | None:
    """The string keys of the dict literals a local of `fn` is assigned (through `x if c else y`); None where it
    is assigned anything else."""
    from .function_bodies import tables

    values = [v for t, v, _c, _p in tables(fn, module).local_assignments if t == name]
    if not values:
        return None
    out: set = set()

    def keys(node) -> bool:
        if type(node) is cst.IfExp:
            return keys(node.body) and keys(node.orelse)
        if type(node) is not cst.Dict:
            return False
        for el in node.elements:
            if type(el) is not cst.DictElement or type(el.key) is not cst.SimpleString:
                return False
            out.add(el.key.evaluated_value)
        return True

    return out if all(keys(v) for v in values) else None


def _keys_set_on(fn: cst.FunctionDef, name: str) -> set | None:
    """The string keys `fn` sets on the dict `name` (`name["k"] = v`); None where it changes it otherwise (a key
    not written out, `name.update(...)`, `del name[...]`, `name |= ...`)."""
    from ..index.nodes import find_all

    out: set = set()
    for node in find_all(fn, (cst.Subscript, cst.Call, cst.AugAssign, cst.Del)):  # one pass over the body
        t = type(node)
        if t is cst.Subscript:
            if type(node.value) is not cst.Name or node.value.value != name:
                continue
            element = node.slice[0].slice if len(node.slice) == 1 else None
            if type(element) is cst.Index and type(element.value) is cst.SimpleString:
                out.add(element.value.evaluated_value)  # (a read as well as a write: the key is only maybe there)
            else:
                return None
        elif t is cst.Call:
            f = node.func
            if type(f) is cst.Attribute and type(f.value) is cst.Name and f.value.value == name and f.attr.value in _MUTATORS:
                return None
        elif t is cst.AugAssign:
            if type(node.target) is cst.Name and node.target.value == name:
                return None
        elif name in cst.Module([]).code_for_node(node):
            return None
    return out


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
                      star_kwargs={k: {kw: mine(v) for kw, v in got.items()} for k, got in scope.star_kwargs.items()},
                      function=scope.function, star_maybe=dict(scope.star_maybe))
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
    # follow): no value is guessed for it, not even the default of `.get`, unless every key the call can pass
    # is known (star_maybe) and this one is none of them: `.get` then gives its default (`kwargs["k"]` raises)
    if name in collected:
        return collected[name]
    maybe = scope.star_maybe.get(star)
    if maybe is None or name in maybe or type(expr) is not cst.Call:
        return None
    return (expr.args[1].value if len(expr.args) == 2 else cst.Name("None")), scope


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
