"""What the evaluator knows of calls and module-level names without running anything: Python builtins on
known values, small decision functions (only ifs, assignments and returns), factories whose every return
builds an object, module-level constants (not ones a function rebinds with `global`), class constants."""

from __future__ import annotations

from functools import lru_cache

import re
from dataclasses import dataclass

import libcst as cst

from .values import Known, Symbol, Unknown, Value, _is_none, literal
from ..index.facts import FactTable
from ..ir.conditions import Truth, code_of

GLOBAL_NAMES = FactTable("global_names", "None -> the names a `global` statement of the module rebinds")
DECISION_FUNCTIONS = FactTable("decision_function", "a function node -> whether it only decides (runs no tensors)")
BUILDS_OBJECTS = FactTable("builds_objects", "a function node -> whether every return builds an object")


def _dotted_text(expr) -> str | None:
    parts = []
    while type(expr) is cst.Attribute:
        parts.append(expr.attr.value)
        expr = expr.value
    if not type(expr) is cst.Name:
        return None
    return ".".join([expr.value] + parts[::-1])


def _rebound(module, name: str) -> bool:
    """A function of the module declares `global name`: the module-level value is only the initial one."""
    key = None
    names = GLOBAL_NAMES.of(module).get(key)
    if names is None:  # read once per module: every `global a, b` statement's names
        source = module.source if module.source is not None else module.path.read_bytes()
        names = GLOBAL_NAMES.of(module)[key] = {n.decode() for line in re.findall(rb"\bglobal\s+([^\n#;]+)", source)
                                    for n in re.findall(rb"\w+", line)}
    return name in names


def _is_unbound_chain(expr: cst.Attribute, scope) -> bool:
    """`a.b.c` whose root name is no local or parameter of `scope`: a module, class or import."""
    root = expr
    while type(root) is cst.Attribute:
        root = root.value
    if not type(root) is cst.Name or root.value == "self":
        return False
    return scope is None or not (root.value in scope.locals or root.value in scope.params or root.value in scope.defaults)


def _class_constant(cls, name: str) -> Value:
    """`NAME = <literal>` in a class body (an Enum's member: a str Enum's member equals its string)."""
    body = cls.skeleton.body.body
    found = [s.body[0].value for s in body
             if type(s) is cst.SimpleStatementLine and len(s.body) == 1 and type(s.body[0]) is cst.Assign
             and len(s.body[0].targets) == 1 and type(s.body[0].targets[0].target) is cst.Name
             and s.body[0].targets[0].target.value == name]
    value = literal(found[0]) if len(found) == 1 else None
    is_enum = len(found) == 1 and any("Enum" in _base_text(b) for b in cls.bases)
    if not found:  # `cache_dtype: CacheDType = "auto"`: a (dataclass) class attribute with a literal default
        annotated = [s.body[0].value for s in body
                     if type(s) is cst.SimpleStatementLine and len(s.body) == 1 and type(s.body[0]) is cst.AnnAssign
                     and type(s.body[0].target) is cst.Name and s.body[0].target.value == name
                     and s.body[0].value is not None]
        value = literal(annotated[0]) if len(annotated) == 1 else None
    if value is None and is_enum:
        return Known(Symbol(f"{cls.name}.{name}"))  # an Enum member (`auto()`): equal only to itself
    if is_enum and value is not None and type(value.value) is str:
        from .values import EnumMember

        return Known(EnumMember(value.value, cls, name))  # its string, knowing which member it is
    if not found and cls.may_define(name) and any(
            type(s) is cst.FunctionDef and s.name.value == name for s in cls.node.body.body):
        from .values import NotNone

        return NotNone(f"{cls.name}.{name}")  # a method read off the class (custom_routing_function=Cls.fn)
    return value if value is not None else Unknown(f"{cls.name}.{name} is not a literal constant")


def _base_text(arg) -> str:
    node = arg.value
    while type(node) is cst.Attribute:
        node = node.attr
    return node.value if type(node) is cst.Name else ""


def _known_items(value: Value):
    if isinstance(value, Known) and isinstance(value.value, (tuple, list, dict, str, set, frozenset)):
        return value.value
    return None


def _len(value: Value) -> Value:
    items = _known_items(value)
    return Known(len(items)) if items is not None else Unknown("len of an unknown value")


