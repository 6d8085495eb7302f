"""The engine arguments checked as the trees check them, read from the trees (never a list of this tool's own):

- `--additional-config` against vllm-ascend's configuration class (walk.yaml `runtime.defaults`
  `get_ascend_config`: `AscendConfig`) and the classes its fields nest: the fields it declares, their types
  (pydantic's lax rules: `"false"` is a bool, `"2"` an int), whether unknown keys are forbidden
  (`ConfigDict(extra="forbid")` in the class or in its `@config` decorator), the keys its factory strips before
  the class sees them, and the tests of its `after` validators that raise with the values given
  (`if self.weight_nz_mode not in (0, 1, 2): raise ValueError(...)`). A test that needs anything but the fields
  and literals (the hardware profile, vllm_config) is not decided here: nothing is refused on a guess.
- `--quantization` against the methods vLLM knows (`QUANTIZATION_METHODS`, the `Literal` of
  `QuantizationMethods`) and the ones `register_quantization_config` adds in vllm-ascend, and on the Ascend
  backend the platform's `supported_quantization` (vLLM's `Platform.verify_quantization`).
- `vllm serve` options by vLLM's own names: every `add_argument("--x", "-y", ...)` of `EngineArgs.add_cli_args`
  (`-q`, `-tp`, `-dp`, `-cc`, `-sc`), and which of them are flags (the `EngineArgs` field is a `bool`).

A refusal is one UserError line (exit 2) naming the tree's file:line.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from ..errors import UserError
from ..index.facts import FactTable
from .values import literal

# where vLLM declares its engine arguments and quantization methods (module, name)
ENGINE_ARGS = ("vllm.engine.arg_utils", "EngineArgs", "add_cli_args")
QUANT_METHODS = ("vllm.model_executor.layers.quantization", "QUANTIZATION_METHODS")
QUANT_REGISTER = "register_quantization_config"
QUANT_PACKAGE = "vllm_ascend.quantization"


# ----- reading a configuration class ---------------------------------------------------------------------------

@dataclass
class Field:
    name: str
    annotation: cst.BaseExpression | None
    default: cst.BaseExpression | None
    line: int


@dataclass
class Schema:
    cls: Any  # index Definition
    fields: dict = field(default_factory=dict)  # name -> Field
    forbid: tuple | None = None  # (file, line) where unknown keys are forbidden, None: allowed
    validators: list = field(default_factory=list)  # FunctionDef nodes of `after` validators

    @property
    def where(self) -> str:
        return f"{self.cls.module.rel}:{self.cls.line}"


SCHEMAS = FactTable("config_schema", "a configuration class node -> its Schema (None: no typed fields)")


def _dotted(expr) -> str:
    if type(expr) is cst.Name:
        return expr.value
    if type(expr) is cst.Attribute:
        return f"{_dotted(expr.value)}.{expr.attr.value}"
    if type(expr) is cst.Call:
        return _dotted(expr.func)
    return ""


def _kw(call: cst.Call, name: str):
    return next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def _forbids(call) -> bool:
    """`ConfigDict(extra="forbid")`."""
    if type(call) is not cst.Call or _dotted(call.func).rpartition(".")[2] != "ConfigDict":
        return False
    extra = _kw(call, "extra")
    got = literal(extra) if extra is not None else None
    return got is not None and got.value == "forbid"


def _forbid_in(index: Any, module, node) -> tuple | None:
    """Where `node` (a class body statement or a decorator) forbids unknown keys: its own
    `ConfigDict(extra="forbid")`, or the decorator function's (`@config` of config_utils merges one in)."""
    for call in _calls(node):
        if _forbids(call):
            return module.rel, module.line_of(call)
    return None


def _calls(node):
    out = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n):
            out.append(n)

    node.visit(V())
    return out


