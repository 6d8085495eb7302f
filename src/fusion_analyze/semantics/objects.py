"""What an object the code builds holds where no `__init__` of the trees assigns it: a `@dataclass`'s field
(the argument of the call that built it, else the field's declared default) and a `@property` of its class (the
value its body returns, read on that object). Read by the constructor (`self_value`, `attr`) for the objects the
walk built (`FusedMoEConfig(...)` in vLLM's MoE factory, its `moe_parallel_config`), never run."""

from __future__ import annotations

import re

import libcst as cst

from ..ir.conditions import code_of
from .function_bodies import class_method, tables


def is_dataclass(mro) -> bool:
    """The class (first of `mro`) is a `@dataclass` whose fields no `__init__` of the trees replaces."""
    return bool(mro) and any("dataclass" in code_of(mro[0].module, d.decorator) for d in mro[0].skeleton.decorators) \
        and not any(class_method(c, "__init__") is not None for c in mro)


def field_order(cls) -> list[str]:
    """The fields of a dataclass in their order: its annotated names, ClassVar ones left out."""
    out = []
    node = cls.skeleton
    for stmt in node.body.body if type(node.body) is cst.IndentedBlock else []:
        for small in stmt.body if type(stmt) is cst.SimpleStatementLine else []:
            if type(small) is cst.AnnAssign and type(small.target) is cst.Name:
                if "ClassVar" in code_of(cls.module, small.annotation.annotation):
                    continue
                out.append(small.target.value)
    return out


def dataclass_argument(cls, call: cst.Call, attr: str):
    """(expression, "call" | "default") of field `attr` of the dataclass `cls` built by `call`: the argument
    passed by keyword, or by position (fields in their order, for a class with no base in the trees), else the
    field's declared default where it is no call (`g_proj: nn.Module | None = None`); None where it is not read
    here (passed through `*` or `**`, or computed by a factory)."""
    from .runtime_defaults import _declared

    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == attr:
            return arg.value, "call"
    if any(arg.star for arg in call.args):
        return None  # through `*` or `**`: which field it fills is not read here
    positional = [arg for arg in call.args if arg.keyword is None]
    if positional:  # by position: the fields in their order, of a dataclass with no base in the trees
        if cls.bases:
            return None
        fields = field_order(cls)
        if attr not in fields:
            return None
        if fields.index(attr) < len(positional):
            return positional[fields.index(attr)].value, "call"
    value = _declared(cls).get(attr)
    if value is not None and type(value) is not cst.Call:
        return value, "default"
    return None


def rebound(mro, name: str) -> bool:
    """A method of these classes assigns `self.<name>` (a `__post_init__`, a setter): what the call passed or
    the class declares may not be what it holds."""
    needle = re.compile(rb"self\.%s\b" % re.escape(name).encode())
    for c in mro:  # only the methods whose text names it are parsed (alone, Definition.nodes_with)
        if any(name in tables(f, c.module).self_assignments for f in c.methods_with(needle)):
            return True
    return False


def is_property(module, fn: cst.FunctionDef) -> bool:
    """`fn` is a `@property` (or cached property) getter: `self` alone."""
    return len(fn.params.params) == 1 and any(
        code_of(module, d.decorator) in ("property", "functools.cached_property", "cached_property") for d in fn.decorators)


def static_method(index, module, func, method_of=None):
    """`Cls.m` (a call's func) where Cls is a class of the trees and `m` its `@staticmethod`: m as a function
    Definition (its module the one that holds its code); None otherwise. `method_of(cls, name)` looks the method
    up (the constructor's, which knows the backend's patches), else the class's own MRO is not searched."""
    from ..index.modules import Definition

    if type(func) is not cst.Attribute or not isinstance(func.value, (cst.Name, cst.Attribute)):
        return None
    owner = index.resolve_expr(module, func.value)
    if not (isinstance(owner, Definition) and owner.kind == "class"):
        return None
    if method_of is not None:
        found = method_of(owner, func.attr.value)
        fn, where = (found[1], found.module) if found is not None else (None, None)
    else:
        fn, where = class_method(owner, func.attr.value), owner.module
    if fn is None or not any(type(d.decorator) is cst.Name and d.decorator.value == "staticmethod"
                             for d in fn.decorators):
        return None
    return Definition("function", fn.name.value, where, fn) if where is not None else None
