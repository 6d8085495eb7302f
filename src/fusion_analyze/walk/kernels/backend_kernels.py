"""Per backend: which class implements a vLLM layer, and which device kernels its forward runs."""

from __future__ import annotations


import sys
from dataclasses import replace

from typing import NamedTuple, cast

import libcst as cst

from ...index.facts import FactTable
from ...catalog import catalog
from ...index.modules import Definition, ModuleIndex
from ...index.nodes import find_all
from ..construction.constructor import Constructor, Method, Scope
from ...semantics.callees import Callee
from ...semantics.known_calls import _decision_function
from ...semantics.scope import bind_params
from ...semantics.evaluator import Evaluator
from ...semantics.function_bodies import class_method, exits_at_end, tables
from ...semantics.values import Bindings, ClassRef, Known
from ...ir.conditions import Condition, Truth, any_of_text, as_text, join
from ...ir.ops import Kernel
from ...ir.texts import say
from ..own_calls import own_call
from ...catalog.taxonomy import collective_kind, is_kernel
from .registered_ops import CustomOps, RegisteredOps, registered_ops
from .selected_class import selected_classes

KERNELS_OF = FactTable("kernels_of", "a device -> {(implementation, method, bindings): the kernels its forward runs}")
KERNELS_BY_INSTANCE = FactTable("kernels_by_instance", "a device -> kernels_of_instance's walks, with what each read")
CUSTOM_OPS = FactTable("custom_ops", "None -> vLLM's custom ops (torch.ops.vllm.<name> -> its function)")
CALLS_IN = FactTable("calls in", "(a statement node, header only?) -> the calls in it, lambdas left out")

MAX_KERNEL_DEPTH = catalog().limit("kernel_depth")


class Collective(NamedTuple):
    """A collective a layer's forward runs (its all-reduce): its kind, file, line, condition and kernels."""

    kind: str
    file: str
    line: int
    condition: str | None
    kernels: list