def schema(index: Any, cls: Any) -> Schema | None:
    """The fields, the unknown-key rule and the `after` validators of a pydantic (data)class of the trees; None
    for a class that declares no typed fields (an older configuration class reading a dict in __init__)."""
    key = cls.node
    table = SCHEMAS.of(cls.module)
    if key in table:
        return table[key]
    module = cls.module
    out = Schema(cls)
    body = cls.node.body.body if type(cls.node.body) is cst.IndentedBlock else []
    for stmt in body:
        if type(stmt) is cst.SimpleStatementLine:
            for small in stmt.body:
                if type(small) is cst.AnnAssign and type(small.target) is cst.Name:
                    name = small.target.value
                    ann = small.annotation.annotation
                    if name.startswith("_") or _dotted(ann).endswith("ClassVar") or (
                            type(ann) is cst.Subscript and _dotted(ann.value).endswith("ClassVar")):
                        continue
                    if name == "model_config" and _dotted(ann).endswith("ConfigDict"):
                        if small.value is not None and _forbids(small.value):
                            out.forbid = (module.rel, module.line_of(small.value))
                        continue
                    value = small.value
                    if type(value) is cst.Call and _dotted(value.func).rpartition(".")[2] in ("field", "Field"):
                        init = _kw(value, "init")
                        if init is not None and type(init) is cst.Name and init.value == "False":
                            continue
                    out.fields[name] = Field(name, ann, value, module.line_of(stmt))
                elif (type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name
                      and small.targets[0].target.value == "model_config" and _forbids(small.value)):
                    out.forbid = (module.rel, module.line_of(small.value))
        elif type(stmt) is cst.FunctionDef and any(_is_after(d.decorator) for d in stmt.decorators):
            out.validators.append(stmt)
    if not out.fields:
        table[key] = None
        return None
    if out.forbid is None:
        for dec in cls.node.decorators:
            out.forbid = _forbid_in(index, module, dec.decorator)
            if out.forbid is None:  # the decorator's own function: `@config` -> config_utils.config
                target = index.resolve_expr(module, dec.decorator.func if type(dec.decorator) is cst.Call else dec.decorator)
                if getattr(target, "kind", None) == "function":
                    out.forbid = _forbid_in(index, target.module, target.node)
            if out.forbid is not None:
                break
    table[key] = out
    return out


def _is_after(dec) -> bool:
    """`@model_validator(mode="after")`."""
    if type(dec) is not cst.Call or _dotted(dec.func).rpartition(".")[2] != "model_validator":
        return False
    mode = _kw(dec, "mode")
    got = literal(mode) if mode is not None else None
    return got is not None and got.value == "after"


def _factory_strips(index: Any, cls: Any) -> tuple[set, tuple | None]:
    """The keys the configuration's factory takes out of the user's dict before the class sees them
    (`kwargs = {k: v for k, v in additional_config.items() if k not in _NON_USER_INPUT_KEYS}` in the function
    that calls `AscendConfig(..., **kwargs)`), with where that set is."""
    module = cls.module
    for defs in module.defs.values():
        for d in defs:
            if d.kind != "function" or not d.mentions(f"{cls.name}(".encode()):
                continue
            sets: dict = {}
            for stmt in _statements(d.node):
                for small in stmt.body if type(stmt) is cst.SimpleStatementLine else []:
                    if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name:
                        if type(small.value) is cst.Set:
                            keys = {got.value for e in small.value.elements
                                    if (got := literal(e.value)) is not None}
                            sets[small.targets[0].target.value] = (keys, module.line_of(small.value))
                        elif type(small.value) is cst.DictComp and small.value.for_in.ifs:
                            test = small.value.for_in.ifs[0].test
                            if (type(test) is cst.Comparison and type(test.comparisons[0].operator) is cst.NotIn
                                    and type(test.comparisons[0].comparator) is cst.Name
                                    and test.comparisons[0].comparator.value in sets):
                                keys, line = sets[test.comparisons[0].comparator.value]
                                return keys, (module.rel, line)
    return set(), None


def _statements(node):
    out = []

    class V(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, n):
            out.append(n)

    node.visit(V())
    return out


# ----- types, as pydantic's lax mode takes JSON values -----------------------------------------------------------

_BOOL_STRINGS = {"0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"}