def _first(value: Value) -> Value:
    """next(iter(x)): the first item of a known sequence."""
    items = _known_items(value)
    if isinstance(value, Known) and isinstance(value.value, _Iter):
        return Known(value.value.items[0]) if value.value.items else Unknown("next of an empty iterator")
    return Known(tuple(items)[0]) if items else Unknown("next of an unknown iterator")


@dataclass(frozen=True)
class _Iter:
    items: tuple


def _iter(value: Value) -> Value:
    items = _known_items(value)
    return Known(_Iter(tuple(items))) if items is not None else Unknown("iter of an unknown value")


def _sorted(value: Value) -> Value:
    items = _known_items(value)
    try:
        return Known(tuple(sorted(items))) if items is not None else Unknown("sorted of an unknown value")
    except TypeError:
        return Unknown("sorted of values that do not compare")


def _convert(kind):
    def convert(value: Value) -> Value:
        if isinstance(value, Known) and isinstance(value.value, (str, int, float, bool)):
            try:
                return Known(kind(value.value))
            except ValueError:
                return Unknown(f"{kind.__name__}() of {value.value!r}")
        return Unknown(f"{kind.__name__}() of an unknown value")
    return convert


_PLAIN_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "dict": dict}
_SEQUENCES = ("list", "tuple")


def isinstance_value(value: Value, wanted) -> Value:
    """`isinstance(x, T)` (T a builtin type name or a tuple of them) of a known plain value
    (`isinstance(self.config.moe_layer_freq, int)` on the configuration's list): decided as Python does; a
    list and a tuple are not told apart (the reader holds a list literal as a tuple), so `list` / `tuple`
    decide only a value that is neither. Anything else: unknown."""
    if not (isinstance(value, Known) and (value.value is None or type(value.value) in
                                          (bool, int, float, str, list, tuple, dict))):
        return Unknown("isinstance of an unknown value")
    exprs = [e.value for e in wanted.elements] if type(wanted) is cst.Tuple else [wanted]
    names = [n.value for n in exprs if isinstance(n, cst.Name)]
    if len(names) != len(exprs) or not all(n in _PLAIN_TYPES or n in _SEQUENCES for n in names):
        return Unknown("isinstance of a type not read here")
    v = value.value
    for n in names:
        if n in _PLAIN_TYPES and isinstance(v, _PLAIN_TYPES[n]):
            return Known(True)
        if n in _SEQUENCES and isinstance(v, (list, tuple)):
            return Unknown("a list or a tuple (not told apart)")
    return Known(False)


_BUILTINS = {"len": _len, "next": _first, "iter": _iter, "sorted": _sorted,
             "int": _convert(int), "bool": _convert(bool), "float": _convert(float), "str": _convert(str),
             "tuple": lambda v: Known(tuple(_known_items(v))) if _known_items(v) is not None else Unknown("tuple of an unknown value")}


# builtin classes an `isinstance` test names; a known value of the evaluator is a scalar literal, None or a
# tuple standing for any sequence, so only None and scalars are tested against them
BUILTIN_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "bytes": bytes, "object": object,
                 "tuple": tuple, "list": list, "dict": dict, "set": set, "frozenset": frozenset}


def known_isinstance(value: Value, classes: list) -> Value:
    """`isinstance(x, C)` (or a tuple of classes) where x is a known None or a literal of a builtin scalar type
    (bool, int, float, str): each class is a class of the trees (`ClassRef`, of which no such value is an
    instance: `isinstance(None, Fp8Config)` is False for an unquantised model), a builtin type (Python's own
    answer: `isinstance(True, int)`), or None where what the name holds is not known (then only a class that
    holds decides)."""
    from .values import ClassRef

    if not (isinstance(value, Known) and (value.value is None or type(value.value) in (bool, int, float, str))):
        return Unknown("isinstance of a value not known")
    undecided = False
    for c in classes:
        if isinstance(c, type):
            if isinstance(value.value, c):
                return Known(True)
        elif not isinstance(c, ClassRef):
            undecided = True
    return Unknown("isinstance against a class not known") if undecided else Known(False)


def _decision_function(fn: cst.FunctionDef, module) -> bool:
    """Only ifs, assignments, returns, raises, asserts, imports, `global` declarations, a docstring, log calls and
    pass: running it on known arguments is safe (a global it declares is read as Evaluator._run_decision says)."""
    return DECISION_FUNCTIONS.get(module, fn, lambda: _only_decisions(fn.body.body))


