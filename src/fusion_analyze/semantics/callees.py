"""What a call runs, as its code names it: the one resolver of a call's target, shared by the evaluator, the
construction of instances, the statement walk and the kernel walk. Each reader asks for the forms it handles,
in its own order (a `self.m(...)` needs the instance, which only the construction knows); what a name stands
for in the trees is resolved here, once per call, through the binder (index.ModuleIndex.resolve_expr)."""

from __future__ import annotations

from typing import Any

import libcst as cst

_UNSET: Any = object()


class Callee:
    __slots__ = ("index", "module", "call", "func", "caller", "runs", "replaced", "_named")

    def __init__(self, index, module, call: cst.Call, caller: cst.FunctionDef | None = None, runs=None) -> None:
        """`caller`: the function the call is in, when its own imports may bind the callee's name. `runs`: the
        backend's replacements of module attributes (walk/construction/constructor.py `Constructor.runs`), so
        that a name a vllm-ascend patch rebinds is what the patch assigned; `replaced` is then the replacement
        that gave `named` (None: the name's own)."""
        self.index, self.module, self.call, self.func, self.caller = index, module, call, call.func, caller
        self.runs, self.replaced = runs, None
        self._named = _UNSET

    def resolve(self, expr: cst.BaseExpression) -> Any:
        """A Name or dotted module attribute of this call's module: a Definition, a ModuleRef or None."""
        return self._resolved(expr)[0]

    def _resolved(self, expr: cst.BaseExpression, where: tuple[str, str] | None = None) -> tuple[Any, Any]:
        """(what `expr` stands for, the replacement that put it there or None); `where`: (module, name) of an
        import inside the calling function instead, read when the call runs."""
        if self.runs is None:
            found = self.index.resolve_expr(self.module, expr) if where is None else self.index.lookup(*where)
            return found, None
        hops: list = []
        found = self.index.traced(self.module, expr, hops) if where is None \
            else self.index.lookup(where[0], where[1], None, hops, None)
        return self.runs(self.module, hops, found)

    @property
    def is_named(self) -> bool:
        """`f(...)`, `a.b.f(...)`: the callee is a name or an attribute chain."""
        return type(self.func) is cst.Name or type(self.func) is cst.Attribute

    @property
    def named(self) -> Any:  # index.Definition | index.ModuleRef | None, as index.ModuleIndex.resolve_expr gives
        """What a named callee stands for in the trees (a class, a function, a module), or None; a bare name the
        module does not bind may be bound by an import inside the calling function (`from m import f` under
        `if HAS_TRITON:`)."""
        if self._named is _UNSET:
            found, by = self._resolved(self.func) if self.is_named else (None, None)
            if found is None and self.caller is not None and type(self.func) is cst.Name:
                from .function_bodies import imports_in

                where = imports_in(self.caller, self.module).get(self.func.value)
                found, by = self._resolved(self.func, where) if where is not None else (None, None)
            self._named, self.replaced = found, by
        return self._named

    @property
    def self_rooted(self) -> bool:
        """`self.m(...)`, `self.a.b(...)`: a method or submodule of the instance (the construction reads it)."""
        root = self.func
        while type(root) is cst.Attribute:
            root = root.value
        return type(root) is cst.Name and root.value == "self"

    @property
    def super_method(self) -> str | None:
        """`super().m(...)`: the method name, looked up after the caller's class in the instance's MRO."""
        func = self.func
        if (type(func) is cst.Attribute and type(func.value) is cst.Call and type(func.value.func) is cst.Name
                and func.value.func.value == "super"):
            return func.attr.value
        return None

    @property
    def launched(self):
        """`kernel[grid](...)`: the Triton function launched, when the trees define it as a function."""
        func = self.func
        if type(func) is cst.Subscript and isinstance(func.value, (cst.Name, cst.Attribute)):
            target = self.resolve(func.value)
            return target if getattr(target, "kind", None) == "function" else None
        return None

    @property
    def is_launch(self) -> bool:
        func = self.func
        return type(func) is cst.Subscript and isinstance(func.value, (cst.Name, cst.Attribute))

    @property
    def applied(self):
        """`SomeFn.apply(...)`: the autograd Function class whose static forward runs, or None."""
        func = self.func
        if type(func) is cst.Attribute and func.attr.value == "apply" and isinstance(func.value, (cst.Name, cst.Attribute)):
            target = self.resolve(func.value)
            return target if getattr(target, "kind", None) == "class" else None
        return None

    @property
    def returned_by(self):
        """`f().m(...)`: (the function f, m) when f is a function of the trees, else None."""
        func = self.func
        if type(func) is cst.Attribute and type(func.value) is cst.Call and isinstance(func.value.func, (cst.Name, cst.Attribute)):
            maker = self.resolve(func.value.func)
            if getattr(maker, "kind", None) == "function":
                return maker, func.attr.value
        return None