def _type_ok(index: Any, module, ann, value) -> tuple[bool, object]:
    """(whether pydantic's lax mode takes `value` for the annotation, the nested schema a dict is checked
    against, or None); an annotation not understood here takes anything."""
    kind = type(ann)
    if kind is cst.BinaryOperation and type(ann.operator) is cst.BitOr:
        left, right = _type_ok(index, module, ann.left, value), _type_ok(index, module, ann.right, value)
        return (left if left[0] else right) if (left[0] or right[0]) else (False, None)
    if kind is cst.Subscript:
        head = _dotted(ann.value).rpartition(".")[2]
        args = [s.slice.value for s in ann.slice if type(s.slice) is cst.Index]
        if head == "Optional":
            return (True, None) if value is None else _type_ok(index, module, args[0], value)
        if head == "Union":
            tries = [_type_ok(index, module, a, value) for a in args]
            return next((t for t in tries if t[0]), (False, None))
        if head == "Literal":
            allowed = [got.value for a in args if (got := literal(a)) is not None]
            if len(allowed) < len(args):
                return True, None
            return (value in allowed and not (isinstance(value, bool) and True not in allowed and False not in allowed)
                    or str(value) in map(str, allowed)), None
        return _type_ok(index, module, ann.value, value)
    name = _dotted(ann)
    if kind is cst.SimpleString:  # a forward reference
        return True, None
    if name == "None":
        return value is None, None
    if name == "bool":
        return (isinstance(value, bool) or (isinstance(value, int) and value in (0, 1))
                or (isinstance(value, str) and value.strip().lower() in _BOOL_STRINGS)), None
    if name == "int":
        if isinstance(value, (bool, int)):
            return True, None
        if isinstance(value, float):
            return value.is_integer(), None
        if isinstance(value, str):
            try:
                int(value.strip())
                return True, None
            except ValueError:
                return False, None
        return False, None
    if name == "float":
        if isinstance(value, (bool, int, float)):
            return True, None
        if isinstance(value, str):
            try:
                float(value)
                return True, None
            except ValueError:
                return False, None
        return False, None
    if name == "str":
        return isinstance(value, str), None
    if name in ("list", "tuple", "set", "frozenset", "Sequence"):
        return isinstance(value, list), None
    if name in ("dict", "Mapping"):
        return isinstance(value, dict), None
    if kind in (cst.Name, cst.Attribute):
        target = index.resolve_expr(module, ann)
        if getattr(target, "kind", None) == "class":
            nested = schema(index, target)
            if nested is not None:
                return isinstance(value, dict), nested
    return True, None


def _coerce(ann, value):
    """The value pydantic hands the validators: `"2"` for an int field is 2, `"false"` for a bool False."""
    if type(ann) is cst.BinaryOperation and value is not None:  # `int | None`
        kinds = {_dotted(ann.left), _dotted(ann.right)} - {"None"}
        if len(kinds) == 1:
            return _coerce(ann.left if _dotted(ann.left) != "None" else ann.right, value)
        return value
    name = _dotted(ann)
    if value is None:
        return value
    try:
        if name == "int" and not isinstance(value, bool):
            return int(value.strip()) if isinstance(value, str) else int(value)
        if name == "float":
            return float(value)
        if name == "bool" and not isinstance(value, bool):
            return value.strip().lower() in ("1", "on", "t", "true", "y", "yes") if isinstance(value, str) else bool(value)
    except (TypeError, ValueError):
        pass
    return value


def _type_text(module, ann) -> str:
    return module.code(ann) if ann is not None else "?"


# ----- the `after` validators, on the values given and the declared defaults --------------------------------------

class _Unknown(Exception):
    pass


def _eval(node, values: dict):
    """A test of fields and literals; _Unknown for anything else."""
    kind = type(node)
    lit = literal(node)
    if lit is not None:
        return lit.value
    if kind is cst.Attribute and type(node.value) is cst.Name and node.value.value == "self":
        name = node.attr.value
        if name not in values:
            raise _Unknown(name)
        return values[name]
    if kind in (cst.Tuple, cst.List, cst.Set):
        items = tuple(_eval(e.value, values) for e in node.elements)
        return items if kind is cst.Tuple else list(items) if kind is cst.List else set(items)
    if kind is cst.UnaryOperation and type(node.operator) is cst.Not:
        return not _eval(node.expression, values)
    if kind is cst.BooleanOperation:
        left = _eval(node.left, values)
        if type(node.operator) is cst.And:
            return _eval(node.right, values) if left else left
        return left if left else _eval(node.right, values)
    if kind is cst.Comparison:
        left = _eval(node.left, values)
        for comp in node.comparisons:
            right = _eval(comp.comparator, values)
            op = type(comp.operator)
            try:
                ok = {cst.Equal: lambda a, b: a == b, cst.NotEqual: lambda a, b: a != b,
                      cst.LessThan: lambda a, b: a < b, cst.LessThanEqual: lambda a, b: a <= b,
                      cst.GreaterThan: lambda a, b: a > b, cst.GreaterThanEqual: lambda a, b: a >= b,
                      cst.In: lambda a, b: a in b, cst.NotIn: lambda a, b: a not in b,
                      cst.Is: lambda a, b: a is b, cst.IsNot: lambda a, b: a is not b}[op](left, right)
            except (KeyError, TypeError):
                raise _Unknown("comparison") from None
            if not ok:
                return False
            left = right
        return True
    raise _Unknown(kind.__name__)


