"""A composite layer walked to its parts: after a MoE layer's op, one op per part (router, experts) with the
device kernels its code runs on the backend, nested under the layer's path, and after a part the steps it
runs (the experts' dispatch, GEMMs, activation, combine), nested under the part's. Which parts, and where their
code is, is data (patterns/catalog/composites.yaml); which class each part is comes from the instance the
walk built (configuration, device profile and the backend's factory patches decide it)."""

from __future__ import annotations

import re
from dataclasses import replace
from collections.abc import Mapping
from typing import Any, cast

import libcst as cst

from ..catalog import catalog
from ..catalog.schema import Impl, Part, Step
from ..index.modules import Definition
from ..index.nodes import find_all
from .construction.constructor import Instance
from .frame import WalkerState, nest_native
from ..ir.ops import Kernel, Op, OpAttrs
from ..semantics.scope import Scope
from ..semantics.function_bodies import tables
from ..semantics.values import Bindings, Known, literal
from ..ir.conditions import Truth
from ..ir.texts import say


class Composites(WalkerState):
    """Mixin of Walker: the parts of composite layers."""

    def _composite_parts(self, frame, sub: Instance, kind: str, path: str, inputs, cond, steady, only=None) -> None:
        """`only`: the names of the parts to emit (a backend's own layer lists the ones its method runs through
        a runtime object, composites.yaml `own_method_parts`)."""
        spec_of = catalog().typed.composites.of(kind, self.index.backend)
        if spec_of is not None and spec_of.impl is not None and only is None \
                and self._composite_impl(frame, sub, spec_of.impl, path, inputs, cond):
            return
        parts = [p for p in spec_of.parts if only is None or p.part in only] if spec_of is not None else []
        if spec_of is None or not parts:
            return
        if only is None:  # the runner design's roles; a backend's own layer routes itself (not vLLM's router)
            self._composite_locations(sub, spec_of.locations, spec_of.location_methods)
        layer_op = self.ops[-1]
        emitted = []
        skipped = sub.skip_parts  # parts the layer's builder takes out (hf_fusers.py)
        for spec in parts:
            if spec.part in skipped or self._nothing_to_do(sub, spec):
                continue
            if spec.layer:  # the runner's join: the shared experts run before it, after the routed ones
                self._flush_shared()
            here = inputs if not emitted else emitted[-1].outputs
            for cls, origin, inst, runs_on in self._part_choices(sub, spec):
                self._composite_part(frame, sub, spec, kind, path, here, cond, steady, emitted,
                                     cls, origin, inst, runs_on)
        if emitted and only is None:
            layer_op.attrs["expanded"] = [op.attrs["part"] for op in emitted]
        elif emitted:  # a backend's own layer still routes itself: its gating stays the layer's, its experts not
            layer_op.attrs["parts"] = [op.attrs["part"] for op in emitted]

    def _nothing_to_do(self, sub: Instance, spec: Part) -> bool:
        """composites.yaml `needs`: the layer's attribute holding what the part works on is None as the layer was
        built (AscendMoERunner's `ascend_shared_experts` where the model hands it no shared experts: no shared
        output to join). Not decided: the part is walked, its tests kept."""
        if not spec.needs:
            return False
        got = self._layer_attr(sub, spec.needs)
        return isinstance(got, Known) and got.value is None

    def _part_choices(self, sub: Instance, spec: Part) -> list[tuple]:
        """(class, how it was found, instance, the runtime paths it runs on or None) of the part: one, or one
        per class the runtime picks per path (the MoE comm method by the path's token count)."""
        cls, origin, inst = self._part_class(sub, spec)
        if cls is not None or spec.registered_by is None:
            return [(cls, origin, inst, None)]
        choices = self._runtime_choices(spec)
        if not choices:
            return [(cls, origin, inst, None)]
        by_cls: dict = {}
        for c in choices:
            by_cls.setdefault(c.cls.qualname, (c.cls, []))[1].append(c)
        out = []
        fn = spec.registered_by.function.rsplit(".", 1)[-1]
        select = (catalog().typed.walk.runtime.moe_comm or {}).get("select", "").rsplit(".", 1)[-1]
        for cls_def, cs in by_cls.values():
            said = "; ".join(say("comm_chosen", fn=f"{select}()", member=c.member, path=c.path, tokens=c.tokens,
                                 capacity=self.env.mc2_capacity, cls=cls_def.name) for c in cs)
            paths = [c.path for c in cs] if len(by_cls) > 1 else None
            out.append((cls_def, f"{said} ({fn}())", None, paths))
        return out

    def _runtime_choices(self, spec: Part) -> list:
        """The comm class the runtime picks on each path, when every path's choice is decided (else none: the
        part stays unknown, with what was not known)."""
        from ..semantics.runtime_choice import moe_comm_choices

        moe = catalog().typed.walk.runtime.moe_comm or {}
        if spec.registered_by is None or moe.get("registry") != spec.registered_by.function:
            return []
        got = moe_comm_choices(self.env, self.ctor.evaluator, self.env.scenarios, self.env.num_experts())
        if not got or any(c.cls is None for c in got):
            return []
        return got

    def _composite_part(self, frame, sub, spec, kind, path, inputs, cond, steady, emitted, cls, origin, inst,
                        runs_on) -> None:
        """One part's op (and its steps), of the class `cls`; `runs_on`: the runtime paths it runs on, where
        the runtime picks another class on the others."""
        if cls is None:
            self._unknown(f"{path}.{spec.part}", frame.module, frame.fn,
                          say("part_unknown", part=spec.part, layer=sub.name, origin=origin))
            return
        impl = self.backends.implementation(cls)
        # what the part's code reads of the runtime's parallel setup, at the tool's deployment (TP only,
        # DP 1, no EP, no sequence parallelism: composites.yaml `deployment`), then the layer's own arguments
        stated = self._deployment_values(spec.deployment)
        for key, attr in spec.from_layer.items():  # what the layer's construction decides (sequence parallelism)
            got = self._layer_attr(sub, attr)
            if isinstance(got, Known):
                stated[key] = got.value
            else:
                stated.pop(key, None)
        facts = Bindings(fields={**{k: Known(v) for k, v in stated.items()},
                                 **self._carried_fields(sub, spec.fields)})
        widths = self._part_widths(sub, spec.widths)
        attrs_out: dict = {}
        scheme = self._experts_scheme(path, spec, attrs_out)
        caller = self._part_caller(sub, spec, scheme)
        kernels: list[Kernel] = []
        by_method: list[tuple[str, Kernel]] = []  # (the method it was found through, kernel), for the steps
        walked: set[str] = set()
        first = None
        for method in spec.methods:
            got = self.ctor.method(impl, method)
            if got is None:
                continue
            first = first or got
            own = spec.own_only  # only the method's own calls of these kinds
            entry = self._entry_facts(facts, got[1], method, caller, widths)
            got_kernels = (self.backends.kernels_of_instance(inst, impl, method, entry, own_calls=own,
                                                             own_only=bool(own)) if inst is not None
                           else self.backends.kernels_of(impl, entry, method=method))
            walked.add(method)
            by_method += [(method, k) for k in got_kernels]
            kernels += [k for k in got_kernels if k not in kernels]
        via = not spec.also_via or any(self._calls_any(impl, m, spec.also_via) for m in spec.methods)
        if not via:  # the comm method does not run the MLP (one fused kernel): the scheme's methods do not run
            scheme = None
        decided = None  # (the MLP's test on the scheme, its truth) where the scheme decides it
        if scheme is not None:  # a quantised checkpoint's experts: the scheme vllm-ascend builds runs the GEMMs
            cls_q, methods, fields = scheme
            facts.fields.update(fields)
            if isinstance(methods, Mapping) and methods.get("test"):
                got = self._supports_fused(cls_q, facts, methods.get("set", "fused_activations"))
                decided = (str(methods["test"]), got) if got is not None else None
            for method, test in self._scheme_methods(cls_q, methods, facts):
                if self.ctor.method(cls_q, method) is not None:
                    got_kernels = self.backends.kernels_of(cls_q, facts, method=method)
                    if test is not None:  # one side of the MLP's undecided test
                        got_kernels = [replace(k, condition=" and ".join(c for c in (test, k.condition) if c))
                                       for k in got_kernels]
                    walked.add(method)
                    by_method += [(method, k) for k in got_kernels]
                    kernels += [k for k in got_kernels if k not in kernels]
        for extra in spec.also if scheme is None and via else ():  # code the part runs through a runtime object (the quant method)
            more = self._attr_path(sub, extra.attr)
            if more is None or more.cls is None:
                continue
            more_impl = self.backends.implementation(more.cls)
            for method in extra.methods:
                if self.ctor.method(more_impl, method) is not None:
                    got_kernels = self.backends.kernels_of_instance(more, more_impl, method, facts)
                    walked.add(method)
                    by_method += [(method, k) for k in got_kernels]
                    kernels += [k for k in got_kernels if k not in kernels]
        if decided is not None:  # the part's own code tests the scheme the same way (`if quant_method.<test>(...)`)
            kernels = [k for k in kernels if _holds(k.condition, *decided)]
            by_method = [(m, k) for m, k in by_method if _holds(k.condition, *decided)]
        if first is None:
            self._unknown(f"{path}.{spec.part}", impl.module, impl.node,
                          say("has_none_of", cls=impl.name, methods=list(spec.methods)))
            return
        if spec.own_only and not kernels:  # the layer does none of it itself: nothing to show
            return
        owner, fn = first
        attrs = {"inside": sub.name, "part": spec.part, "class_file": cls.module.rel,
                 "class_line": cls.line, "found_by": origin}
        if spec.paths:  # the runtime paths it runs on (decode, prefill)
            attrs["paths"] = list(spec.paths)
        if runs_on:  # the runtime picks this class on these paths only (the MoE comm method by token count)
            attrs["runs_on"] = list(runs_on)
        attrs.update(attrs_out)
        if impl is not cls:
            attrs["ascend_class"], attrs["ascend_file"] = impl.name, impl.module.rel
        op_path = f"{path}.{spec.part}"
        # a part built under an undecided test says so, and lists what else would be built
        # (the layer itself was chosen already)
        part_cond = self._chosen(op_path, inst, cond) if inst is not None and inst is not sub else cond
        op = self._part_op(frame, spec, cls.name, owner.module, fn, inputs,
                           part_cond, steady, attrs, op_path)
        op.kernels = kernels
        at = next((k for k in kernels if k.condition is None), kernels[0] if kernels else None)
        called = self._called_at(spec.at_call) if spec.at_call else None
        if called is not None:  # at the call that runs the part (`moe_comm_method.fused_experts(...)`)
            op.file, op.line = called
        elif at is not None:  # at the call of its kernel (one that always runs, if any),
            op.file, op.line = at.file, at.line  # not at the definition of the method that holds it
        if self.index.backend == "ascend":
            self._cuda_part(op, kind, spec.part, frame.inst, path.rsplit(".", 1)[-1])
        emitted.append(op)
        variant = next((v for v in spec.steps if walked.issuperset(v.when)), None)
        if variant is not None:
            self._step_ops(op, variant.steps, by_method)

    def _part_widths(self, sub: Instance, widths: Mapping[str, str]) -> dict:
        """composites.yaml `widths`: a tensor parameter of the part's methods -> its last dimension, the value of
        the layer's attribute path (`moe_config.hidden_dim`: the runner pads the routed hidden states to it,
        vLLM's MoERunner._maybe_pad_hidden_states), where the construction decides it."""
        out = {}
        for param, attr in widths.items():
            got = self._layer_attr(sub, attr)
            if isinstance(got, Known) and type(got.value) is int:
                out[param] = got.value
        return out

    def _layer_attr(self, sub: Instance, attr: str):
        """`self.<attr>` (a dotted path) of the layer, read on its backend's class; None without a class."""
        impl = self.backends.implementation(sub.cls) if sub.cls is not None else None
        if impl is None:
            return None
        owner = Instance(impl, sub.call, sub.scope, sub.condition)
        return self.ctor.evaluator.infer(cst.parse_expression(f"self.{attr}"), Scope(module=impl.module, owner=owner))

    def _part_caller(self, sub: Instance, spec: Part, scheme) -> tuple | None:
        """(class, method) of composites.yaml `called_by`: the object whose method calls the part's entry methods
        (the routed experts' quant method, whose `apply` calls `moe_comm_method.fused_experts(..., quant_method=
        self)`); a quantised checkpoint's scheme where it runs the experts (its own `apply` makes that call)."""
        by = spec.called_by
        if by is None:
            return None
        if scheme is not None:
            return scheme[0], by.method
        held = self._attr_path(sub, by.attr)
        return (held.cls, by.method) if held is not None and held.cls is not None else None

    def _entry_facts(self, facts: Bindings, fn: cst.FunctionDef, method: str, caller, widths: dict) -> Bindings:
        """What is known of one entry method's parameters: the tensors whose last dimension the layer decides
        (`widths`), and what the call that runs it passes (`caller`: its None-ness, and `self` as an object of
        the caller's class, whose methods are read on the class: `quant_method.supports_fused_activation(...)`)."""
        from ..semantics.signatures import bind_arguments, call_arguments, signature

        found = self.ctor.method(caller[0], caller[1]) if caller is not None else None
        call = next((c for c in find_all(found[1], cst.Call) if type(c.func) is cst.Attribute
                     and c.func.attr.value == method), None) if found is not None else None
        params = {p.name.value for group in signature(fn) for p in group}
        if call is None and not params & set(widths):
            return facts
        out = facts.for_call(fn, call) if call is not None else \
            Bindings(dict(facts.none), dict(facts.attr_classes), set(facts.sure), fields=facts.fields)
        if call is not None and caller is not None:
            for name, expr in bind_arguments(fn, *call_arguments(call)):
                if type(expr) is cst.Name and expr.value == "self":  # the caller itself
                    out.objects[name], out.none[name] = caller[0], False
                    out.sure.add(name)
        for name in params & set(widths):
            out.widths[name], out.none[name] = widths[name], False
            out.sure.add(name)
        return out

    def _cuda_part(self, op: Op, kind: str, part: str, holder: Instance, name: str) -> None:
        """What the same part runs on CUDA (composites.yaml, the `cuda` parts of the layer's kind): the layer
        `holder.<name>` built again as vLLM builds it there (no Ascend factory patch: FusedTopKRouter, not
        AscendFusedTopKRouter), for the report's CUDA column: `cuda_kernels` (the device kernels its methods
        launch), their tests, and `cuda_runs` (where). Nothing where vLLM has no such part or class."""
        spec_of = catalog().typed.composites.of(kind, "cuda")
        spec = next((p for p in spec_of.parts if p.part == part), None) if spec_of is not None else None
        if spec is None or not spec.column or spec.attr is None or holder is None or holder.cls is None \
                or not holder.cls.module.name.startswith("vllm."):
            return
        cuda = self.cuda_backends
        # new instances: what the Ascend walk built of these (their `built`) is not what CUDA builds
        layer = cuda.ctor.attr(Instance(holder.cls, holder.call, holder.scope, holder.condition), name)
        built = None
        for step in spec.attr.split("."):
            built = cuda.ctor.attr(layer, step) if layer is not None and layer.cls is not None else None
            layer = built
        cls = built.cls if built is not None else None
        if cls is None or not cls.module.name.startswith("vllm."):
            return
        facts = Bindings(fields={k: Known(v) for k, v in spec.deployment.items()})
        for method in spec.methods:
            if cuda.ctor.method(cls, method) is None:
                continue
            got = [k for k in cuda.kernels_of(cls, facts, method=method)
                   if not k.name.startswith(("native:", "triton:"))]
            if got:
                op.attrs["cuda_kernels"] = [k.name for k in got]
                op.attrs["cuda_kernel_conditions"] = {k.name: k.condition for k in got if k.condition}
                op.attrs["cuda_runs"] = f"{cls.name}.{method}"
            return

    def _composite_impl(self, frame, sub: Instance, spec: Impl, path: str, inputs, cond) -> bool:
        """The implementation the layer's custom op hands its work to (AscendMLAImpl.forward behind
        torch.ops.vllm.mla_forward), walked as code: each projection, norm, RoPE, cache write, attention kernel
        and batched matmul an op at the line that calls it, under the tests of the code on the way. Its
        __init__ is bound to the call that builds it in the holder's __init__ (`impl_cls(..., **extra_impl_args)`),
        so `self.q_proj`, `self.kv_a_layernorm` are the model's modules. False when it cannot be built."""
        holder = self._attention_layer(sub, spec.holder, spec.assigned)
        if holder is None:
            return False
        # the implementation of the backend the platform's selector picks (AscendSFAImpl for a model with an
        # indexer); composites.yaml's class where the selector is not run (the layer op says so)
        chosen = self._attention_backend(sub, sub.cls, "mla_attention")
        cls = chosen.impl if chosen is not None else None
        if cls is None:
            mod, _, name = spec.cls.rpartition(".")
            cls = self.index.lookup(mod, name)
        if not (isinstance(cls, Definition) and cls.kind == "class"):
            return False
        if chosen is not None and chosen.others:  # the selector's test is not decided: the others, listed
            self.alternatives.append({"path": f"{path}.{spec.assigned}", "chosen": cls.name,
                                      "condition": chosen.choice.why or None, "decided": False,
                                      "others": sorted({(i.name if i is not None else b.name, "")
                                                        for b, i in chosen.others})})
        built = self._built_at(holder, spec.assigned)
        if built is None:
            return False
        call, scope = built
        impl = Instance(cls, call, scope)
        layer_op = self.ops[-1]
        got = self.ctor.method(cls, spec.method)
        if got is None:
            return False
        params = [p.name.value for p in got[1].params.params[1:]]
        args = [list(inputs) if p in spec.inputs else [self._value(p)] for p in params]
        start = len(self.ops)
        self._expand(impl, spec.method, args, {}, path=f"{path}.{spec.assigned}", facts=Bindings(), cond=cond)
        for op in self.ops[start:]:
            op.attrs.setdefault("inside", sub.name)
        layer_op.attrs["runs"] = f"{cls.name}.{spec.method}"
        return len(self.ops) > start

    def _built_at(self, holder: Instance, assigned: str):
        """(call, scope) of the constructor call whose result the holder's __init__ stores as `self.<assigned>`,
        directly or through a local (`impl = impl_cls(...); self.impl = impl`), with the scope that binds it."""
        for c, fn, scope in self.ctor.init_scopes(holder):
            found = tables(fn, c.module).self_assignments.get(assigned, ())
            for expr, _cond, pos in found:
                if type(expr) is cst.Name:
                    locals_ = [v for t, v, _c, p in tables(fn, c.module).local_assignments if t == expr.value and p <= pos]
                    expr = locals_[-1] if locals_ else expr
                if type(expr) is cst.Call:
                    return expr, scope
        return None

    def _step_ops(self, part, steps: tuple[Step, ...], by_method: list) -> None:
        """The part's kernels as the steps that run them, in the order they run (composites.yaml `steps`), each
        an op nested under the part at the line of its first kernel's call (of one that always runs, if
        any). A kernel goes to the first step that takes the method it was found through and, when the step
        names primitives, does one of them (kernels.yaml) or its name matches the step's `match`; one that no
        step takes stays the part's only. A step with no kernel is left out."""
        from ..catalog import kernel_covers

        inputs = part.inputs
        for step in steps:
            taken: list[Kernel] = []
            for method, k in by_method:
                if (method in step.methods and k not in taken
                        and (not step.covers or kernel_covers(k.name) & set(step.covers)
                             or (step.match and re.search(step.match, k.name)))):
                    taken.append(k)
            by_method = [(m, k) for m, k in by_method if k not in taken]
            if not taken:
                continue
            name = step.step
            path = f"{part.path}.{name}"
            attrs: OpAttrs = {"inside": part.layer_class or "", "step": name}
            at = next((k for k in taken if k.condition is None), taken[0])  # one that always runs, if any
            op = Op(id=self._op_id(f"{path}:{name}"), kind=step.kind, name=name, layer_class=None, file=at.file,
                    line=at.line, scope=part.scope, path=path, section=part.section, inputs=list(inputs),
                    outputs=[self._value(f"{name}_out")], condition=part.condition, steady=part.steady,
                    kernels=taken, attrs=attrs)
            if "repeat" in part.attrs:
                op.attrs["repeat"] = part.attrs["repeat"]
            if "layer_kind" in part.attrs:
                op.attrs["layer_kind"] = part.attrs["layer_kind"]
            if "runs_on" in part.attrs:  # a comm class the runtime picks on some paths: its steps too
                op.attrs["runs_on"] = list(part.attrs["runs_on"])
            op.branches = list(part.branches)
            op.cond = part.cond
            self.ops.append(op)
            inputs = op.outputs
            native = [k for k in taken if k.name.startswith("native:")]
            if native and (len(taken) == 1 or native[0].condition is None):
                self._native_step(op, native[0])  # a step that runs a layer's forward_native: its ops, under it

    def _module_at(self, rel: str):
        """The module of a file of the trees, by its path as reports name it (vllm_ascend/ops/activation.py)."""
        tree = self.index.trees.get(rel.split("/", 1)[0])
        name = self.index.module_name_for(tree.root / rel) if tree is not None else None
        return self.index.get(name) if name else None

    def _called_at(self, method: str) -> tuple[str, int] | None:
        """(file, line) of the first call `<x>.<method>(...)` in the module of the class that runs the routed
        experts on this backend (the report's "MoE experts" location): where the runner calls the part."""
        where = self.locations.get("moe_experts")
        module = self._module_at(where.file) if where is not None else None
        if module is None:
            return None
        calls = [c for c in find_all(module.tree, cst.Call)
                 if type(c.func) is cst.Attribute and c.func.attr.value == method]
        return (module.rel, min(module.line_of(c) for c in calls)) if calls else None

    def _native_step(self, step: Op, k: Kernel) -> None:
        """A step that runs a layer's forward_native (`native:SwigluOAIAndMul.forward_native`, called at the
        kernel's line: GPT-OSS's swigluoai in the experts on Ascend) walked into its PyTorch ops, nested under the
        step (walk/native.py marks them the same way)."""
        cls_name, _, method = k.name.removeprefix("native:").partition(".")
        module = self._module_at(k.file)
        cls = self.index.resolve_expr(module, cst.Name(cls_name)) if module is not None else None
        if not (isinstance(cls, Definition) and cls.kind == "class") or self.ctor.method(cls, method or "") is None:
            return
        start = len(self.ops)
        self._expand(Instance(cls), method, [list(step.inputs)], {}, path=f"{step.path}.native", facts=Bindings(),
                     cond=None)
        if nest_native(self.ops, start, step, f"{step.name} ({cls.name})"):
            for op in self.ops[start:]:
                op.condition, op.cond = step.condition, step.cond

    def _carried_fields(self, sub: Instance, fields: Mapping[str, str]) -> dict:
        """field -> the value of the argument the layer was built with (`activation="swigluoai"`, else the
        parameter's default), for the part's walk (composites.yaml `fields`); a field whose value is not
        known is left out, and its tests stay conditions."""
        out = {}
        for name, arg in fields.items():
            value = self._built_with(sub, arg)
            if isinstance(value, Known):
                out[name] = value
        return out

    def _built_with(self, sub: Instance, arg: str):
        """The value of parameter `arg` of the code that built the layer: its class's __init__ chain, else the
        factory that returned it (whose scope binds the model's arguments)."""
        name = cst.Name(arg)
        scopes = [scope for _c, _fn, scope in self.ctor.init_scopes(sub)] + ([sub.scope] if sub.scope is not None else [])
        for scope in scopes:
            if arg in scope.params or arg in scope.defaults:
                value = self.ctor.evaluator.infer(name, scope)
                if isinstance(value, Known):
                    return value
        return None

    def _composite_locations(self, sub: Instance, roles: Mapping[str, str], methods: Mapping[str, str]) -> None:
        """Where a MoE user looks: the classes that run the router and the experts on this backend, each with
        the method the runner calls (AscendRoutedExperts.forward_impl, not RoutedExperts.forward)."""
        for role, attr in roles.items():
            inst = self._attr_path(sub, attr) if role not in self.locations else None
            if inst is not None and inst.cls is not None:
                impl = self.backends.implementation(inst.cls)
                self._role(role, Instance(impl, inst.call, inst.scope), methods.get(role, "forward"))

    def _part_op(self, frame, spec, cls_name, module, fn, inputs, cond, steady, attrs, path):
        """An op whose line is the part's method in the tree (where its code is), not the model's call."""
        return self._op_in_method(frame, spec.kind, spec.part, cls_name, module, fn, inputs,
                                  [f"{spec.part}_out"], cond, steady, attrs, path)

    def _op_in_method(self, frame, kind, name, cls_name, module, fn, inputs, hint, cond, steady, attrs, path):
        """An op at the line of method `fn` of `module` (a part's, the router GEMM's), in the model's scope."""
        from .frame import _Frame

        at = _Frame(frame.inst, frame.cls, fn, module, path, Bindings())
        at.scope = frame.scope
        self._op(at, kind, name, cls_name, fn, inputs, hint, cond, steady, attrs=attrs, path=path)
        return self.ops[-1]

    def _part_class(self, sub: Instance, spec: Part) -> tuple[Definition | None, str, Instance | None]:
        """(class, how it was found, its instance if the walk built it) of a part: an attribute path of the
        layer's instance, or the one class a registry function constructs; (None, why, None) when not known."""
        if spec.layer:  # the layer itself (the runner joins what its parts ran)
            return sub.cls, f"{sub.name} itself", sub
        if spec.cls is not None:  # built by the runtime (the attention backend's implementation): the named class
            mod, _, name = spec.cls.rpartition(".")
            cls = self.index.lookup(mod, name)
            if not (isinstance(cls, Definition) and cls.kind == "class"):
                return None, say("not_in_trees", name=spec.cls), None
            return cls, f"{name}, the backend's implementation", None
        if spec.attr is not None:
            inst = self._attr_path(sub, spec.attr)
            if inst is None:
                return None, say("no_attribute", attr=spec.attr), None
            return inst.cls, f"{sub.name}.{spec.attr}", inst
        reg = spec.registered_by
        name = reg.function.rsplit(".", 1)[-1] if reg is not None else "?"
        reg_values = self._deployment_values(reg.values) if reg is not None else {}
        classes = self._registered_classes(reg.function, reg_values) if reg is not None else []
        values = _values_text(reg_values)
        if len(classes) == 1:
            return classes[0], f"{name}() with {values}", None
        if classes:  # which one runs is chosen at run time: not a guess
            return None, say("registers_several", fn=f"{name}()", values=values, classes=[c.name for c in classes]), None
        return None, say("registers_none", fn=f"{name}()"), None

    def _calls_any(self, cls, method: str, names) -> bool:
        """Whether `cls.method` (as its MRO resolves it) calls a function or method of one of these names."""
        got = self.ctor.method(cls, method)
        if got is None:
            return False
        for call in find_all(got[1], cst.Call):
            func = call.func
            name = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else None
            if name in names:
                return True
        return False

    def _experts_scheme(self, path: str, spec: Part, attrs: dict):
        """(scheme class, its methods, the fields the experts' code reads of it) of a quantised checkpoint's
        routed experts (walk.yaml `runtime.quantization.<method>.moe`), None where the part is not the experts
        or they are unquantised. `attrs` gets the quant type and where it was read."""
        quant = self.quant
        if quant is None or not spec.also or spec.kind != "moe_experts":
            return None
        moe = quant.spec.get("moe") or {}
        q = quant.for_layer(path, moe.get("kind", "moe"))
        if q.mixed or (q.quant_type is not None and q.scheme is None):
            attrs.update(quant_type=None, quant_unknown=q.why)
            return None
        if q.quant_type is None:
            return None
        attrs.update(quant_type=q.quant_type, quant_scheme=q.scheme.name, quant_scheme_file=q.scheme.module.rel,
                     quant_keys=list(q.keys))
        return q.scheme, moe.get("methods") or (), self._scheme_fields(q.scheme, moe.get("fields") or {})

    def _scheme_methods(self, scheme, methods, facts) -> list[tuple[str, str | None]]:
        """(method, the test it runs under or None) of what the experts' MLP calls on the scheme: walk.yaml
        `moe.methods` as `{test, fused, unfused, always}` — the MLP's `scheme.<test>(activation)`
        (`supports_fused_activation`: the activation's name in the scheme's `fused_activations`) picks the
        fused or the unfused methods; undecided, both, each under its side of the test. A plain list: all."""
        if not isinstance(methods, Mapping):
            return [(m, None) for m in methods]
        test = str(methods.get("test", ""))
        fused = self._supports_fused(scheme, facts, methods.get("set", "fused_activations"))
        said = f"{scheme.name}.{test}(activation)"
        out = []
        if fused is not False:
            out += [(m, None if fused else said) for m in methods.get("fused") or ()]
        if fused is not True:
            out += [(m, None if fused is False else f"not ({said})") for m in methods.get("unfused") or ()]
        return out + [(m, None) for m in methods.get("always") or ()]

    def _supports_fused(self, scheme, facts, set_attr: str) -> bool | None:
        """Whether the layer's activation (the `activation` field it was built with) is one of the names the
        scheme's class lists in `set_attr` (`fused_activations = frozenset({"silu", ...})`); None: not known."""
        from ..semantics.runtime_defaults import _declared

        activation = facts.fields.get("activation")
        name = activation.value if isinstance(activation, Known) else None
        name = getattr(name, "name", name)  # an enum member read as a symbol: its name
        if isinstance(name, str) and "." in name:
            name = name.rsplit(".", 1)[1].lower()
        names = None
        for c in self.ctor.mro(scheme):
            node = _declared(c).get(set_attr)
            if node is None:
                continue
            if isinstance(node, cst.Call) and node.args:
                node = node.args[0].value
            if isinstance(node, (cst.Set, cst.List, cst.Tuple)):
                got = [literal(e.value) for e in node.elements]
                names = {g.value for g in got if g is not None and isinstance(g.value, str)}
            break
        if not isinstance(name, str) or names is None:
            return None
        return name.lower() in names

    def _scheme_fields(self, scheme, fields: Mapping[str, Any]) -> dict:
        """walk.yaml `moe.fields`: a field the experts' code reads of its compute input (`mlp_compute_input
        .fusion`), the value of the keyword that builds it in `function`, evaluated with the scheme's own class
        attributes (`quant_type`) handed in as `values` name them; none where it is not decided."""
        from ..semantics.scope import Scope

        out = {}
        for name, how in fields.items():
            if how.get("config"):  # a field of vllm-ascend's configuration (get_ascend_config()), as the user set it
                got = self._ascend_config_value(list(how["config"]))
                if isinstance(got, Known):
                    out[name] = got
                continue
            mod, _, fn_name = str(how.get("function", "")).rpartition(".")
            fn = self.index.lookup(mod, fn_name)
            if not isinstance(fn, Definition) or fn.kind != "function" or type(fn.node) is not cst.FunctionDef:
                continue
            fn_node: cst.FunctionDef = fn.node
            given = {}
            for param, attr_path in (how.get("values") or {}).items():
                value = self.ctor.evaluator._class_attribute(scheme, attr_path.rsplit(".", 1)[-1], 0)
                if not isinstance(value, Known):
                    break
                node = {attr_path.rsplit(".", 1)[-1]: value.value}
                for step in reversed(attr_path.split(".")[:-1]):
                    node = {step: node}
                given[param] = Known(node)
            else:
                scope = Scope(module=fn.module, values=given)
                table = tables(fn_node, fn.module)
                for local, value, cond, _pos in table.local_assignments:
                    scope.locals.setdefault(local, []).append((value, cond))
                for p in (*fn_node.params.params, *fn_node.params.kwonly_params):
                    if p.name.value not in given and p.default is not None:
                        scope.defaults[p.name.value] = p.default
                for call in find_all(fn_node, cst.Call):
                    arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == how.get("keyword")), None)
                    if arg is not None:
                        got = self.ctor.evaluator.infer(arg.value, scope)
                        if isinstance(got, Known):
                            out[name] = got
                        break
        return out

    def _ascend_config_value(self, path: list[str]):
        """`get_ascend_config().<a>.<b>` (walk.yaml runtime.defaults with the user's --additional-config)."""
        from ..semantics.runtime_defaults import config_default
        from ..semantics.scope import Scope

        calls = self.env.runtime_calls
        name = next(iter(catalog().typed.walk.runtime.defaults), None)
        if name not in calls:
            return None
        value = calls[name](None, None)
        for step in path:
            if not (isinstance(value, Known) and hasattr(value.value, "definition")):
                return None
            value = config_default(value.value, step, lambda e, sc: self.ctor.evaluator.infer(e, sc or Scope(module=None)))
        return value

    def _deployment_values(self, values: Mapping[str, Any]) -> dict:
        """composites.yaml's stated runtime values (`moe_config.ep_size: 1`, `use_ep: false`) with what the
        report's deployment states instead (ir/deployment.py: ep_size, use_ep, dp_size, tp_size)."""
        ep = self.env.parallel_value("ep")
        d = self.env.deployment
        if ep is None or d is None:
            return dict(values)
        given = {"ep_size": ep, "use_ep": ep > 1, "dp_size": d.dp, "tp_size": d.tp_size}

        def over(v):
            return {k: (over(x) if isinstance(x, dict) else given.get(k, x)) for k, x in v.items()}

        return over(dict(values))

    def _attr_path(self, sub: Instance, dotted: str) -> Instance | None:
        """`a.b` of the instance, each step read on the backend's class (AscendRoutedExperts' quant_method, not
        RoutedExperts')."""
        inst = sub
        for name in dotted.split("."):
            if inst is None or inst.cls is None:
                return None
            impl = self.backends.implementation(inst.cls)
            if impl is not inst.cls:
                inst = Instance(impl, inst.call, inst.scope, inst.condition)
            inst = self.ctor.attr(inst, name)
        return inst if inst is not None and inst.cls is not None else None

    def _registered_classes(self, qualname: str, values: Mapping[str, Any]) -> list[Definition]:
        """Classes constructed, in order, by the statements of `qualname` whose path condition `values` do not
        rule out."""
        mod, _, name = qualname.rpartition(".")
        fn_def = self.index.lookup(mod, name)
        if not isinstance(fn_def, Definition) or fn_def.kind != "function":
            return []
        module = fn_def.module
        scope = Scope(module=module, values={k: Known(v) for k, v in values.items()})
        out: list[Definition] = []
        for stmt, cond in tables(cast(cst.FunctionDef, fn_def.node), module).statements:  # (kind function)
            if not type(stmt) is cst.SimpleStatementLine or self.ctor.evaluator.condition_truth(cond, scope=scope) is Truth.FALSE:
                continue
            for call in find_all(stmt, cst.Call):
                target = self.index.resolve_expr(module, call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
                if isinstance(target, Definition) and target.kind == "class" and all(target is not o for o in out):
                    out.append(target)
        return out

def _holds(condition: str | None, test: str, truth: bool) -> bool:
    """Whether a kernel's condition can hold where `<object>.<test>(...)` is `truth`: a condition that needs
    the other side (`not (quant_method.supports_fused_activation(...))` where it is true) cannot."""
    if not condition:
        return True
    negated = re.search(rf"not \(\w+\.{re.escape(test)}\(", condition) is not None
    plain = re.search(rf"(?<!not \()\b\w+\.{re.escape(test)}\(", condition) is not None
    return not (negated if truth else plain)


def _values_text(values: Mapping[str, Any]) -> str:
    parts = []
    for k, v in values.items():
        parts += [f"{k}.{k2} = {v2!r}" for k2, v2 in v.items()] if isinstance(v, dict) else [f"{k} = {v!r}"]
    return ", ".join(parts)
