"""Walk forward() from the model class: statements in order, submodules expanded, leaves become ops."""

from __future__ import annotations

import re

import libcst as cst

from ..catalog import catalog
from ..index.modules import Definition, ModuleIndex
from ..index.nodes import find_all
from ..locate.ascend import Patch
from .construct import Constructor, Instance
from .tables import class_method, tables
from .values import EVALUATOR, Bindings, Condition, Truth, join, as_text
from .ir import Kernel, Op, RoleLocation, WalkResult
from .kernels import Backends
from .taxonomy import function_kind, is_kernel, leaf_for_class_names, operator_kind, tensor_method_kind

MAX_DEPTH = catalog().limit("expand_depth")
MAX_OPS = catalog().limit("max_ops")


class _Frame:
    """One expanded forward/method: its instance, variables (SSA values) and facts."""

    def __init__(self, inst: Instance, cls: Definition, fn: cst.FunctionDef, module, path: str, facts: Bindings):
        self.inst = inst
        self.cls = cls
        self.fn = fn
        self.module = module
        self.path = path
        self.facts = facts
        self.env: dict[str, list[str]] = {}
        self.loop_vars: dict[str, Instance] = {}
        self.returns: list[str] = []
        self.scope = f"{cls.name}.{fn.name.value}"


class Walker:
    def __init__(self, index: ModuleIndex, patches: list[Patch]):
        self.index = index
        self.ctor = Constructor(index)
        self.backends = Backends(index, self.ctor)
        self.patches = {p.target: p for p in patches} if index.backend == "ascend" else {}
        self.ops: list[Op] = []
        self.unknowns: list[dict] = []
        self.alternatives: list[dict] = []
        self.locations: dict[str, RoleLocation] = {}
        self._counter = 0
        self._ids: dict[str, int] = {}
        self.section = "prologue"
        self.repeat: str | None = None
        self._stack: list[str] = []
        self._walked_lists: set = set()

    # -- entry ------------------------------------------------------------------------------------
    def walk_model(self, model_cls: Definition) -> WalkResult:
        root = Instance(model_cls)
        self._role("model", root)
        self._expand(root, "forward", [], {}, path="", facts=Bindings())
        if self.ctor.method(model_cls, "compute_logits") is not None:
            self.section = "epilogue"
            self._expand(root, "compute_logits", [self._value("hidden_states")], {}, path="", facts=Bindings())
        return WalkResult(self.ops, self.locations, self.repeat, self.unknowns, self.alternatives)

    # -- expanding modules ------------------------------------------------------------------------
    def _forward_of(self, cls: Definition, method: str):
        """The method that runs for `cls.method` on this backend: a patch first, then the MRO."""
        for c in self.ctor.mro(cls):
            patch = self.patches.get(f"{c.qualname}.{method}")
            if patch is not None:
                pmod = self.index.get(patch.module)
                value = cst.parse_expression(patch.value_name) if pmod and patch.value_name else None
                target = self.index.resolve_expr(pmod, value) if value is not None else None
                if isinstance(target, Definition) and target.kind == "function":
                    return c, target.node, target.module, patch
                if isinstance(target, Definition) and target.kind == "class":
                    pass
            fn = class_method(c, method)
            if fn is not None:
                return c, fn, c.module, None
        return None

    def _expand(self, inst: Instance, method: str, args: list, kwargs: dict, path: str, facts: Bindings) -> list[str]:
        if inst.cls is None or len(self._stack) > MAX_DEPTH or len(self.ops) > MAX_OPS:
            return []
        key = f"{inst.cls.qualname}.{method}"
        if self._stack.count(key) >= 2:
            self._unknown(None, inst.cls.module, inst.cls.node, f"recursion into {key} stopped")
            return []
        found = self._forward_of(inst.cls, method)
        if found is None:
            self._unknown(path, inst.cls.module, inst.cls.node, f"{inst.cls.name} has no {method}()")
            return []
        owner, fn, module, patch = found
        frame = _Frame(inst, owner, fn, module, path, Bindings(dict(), dict(facts.attr_classes)))
        if patch is not None:
            frame.scope = f"{owner.name}.{method}"
        self._bind(frame, args, kwargs)
        self._stack.append(key)
        try:
            self._block(frame, fn.body.body, None, True)
        finally:
            self._stack.pop()
        return frame.returns

    def _bind(self, frame: _Frame, args: list, kwargs: dict) -> None:
        params = list(frame.fn.params.posonly_params) + list(frame.fn.params.params)
        if params and params[0].name.value in ("self", "cls"):
            params = params[1:]
        all_params = params + list(frame.fn.params.kwonly_params)
        for p in all_params:
            name = p.name.value
            frame.env[name] = [self._value(name)]
            if p.default is not None and isinstance(p.default, cst.Name) and p.default.value == "None":
                frame.facts.none[name] = True
        for p, value in zip(params, args):
            self._assign_param(frame, p.name.value, value)
        for k, value in kwargs.items():
            if any(p.name.value == k for p in all_params):
                self._assign_param(frame, k, value)

    def _assign_param(self, frame: _Frame, name: str, value) -> None:
        if isinstance(value, _NoneValue):
            frame.facts.none[name] = True
            frame.env[name] = []
        elif isinstance(value, _InstanceValue):
            frame.loop_vars[name] = value.inst
        else:
            frame.facts.none[name] = False
            frame.env[name] = list(value) if isinstance(value, list) else [value]

    # -- statements -------------------------------------------------------------------------------
    def _block(self, frame: _Frame, stmts, cond: str | None, steady: bool) -> None:
        for stmt in stmts:
            if len(self.ops) > MAX_OPS:
                return
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    self._small(frame, small, stmt, cond, steady)
            elif isinstance(stmt, cst.If):
                self._if(frame, stmt, cond, steady)
            elif isinstance(stmt, cst.For):
                self._for(frame, stmt, cond, steady)
            elif isinstance(stmt, (cst.With, cst.While)):
                self._block(frame, stmt.body.body, cond, steady)
            elif isinstance(stmt, cst.Try):
                self._block(frame, stmt.body.body, cond, steady)

    def _if(self, frame: _Frame, stmt: cst.If, cond, steady) -> None:
        test = Condition.of(stmt.test, frame.module)
        self._eval(frame, stmt.test, cond, steady, stmt, quiet=True)
        value = EVALUATOR.truth(stmt.test, frame.module, frame.facts).as_bool()
        body_steady = steady and value is not False
        else_steady = steady and (value is False)
        before = {k: list(v) for k, v in frame.env.items()}
        none_before = dict(frame.facts.none)
        self._block(frame, stmt.body.body, join(cond, test), body_steady)
        env_body, none_body = frame.env, frame.facts.none
        if stmt.orelse is not None:
            frame.env = {k: list(v) for k, v in before.items()}
            frame.facts.none = dict(none_before)
            neg = test.negate()
            if isinstance(stmt.orelse, cst.If):
                self._if(frame, stmt.orelse, join(cond, neg), else_steady)
            else:
                self._block(frame, stmt.orelse.body.body, join(cond, neg), else_steady)
            env_else, none_else = frame.env, frame.facts.none
        else:
            env_else, none_else = before, none_before
        # After the branch, a variable holds the steady branch's value.
        if value is False:
            frame.env, frame.facts.none = env_else, none_else
        elif value is True or stmt.orelse is None:
            merged = dict(env_else)
            merged.update(env_body)
            frame.env = merged
            frame.facts.none = {**none_else, **none_body}
            if value is None:
                for k in set(none_else) | set(none_body):
                    if none_else.get(k) != none_body.get(k):
                        frame.facts.none.pop(k, None)
        else:
            frame.env, frame.facts.none = env_body, none_body

    def _for(self, frame: _Frame, stmt: cst.For, cond, steady) -> None:
        layer_list = self._layer_list(frame, stmt.iter)
        loop_var, body = None, list(stmt.body.body)
        if layer_list is None:
            # for i in range(self.start_layer, self.end_layer): layer = self.layers[i]; ...
            indexed = self._indexed_layer(frame, body)
            if indexed is not None:
                layer_list, loop_var, first = indexed
                body.remove(first)
        if layer_list is not None and layer_list.element is not None:
            element = layer_list.element
            key = element.cls.qualname if element.cls else None
            if key in self._walked_lists:
                return  # a second loop over the same layers (another PP / aux path): walked once
            self._walked_lists.add(key)
            target = stmt.target
            names = [target] if isinstance(target, cst.Name) else [e.value for e in target.elements] if isinstance(target, cst.Tuple) else []
            if loop_var is not None:
                frame.loop_vars[loop_var] = element
            elif names and isinstance(names[-1], cst.Name):
                frame.loop_vars[names[-1].value] = element
            # Loop-carried variables are not None after the first iteration (the steady state).
            for name in _assigned_names(stmt.body):
                if frame.facts.none.get(name):
                    frame.facts.none[name] = False
            previous = self.section
            self.section = "layer"
            self.repeat = layer_list.repeat
            self._layer_role(element, f"{frame.path}.layers" if frame.path else "layers")
            self._block(frame, body, cond, steady)
            self.section = "epilogue" if previous != "layer" else previous
            return
        self._eval(frame, stmt.iter, cond, steady, stmt)
        self._block(frame, stmt.body.body, cond, steady)

    def _is_leaf(self, inst: Instance) -> bool:
        """A class the taxonomy lists (attention, norm, linear...): one op, not a forward to walk into."""
        return inst.cls is not None and leaf_for_class_names(self.ctor.base_names(inst.cls)) is not None

    def _list_item(self, frame: _Frame, value) -> Instance | None:
        """The module `self.<list>[k]` stands for, when the list holds leaves (attention, norms)."""
        if not (isinstance(value, cst.Subscript) and _self_attr(value.value)):
            return None
        lst = self.ctor.attr(frame.inst, value.value.attr.value)
        if lst is None or lst.element is None or lst.element.cls is None:
            return None
        return lst.element if self._is_leaf(lst.element) else None

    def _indexed_layer(self, frame: _Frame, body: list):
        """(layer list, name, statement) for a loop body with a statement `name = self.layers[i]`."""
        for stmt in body:
            if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
                continue
            small = stmt.body[0]
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name) and isinstance(small.value, cst.Subscript)):
                continue
            layer_list = self._layer_list(frame, small.value)
            if layer_list is not None and layer_list.element is not None:
                return layer_list, small.targets[0].target.value, stmt
        return None

    def _layer_list(self, frame: _Frame, it) -> Instance | None:
        """islice(self.layers, a, b) / self.layers / self.layers[a:b] / enumerate(...) of those."""
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("islice", "enumerate", "zip") and it.args:
            return self._layer_list(frame, it.args[0].value)
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value == "islice" and it.args:
            return self._layer_list(frame, it.args[0].value)
        if isinstance(it, cst.Subscript):
            return self._layer_list(frame, it.value)
        if _self_attr(it):
            inst = self.ctor.attr(frame.inst, it.attr.value)
            if inst is not None and inst.element is not None:
                return inst
        return None

    def _small(self, frame: _Frame, small, stmt, cond, steady) -> None:
        if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            value = small.value
            if value is None:
                return
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            hint = _target_names(targets[0])
            if isinstance(small, cst.AugAssign):
                kind = operator_kind(type(small.operator).__name__.replace("Assign", ""))
                left = self._eval(frame, small.target, cond, steady, stmt)
                right = self._eval(frame, value, cond, steady, stmt)
                if kind and left:  # x *= scale is an op too (scalar right side)
                    out = self._op(frame, kind, _OP_SYMBOL.get(kind, kind), None, stmt, left + right, hint, cond, steady,
                                   attrs={"scalar": not right})
                    self._bind_targets(frame, targets, out)
                return
            if isinstance(value, cst.Name) and value.value == "None":
                for t in targets:
                    for n in _target_names(t):
                        frame.facts.none[n] = True
                        frame.env[n] = []
                return
            alias = self._list_item(frame, value)
            if alias is not None and len(targets) == 1 and isinstance(targets[0], cst.Name):
                frame.loop_vars[targets[0].value] = alias  # attn = self.attn[0]; attn(q, k, v)
                return
            result = self._eval(frame, value, cond, steady, stmt, hint=hint)
            self._bind_targets(frame, targets, result)
        elif isinstance(small, cst.Expr):
            self._eval(frame, small.value, cond, steady, stmt)
        elif isinstance(small, cst.Return):
            if small.value is not None:
                frame.returns = self._eval(frame, small.value, cond, steady, stmt) if steady or not frame.returns else frame.returns

    def _bind_targets(self, frame: _Frame, targets, values: list[str]) -> None:
        for t in targets:
            if isinstance(t, cst.Name):
                frame.env[t.value] = values[:1] if len(values) == 1 else values
                frame.facts.none[t.value] = False
            elif isinstance(t, (cst.Tuple, cst.List)):
                names = [e.value for e in t.elements]
                for i, n in enumerate(names):
                    if isinstance(n, cst.Name):
                        if len(values) == len(names):
                            frame.env[n.value] = [values[i]]
                        else:
                            frame.env[n.value] = values[i:i + 1] if i < len(values) else values[-1:]
                        frame.facts.none[n.value] = False

    # -- expressions ------------------------------------------------------------------------------
    def _eval(self, frame: _Frame, expr, cond, steady, stmt, hint=None, quiet=False) -> list[str]:
        if expr is None:
            return []
        if isinstance(expr, cst.Name):
            return list(frame.env.get(expr.value, []))
        if isinstance(expr, cst.Call):
            return self._call(frame, expr, cond, steady, stmt, hint)
        if isinstance(expr, (cst.Tuple, cst.List)):
            out = []
            for el in expr.elements:
                out += self._eval(frame, el.value, cond, steady, stmt)
            return out
        if isinstance(expr, cst.BinaryOperation):
            left = self._eval(frame, expr.left, cond, steady, stmt)
            right = self._eval(frame, expr.right, cond, steady, stmt)
            kind = operator_kind(type(expr.operator).__name__)
            if kind and (left or right) and not quiet:
                return self._op(frame, kind, _OP_SYMBOL.get(kind, kind), None, stmt, left + right, hint, cond, steady, attrs={"scalar": not (left and right)})
            return left + right
        if isinstance(expr, cst.Subscript):
            return self._eval(frame, expr.value, cond, steady, stmt)
        if isinstance(expr, cst.IfExp):
            return self._eval(frame, expr.body, cond, steady, stmt) or self._eval(frame, expr.orelse, cond, steady, stmt)
        if isinstance(expr, cst.Attribute):
            if _self_attr(expr):
                return []
            return self._eval(frame, expr.value, cond, steady, stmt)
        return []

    def _args(self, frame: _Frame, call: cst.Call, cond, steady, stmt):
        args, kwargs = [], {}
        for a in call.args:
            if a.star:
                continue
            if isinstance(a.value, cst.Name) and a.value.value == "None":
                v = _NONE
            elif isinstance(a.value, cst.Name) and a.value.value in frame.loop_vars:
                v = _InstanceValue(frame.loop_vars[a.value.value])
            elif isinstance(a.value, cst.Name) and frame.facts.none.get(a.value.value):
                v = _NONE
            else:
                v = self._eval(frame, a.value, cond, steady, stmt)
            if a.keyword is None:
                args.append(v)
            else:
                kwargs[a.keyword.value] = v
        return args, kwargs

    def _call(self, frame: _Frame, call: cst.Call, cond, steady, stmt, hint) -> list[str]:
        func = call.func
        # super().forward(...) / super().method(...)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call) and isinstance(func.value.func, cst.Name) and func.value.func.value == "super":
            args, kwargs = self._args(frame, call, cond, steady, stmt)
            mro = self.ctor.mro(frame.cls)
            for c in mro[1:]:
                fn = class_method(c, func.attr.value)
                if fn is not None:
                    return self._inline(frame, c, fn, c.module, args, kwargs, cond, steady)
            return []
        # self.<submodule>(...) or self.<method>(...)
        if _self_attr(func):
            name = func.attr.value
            if name == "_forward_method" and frame.inst.cls is not None:
                name = self._dispatch_target(frame.inst)  # per-platform dispatch set in __init__
            method = self.ctor.method(frame.cls, name) if frame.inst.cls is not None else None
            if method is None and frame.inst.cls is not None:
                method = self.ctor.method(frame.inst.cls, name)
            if method is not None:
                args, kwargs = self._args(frame, call, cond, steady, stmt)
                owner, fn = method
                return self._inline(frame, owner, fn, owner.module, args, kwargs, cond, steady)
            sub = self.ctor.attr(frame.inst, name)
            args, kwargs = self._args(frame, call, cond, steady, stmt)
            if sub is None or sub.cls is None:
                external = self.ctor.external_class(frame.inst, name)
                leaf = leaf_for_class_names([external.rsplit(".", 1)[-1]]) if external else None
                if leaf is not None:
                    return self._op(frame, leaf[1]["kind"], name, external.rsplit(".", 1)[-1], stmt, _flat(args, kwargs),
                                    hint, cond, steady, attrs={"external": external},
                                    path=f"{frame.path}.{name}" if frame.path else name)
                return self._unknown_op(frame, stmt, name, _flat(args, kwargs), hint, cond, steady,
                                        f"cannot tell which class builds self.{name}")
            return self._module_call(frame, sub, name, call, args, kwargs, cond, steady, stmt, hint)
        # self.<submodule>.<method>(...) e.g. self.experts.forward_impl(...)
        if isinstance(func, cst.Attribute) and _self_attr(func.value):
            sub = self.ctor.attr(frame.inst, func.value.attr.value)
            if sub is not None and sub.cls is not None and func.attr.value in ("forward",):
                args, kwargs = self._args(frame, call, cond, steady, stmt)
                return self._module_call(frame, sub, func.value.attr.value, call, args, kwargs, cond, steady, stmt, hint)
        # layer(...) inside a layer loop
        if isinstance(func, cst.Name) and func.value in frame.loop_vars:
            args, kwargs = self._args(frame, call, cond, steady, stmt)
            inst = frame.loop_vars[func.value]
            if self._is_leaf(inst):
                return self._module_call(frame, inst, func.value, call, args, kwargs, cond, steady, stmt, hint)
            return self._expand(inst, "forward", args, kwargs, path=f"{frame.path}.layers" if frame.path else "layers",
                                facts=frame.facts)
        # self.layers[i](...), self.attn_per_step[str(step)](...)
        if isinstance(func, cst.Subscript) and _self_attr(func.value):
            lst = self.ctor.attr(frame.inst, func.value.attr.value)
            if lst is not None and lst.element is not None:
                args, kwargs = self._args(frame, call, cond, steady, stmt)
                if self._is_leaf(lst.element):  # a list of leaves
                    return self._module_call(frame, lst.element, func.value.attr.value, call, args, kwargs, cond,
                                             steady, stmt, hint)
                return self._expand(lst.element, "forward", args, kwargs, path=f"{frame.path}.{func.value.attr.value}".lstrip("."), facts=frame.facts)
        dotted = self.index.dotted(frame.module, func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        # tensor methods: x.view(...), qkv.split(...)
        if isinstance(func, cst.Attribute) and not (dotted and dotted.split(".")[0] in ("torch", "torch_npu", "F")) and not is_kernel(dotted):
            base = self._eval(frame, func.value, cond, steady, stmt)
            args, kwargs = self._args(frame, call, cond, steady, stmt)
            kind = tensor_method_kind(func.attr.value)
            if kind and base:
                return self._op(frame, kind, func.attr.value, None, stmt, base + _flat(args, kwargs), hint, cond, steady)
            if func.attr.value in _CONTAINER_METHODS:
                return []
        args, kwargs = self._args(frame, call, cond, steady, stmt)
        inputs = _flat(args, kwargs)
        if is_kernel(dotted):
            out = self._op(frame, "kernel", dotted.rsplit(".", 1)[-1], None, stmt, inputs, hint, cond, steady)
            self.ops[-1].kernels = [Kernel(dotted, frame.module.rel, frame.module.line_of(call), None)]
            target = self.backends.custom_ops.get(dotted.rsplit(".", 1)[-1]) if dotted.startswith("torch.ops.vllm.") else None
            if target is not None:
                self.ops[-1].kernels += self.backends.kernels_of_function(target, Bindings())
            return out
        kind = function_kind(dotted)
        if kind:
            return self._op(frame, kind, dotted.rsplit(".", 1)[-1], None, stmt, inputs, hint, cond, steady)
        target = self.index.resolve_expr(frame.module, func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if isinstance(target, Definition) and target.kind == "function" and target.module.name.startswith(("vllm.", "vllm_ascend.")):
            return self._inline(frame, None, target.node, target.module, args, kwargs, cond, steady, free=True)
        original = self._saved_method(target, call)
        if original is not None:  # a patch calling the method it replaced: _orig_forward = Model.forward
            owner, fn = original
            return self._inline(frame, owner, fn, owner.module, args[1:], kwargs, cond, steady, replaced=True)
        if isinstance(func, cst.Name) and func.value in _IGNORED_BUILTINS:
            return inputs
        if dotted and dotted.split(".")[0] in ("torch", "F", "math", "einops") and not inputs:
            return []
        name = dotted or frame.module.code(func).strip()
        if dotted and dotted.startswith("torch."):
            return self._op(frame, "torch", dotted.rsplit(".", 1)[-1], None, stmt, inputs, hint, cond, steady)
        return self._unknown_op(frame, stmt, name, inputs, hint, cond, steady, "callee not in the taxonomy or the trees")

    def _saved_method(self, target, call: cst.Call):
        """(class, method) for `saved(self, ...)` where `saved = SomeClass.method` at module level."""
        if not (isinstance(target, Definition) and target.kind == "assign" and isinstance(target.node, cst.Attribute)):
            return None
        if not (call.args and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == "self"):
            return None
        cls = self.index.resolve_expr(target.module, target.node.value)
        if not (isinstance(cls, Definition) and cls.kind == "class"):
            return None
        return self.ctor.method(cls, target.node.attr.value)

    def _dispatch_target(self, inst: Instance) -> str:
        """`self._forward_method = self.forward_x` under platform ifs in __init__ (first branch the
        assume table does not rule out), else CustomOp's own per-backend method."""
        for c, fn, _scope in self.ctor.init_scopes(inst):
            for value, vcond, _pos in tables(fn, c.module).self_assignments.get("_forward_method", ()):
                if not (isinstance(value, cst.Attribute) and _self_attr(value)):
                    continue
                terms = vcond.terms if vcond else ()
                if not any(EVALUATOR.term_truth(t) is Truth.FALSE for t in terms if not t.negated):
                    return value.attr.value
        return self.backends.forward_name(inst.cls)

    def _inline(self, frame, owner, fn, module, args, kwargs, cond, steady, free=False, replaced=False) -> list[str]:
        """`replaced`: the method a patch replaced, called from the patch (not a recursion)."""
        if len(self._stack) > MAX_DEPTH:
            return []
        key = f"{module.name}.{fn.name.value}"
        if self._stack.count(key) >= 1 or (not replaced and any(
                k.endswith(f".{fn.name.value}") and k.startswith(module.name) for k in self._stack[-1:])):
            self._unknown(frame.path, module, fn, f"recursive call of {fn.name.value}() not followed")
            return []
        sub = _Frame(frame.inst, owner or frame.cls, fn, module, frame.path, Bindings(dict(), dict(frame.facts.attr_classes)))
        if free:
            sub.scope = f"{module.name.rsplit('.', 1)[-1]}.{fn.name.value}"
        self._bind(sub, args, kwargs)
        sub.loop_vars = dict(frame.loop_vars)
        self._stack.append(key)
        try:
            self._block(sub, fn.body.body, cond, steady)
        finally:
            self._stack.pop()
        return sub.returns

    def _module_call(self, frame, sub: Instance, name, call, args, kwargs, cond, steady, stmt, hint) -> list[str]:
        path = f"{frame.path}.{name}" if frame.path else name
        impl = self.backends.implementation(sub.cls)
        leaf = leaf_for_class_names(self.ctor.base_names(sub.cls))
        if sub.alternatives:
            self.alternatives.append({
                "path": path, "chosen": sub.cls.name, "condition": as_text(sub.condition),
                "others": sorted({(a.name, as_text(a.condition) or "") for a in sub.alternatives}),
            })
        if sub.condition:
            cond = join(cond, sub.condition.with_prefix("built when "))
        if leaf is None:
            self._role_for_submodule(frame, name, sub)
            facts = Bindings(dict(), self._attr_facts(sub))
            return self._expand(sub, "forward", args, kwargs, path, facts)
        leaf_name, info = leaf
        kind = info["kind"]
        inputs = _flat(args, kwargs)
        attrs: dict = {}
        if info.get("merged"):
            attrs["merged"] = info["merged"]
        for key in ("bias", "quant_config", "eps"):
            text = _kwarg_text(sub.call, key, sub.scope)
            if text is not None:
                attrs[key] = text
        attrs["class_file"], attrs["class_line"] = sub.cls.module.rel, sub.cls.line
        facts = Bindings(dict(), self._attr_facts(sub))
        fwd = self._forward_of(impl, self.backends.forward_name(impl))
        nonnull = [a for a in args if not isinstance(a, _NoneValue)] + [v for v in kwargs.values() if not isinstance(v, _NoneValue)]
        if fwd is not None:
            params = [p for p in fwd[1].params.params if p.name.value != "self"]
            for p in params + list(fwd[1].params.kwonly_params):
                if isinstance(p.default, cst.Name) and p.default.value == "None":
                    facts.none[p.name.value] = True
            for p, a in zip(params, args):
                facts.none[p.name.value] = isinstance(a, _NoneValue)
            for k, a in kwargs.items():
                facts.none[k] = isinstance(a, _NoneValue)
        with_residual = info.get("with_residual")
        if with_residual and (facts.none.get("residual") is False or len(nonnull) >= 2):
            kind = with_residual
            attrs["residual"] = True
        if info.get("role") == "router":
            attrs["role"] = "router"
        if kind == "moe":
            self._moe_parts(frame, sub, path, stmt, inputs, cond, steady)
        kernels = self._leaf_kernels(impl, kind, facts)
        if impl is not sub.cls:
            attrs["ascend_class"] = impl.name
            attrs["ascend_file"] = impl.module.rel
        elif self.backends.runs_native(impl):
            attrs["native"] = "no Ascend replacement; CustomOp.forward_oot runs forward_native (separate PyTorch ops)"
        out = self._op(frame, kind, name, sub.cls.name, stmt, inputs, hint, cond, steady, attrs=attrs, path=path)
        self.ops[-1].kernels = kernels
        if info.get("reduce"):
            reduce = _kwarg_text(sub.call, info["reduce"], sub.scope)
            self.ops[-1].attrs["all_reduce"] = "when tp_size > 1" if reduce in (None, "True") else f"when {reduce} and tp_size > 1"
        self._role_for_submodule(frame, name, sub, kind)
        return out

    def _moe_parts(self, frame, sub: Instance, path, stmt, inputs, cond, steady) -> None:
        """The router GEMM and shared experts a MoE layer runs inside (gate=..., shared_experts=...)."""
        for key, role in (("gate", "router"), ("shared_experts", "shared")):
            expr = _kwarg(sub.call, key)
            if expr is None or sub.scope is None:
                continue
            built = self.ctor.evaluate(expr, sub.scope)
            inst = built[0] if built else None
            if inst is None or inst.cls is None:
                continue
            icond = join(cond, inst.condition.with_prefix("built when ")) if inst.condition else cond
            if role == "router":
                impl = self.backends.implementation(inst.cls)
                facts = Bindings(dict(), {})
                self._op(frame, "matmul", key, inst.cls.name, stmt, inputs, ["router_logits"], icond, steady,
                         attrs={"role": "router", "inside": sub.cls.name}, path=f"{path}.{key}")
                self.ops[-1].kernels = self._leaf_kernels(impl, "matmul", facts)
            else:
                self._expand_under(inst, [inputs], f"{path}.{key}", icond)
                for op in self.ops:
                    if op.path.startswith(f"{path}.{key}"):
                        op.attrs.setdefault("inside", sub.cls.name)
                        op.attrs.setdefault("role", "shared_expert")

    def _expand_under(self, inst: Instance, args, path: str, cond: str | None) -> None:
        start = len(self.ops)
        self._expand(inst, "forward", args, {}, path, Bindings())
        for op in self.ops[start:]:
            op.condition = " and ".join(c for c in (as_text(cond), op.condition) if c) or None

    def _leaf_kernels(self, impl: Definition, kind: str, facts: Bindings) -> list[Kernel]:
        from .taxonomy import taxonomy

        kernels = self.backends.kernels_of(impl, facts)
        if kind in ("attention", "mla_attention"):
            qual = taxonomy().get("attention_impls", {}).get(self.index.backend, {}).get(kind)
            if qual:
                mod, _, cls_name = qual.rpartition(".")
                target = self.index.lookup(mod, cls_name)
                if isinstance(target, Definition) and target.kind == "class":
                    kernels = kernels + self.backends.kernels_of(target, Bindings(), method="forward")
        return kernels

    def _attr_facts(self, inst: Instance) -> dict[str, list[str]]:
        """Classes of the instance's own submodules, for isinstance() checks in its forward."""
        out = {}
        if inst.cls is None:
            return out
        for c, fn, _scope in self.ctor.init_scopes(inst)[:1]:
            for name in tables(fn, c.module).self_attr_names:
                sub = self.ctor.attr(inst, name)
                if sub is not None and sub.cls is not None:
                    impl = self.backends.implementation(sub.cls)
                    out[f"self.{name}"] = [c2.name for c2 in self.ctor.mro(impl)]
        return out

    # -- roles (code locations) -----------------------------------------------------------------
    def _role(self, role: str, inst: Instance) -> None:
        if role in self.locations or inst.cls is None:
            return
        fwd = self._forward_of(inst.cls, "forward")
        f_file = f_line = None
        patched = None
        if fwd is not None:
            owner, fn, module, patch = fwd
            f_file, f_line = module.rel, module.line_of(fn)
            patched = f"{patch.file}:{patch.line}" if patch else None
        self.locations[role] = RoleLocation(inst.cls.name, inst.cls.module.rel, inst.cls.line, f_file, f_line, patched)

    def _layer_role(self, element: Instance, path: str = "layers") -> None:
        self._role("decoder_layer", element)
        if element.alternatives and element.cls is not None and not any(a["path"] == path for a in self.alternatives):
            self.alternatives.append({  # get_layer() picks the class per layer index
                "path": path, "chosen": element.cls.name, "condition": as_text(element.condition),
                "others": sorted({(a.name, as_text(a.condition) or "") for a in element.alternatives}),
            })

    def _role_for_submodule(self, frame: _Frame, name: str, sub: Instance, kind: str | None = None) -> None:
        model = self.locations.get("model")
        if model is not None and frame.inst.cls is not None and frame.inst.cls.name == model.cls and "backbone" not in self.locations and kind is None:
            self._role("backbone", sub)
            return
        layer = self.locations.get("decoder_layer")
        if layer is None or frame.inst.cls is None or frame.inst.cls.name != layer.cls or kind is not None:
            return
        lname = sub.cls.name.lower()
        if "attn" in name or "attention" in lname:
            self._role("attention", sub)
        elif re.search(r"moe|expert|sparse", lname) or "moe" in name:
            self._role("moe", sub)
        elif "mlp" in name or "mlp" in lname or "ffn" in name:
            self._role("mlp", sub)

    # -- ops --------------------------------------------------------------------------------------
    def _value(self, name: str) -> str:
        self._counter += 1
        return f"{name}#{self._counter}"

    def _op(self, frame, kind, name, layer_class, stmt, inputs, hint, cond, steady, attrs=None, path=None) -> list[str]:
        path = path if path is not None else frame.path
        base = f"{path}:{name}" if path else name
        n = self._ids.get(base, 0) + 1
        self._ids[base] = n
        op_id = base if n == 1 else f"{base}#{n}"
        outs = [self._value(h) for h in (hint or [name + "_out"])]
        op = Op(
            id=op_id, kind=kind, name=name, layer_class=layer_class, file=frame.module.rel,
            line=frame.module.line_of(stmt), scope=frame.scope, path=path, section=self.section,
            inputs=list(dict.fromkeys(i for i in inputs if isinstance(i, str))), outputs=outs,
            condition=" ".join(str(cond).split()) if cond else None, steady=steady,
            attrs=dict(attrs or {}),
        )
        if self.section == "layer" and self.repeat:
            op.attrs["repeat"] = self.repeat
        self.ops.append(op)
        return outs

    def _unknown_op(self, frame, stmt, name, inputs, hint, cond, steady, reason) -> list[str]:
        out = self._op(frame, "unknown", name, None, stmt, inputs, hint, cond, steady, attrs={"reason": reason})
        self.unknowns.append({"file": frame.module.rel, "line": frame.module.line_of(stmt), "name": name, "reason": reason})
        return out

    def _unknown(self, path, module, node, reason) -> None:
        self.unknowns.append({"file": module.rel, "line": module.line_of(node), "name": path or "", "reason": reason})


class _NoneValue:
    pass


_NONE = _NoneValue()


class _InstanceValue:
    def __init__(self, inst):
        self.inst = inst


# Calls on Python containers and tensor metadata: no operator runs.
_CONTAINER_METHODS = {"size", "dim", "numel", "item", "tolist", "get", "items", "keys", "values", "append",
                      "extend", "insert", "pop", "update", "setdefault", "data_ptr", "stride", "is_contiguous",
                      "new_empty", "new_zeros", "element_size", "format", "join", "startswith", "endswith"}
_OP_SYMBOL = {"add": "add", "mul": "mul", "sub": "sub", "div": "div", "matmul": "matmul", "elementwise": "pow"}
_IGNORED_BUILTINS = {"len", "int", "float", "bool", "str", "getattr", "hasattr", "isinstance", "range", "print",
                     "tuple", "list", "dict", "set", "min", "max", "zip", "enumerate", "iter", "next", "type",
                     "IntermediateTensors", "assert", "sorted", "any", "all", "abs", "round", "id", "cast"}


def _flat(args, kwargs) -> list[str]:
    out = []
    for v in list(args) + list(kwargs.values()):
        if isinstance(v, list):
            out += [x for x in v if isinstance(x, str)]
    return out


def _self_attr(expr) -> bool:
    return isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"


def _target_names(t) -> list[str]:
    if isinstance(t, cst.Name):
        return [t.value]
    if isinstance(t, (cst.Tuple, cst.List)):
        out = []
        for e in t.elements:
            out += _target_names(e.value)
        return out
    if isinstance(t, cst.Attribute):
        return [t.attr.value]
    return []


def _assigned_names(block) -> set[str]:
    names: set[str] = set()
    for node in find_all(block, cst.AssignTarget):
        names.update(_target_names(node.target))
    return names


def _kwarg(call: cst.Call | None, name: str):
    if call is None:
        return None
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a.value
    return None


def _kwarg_text(call, name, scope) -> str | None:
    """The source text of a constructor keyword, followed through parameters to where it is set
    (bias=qkv_bias -> getattr(config, "attention_bias", False))."""
    expr = _kwarg(call, name)
    if expr is None or scope is None:
        return None
    where = EVALUATOR.origin(expr, scope)
    return where[1].module.code(where[0]).strip() if where is not None else None