def _message(module, node, values: dict) -> str:
    """The text of `raise X("...")` / `assert t, "..."`, an f-string's `{self.x}` filled in."""
    if node is None:
        return ""
    if type(node) is cst.Call and node.args:
        node = node.args[0].value
    if type(node) is cst.FormattedString:
        parts = []
        for p in node.parts:
            if isinstance(p, cst.FormattedStringText):
                parts.append(p.value)
            elif isinstance(p, cst.FormattedStringExpression):
                try:
                    got = _eval(p.expression, values)
                    parts.append(repr(got) if p.conversion == "r" else str(got))
                except _Unknown:
                    parts.append("{" + module.code(p.expression) + "}")
        return "".join(parts)
    lit = literal(node)
    if lit is not None and isinstance(lit.value, str):
        return lit.value
    return module.code(node)


def _run_validator(module, func, values: dict) -> tuple[str, int] | None:
    """The first raise (or failing assert) of an `after` validator that runs with these values; tests it cannot
    decide are skipped, and an assignment under such a test makes its field unknown from there on."""
    values = dict(values)

    def block(stmts) -> tuple[str, int] | None:
        for stmt in stmts:
            if type(stmt) is cst.If:
                node = stmt
                while type(node) is cst.If:
                    try:
                        holds = bool(_eval(node.test, values))
                    except _Unknown:
                        _forget(node, values)
                        break
                    if holds:
                        found = block(node.body.body)
                        if found:
                            return found
                        break
                    node = node.orelse
                else:
                    if type(node) is cst.Else:
                        found = block(node.body.body)
                        if found:
                            return found
            elif type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    if type(small) is cst.Raise:
                        return _message(module, small.exc, values), module.line_of(stmt)
                    if type(small) is cst.Assert:
                        try:
                            if not _eval(small.test, values):
                                return _message(module, small.msg, values), module.line_of(stmt)
                        except _Unknown:
                            pass
                    elif type(small) is cst.Assign:
                        for t in small.targets:
                            t = t.target
                            if type(t) is cst.Attribute and type(t.value) is cst.Name and t.value.value == "self":
                                try:
                                    values[t.attr.value] = _eval(small.value, values)
                                except _Unknown:
                                    values.pop(t.attr.value, None)
                    elif type(small) is cst.Return:
                        return None
            else:  # a loop, a with, a try: what it assigns becomes unknown
                _forget(stmt, values)
        return None

    return block(func.body.body)


def _forget(node, values: dict) -> None:
    class V(cst.CSTVisitor):
        def visit_Assign(self, n):
            for t in n.targets:
                t = t.target
                if type(t) is cst.Attribute and type(t.value) is cst.Name and t.value.value == "self":
                    values.pop(t.attr.value, None)

    node.visit(V())


def _declared_values(sch: Schema) -> dict:
    """The fields whose declared default is a literal."""
    out = {}
    for name, f in sch.fields.items():
        value = f.default
        if type(value) is cst.Call and _dotted(value.func).rpartition(".")[2] in ("field", "Field"):
            value = _kw(value, "default")
        lit = literal(value) if value is not None else None
        if lit is not None:
            out[name] = lit.value
    return out


# ----- --additional-config ------------------------------------------------------------------------------------

def ascend_config_class(index: Any):
    from ..catalog import catalog

    qualname = (catalog().typed.walk.runtime.defaults or {}).get("get_ascend_config")
    if not qualname or index is None:
        return None
    mod, _, name = qualname.rpartition(".")
    target = index.lookup(mod, name)
    return target if getattr(target, "kind", None) == "class" else None


def check_additional_config(index: Any, given: dict) -> None:
    """Refuse (UserError) what vllm-ascend's configuration class refuses; nothing where the tree has no such
    class or the class declares no typed fields."""
    if not given:
        return
    cls = ascend_config_class(index)
    sch = schema(index, cls) if cls is not None else None
    if sch is None:
        return
    stripped, _ = _factory_strips(index, cls)
    _check(index, sch, given, "", stripped)