class Backends:
    def __init__(self, index: ModuleIndex, ctor: Constructor, device: str | None = None):
        self.index = index
        self.ctor = ctor
        self.backend = ctor.env.backend or index.backend  # the backend whose kernels are read
        self._oot: RegisteredOps | dict | None = None
        ctor.registered_ops = lambda: self.oot  # what the construction reads a submodule's attributes on
        self._custom_ops: CustomOps | None = None
        # a layer's kernels are the same for every model on one device: kept per session and device. They are
        # decided with the platform, the device and the code, not a model's configuration (conditions on it
        # stay), so one model's values never leak into another's kernels
        # (and per deployment: its engine arguments decide tests the kernels are read under)
        d = ctor.env.deployment
        slot = device if d is None or d.is_default else (device, d.key())
        self._cache: dict = KERNELS_OF.of(index).setdefault(slot, {})
        self._evaluator = Evaluator(ctor.env.without_config())
        # a runtime object a function returns (`get_tp_group()` -> GroupCoordinator): its `self.x` read in its
        # __init__ with no argument known (only what it computes from the platform or constants is decided),
        # without the model's configuration (its kernels are kept per session); one instance per class
        self._objects: dict = {}
        self._object_evaluator = Evaluator(ctor.env.without_config(), attrs=ctor)
        self._subs: dict = {}  # while it runs: the submodules of that instance reached, by class
        # while it runs: the object the instance holds whose method is being walked (`self.turboquant.compress`),
        # whose own `self.x` decide its tests
        self._sub = None
        self._inst = self._inst_impl = None  # while kernels_of_instance runs: the instance whose values decide
        self._collectives: list | None = None
        self._own: tuple = ()  # while kernels_of_instance(own_calls=...) runs: see own_calls.py
        self._own_only = False
        # kernels_of_instance's memo, per session and device like the cache above: an entry serves another
        # model's instance when what the walk read (its self.x, its submodules, configuration values) agrees
        self._by_instance: dict = KERNELS_BY_INSTANCE.of(index).setdefault(slot, {})

    def kernels_of_instance(self, inst, impl: Definition, method: str, facts: Bindings | None = None,
                            collectives: list | None = None, own_calls: tuple = (), own_only: bool = False) -> list[Kernel]:
        """The kernels `impl.method` runs for one built instance (a MoE layer's router, a linear layer): its
        `self.x` tests are decided with the values its construction gave it (scoring_func, reduce_results),
        the configuration's too. `collectives` (a list) receives each collective the code calls, as an op of
        its own: (kind, file, line, condition, its kernels), and those kernels are not the layer's.
        `own_calls`: the method's own calls of these op kinds count too (own_calls.py); `own_only`: and only
        they, not what its other calls run."""
        facts = facts or Bindings()
        # memo: per implementation, the walks already done, each with what it read of its instance (self.x
        # values, submodules' classes); one whose reads give the same for this instance has its kernels
        entries = self._by_instance.setdefault((impl.qualname, method, facts.key(), collectives is not None, own_calls, own_only), [])
        now: dict = {}  # what this instance gives for a read, asked once however many entries ask it

        def read(key, again):
            if key not in now:
                now[key] = again(self.ctor, inst)
            return now[key]

        for reads, kernels, found, replay in entries:
            if all(read(key, again) == seen for key, (again, seen) in reads.items()):
                if collectives is not None:
                    collectives.extend(found)
                self.ctor.made_again(inst, replay)  # what its undecided calls wait on, said for this walk
                return list(kernels)
        got: list = []
        self._inst, self._inst_impl, self._collectives = inst, impl, got if collectives is not None else None
        self._subs, self._own, self._own_only = {}, own_calls, own_only
        self.ctor.start_reads(inst)
        try:
            kernels = self.kernels_of(impl, facts, method=method)
            entries.append((dict(self.ctor.reads or {}), kernels, list(got), list(self.ctor.replay)))
        finally:
            self._inst = self._inst_impl = self._collectives = None
            self._subs, self._own, self._own_only = {}, (), False
            self.ctor.stop_reads()
        if collectives is not None:
            collectives.extend(got)
        return list(kernels)


    # -- out-of-tree replacements -----------------------------------------------------------------
    @property
    def oot(self) -> "RegisteredOps | dict":
        """REGISTERED_ASCEND_OPS: vLLM class name -> Ascend class (standard hardware path)."""
        if self._oot is None:  # one table per session, not per model: kept in the replacement index
            self._oot = registered_ops(self.ctor)
        return self._oot

    def implementation(self, cls: Definition) -> Definition:
        if self.backend == "ascend" and cls.module.name.split(".")[0] == "vllm":
            return self.oot.get(cls.name, cls)  # the registry replaces vLLM's classes (not a transformers namesake)
        return cls

    def runs_native(self, cls: Definition, inst=None) -> str | None:
        """On Ascend, where the forward_oot a CustomOp runs is only forward_native (plain PyTorch ops, one kernel
        each): CustomOp's own (no forward_oot anywhere on the way), or one that just returns a forward_native
        call (AscendSwigluOAIAndMul: `return SwigluOAIAndMul.forward_native(layer, x)`); its file:line, else None.
        `inst`: the instance built (walk.construction.Instance), whose values decide whether an own forward
        reaches the dispatch at all."""
        if self.backend != "ascend" or (self.forward_name(cls) != "forward_oot" and not self._to_dispatch(cls, inst)):
            return None
        replaced = cls.module.name.startswith("vllm_ascend.")
        for c in self.ctor.mro(cls):
            fn = class_method(c, "forward_oot")
            if c.name == "CustomOp":  # an Ascend class inheriting it may override what forward_native calls
                return None if replaced else f"{c.module.rel}:{c.module.line_of(fn) if fn is not None else c.line}"
            if fn is not None:
                return f"{c.module.rel}:{c.module.line_of(fn)}" if _only_forward_native(fn) else None
        return None

    def _to_dispatch(self, cls: Definition, inst=None) -> bool:
        """A CustomOp subclass whose own forward hands on to `super().forward(...)`, CustomOp's dispatch
        (the Transformers backend's TPAwareRMSNorm: its registered name is not the one Ascend replaces). With
        the instance, only a call its values leave reachable counts: K2HorizonRMSNorm hands on only `if
        self.n_groups == 1`, and built with `n_groups=config.layernorm_num_groups` = 2 runs its own code."""
        if "CustomOp" not in self.ctor.base_names(cls):
            return False
        for c in self.ctor.mro(cls):
            fn = class_method(c, "forward")
            if fn is not None:
                if c.name == "CustomOp" or "super().forward(" not in c.module.code(fn):
                    return False
                return inst is None or self._reaches_super_forward(c.module, fn.body.body, inst)
        return False

    def _reaches_super_forward(self, module, stmts, inst) -> bool:
        """Whether a `super().forward(...)` call in `stmts` runs for `inst`: an `if` its values decide keeps only
        the branch taken, an early return its values take ends the block; undecided, either side counts."""
        for stmt in stmts:
            if type(stmt) is cst.If:
                value = self.ctor.evaluator.truth(stmt.test, module, None, Scope(module=module, owner=inst))
                if value is not Truth.FALSE and self._reaches_super_forward(module, stmt.body.body, inst):
                    return True
                orelse = stmt.orelse
                if orelse is not None and value is not Truth.TRUE and self._reaches_super_forward(
                        module, [orelse] if type(orelse) is cst.If else orelse.body.body, inst):
                    return True
                if value is Truth.TRUE and exits_at_end(stmt.body.body):
                    return False
                continue
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                continue
            if any(Callee(self.index, module, c).super_method == "forward" for c in find_all(stmt, cst.Call)):
                return True
        return False

    def forward_name(self, cls: Definition) -> str:
        """CustomOp.forward dispatches per backend, unless a subclass overrides forward() itself."""
        if "CustomOp" not in self.ctor.base_names(cls):
            return "forward"
        for c in self.ctor.mro(cls):
            if c.name == "CustomOp":
                break
            if class_method(c, "forward") is not None:
                return "forward"
        return "forward_oot" if self.backend == "ascend" else "forward_cuda"

    # -- torch.ops.vllm.<name> -> the Python function behind it -----------------------------------
    @property
    def custom_ops(self) -> "CustomOps":
        if self._custom_ops is None:  # the text scan reads every file of both trees: once per session
            self._custom_ops = CUSTOM_OPS.of(self.index).setdefault(None, CustomOps(self.index))
        return self._custom_ops

    # -- kernels ----------------------------------------------------------------------------------
    def kernels_of(self, cls: Definition, facts: Bindings, method: str | None = None) -> list[Kernel]:
        impl = self.implementation(cls)
        method = method or self.forward_name(impl)
        key = (impl.qualname, method, facts.key())
        if self._inst is not None:  # one instance's kernels: decided with its own values, not shared
            found = self.ctor.method(impl, method)
            out: list[Kernel] = []
            if found is not None:
                self._collect(impl, found.module, found[1], facts, out, 0, {})
            return _dedupe(out)
        if key not in self._cache:
            found = self.ctor.method(impl, method)
            out: list[Kernel] = []
            if found is not None:
                self._collect(impl, found.module, found[1], facts, out, 0, {})
            self._cache[key] = _dedupe(out)
        return list(self._cache[key])

    def kernels_of_function(self, fn_def: Definition, facts: Bindings, impl: Definition | None = None) -> list[Kernel]:
        """`impl`: the calling layer's implementation, for a custom op that runs a method of the layer that
        called it (`runs_layer`)."""
        out: list[Kernel] = []
        self._collect(impl, fn_def.module, fn_def.node, facts, out, 0, {})
        return _dedupe(out)

    def runs_layer(self, fn_def: Definition) -> bool:
        """A custom op's function that runs a method of the layer that called it: listed (walk.yaml
        `runtime.layer_dispatch`), or one that takes the layer from the forward context
        (`self = forward_context.no_compile_layers[layer_name]`, then `self._forward_core(...)`)."""
        if fn_def.name in catalog().runtime.get("layer_dispatch", ()):
            return True
        return any(type(s.value) is cst.Attribute and s.value.attr.value == "no_compile_layers"
                   for s in find_all(fn_def.node, cst.Subscript))

    def _collect(self, impl, module, fn: cst.FunctionDef, facts: Bindings, out: list, depth: int, seen: dict,
                 base: Condition | None = None) -> None:
        """The kernels `fn` runs, each under `base` (the path to the call that reached it) and its own tests. A
        function reached again under another path condition is not walked again: its kernels are given again
        under that condition, so that a kernel both sides of a test reach runs whichever way it goes (_dedupe).
        Reached with other bindings (a call that passes `q_scale_inv=`, another that leaves it None), it is
        walked again: its tests may go another way."""
        key = (id(fn), facts.key(), id(self._sub) if self._sub is not None else None)
        if depth > MAX_KERNEL_DEPTH:
            return
        if key in seen:
            if seen[key] is not None and str(seen[key][0] or "") != str(base or ""):
                _again(seen[key], base, out)
            return
        seen[key] = None  # being walked (a recursive call gives nothing)
        start = len(out)
        self._walk_body(impl, module, fn, facts, out, depth, seen, base)
        seen[key] = (base, out, start, len(out))

    def _walk_body(self, impl, module, fn: cst.FunctionDef, facts: Bindings, out: list, depth: int, seen: dict,
                   base: Condition | None) -> None:
        backends = self

        table = tables(fn, module)
        position = {id(s): pos for pos, (s, _c) in enumerate(table.statements)}
        handed = facts.as_values()  # read only (a Scope's `values`)

        def scope_at(stmt, owner) -> Scope:
            """The test's scope: the parameters' None-ness and the locals assigned before it that the test reads
            (and those their values read): a test reading none of them is decided as before, at no cost."""
            scope = Scope(module=module, owner=owner, values=handed, fields=facts.fields, cls=impl,
                          objects=facts.objects)
            here = position.get(id(stmt), -1)
            before = [(name, value, c) for name, value, c, pos in table.local_assignments if pos < here]
            if not before:
                return scope
            wanted = _names(stmt.test)
            assigned = {name for name, _v, _c in before}
            todo = wanted & assigned
            while todo:
                name = todo.pop()
                for n, value, c in before:
                    if n == name:
                        scope.locals.setdefault(n, []).append((value, c))
                        todo |= (_names(value) & assigned) - set(scope.locals)
            return scope

        def visit_block(stmts, cond):
            for stmt in stmts:
                if type(stmt) is cst.If:
                    if self._of_instance(impl):
                        value, test = self.ctor.evaluator.residual(stmt.test, module, facts, scope_at(stmt, self._inst))
                    elif self._of_sub(impl):
                        value, test = self.ctor.evaluator.residual(stmt.test, module, facts, scope_at(stmt, self._sub))
                    elif impl is not None and impl.qualname in self._objects:
                        value, test = self._object_evaluator.residual(stmt.test, module, facts,
                                                                      scope_at(stmt, self._objects[impl.qualname]))
                    else:
                        value, test = self._evaluator.residual(stmt.test, module, facts, scope_at(stmt, None))
                    if value is not Truth.FALSE:
                        visit_block(stmt.body.body, cond if value is Truth.TRUE else join(cond, test))
                    neg = test.negate() if test is not None else None
                    if stmt.orelse is not None and value is not Truth.TRUE:
                        orelse = stmt.orelse
                        if type(orelse) is cst.If:  # an elif reads the locals assigned before its `if`
                            position.setdefault(id(orelse), position.get(id(stmt), -1))
                            visit_block([orelse], cond if value is Truth.FALSE else join(cond, neg))
                        else:
                            visit_block(orelse.body.body, cond if value is Truth.FALSE else join(cond, neg))
                    if exits_at_end(stmt.body.body):
                        if value is Truth.TRUE:
                            return  # early return: what follows does not run on this path
                        if value is Truth.UNKNOWN:
                            cond = join(cond, neg)
                    continue
                if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                    continue
                if type(stmt) is cst.Try and _probe(stmt):
                    continue  # an availability probe: a smoke call whose outcome is cached, no compute of the layer
                if isinstance(stmt, (cst.For, cst.While, cst.With, cst.Try)):
                    visit_expr_in(stmt, cond, shallow=True)
                    visit_block(stmt.body.body, cond)  # exception handlers are not the steady state
                    continue
                visit_expr_in(stmt, cond)

        def visit_expr_in(node, cond, shallow=False):
            for c in _calls_in(module, node, shallow):
                backends._call(impl, module, c, cond, facts, out, depth, seen, fn)

        visit_block(fn.body.body, base)

    def _call(self, impl, module, call: cst.Call, cond, facts: Bindings, out: list, depth: int, seen: dict,
              caller: cst.FunctionDef | None = None) -> None:
        func = call.func
        if self._own and depth == 0 and (own_call(self, impl, module, call, cond, facts, out, seen, caller)
                                         or self._own_only):
            return
        vo = None
        if self._of_instance(impl):  # `self.x` arguments: the instance's values
            vo = lambda e: self.ctor.evaluator.infer(e, Scope(module=module, owner=self._inst))  # noqa: E731
        elif self._of_sub(impl):  # (those of the object it holds whose method this is)
            sub_now = self._sub
            vo = lambda e: self.ctor.evaluator.infer(e, Scope(module=module, owner=sub_now))  # noqa: E731
        c = Callee(self.index, module, call, caller, runs=self.ctor.runs)
        # super().m(...): the next class of the implementation's MRO after the one that defines the caller
        if impl is not None and caller is not None and c.super_method is not None:
            found = self._super_method(impl, caller, c.super_method)
            if found is not None:
                owner, fn = found
                self._collect(impl, owner.module, fn, facts.for_call(fn, call, vo), out, depth + 1, seen, cond)
            return
        # kernel[grid](...): a Triton launch; the kernel is the function subscripted
        if c.is_launch:
            target = c.launched
            if target is not None:
                out.append(Kernel(f"triton:{target.qualname}", module.rel, module.line_of(call, caller), as_text(cond), cond=cond))
            return
        # SomeFn.apply(...): an autograd Function runs its static forward
        target = c.applied
        if target is not None:
            found = self.ctor.method(target, "forward")
            if found is not None:
                self._collect(None, found.module, found[1], facts, out, depth + 1, seen, cond)
            return
        dotted = self.index.dotted(module, func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if dotted and dotted.endswith(".out") and is_kernel(dotted[:-4]):
            dotted = dotted[:-4]
        if dotted and not is_kernel(dotted) and self._outside(dotted, func, module):
            # a function of a Python package outside the trees (fla_npu.ops.ascendc.causal_conv1d_fn): its code
            # cannot be read, so the call is the kernel it stands for
            out.append(Kernel(dotted, module.rel, module.line_of(call, caller), as_text(cond), cond=cond,
                              note=say("outside_the_trees", package=dotted.split(".")[0])))
            return
        if is_kernel(dotted):
            out.append(Kernel(dotted, module.rel, module.line_of(call, caller), as_text(cond), cond=cond))
            if dotted.startswith("torch.ops.vllm."):
                target = self.custom_ops.get(dotted.rsplit(".", 1)[-1], near=module.name)
                if target is not None:  # a layer_dispatch op runs the calling layer's own method
                    back = impl if self.runs_layer(target) else None
                    self._collect(back, target.module, target.node, facts, out, depth + 1, seen, cond)
            return
        # self.helper(...) inside the implementation
        if impl is not None and type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
            found = self.ctor.method(impl, func.attr.value)
            if found is not None:
                fn = found[1]
                start = len(out)
                self._collect(impl, found.module, fn, facts.for_call(fn, call, vo), out, depth + 1, seen, cond)
                self._native(impl, fn, module, call, cond, out, start)
            return
        # self.<submodule>.<method>(...): the MoE runner hands work to its router / experts / quant method
        if (impl is not None and type(func) is cst.Attribute and type(func.value) is cst.Attribute
                and type(func.value.value) is cst.Name and func.value.value.value == "self"):
            from ..construction.constructor import Instance

            owner_inst = (self._inst if self._of_instance(impl) else self._sub if self._of_sub(impl)
                          else self._subs.get(impl.qualname) or Instance(impl))
            sub = self.ctor.attr(owner_inst, func.value.attr.value)
            if sub is not None and sub.cls is not None:
                sub_impl = self.implementation(sub.cls)
                held = None
                if self._inst is not None:  # its own `self.x` are read on it (CustomReplicatedOp's quant_method)
                    held = Instance(sub_impl, sub.call, sub.scope, sub.condition)
                    self._subs.setdefault(sub_impl.qualname, held)
                    if sub.call is not None and owner_inst is not None and owner_inst.call is not None:
                        held = self._held(owner_inst, func.value.attr.value, held)
                    else:
                        held = None
                name = func.attr.value
                if name == "forward" or name == "__call__":
                    name = self.forward_name(sub_impl)
                found = self.ctor.method(sub_impl, name)
                if found is not None:
                    fn = found[1]
                    saved, self._sub = self._sub, held
                    try:
                        self._collect(sub_impl, found.module, fn, facts.for_call(fn, call, vo), out, depth + 1, seen, cond)
                    finally:
                        self._sub = saved
            return
        # Cls.m(self, ...): a method of a named class run on the caller's own instance
        # (AscendYaRNRotaryEmbedding.forward_oot: `return AscendRotaryEmbedding.forward_oot(self, ...)`): its
        # `self.x` are the instance's, the other arguments bound to the parameters after self
        if impl is not None and type(func) is cst.Attribute and isinstance(func.value, (cst.Name, cst.Attribute)) \
                and call.args and call.args[0].keyword is None and not call.args[0].star \
                and type(call.args[0].value) is cst.Name and call.args[0].value.value == "self":
            named = self.index.resolve_expr(module, func.value)
            ran = self.ctor.method(named, func.attr.value) \
                if isinstance(named, Definition) and named.kind == "class" else None
            if ran is not None and isinstance(named, Definition) and _takes_self(ran[1]):
                ran_fn: cst.FunctionDef = ran[1]
                rest = call.with_changes(args=call.args[1:])
                start = len(out)
                self._collect(impl, ran.module, ran_fn, facts.for_call(ran_fn, rest, vo), out, depth + 1, seen, cond)
                self._native(named, ran_fn, module, call, cond, out, start)
                return
        # f().m(...): a method of the class f's return annotation names (get_tp_group() -> GroupCoordinator)
        if type(func) is cst.Attribute and type(func.value) is cst.Call and isinstance(func.value.func, (cst.Name, cst.Attribute)):
            made = c.returned_by
            maker = made[0] if made is not None else None
            ret = maker.node.returns if maker is not None else None
            if ret is not None and isinstance(ret.annotation, (cst.Name, cst.Attribute)):
                cls = self.index.resolve_expr(maker.module, ret.annotation)
                found = self.ctor.method(cls, func.attr.value) if isinstance(cls, Definition) and cls.kind == "class" else None
                if found is not None and isinstance(cls, Definition):
                    from ..construction.constructor import Instance

                    fn = found[1]
                    built = self._returned_objects(maker, func.value, cls, module) \
                        if self._inst is not None and maker is not None else None
                    if built:  # each object the function may return, its method walked on it under its test
                        method = cast(Method, found)
                        for held, test in built:
                            saved, self._sub = self._sub, held
                            try:
                                self._collect(cls, method.module, method[1], facts.for_call(method[1], call, vo), out,
                                              depth + 1, seen, join(cond, test))
                            finally:
                                self._sub = saved
                        return
                    self._objects.setdefault(cls.qualname, Instance(cls))
                    self._collect(cls, found.module, fn, facts.for_call(fn, call, vo), out, depth + 1, seen, cond)
            return
        # Facade.method(...): a module-level value the device decides (DeviceOperator = get_device_adaptor())
        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value != "self":
            if c.resolve(func) is None:
                owner = self._evaluator.infer(func.value, Scope(module=module))
                if isinstance(owner, Known) and isinstance(owner.value, ClassRef):
                    found = self.ctor.method(owner.value.definition, func.attr.value)
                    if found is not None:
                        owner_cls, fn = found
                        start = len(out)
                        self._collect(owner_cls, found.module, fn, facts.for_call(fn, call, vo), out, depth + 1, seen, cond)
                        self._native(owner.value.definition, fn, module, call, cond, out, start)
                    return
                # not decided (a device with no SoC family): each class the selector may return, under its key
                picked = [(cls, test) for cls, test in selected_classes(self.index, module, func.value)
                          if self.ctor.method(cls, func.attr.value) is not None]
                for cls, test in picked:
                    meth = self.ctor.method(cls, func.attr.value)
                    if meth is None:
                        continue
                    start = len(out)
                    self._collect(meth[0], meth.module, meth[1], facts.for_call(meth[1], call, vo), out,
                                  depth + 1, seen, join(cond, test))
                    for i in range(start, len(out)):
                        if out[i].note is None:
                            out[i] = replace(out[i], note=say("selected_class", name=func.value.value))
                if picked:
                    return
        # f = dispatch(...); f(...): the function the dispatcher returns for these arguments
        # (fused_topk: `topk_func = dispatch_topk_softmax_func(use_rocm_aiter=...)`, vllm_topk_softmax off ROCm)
        if type(func) is cst.Name and caller is not None and c.named is None:
            for fn_def, rcond in self._dispatched(module, caller, call, facts):
                if isinstance(fn_def.node, cst.FunctionDef):
                    self._collect(None, fn_def.module, fn_def.node, facts.for_call(fn_def.node, call, vo), out,
                                  depth + 1, seen, join(cond, rcond))
            return
        # module-level helpers of vllm / vllm_ascend (rms_norm_batch_invariant, ...)
        if c.is_named:
            target = c.named
            kind = collective_kind(target.name) if isinstance(target, Definition) and target.kind == "function" else None
            if kind is not None and self._collectives is not None:  # the layer's all-reduce: an op of its own
                found: list[Kernel] = []
                self._collect(None, target.module, target.node, facts.for_call(target.node, call, vo), found, depth + 1, {})
                self._collectives.append(Collective(kind, module.rel, module.line_of(call, caller), as_text(cond), _dedupe(found)))
                return
            if isinstance(target, Definition) and target.kind == "function":
                start = len(out)
                self._collect(None, target.module, target.node, facts.for_call(target.node, call, vo), out, depth + 1, seen, cond)
                by = c.replaced
                if by is not None and by.reason is None:  # a function a vllm-ascend patch put in place of the name
                    for i in range(start, len(out)):
                        if out[i].note is None:
                            out[i] = replace(out[i], note=say("replaced_kernel", patch=by.text))


    def _outside(self, dotted: str, func, module) -> bool:
        """`dotted` names a function of an importable package the trees do not hold, reached through an import
        (not a local's method): not a library the layers only compute with through their tensors (walk.yaml
        `not_kernel_packages`), nor the standard library."""
        head = dotted.split(".")[0]
        if head in self.index.trees or head in sys.stdlib_module_names or head in _NOT_KERNEL_PACKAGES():
            return False
        root = func
        while type(root) is cst.Attribute:
            root = root.value
        return type(root) is cst.Name and root.value in module.imports

    def _dispatched(self, module, caller: cst.FunctionDef, call: cst.Call, facts: Bindings) -> list[tuple[Definition, Condition | None]]:
        """[(function, condition)] the local `call` calls may hold where its last assignment before the call
        is a call of a function of the trees (`topk_func = dispatch_topk_softmax_func(use_rocm_aiter=...)`,
        then `topk_func(...)` in the same block): the functions that function returns, its tests decided with
        the call's arguments (undecided ones kept as the condition)."""
        from ...semantics.scope import bind_params

        func = call.func
        if not isinstance(func, cst.Name):
            return []
        line = module.line_of(call, caller)
        scope = Scope(module=module)
        assigned = [a for a in tables(caller, module).local_assignments  # those a decided test does not skip
                    if a[0] == func.value and module.line_of(a[1], caller) <= line
                    and self._evaluator.condition_truth(a[2], scope=scope) is not Truth.FALSE]
        made = max(assigned, key=lambda a: module.line_of(a[1], caller))[1] if assigned else None
        if isinstance(made, (cst.Name, cst.Attribute)):  # `impl = grouped_topk` (else `partial(aiter_impl)`)
            target = self.index.resolve_expr(module, made)
            return [(target, None)] if isinstance(target, Definition) and target.kind == "function" else []
        if not isinstance(made, cst.Call) or not isinstance(made.func, (cst.Name, cst.Attribute)):
            return []
        maker = self.index.resolve_expr(module, made.func)
        if not (isinstance(maker, Definition) and maker.kind == "function" and isinstance(maker.node, cst.FunctionDef)):
            return []
        inner = Scope(module=maker.module)
        bind_params(maker.node, made, Scope(module=module, values=facts.as_values()), inner, skip_self=False)
        out: list[tuple[Definition, Condition | None]] = []
        for value, rcond in tables(maker.node, maker.module).returns_decided(Bindings(), self._evaluator, inner):
            target = (self.index.resolve_expr(maker.module, value)
                      if isinstance(value, (cst.Name, cst.Attribute)) else None)
            if isinstance(target, Definition) and target.kind == "function":
                out.append((target, rcond))
        return out

    def _native(self, cls: Definition, fn: cst.FunctionDef, module, call: cst.Call, cond, out: list, start: int) -> None:
        """A call of a CustomOp's forward_native whose walk found no kernel (out[start:]) runs the layer as plain
        PyTorch ops, one launch each: listed as `native:<Class>.forward_native` at the call (it covers no
        scenario), so the path shows what it runs. (FusedMoE's forward_native is its custom-op path: not so.)"""
        if (fn.name.value == "forward_native" and len(out) == start
                and "CustomOp" in self.ctor.base_names(cls)):
            out.append(Kernel(f"native:{cls.name}.forward_native", module.rel, module.line_of(call), as_text(cond), cond=cond))

    def _returned_objects(self, maker: Definition, call: cst.Call, cls: Definition, module) -> list | None:
        """`f(...).m(...)` in the code of the instance (or of an object it holds): the objects `f` may return
        for this call, read in `f` with its parameters bound to the call (`get_dsa_attn_kv_plan(self.vllm_config)`:
        the `DsaAttnKvPlan(...)` of each return the device and the configuration leave), each with the test it
        is returned under (None where it surely is); None where a return that may run builds no `cls`."""
        from ..construction.constructor import Instance
        from ...semantics.function_bodies import tables

        fn = maker.node
        if not isinstance(fn, cst.FunctionDef) or not _decision_function(fn, maker.module):
            return None
        owner = self._inst if self._sub is None else self._sub
        inner = Scope(module=maker.module)
        bind_params(fn, call, Scope(module=module, owner=owner), inner, skip_self=False)
        table = tables(fn, maker.module)
        for local, value, lcond, _pos in table.local_assignments:
            inner.locals.setdefault(local, []).append((value, lcond))
        out = []
        for value, test in table.returns_decided(Bindings(), self.ctor.evaluator, inner):
            if type(value) is not cst.Call or not isinstance(value.func, (cst.Name, cst.Attribute)) \
                    or self.index.resolve_expr(maker.module, value.func) is not cls:
                return None
            out.append((Instance(cls, value, inner), test))
            if test is None:
                break
        return out or None

    def _held(self, owner, name: str, built):
        """The object `owner.<name>` holds, as one instance for the walk of its methods (the same object on every
        read of it: its tests are read on it, and a method walked for it is walked again for another)."""
        memo = self.__dict__.setdefault("_held_objects", {})
        key = (id(owner), name)
        kept = memo.get(key)
        if kept is None or kept[0] is not owner:
            kept = memo[key] = (owner, built)
        path = self.ctor._path_of(owner)  # what a memo of the instance's kernels reads of it is read again there
        if path is not None:
            self.ctor._track(kept[1], path + ((name, True),))
        return kept[1]

    def _of_sub(self, impl) -> bool:
        """`self` in impl's code is the object being walked for the instance (_sub): its class or a base of it."""
        sub = self._sub
        return sub is not None and impl is not None and sub.cls is not None and (
            impl is sub.cls or any(c is impl for c in self.ctor.mro(sub.cls)))

    def _of_instance(self, impl) -> bool:
        """`self` in impl's code is the instance kernels_of_instance reads: its class or a base of it
        (`AscendFusedMoE.forward_impl(self, ...)` from AscendSharedFusedMoE)."""
        return self._inst is not None and impl is not None and (
            impl is self._inst_impl or any(c is impl for c in self.ctor.mro(self._inst_impl)))

    def _super_method(self, impl: Definition, caller: cst.FunctionDef, name: str):
        mro = self.ctor.mro(impl)
        at = next((i for i, c in enumerate(mro) if class_method(c, caller.name.value) is caller), None)
        if at is None:
            return None
        for c in mro[at + 1:]:
            fn = class_method(c, name)
            if fn is not None:
                return c, fn
        return None


def _takes_self(fn: cst.FunctionDef) -> bool:
    """A plain method: its first parameter is `self` (not a static or class method)."""
    params = list(fn.params.posonly_params) + list(fn.params.params)
    return bool(params) and params[0].name.value == "self" and not any(
        type(d.decorator) is cst.Name and d.decorator.value in ("staticmethod", "classmethod") for d in fn.decorators)


def _NOT_KERNEL_PACKAGES() -> frozenset:
    return frozenset(catalog().runtime.get("not_kernel_packages", ()))


def _probe(stmt: cst.Try) -> bool:
    """An availability probe (AscendGatedDeltaNetAttention._probe_fused_chunk): a `try` whose handlers catch
    every Exception and record a constant on the class (`cls._x = False`), its body ending by recording another
    (`cls._x = True`): what it runs is a smoke call made once, not the layer's compute."""
    def records(body) -> bool:
        last = body[-1] if body else None
        return (type(last) is cst.SimpleStatementLine and type(last.body[0]) is cst.Assign
                and type(last.body[0].targets[0].target) is cst.Attribute
                and type(last.body[0].targets[0].target.value) is cst.Name
                and last.body[0].targets[0].target.value.value in ("cls", "self")
                and type(last.body[0].value) is cst.Name and last.body[0].value.value in ("True", "False"))

    return (bool(stmt.handlers) and records(stmt.body.body)
            and all(h.type is None or (type(h.type) is cst.Name and h.type.value in ("Exception", "BaseException"))
                    for h in stmt.handlers)
            and all(records(h.body.body) for h in stmt.handlers))


def _only_forward_native(fn: cst.FunctionDef) -> bool:
    """The body (past a docstring) is one `return <...>.forward_native(...)`."""
    body = [st for st in fn.body.body if not (type(st) is cst.SimpleStatementLine and type(st.body[0]) is cst.Expr
                                              and isinstance(st.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))]
    if len(body) != 1 or not type(body[0]) is cst.SimpleStatementLine or not type(body[0].body[0]) is cst.Return:
        return False
    value = body[0].body[0].value
    return (type(value) is cst.Call and type(value.func) is cst.Attribute
            and value.func.attr.value == "forward_native")


def _again(walked, base, out: list) -> None:
    """The kernels a function gave under one path condition, given again under `base`."""
    old_base, found, start, end = walked
    n = len(old_base.terms) if old_base else 0
    for k in found[start:end]:
        own = Condition(k.cond.terms[n:]) if k.cond is not None and len(k.cond.terms) > n else None
        cond = join(base, own)
        out.append(replace(k, condition=as_text(cond), cond=cond, paths=None))


def _calls_in(module, node, shallow: bool) -> list[cst.Call]:
    """The calls of a statement, lambdas left out; `shallow`: of a compound statement's header only. Kept
    with the module: a function's kernels are walked again for each binding of its parameters and each model."""
    key = (node, shallow)
    found = CALLS_IN.of(module).get(key)
    if found is not None:
        return found

    def prune(n) -> bool:
        return type(n) is cst.Lambda or (shallow and type(n) is cst.IndentedBlock)

    found = []
    if shallow:
        for part in ("iter", "items", "test"):
            sub = getattr(node, part, None)
            if isinstance(sub, cst.CSTNode):
                found += find_all(sub, cst.Call, prune)
    else:
        found = find_all(node, cst.Call, prune)
    CALLS_IN.of(module)[key] = found
    return found


def _names(node) -> set[str]:
    return {n.value for n in find_all(node, cst.Name)}


def _dedupe(items: list[Kernel]) -> list[Kernel]:
    """One kernel per call site. Reached on both sides of one test (`if self.custom_op is not None:` and its
    else both end in the GEMM), it runs whichever way the test goes: the test is dropped from its condition.
    Reached on paths whose conditions do not merge so, it runs on any of them: its condition is the tests
    they share and the rest of each, `or`-ed (its `alts` keep each path's, for placing it on runtime paths);
    reached on one path with no test at all, it runs whenever that path runs."""
    seen: dict = {}
    out: list[Kernel] = []
    conds: dict[int, list] = {}  # index -> the conditions of the paths it was reached on, when they differ
    for k in items:
        key = (k.name, k.file, k.line)
        if key not in seen:
            seen[key] = len(out)
            out.append(k)
            continue
        i = seen[key]
        kept = out[i]
        if i not in conds:
            either = _either(kept.cond, k.cond)
            if either is not False:
                out[i] = replace(kept, condition=as_text(either), cond=either, paths=None)
                continue
            conds[i] = [kept.cond]
        if all(str(c or "") != str(k.cond or "") for c in conds[i]):
            conds[i].append(k.cond)
    for i, alts in conds.items():
        out[i] = _any_of(out[i], alts)
    return out


def _any_of(k: Kernel, alts: list) -> Kernel:
    """The kernel under `a or b or ...`: the tests every condition has, then what is left of each."""
    if any(c is None for c in alts):  # one path reaches it with no test of its own
        return replace(k, condition=None, cond=None, paths=None)
    shared = [t for t in alts[0].terms if all(any(u.render() == t.render() for u in c.terms) for c in alts[1:])]
    names = {t.render() for t in shared}
    rests = [[t for t in c.terms if t.render() not in names] for c in alts]
    common = Condition(tuple(shared)) if shared else None
    if any(not r for r in rests):  # one path needs only the shared tests
        return replace(k, condition=as_text(common), cond=common, paths=None)
    either = any_of_text([as_text(Condition(tuple(r))) for r in rests])
    text = f"{as_text(common)} and {either}" if common is not None else either
    return replace(k, condition=text, cond=common, paths=None, alts=tuple(alts))


def _either(a, b):
    """The condition of `a or b` when they differ in one test taken both ways (else False)."""
    if a is None or b is None or len(a.terms) != len(b.terms):
        return False
    differ = [i for i, (x, y) in enumerate(zip(a.terms, b.terms)) if x.render() != y.render()]
    if len(differ) != 1:
        return False
    x, y = a.terms[differ[0]], b.terms[differ[0]]
    if x.text != y.text or x.negated == y.negated or x.prefix or y.prefix or x.suffix or y.suffix:
        return False
    rest = a.terms[:differ[0]] + a.terms[differ[0] + 1:]
    return Condition(rest) if rest else None
