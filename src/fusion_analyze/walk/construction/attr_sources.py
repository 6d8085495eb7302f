"""Where else `self.x` comes from when no `__init__` of the chain assigns it: a method `__init__` calls, a
container `__init__` fills, a class attribute; and the value the constructor reads for an item of a
factory's tuple. A mixin of constructor.Constructor (its `attr`, `evaluate`, `init_scopes` and `method`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from ...catalog import catalog
from ...index.modules import Definition
from .default_choice import _explain, pick
from .instance import Instance, _layer_list
from ...semantics.scope import Scope, bind_params
from ...semantics.function_bodies import tables
from ...ir.conditions import Condition, Truth, impossible, join
from ...semantics.values import Bindings
from ...ir.texts import say

_NO_BINDINGS = Bindings()


class AttrSources:
    """Mixin of Constructor: the other sources of `self.<name>`."""

    if TYPE_CHECKING:  # what Constructor (constructor.py) gives it, declared for the type checker only
        from collections.abc import Callable

        from ...index.modules import ModuleIndex
        from ...semantics.evaluator import Evaluator

        index: ModuleIndex
        evaluator: Evaluator
        load_time: Callable[..., object] | None
        unbuilt: dict[int, str]
        _hf: object

        def attr(self, inst: Instance, name: str, depth: int = 0) -> Instance | None: ...

        def evaluate(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> list[Instance]: ...

        def init_scopes(self, inst: Instance) -> list[tuple[Definition, cst.FunctionDef, Scope]]: ...

        def mro(self, cls: Definition) -> list[Definition]: ...

        def external_call(self, inst: Instance, name: str) -> tuple[str, cst.Call, Scope] | None: ...

        def _fill_locals(self, fn: cst.FunctionDef, scope: Scope, module, before: int) -> None: ...

        def _traced(self, cond: Condition, scope: Scope) -> Condition: ...

    @property
    def hf(self):
        """The Transformers backend's load-time rewrites, when the walk can meet transformers classes."""
        if self._hf is False:
            make = self.load_time  # handed in by the walker (walk.hf.fusers.LoadTime): construction knows no backend
            self._hf = make(self) if make is not None and catalog().hf_fusers["package"] in self.index.trees else None
        return self._hf

    def _provided(self, target: Definition):
        """`RMSNorm = _resolve("layernorm", "RMSNorm")`: the vLLM layer a provider names (hf_fusers.yaml)."""
        spec = catalog().hf_fusers.get("layer_providers") or {}
        call = target.node
        if not (type(call) is cst.Call and target.module.code(call.func).strip() in spec.get("calls", ())
                and len(call.args) == 2 and all(type(a.value) is cst.SimpleString for a in call.args)):
            return target
        module, name = (a.value.evaluated_value for a in call.args)
        return self.index.lookup(f"{spec['package']}.{module}", name)


    def _built_value(self, inst: Instance, name: str, unknown):
        """What the constructor reads for self.<name>: None, or an object (never None), when it is certain."""
        from ...semantics.values import Known, NotNone

        built = self.attr(inst, name)
        if built is None or any(a.cls is None for a in built.alternatives):
            return unknown  # not known, or None on another path
        if built.cls is not None:  # one of several classes the factory builds (get_rope's by rope type): an object
            return NotNone(built.cls.name)
        return unknown if built.condition else Known(None)

    def _init_self_calls(self, inst: Instance):
        """(class, __init__, scope, position, call) of each `self.<method>(...)` statement of the __init__ chain."""
        for c, fn, scope in self.init_scopes(inst):
            for pos, call in tables(fn, c.module).self_calls:
                yield c, fn, scope, pos, call

    def _init_helpers(self, inst: Instance, name: str):
        """(the method found, its scope, its assignments of `self.<name>`, the calling __init__'s scope) of each
        method the __init__ chain calls (`self._init_layers(...)`: the most derived override, not __init__) that
        assigns `self.<name>`; the __init__'s locals filled up to the call, the method's parameters bound to it."""
        for c, fn, scope, pos, call in self._init_self_calls(inst):
            found = self.method(inst.cls, call.func.attr.value)
            if found is None or found[1].name.value == "__init__":
                continue
            assigned = tables(found[1], found.module).self_assignments.get(name, ())
            if not assigned:
                continue
            self._fill_locals(fn, scope, c.module, before=pos)
            hscope = Scope(module=found.module, owner=inst)
            bind_params(found[1], call, scope, hscope, skip_self=True)
            yield found, hscope, assigned, scope

    def _filled_container(self, inst: Instance, name: str, depth: int) -> Instance | None:
        """`self.x = nn.ModuleList()` then `self.x.append(M(...))` or `self.x[k] = M(...)`: a list of M."""
        for c, fn, scope in self.init_scopes(inst):
            for pos, cond, value in tables(fn, c.module).container_fills.get(name, ()):
                self._fill_locals(fn, scope, c.module, before=pos)
                element = pick(self.evaluate(value, scope, depth + 1))
                if element is not None and element.cls is not None:
                    element.condition = join(cond, element.condition)

                    return _layer_list(element, None)
        return None

    def _helper_attr(self, inst: Instance, name: str, depth: int) -> Instance | None:
        """`self.<name>` assigned in a method that __init__ calls: self._init_layers(...), self._build(...)."""
        for found, hscope, assigned, _scope in self._init_helpers(inst, name):
            helper = found[1]
            options = []
            for expr, cond, hpos in assigned:
                self._fill_locals(helper, hscope, found.module, before=hpos)
                decided = self.evaluator.decide(cond, _NO_BINDINGS, scope=hscope)
                if decided is Truth.FALSE:
                    continue  # the configuration rules this assignment out
                if decided is Truth.TRUE:
                    options, cond = [], None  # it runs, and replaces what earlier assignments built
                else:
                    local_text = {t: found.module.code(v).strip()
                                  for t, v, _c, _p in tables(helper, found.module).local_assignments}
                    cond = _explain(self._traced(decided, hscope) if isinstance(decided, Condition) else None,
                                    local_text)
                for alt in self.evaluate(expr, hscope, depth + 1):
                    alt.condition = join(cond, alt.condition)
                    if not impossible(alt.condition):
                        options.append(alt)
            if options:
                return pick(options)
        return None

    def external_class(self, inst: Instance, name: str) -> str | None:
        """`self.gate = nn.Linear(...)`: the dotted name of a constructor outside the trees."""
        got = self.external_call(inst, name)
        return got[0] if got is not None else None

    def nested_attr(self, expr: cst.Attribute, scope: Scope, depth: int) -> list | None:
        """`self.layer.quant_method`: the attribute of a module the walk built (None: not such an expression)."""
        root = expr.value
        while type(root) is cst.Attribute:
            root = root.value
        if not (type(root) is cst.Name and root.value == "self" and type(expr.value) is cst.Attribute):
            return None
        bases = [b for b in self.evaluate(expr.value, scope, depth + 1) if b.cls is not None]
        found = [self.attr(b, expr.attr.value, depth + 1) for b in bases[:1]]
        return [f for f in found if f is not None]

    def _late_attr(self, inst: Instance, name: str, depth: int) -> Instance | None:
        """`self.x = None` in __init__, set by another method of the class its owner calls
        (`update_attrs()`: `self.quant_method = self.layer.quant_method`): the module it then holds."""
        options = []
        needle = re.compile(rb"self\.%s\b" % re.escape(name).encode())
        for c in self.mro(inst.cls):
            # only the methods whose text names it are parsed (alone: Definition.nodes_with); a class that names
            # it nowhere is not parsed at all
            for fn in c.methods_with(needle):
                if fn.name.value == "__init__":
                    continue
                for expr, _cond, _pos in tables(fn, c.module).self_assignments.get(name, ()):
                    options += [i for i in self.evaluate(expr, Scope(module=c.module, owner=inst), depth + 1)
                                if i.cls is not None]
        return pick(options)  # several: the default, the others listed as alternatives

    def partial_function(self, inst: Instance, name: str) -> str | None:
        """`self.<name> = functools.partial(f, ...)`: the dotted name of f."""
        for c, fn, _scope in self.init_scopes(inst):
            for expr, _cond, _pos in tables(fn, c.module).self_assignments.get(name, ()):
                if type(expr) is cst.Call and expr.args and isinstance(expr.args[0].value, (cst.Name, cst.Attribute)):
                    return self.index.dotted(c.module, expr.args[0].value)
        return None

    def _class_attr(self, inst: Instance, name: str, depth: int) -> Instance | None:
        """`model_cls = DeepseekV2Model` in a class body, read through `self.model_cls`."""
        for c in self.mro(inst.cls):
            if not c.may_assign(name):
                continue  # `ast` saw no such assignment: its body need not be parsed
            node = c.skeleton
            body = node.body.body if type(node.body) is cst.IndentedBlock else []
            for stmt in body:
                if not type(stmt) is cst.SimpleStatementLine:
                    continue
                for small in stmt.body:
                    targets = [t.target for t in small.targets] if type(small) is cst.Assign else (
                        [small.target] if type(small) is cst.AnnAssign and small.value is not None else [])
                    if any(type(t) is cst.Name and t.value == name for t in targets):
                        found = self.evaluate(small.value, Scope(module=c.module, owner=inst), depth + 1)
                        return pick(found)
        return None

    def built_as(self, inst: Instance, name: str, cls):
        """`self.<name> = impl_cls(...)` where the runtime picks the class (`impl_cls =
        self.attn_backend.get_impl_cls()`): an instance of `cls` built with that call's arguments, read in the
        __init__ that makes it (the layer's sinks and sliding window reach the backend's impl this way)."""
        for c, fn, scope in self.init_scopes(inst):
            for expr, cond, pos in tables(fn, c.module).self_assignments.get(name, ()):
                if type(expr) is cst.Name and not cond:  # `impl = impl_cls(...)`, then `self.impl = impl`
                    made = [(v, lc, p) for t, v, lc, p in tables(fn, c.module).local_assignments
                            if t == expr.value and p < pos]
                    if len(made) == 1 and type(made[0][0]) is cst.Call and not made[0][1]:
                        expr, pos = made[0][0], made[0][2]
                if type(expr) is cst.Call and not cond:
                    self._fill_locals(fn, scope, c.module, before=pos)
                    return Instance(cls, expr, scope, None)
        return None

    def _elements(self, expr, scope: Scope, depth: int) -> list:
        """What an iterator over `expr` yields: a list's or comprehension's elements, an iterator's own."""
        if type(expr) is cst.ListComp:
            return self.evaluate(expr.elt, scope, depth + 1)
        if type(expr) is cst.List:
            return [i for e in expr.elements for i in self.evaluate(e.value, scope, depth + 1)]
        return self.evaluate(expr, scope, depth + 1)

    def _registered_model(self, target, call: cst.Call, scope: Scope) -> list[Instance] | None:
        """`init_vllm_registered_model(vllm_config, hf_config=config.text_config)` (walk.yaml `runtime.registered_model`):
        the registry's class for the architecture it names, [] when the configuration does not say which
        (`unbuilt` keeps why); None for any other function."""
        from ...catalog import catalog
        from ...locate.registry import read_registry
        from ...semantics.signatures import call_arguments
        from ...semantics.values import Known

        if target.qualname not in catalog().runtime.get("registered_model", ()):
            return None
        _args, keywords = call_arguments(call)
        arch_expr = keywords.get("architectures")
        if arch_expr is None and keywords.get("hf_config") is not None:
            arch_expr = cst.Attribute(value=keywords["hf_config"], attr=cst.Name("architectures"))
        value = self.evaluator.infer(arch_expr, scope) if arch_expr is not None else None
        names = value.value if isinstance(value, Known) and isinstance(value.value, (list, tuple)) else []
        if self._registry is None:
            self._registry = {e.architecture: e for e in read_registry(self.index)}
        entry = self._registry.get(names[0]) if names and isinstance(names[0], str) else None
        cls = self.index.lookup(entry.module, entry.class_name) if entry is not None else None
        if cls is None or getattr(cls, "kind", None) != "class":
            said = scope.module.code(arch_expr).strip() if arch_expr is not None else say("own_architectures")
            self.unbuilt[id(call)] = (say("built_at_run_time_unknown", fn=target.name, source=said, arch=str(names[0]))
                                      if names else say("built_at_run_time", fn=target.name, source=said))
            return []
        return [Instance(cls, call, scope)]