def _check(index: Any, sch: Any, given: dict, path: str, stripped: set | frozenset = frozenset()) -> None:
    module = sch.cls.module
    values = _declared_values(sch)
    for key, value in given.items():
        f = sch.fields.get(key)
        if key in stripped and (f is None or not isinstance(value, dict)):
            continue  # the factory takes it (refresh, dump_config, ...)
        if f is None:
            if sch.forbid is None:
                continue
            near = difflib.get_close_matches(key, list(sch.fields), n=1)
            hint = f"; did you mean {path}{near[0]}?" if near else ""
            raise UserError(f"--additional-config: {path}{key} is not a field of {sch.cls.name} "
                            f"({sch.where}), which forbids unknown keys ({sch.forbid[0]}:{sch.forbid[1]}){hint}")
        ok, nested = _type_ok(index, module, f.annotation, value)
        if not ok:
            raise UserError(f"--additional-config: {path}{key} {_json(value)} is not a valid "
                            f"`{_type_text(module, f.annotation)}` ({sch.cls.name}.{key}, {module.rel}:{f.line})")
        if nested is not None and isinstance(value, dict):
            _check(index, nested, value, f"{path}{key}.")
        values[key] = _coerce(f.annotation, value)
    for func in sch.validators:
        found = _run_validator(module, func, values)
        if found is not None:
            message, line = found
            raise UserError(f"--additional-config: {message.rstrip('.')} ({sch.cls.name}.{func.name.value}, "
                            f"{module.rel}:{line})")


def _json(value) -> str:
    import json

    return json.dumps(value)


# ----- --quantization -----------------------------------------------------------------------------------------

def quantization_methods(index: Any, backend: str | None) -> tuple[list, list, tuple | None]:
    """(vLLM's methods with where each list is said, the Ascend registrations, the platform's supported list with
    where): (([method], file:line) pairs...)."""
    out: list = []
    mod, name = QUANT_METHODS
    info = index.get(mod) if index is not None else None
    if info is not None:
        for d in info.defs.get(name, ()):
            if d.kind == "assign":
                names = _strings_of(index, info, d.node)
                if names is not None:
                    out.append((names, f"{info.rel}:{_line_of_literal(index, info, d.node)}"))
    registered = _registered(index) if backend == "ascend" else []
    supported = _platform_supported(index) if backend == "ascend" else None
    return out, registered, supported


def _strings_of(index: Any, info, node) -> list | None:
    """The strings of a list / tuple / `Literal[...]` literal, through `list(get_args(Name))` and names."""
    kind = type(node)
    if kind in (cst.List, cst.Tuple, cst.Set):
        got = [literal(e.value) for e in node.elements]
        names = [g.value for g in got if g is not None and isinstance(g.value, str)]
        for e in node.elements:  # names of constants
            if literal(e.value) is None and type(e.value) in (cst.Name, cst.Attribute):
                target = index.resolve_expr(info, e.value)
                lit = literal(target.node) if getattr(target, "kind", None) == "assign" else None
                if lit is not None and isinstance(lit.value, str):
                    names.append(lit.value)
        return names
    if kind is cst.Subscript and _dotted(node.value).rpartition(".")[2] == "Literal":
        return [got.value for s in node.slice
                if isinstance(s.slice, cst.Index) and (got := literal(s.slice.value)) is not None]
    if kind is cst.Call and node.args:
        return _strings_of(index, info, node.args[0].value)
    if kind in (cst.Name, cst.Attribute):
        target = index.resolve_expr(info, node)
        if getattr(target, "kind", None) == "assign":
            return _strings_of(index, target.module, target.node)
    return None


def _line_of_literal(index: Any, info, node) -> int:
    """The line of the list itself (through `list(get_args(QuantizationMethods))` to the Literal)."""
    if type(node) is cst.Call and node.args:
        return _line_of_literal(index, info, node.args[0].value)
    if type(node) in (cst.Name, cst.Attribute):
        target = index.resolve_expr(info, node)
        if getattr(target, "kind", None) == "assign":
            return _line_of_literal(index, target.module, target.node)
    return info.line_of(node)


def _registered(index: Any) -> list:
    """(method, file:line) of each `@register_quantization_config(...)` under vllm_ascend.quantization."""
    out: list = []
    if index is None:
        return out
    for info, _d, call in index.decorated_classes(QUANT_PACKAGE, QUANT_REGISTER):
        if not call.args:
            continue
        arg = call.args[0].value
        lit = literal(arg)
        if lit is None and type(arg) in (cst.Name, cst.Attribute):
            target = index.resolve_expr(info, arg)
            lit = literal(target.node) if getattr(target, "kind", None) == "assign" else None
        if lit is not None and isinstance(lit.value, str):
            out.append((lit.value, f"{info.rel}:{info.line_of(call)}"))
    return out