def _only_decisions(body) -> bool:
    for stmt in body:
        if type(stmt) is cst.If:
            orelse = stmt.orelse
            if not _only_decisions(stmt.body.body):
                return False
            while type(orelse) is cst.If:
                if not _only_decisions(orelse.body.body):
                    return False
                orelse = orelse.orelse
            if type(orelse) is cst.Else and not _only_decisions(orelse.body.body):
                return False
        elif type(stmt) is cst.SimpleStatementLine:
            for small in stmt.body:
                if isinstance(small, (cst.Return, cst.Assign, cst.AnnAssign, cst.Pass, cst.ImportFrom, cst.Import,
                                      cst.Raise, cst.Assert, cst.Global)):
                    continue  # (a raise is a path that returns nothing; a failed assert too)
                if type(small) is cst.Expr and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
                    continue
                if type(small) is cst.Expr and _logs(small.value):
                    continue  # `logger.info(...)`: says why, changes nothing it returns
                return False
        else:
            return False
    return True


_LOGGERS = frozenset(("logger", "logging", "_logger", "log"))
_LOG_METHODS = frozenset(("debug", "info", "warning", "warn", "error", "debug_once", "info_once", "warning_once"))


def _logs(expr) -> bool:
    """A call of a logger's method (`logger.info("...")`, `logger.warning_once(...)`)."""
    func = expr.func if type(expr) is cst.Call else None
    return (type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value in _LOGGERS
            and func.attr.value in _LOG_METHODS)


def _builds_objects(fn_def, index) -> bool:
    """Every return of the function is a class's construction (a factory of routers, layers, ...)."""
    module = fn_def.module
    key = fn_def.node
    if key not in BUILDS_OBJECTS.of(module):
        from .function_bodies import tables

        rets = [value for value, _cond in tables(fn_def.node, module).returns]
        ok = bool(rets)
        for value in rets:
            func = value.func if type(value) is cst.Call else None
            target = index.resolve_expr(module, func) if isinstance(func, (cst.Name, cst.Attribute)) else None
            if target is None and type(func) is cst.Name:  # imported inside the function
                from .function_bodies import function_imports

                local = function_imports(module).get(func.value)
                target = index.lookup(*local) if local else None
            if getattr(target, "kind", None) != "class":
                ok = False
                break
        BUILDS_OBJECTS.of(module)[key] = ok
    return BUILDS_OBJECTS.of(module)[key]


@lru_cache(maxsize=1)
def _never_none() -> frozenset[str]:
    """Dotted callables outside the trees whose result is never None (walk.yaml never_none)."""
    from ..catalog import catalog

    return frozenset(catalog().walk.get("never_none", []))


def _held(value) -> Value:
    """An item of a known dict: Known, unless the dict holds it as Unknown (a literal with unknown values)."""
    return value if isinstance(value, Unknown) else Known(value)


def _item(base: Value, key: Value) -> Value:
    if isinstance(base, Known) and isinstance(key, Known):
        try:
            return _held(base.value[key.value])
        except (KeyError, IndexError, TypeError):
            return Unknown("no such item")
    return Unknown("an item of an unknown value")


# -- tests the bindings decide ------------------------------------------------------------------
def none_test(expr, env) -> Truth:
    """`p is None` / `p is not None` for a parameter whose None-ness the call decides."""
    if type(expr) is cst.Comparison and len(expr.comparisons) == 1 and type(expr.left) is cst.Name:
        comp = expr.comparisons[0]
        if _is_none(comp.comparator) and expr.left.value in env.none:
            state = env.none[expr.left.value]
            if type(comp.operator) is cst.Is:
                return Truth.of(state)
            if type(comp.operator) is cst.IsNot:
                return Truth.of(not state)
    return Truth.UNKNOWN


def isinstance_test(expr, module, env) -> Truth:
    """`isinstance(self.x, C)` when the walk knows which class built self.x."""
    if not (type(expr) is cst.Call and type(expr.func) is cst.Name and expr.func.value == "isinstance"
            and len(expr.args) == 2):
        return Truth.UNKNOWN
    classes = env.attr_classes.get(code_of(module, expr.args[0].value))
    if classes is None:
        return Truth.UNKNOWN
    wanted = expr.args[1].value
    names = [e.value for e in wanted.elements] if type(wanted) is cst.Tuple else [wanted]
    tails = {code_of(module, n).rsplit(".", 1)[-1] for n in names}
    return Truth.of(bool(tails & set(classes)))