def _platform_supported(index: Any) -> tuple | None:
    from ..catalog import catalog

    qualname = (catalog().typed.walk.runtime.platform or {}).get("ascend")
    if not qualname or index is None:
        return None
    mod, _, name = qualname.rpartition(".")
    cls = index.lookup(mod, name)
    if getattr(cls, "kind", None) != "class":
        return None
    node = cls.skeleton
    for stmt in node.body.body if type(node.body) is cst.IndentedBlock else []:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else []:
            if isinstance(small, cst.AnnAssign):
                target, value = small.target, small.value
            elif isinstance(small, cst.Assign) and len(small.targets) == 1:
                target, value = small.targets[0].target, small.value
            else:
                continue
            if isinstance(target, cst.Name) and target.value == "supported_quantization" and value is not None:
                names = _strings_of(index, cls.module, value)
                if names is not None:
                    return names, f"{cls.module.rel}:{cls.module.line_of(stmt)}"
    return None


def check_quantization(index: Any, method: str | None, backend: str | None) -> None:
    """Refuse a method the trees do not know (vLLM's `Unknown quantization method`), or, on Ascend, one the
    platform does not support (`Platform.verify_quantization`)."""
    if not method:
        return
    known, registered, supported = quantization_methods(index, backend)
    if not known:
        return  # a tree that lists none: nothing is refused on a guess
    names = {m for names, _ in known for m in names} | {m for m, _ in registered}
    where = ", ".join(w for _, w in known)
    if method not in names:
        near = difflib.get_close_matches(method, sorted(names), n=1)
        hint = f"; did you mean {near[0]}?" if near else ""
        reg = f" and vllm-ascend's @{QUANT_REGISTER} ({len(registered)})" if registered else ""
        raise UserError(f"--quantization {method}: not a quantization method of the trees (vLLM's "
                        f"QUANTIZATION_METHODS, {where}{reg}){hint}")
    if supported is not None:
        allowed = set(supported[0]) | {m for m, _ in registered}
        if supported[0] and method not in allowed:
            raise UserError(f"--quantization {method}: not supported on Ascend (NPUPlatform.supported_quantization, "
                            f"{supported[1]}: {', '.join(sorted(allowed))})")


# ----- vllm serve's options --------------------------------------------------------------------------------------

def serve_options(index: Any) -> tuple[dict, set, str | None] | None:
    """(option spelling -> its long name, the long names that are flags, where they are declared) from
    `EngineArgs.add_cli_args`; None without the tree."""
    mod, cls_name, method = ENGINE_ARGS
    cls = index.lookup(mod, cls_name) if index is not None else None
    if cls is None or getattr(cls, "kind", None) != "class":
        return None
    func = next((s for s in cls.node.body.body if type(s) is cst.FunctionDef and s.name.value == method), None)
    if func is None:
        return None
    bools = {name for name, f in (_fields(cls)).items() if _dotted(f) == "bool"}
    spellings: dict = {}
    flags: set = set()
    for call in _calls(func):
        if type(call.func) is not cst.Attribute or call.func.attr.value != "add_argument":
            continue
        names: list[str] = []
        for a in call.args:
            got = literal(a.value) if a.keyword is None and a.star == "" else None
            if got is not None and isinstance(got.value, str) and got.value.startswith("-"):
                names.append(got.value)
        if not names:
            continue
        long = next((n for n in names if n.startswith("--")), names[0])
        for n in names:
            spellings[n] = long
        dest = _kwargs_key(call) or long.lstrip("-").replace("-", "_")
        action = _kw(call, "action")
        if dest in bools or (action is not None and "store_true" in cls.module.code(action)) or (
                action is not None and "BooleanOptionalAction" in cls.module.code(action)):
            flags.add(long)
            spellings["--no-" + long[2:]] = long
    return spellings, flags, f"{cls.module.rel}:{cls.module.line_of(func)}"


def _kwargs_key(call) -> str | None:
    """`**model_kwargs["enforce_eager"]` -> enforce_eager (the EngineArgs field the option sets)."""
    for a in call.args:
        if a.star == "**" and type(a.value) is cst.Subscript:
            s = a.value.slice[0].slice
            lit = literal(s.value) if type(s) is cst.Index else None
            if lit is not None and isinstance(lit.value, str):
                return lit.value
    return None


def _fields(cls: Any) -> dict:
    out = {}
    node = cls.skeleton
    for stmt in node.body.body if type(node.body) is cst.IndentedBlock else []:
        for small in stmt.body if type(stmt) is cst.SimpleStatementLine else []:
            if type(small) is cst.AnnAssign and type(small.target) is cst.Name:
                out[small.target.value] = small.annotation.annotation
    return out
