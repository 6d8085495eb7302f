"""Call dispatch: one small handler per idiom of a call site, tried in order; the first that knows the call
decides what it is (an inlined method, a submodule, a layer of the loop, a tensor method, a device kernel,
a vLLM function, ...). A handler returns the call's SSA values, or None when the idiom is not its own."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import cast

import libcst as cst

from ..catalog import is_dispatcher, kernel_covers
from ..index.modules import Definition
from .construction.constructor import Instance
from .frame import (MAX_DEPTH, _CONTAINER_METHODS, _Frame, _IGNORED_BUILTINS, _InstanceValue, _NONE, WalkerState, _flat,
                    _self_attr)
from ..ir.ops import Kernel
from ..semantics.callees import Callee
from ..semantics.function_bodies import class_method, tables
from ..semantics.scope import bind_params
from ..semantics.signatures import bind_arguments
from ..catalog.taxonomy import function_kind, hub_layer_kind, is_kernel, leaf_for_class_names, leaf_ops, tensor_method_kind
from ..semantics.values import Bindings, Known
from ..ir.conditions import Truth, join
from ..ir.texts import say


MAX_OTHER_LAYERS = 4  # other layer classes walked per layer list


@dataclass
class CallSite:
    """One call expression as the walk meets it."""

    frame: _Frame
    call: cst.Call
    cond: object  # the path condition (values.Condition) or None
    steady: bool
    stmt: cst.CSTNode
    hint: list | None

    @property
    def func(self):
        return self.call.func

    runs: object = None  # the backend's replacements of module attributes (Constructor.runs)

    @cached_property
    def callee(self) -> Callee:
        """What the call names, resolved in the trees (semantics/callees.py), as the backend's patches leave it; a
        bare name an import inside the calling function binds (`from .ops.x import f` in a method) included."""
        return Callee(self.frame.module._index, self.frame.module, self.call, caller=self.frame.fn, runs=self.runs)


class Calls(WalkerState):
    """Mixin of Walker: what a call runs."""

    # the idioms, most specific first; the last handler always answers
    HANDLERS = ("_host_value_call", "_super_call", "_self_call", "_submodule_method_call", "_nested_call", "_alias_call",
                "_loop_layer_call", "_indexed_layer_call",
                "_triton_launch", "_tensor_method_call", "_partial_call", "_function_call")

    def _call(self, frame: _Frame, call: cst.Call, cond, steady, stmt, hint) -> list[str]:
        site = CallSite(frame, call, cond, steady, stmt, hint, self.ctor.runs)
        for name in self.HANDLERS:
            out = getattr(self, name)(site)
            if out is not None:
                return out
        raise AssertionError("the last call handler answers every call")

    def _site_args(self, s: CallSite):
        return self._args(s.frame, s.call, s.cond, s.steady, s.stmt)

    def _host_value_call(self, s: CallSite):
        """A host package's function or a method of its value (`np.block(...)`, `rng.choice(...)`): computed on
        the host, no device op (walk/host.py); its arguments' own calls still run."""
        if not self._host_call(s.frame, s.call):
            return None
        self._site_args(s)
        return []

    def _super_call(self, s: CallSite):
        """super().forward(...) / super().method(...): the next class of the MRO that defines it."""
        name = s.callee.super_method
        if name is None:
            return None
        args, kwargs = self._site_args(s)
        for c in self.ctor.mro(s.frame.cls)[1:]:
            fn = class_method(c, name)
            if fn is not None:
                # the base class's method, not a recursion (a subclass in another package calls its base's forward)
                return self._inline(s.frame, c, fn, c.module, args, kwargs, s.cond, s.steady, replaced=True)
        return []

    def _self_call(self, s: CallSite):
        """self.<method>(...) is inlined; self.<submodule>(...) runs the submodule (a leaf or its forward)."""
        func, frame = s.func, s.frame
        if not _self_attr(func):
            return None
        name = func.attr.value
        if name == "_forward_method" and frame.inst.cls is not None:
            name = self._dispatch_target(frame.inst)  # per-platform dispatch set in __init__
        # `self.m()` dispatches on the instance's class: a subclass's override wins over the base class whose
        # method is being walked (AscendKimiDecoderLayer._run_self_attn, called from the upstream forward)
        method = self.ctor.method(frame.inst.cls, name) if frame.inst.cls is not None else None
        if method is None and frame.inst.cls is not None:
            method = self.ctor.method(frame.cls, name)
        if method is not None:
            args, kwargs = self._site_args(s)
            owner, fn = method
            return self._inline(frame, owner, fn, method.module, args, kwargs, s.cond, s.steady, call=s.call)
        sub = _under_path(self.ctor.attr(frame.inst, name), s.cond)
        args, kwargs = self._site_args(s)
        if sub is None or sub.cls is None:
            external = self.ctor.external_class(frame.inst, name) or frame.inst.outside.get(name)
            bound = self.ctor.partial_function(frame.inst, name) if external == "functools.partial" else None
            if bound and function_kind(bound):  # self.act = functools.partial(nn.functional.gelu, approximate=...)
                return self._op(frame, function_kind(bound), bound.rsplit(".", 1)[-1], None, s.stmt, _flat(args, kwargs),
                                s.hint, s.cond, s.steady)
            leaf = leaf_for_class_names([external.rsplit(".", 1)[-1]]) if external else None
            if leaf is not None and external:
                return self._op(frame, leaf[1]["kind"], name, external.rsplit(".", 1)[-1], s.stmt, _flat(args, kwargs),
                                s.hint, s.cond, s.steady,
                                attrs={"external": external, **self._external_values(frame.inst, name, leaf[0])},
                                path=f"{frame.path}.{name}" if frame.path else name)
            why = frame.inst.why.get(name) if frame.inst.cls is not None else None
            return self._unknown_op(frame, s.stmt, name, _flat(args, kwargs), s.hint, s.cond, s.steady,
                                    say("unknown_builder_why", attr=f"self.{name}", why=why) if why
                                    else say("unknown_builder", attr=f"self.{name}"))
        return self._module_call(frame, sub, name, s.call, args, kwargs, s.cond, s.steady, s.stmt, s.hint)

    def _external_values(self, inst: Instance, name: str, leaf: str) -> dict:
        """What the construction of a layer class outside the trees decides (`self.gate = nn.Linear(hidden,
        n_experts, bias=False, dtype=self.gate_dtype)`), read from the call's arguments by the parameters
        leaf_ops.yaml gives it: `values` (its sizes) and `params_dtype` (its weights' dtype)."""
        info = leaf_ops().classes.get(leaf)
        got = self.ctor.external_call(inst, name) if info is not None and info.params else None
        if got is None or info is None or not info.params:
            return {}
        _dotted, call, scope = got
        given: dict = {}
        for i, a in enumerate(call.args):
            if a.star:
                return {}  # `*args` / `**kwargs`: which parameter gets what is not read
            key = a.keyword.value if a.keyword is not None else info.params[i] if i < len(info.params) else None
            if key is not None:
                given[key] = a.value
        known = {}
        for key, expr in given.items():
            value = self.ctor.evaluator.infer(expr, scope)
            if isinstance(value, Known) and value.value is not None:
                known[key] = value.value
        out: dict = {}
        values = {k: known[p] for k, p in (info.values or {}).items() if type(known.get(p)) in (int, float, str, bool)}
        if info.values is not None:
            out["values"] = values
        dtype = str(known.get(info.weight_dtype, "")) if info.weight_dtype else ""
        if dtype.startswith("torch."):
            out["params_dtype"] = dtype
        return out

    def _submodule_method_call(self, s: CallSite):
        """self.<submodule>.forward(...): the submodule called explicitly."""
        func = s.func
        if not (type(func) is cst.Attribute and _self_attr(func.value)):
            return None
        sub = self.ctor.attr(s.frame.inst, func.value.attr.value)
        if sub is None or sub.cls is None or func.attr.value not in ("forward",):
            return None
        args, kwargs = self._site_args(s)
        return self._module_call(s.frame, sub, func.value.attr.value, s.call, args, kwargs, s.cond, s.steady, s.stmt, s.hint)

    def _nested_call(self, s: CallSite):
        """self.a.b(...): b a submodule of self.a (run as a module) or a method of it (walked with self.a as self);
        a multimodal model calls its language model's backbone so (self.language_model.model(...))."""
        func, frame = s.func, s.frame
        if not (type(func) is cst.Attribute and type(func.value) is cst.Attribute and _self_attr(func.value)
                and frame.inst.cls is not None):
            return None
        owner = self.ctor.attr(frame.inst, func.value.attr.value)
        if owner is None or owner.cls is None:
            why = frame.inst.why.get(func.value.attr.value)
            if why is None:
                return None
            args, kwargs = self._site_args(s)
            return self._unknown_op(frame, s.stmt, frame.module.code(func).strip(), _flat(args, kwargs), s.hint,
                                    s.cond, s.steady, say("attr_is", attr=f"self.{func.value.attr.value}", why=why))
        return self._held_method_call(s, owner, func.value.attr.value)

    def _held_method_call(self, s: CallSite, owner: Instance, held: str, forward: bool = False):
        """`<held>.m(...)` on a module (or object) the instance holds as `self.<held>`: a submodule m of it run as a
        module, or its method m walked with it as self; `forward`: `.forward(...)` runs the module too. None where
        it has no method m."""
        frame, name = s.frame, cast(cst.Attribute, s.func).attr.value  # (its callers' `<held>.m(...)`)
        path = f"{frame.path}.{held}".lstrip(".")
        sub = self.ctor.attr(owner, name)
        if sub is not None and sub.cls is not None:
            args, kwargs = self._site_args(s)
            return self._module_call(frame, sub, f"{held}.{name}", s.call, args, kwargs, s.cond, s.steady, s.stmt,
                                     s.hint)
        if name == "forward" and forward:
            args, kwargs = self._site_args(s)
            return self._module_call(frame, owner, held, s.call, args, kwargs, s.cond, s.steady, s.stmt, s.hint)
        if name == "forward" or owner.cls is None or self.ctor.method(owner.cls, name) is None:
            return None
        args, kwargs = self._site_args(s)
        self._role_for_submodule(frame, held, owner)
        return self._expand(owner, name, args, kwargs, path, Bindings(dict(), self._attr_facts(owner)), s.cond)

    def _alias_call(self, s: CallSite):
        """`attn_hc(...)` / `attn_hc.mix(...)` where a local holds a module of the instance (`attn_hc =
        self.attn_hyper_connection`, statements.py `_held_module`): as `self.attn_hyper_connection(...)` / its
        method `mix` called on it."""
        func, frame = s.func, s.frame
        if type(func) is cst.Name and func.value in frame.aliases:
            args, kwargs = self._site_args(s)
            return self._module_call(frame, frame.loop_vars[func.value], frame.aliases[func.value], s.call, args,
                                     kwargs, s.cond, s.steady, s.stmt, s.hint)
        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value in frame.aliases:
            local = func.value.value
            return self._held_method_call(s, frame.loop_vars[local], frame.aliases[local], forward=True)
        if (type(func) is cst.Attribute and type(func.value) is cst.Attribute and type(func.value.value) is cst.Name
                and func.value.value.value in frame.loop_vars):
            # `layer.mlp_hyper_connection.combine(...)`: a submodule's method of a module a local holds (the layer
            # of the loop, a module handed in, an alias)
            local = func.value.value.value
            owner = self.ctor.attr(frame.loop_vars[local], func.value.attr.value)
            if owner is None or owner.cls is None:
                return None
            held = frame.aliases.get(local) or frame.module_names.get(local) or "layers"
            return self._held_method_call(s, owner, f"{held}.{func.value.attr.value}", forward=True)
        return None

    def _loop_layer_call(self, s: CallSite):
        """layer(...) inside a layer loop: the decoder layer (or a leaf held in a list)."""
        func, frame = s.func, s.frame
        local = func.value.value if (type(func) is cst.Attribute and type(func.value) is cst.Name
                                     and func.value.value in frame.loop_vars) else None
        held = frame.loop_vars[local].cls if local is not None else None
        if local is not None and held is not None and type(func) is cst.Attribute \
                and self.ctor.method(held, func.attr.value) is not None:
            # layer.forward_input_norm(...): a method of the decoder layer, called by the model's loop
            args, kwargs = self._site_args(s)
            return self._expand(frame.loop_vars[local], func.attr.value, args, kwargs,
                                path=f"{frame.path}.layers" if frame.path else "layers", facts=frame.facts, cond=s.cond)
        if not (type(func) is cst.Name and func.value in frame.loop_vars):
            return None
        args, kwargs = self._site_args(s)
        inst = frame.loop_vars[func.value]
        if self._is_leaf(inst):
            name = frame.module_names.get(func.value, func.value)  # a module handed in keeps its own name
            return self._module_call(frame, inst, name, s.call, args, kwargs, s.cond, s.steady, s.stmt, s.hint)
        path = f"{frame.path}.layers" if frame.path else "layers"
        first = len(self.ops)
        # the layer's own submodules' classes decide its isinstance() tests (`isinstance(self.mlp,
        # DeepseekV2MLP)` in a kind of layer whose index builds the dense MLP)
        facts = Bindings(dict(), self._attr_facts(inst), fields=frame.facts.fields)
        out = self._expand(inst, "forward", args, kwargs, path=path, facts=facts, cond=s.cond)
        if s.steady:
            self._other_layers(inst, first, args, kwargs, path, frame.facts, s.cond)
        return out

    def _other_layers(self, inst: Instance, first: int, args, kwargs, path: str, facts, cond) -> None:
        """A per-layer class choice nothing decides (NemotronH's `ALL_DECODER_LAYER_TYPES[pattern[i]]`): the
        walk's sequence is the default class's; each other class is walked too, as the other branch of that
        choice (statements.py `_if`): its ops are not steady, listed apart, and matched in their own view."""
        for alt in inst.alternatives[:MAX_OTHER_LAYERS]:
            if alt.cls is None or self._is_leaf(alt):
                continue
            self.undecided_tests = number = self.undecided_tests + 1
            for op in self.ops[first:]:
                if op.steady:
                    op.branches.append((number, 0))
            start = len(self.ops)
            self._expand(alt, "forward", args, kwargs, path=path, facts=facts, cond=join(cond, alt.condition))
            for op in self.ops[start:]:  # walked as the default is, to learn what is steady in it
                op.branches.append((number, 1 if op.steady else 2))
                op.steady = False
                op.attrs.setdefault("other_branch", True)

    def _indexed_layer_call(self, s: CallSite):
        """self.layers[i](...), self.attn_per_step[str(step)](...): an element of a module list."""
        func, frame = s.func, s.frame
        if not (type(func) is cst.Subscript and _self_attr(func.value)):
            return None
        lst = self.ctor.attr(frame.inst, func.value.attr.value)
        if lst is None or lst.element is None:
            return None
        args, kwargs = self._site_args(s)
        if self._is_leaf(lst.element):  # a list of leaves
            return self._module_call(frame, lst.element, func.value.attr.value, s.call, args, kwargs, s.cond,
                                     s.steady, s.stmt, s.hint)
        return self._expand(lst.element, "forward", args, kwargs,
                            path=f"{frame.path}.{func.value.attr.value}".lstrip("."), facts=frame.facts,
                            cond=s.cond)

    def _triton_launch(self, s: CallSite):
        """`kernel[grid](...)` with `kernel` a `@triton.jit` function of the trees: one device kernel, launched
        here (vllm-ascend's ops/triton, vLLM's Triton kernels), named by its module and function."""
        func, frame = s.func, s.frame
        if not (type(func) is cst.Subscript and isinstance(func.value, (cst.Name, cst.Attribute))):
            return None
        target = s.callee.launched
        if not (isinstance(target, Definition) and target.kind == "function" and _triton_jit_def(target)):
            return None
        args, kwargs = self._site_args(s)
        out = self._op(frame, "kernel", target.name, None, s.stmt, _flat(args, kwargs), s.hint, s.cond, s.steady,
                       attrs={"triton": f"{target.module.rel}:{target.line}"})
        self.ops[-1].kernels = [Kernel(f"triton:{target.module.name}.{target.name}", frame.module.rel,
                                       frame.module.line_of(s.call), None)]
        return out

    def _dotted(self, s: CallSite) -> str | None:
        func = s.func
        return self.index.dotted(s.frame.module, func) if isinstance(func, (cst.Name, cst.Attribute)) else None

    def _tensor_method_call(self, s: CallSite):
        """x.view(...), qkv.split(...): an op on the tensor; calls on containers and metadata run nothing."""
        func, frame, dotted = s.func, s.frame, self._dotted(s)
        if not type(func) is cst.Attribute or (dotted and dotted.split(".")[0] in ("torch", "torch_npu", "F")) or is_kernel(dotted):
            return None
        base = self._eval(frame, func.value, s.cond, s.steady, s.stmt)
        args, kwargs = self._site_args(s)
        kind = tensor_method_kind(func.attr.value)
        if kind and not base and func.attr.value in _TENSOR_ONLY_METHODS:
            base = [self._value(frame.module.code(func.value).strip().split(".")[-1])]  # a buffer (self.cos_sin_cache)
        if kind and base:
            dtype = self._cast_dtype(frame, func.attr.value, s.call) if kind == "cast" else None
            return self._op(frame, kind, func.attr.value, None, s.stmt, base + _flat(args, kwargs), s.hint, s.cond, s.steady,
                            attrs={"dtype": dtype} if dtype else None)
        if func.attr.value in _CONTAINER_METHODS:
            return []
        return None

    def _cast_dtype(self, frame, method: str, call: cst.Call) -> str | None:
        """The dtype a cast converts to where the code decides it (`x.float()`, `x.to(torch.float32)`,
        `x.to(self.gate_dtype)` with the attribute known), as `torch.<name>`; None otherwise (`x.to(orig_dtype)`,
        a device)."""
        if method in _CAST_METHODS:
            return _CAST_METHODS[method]
        expr = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "dtype"), None)
        if expr is None and call.args and call.args[0].keyword is None:
            expr = call.args[0].value
        value = self.ctor.evaluator.infer(expr, frame.names) if expr is not None else None
        name = str(value.value) if isinstance(value, Known) else ""
        return name if name.startswith("torch.") and name.split(".", 1)[1] in _DTYPES else None

    def _partial_call(self, s: CallSite):
        """f(x) where `f = functools.partial(g, ...)`: g runs on the call's tensors (the bound keywords are
        settings, not tensors)."""
        func, frame = s.func, s.frame
        if not (type(func) is cst.Name and func.value in frame.partials):
            return None
        target = frame.partials[func.value]
        args, kwargs = self._site_args(s)
        return self._inline(frame, None, target.node, target.module, args, kwargs, s.cond, s.steady, free=True)

    def _function_call(self, s: CallSite):
        """A named callee: a device kernel, a function the taxonomy knows, a vLLM function (inlined), a method a
        patch saved, a builtin, a torch function; else an unknown op that says so."""
        func, frame, dotted = s.func, s.frame, self._dotted(s)
        cond, steady, stmt, hint = s.cond, s.steady, s.stmt, s.hint
        args, kwargs = self._site_args(s)
        inputs = _flat(args, kwargs)
        if is_kernel(dotted):
            target = self.backends.custom_ops.get(dotted.rsplit(".", 1)[-1], near=frame.module.name) \
                if dotted.startswith("torch.ops.vllm.") else None
            why = None  # why the custom op's function is not walked (its kernels are read), said on the op
            if target is not None and frame.inst is not None and self.backends.runs_layer(target):
                walked = self._layer_custom_op(s, dotted, target, args, kwargs)
                if isinstance(walked, list):  # its function's body: the layer's methods, walked as ops of the layer
                    return walked
                why = walked
            out = self._op(frame, "kernel", dotted.rsplit(".", 1)[-1], None, stmt, inputs, hint, cond, steady,
                           attrs={"not_walked": why} if why else None)
            self.ops[-1].kernels = [Kernel(dotted, frame.module.rel, frame.module.line_of(s.call), None)]
            if target is not None:  # one that runs a method of the calling layer reads it on the layer (patches too)
                layer = frame.inst.cls if frame.inst is not None and self.backends.runs_layer(target) else None
                impl = self.backends.implementation(layer) if layer is not None else None
                self.ops[-1].kernels += self.backends.kernels_of_function(target, Bindings(), impl)
            return out
        kind = function_kind(dotted)
        if kind and dotted:  # (a kind is only given to a name)
            return self._op(frame, kind, dotted.rsplit(".", 1)[-1], None, stmt, inputs, hint, cond, steady)
        target = s.callee.named
        if isinstance(target, Definition) and _not_walked(target.module.name):
            return []  # a transformers helper the backend's runs do not compute with (hf_fusers.yaml not_walked)
        if isinstance(target, Definition) and target.kind == "function" and _attention_dispatch(target.name):
            # the model runs a layer's attention itself (unified_attention_with_output(q, k, v, out, layer_name)):
            # its token mixer, whatever class holds it; claims come from the kernels, not from a class
            kind = "mla_attention" if "mla" in target.name else "attention"
            out = self._op(frame, kind, target.name, None, stmt, inputs, hint, cond, steady, attrs={"mixer": True})
            self.ops[-1].kernels = [Kernel(target.qualname, frame.module.rel, frame.module.line_of(s.call), None)]
            return out
        hub = hub_layer_kind(target.node) if isinstance(target, Definition) and target.kind == "function" else None
        if hub:  # transformers' apply_rotary_pos_emb: one rope, run as its PyTorch ops
            return self._op(frame, hub, target.name, None, stmt, inputs, hint, cond, steady, attrs={
                "native": say("hub_native", fn=target.name, where=f"{target.module.rel}:{target.line}")})
        by = s.callee.replaced
        if by is not None and by.reason is None and by.function is not None:
            self._replacing.append(by)  # a vllm-ascend patch's function (or method of a class): its ops carry the patch
            try:
                return self._inline(frame, None, by.function.node, by.function.module, args, kwargs, cond, steady,
                                    free=True, call=s.call)
            finally:
                self._replacing.pop()
        if isinstance(target, Definition) and target.kind == "function" and target.module.name.split(".")[0] in self.index.trees:
            return self._inline(frame, None, target.node, target.module, args, kwargs, cond, steady, free=True,
                                call=s.call)
        owned = self._class_function(frame, func) if target is None else None
        if owned is not None:  # ApplyRotaryEmb.forward_static(...): a static method called on its class
            owner, fn = owned
            return self._inline(frame, owner, fn, owner.module, args, kwargs, cond, steady, free=True, call=s.call)
        facade = self._facade_method(frame, func) if target is None else None
        if facade is not None:  # DeviceOperator.scatter_cache(...): the class the device's adaptor is
            owner, fn = facade
            return self._inline(frame, owner, fn, owner.module, args, kwargs, cond, steady, free=True, call=s.call)
        original = self._saved_method(target, s.call)
        if original is not None:  # a patch calling the method it replaced: _orig_forward = Model.forward
            owner, fn = original
            return self._inline(frame, owner, fn, owner.module, args[1:], kwargs, cond, steady, replaced=True)
        if type(func) is cst.Name and func.value in _HOST_BUILTINS:
            return []  # len(x), int(n), x.size(0) ...: a Python scalar, whatever its arguments (walk/host.py)
        if type(func) is cst.Name and func.value in _IGNORED_BUILTINS:
            return inputs
        if dotted and dotted.startswith("torch.") and dotted.rsplit(".", 1)[-1] in _ALLOCATORS:
            return [self._value(hint[0] if hint else dotted.rsplit(".", 1)[-1])]  # a new buffer: no compute
        if dotted and dotted.split(".")[0] in ("torch", "F", "math", "einops") and not inputs:
            return []
        name = dotted or frame.module.code(func).strip()
        if dotted and dotted.startswith("torch."):
            return self._op(frame, "torch", dotted.rsplit(".", 1)[-1], None, stmt, inputs, hint, cond, steady)
        return self._unknown_op(frame, stmt, name, inputs, hint, cond, steady, say("unknown_callee"))

    def _layer_custom_op(self, s: CallSite, dotted: str, target: Definition, args, kwargs) -> list[str] | str | None:
        """`torch.ops.vllm.<name>(..., layer_name)` whose function takes the calling layer from the forward context
        (`self = forward_context.no_compile_layers[layer_name]`) and calls its methods: each call walked as the
        layer's own (its class on this backend, patches too), the op's parameters handed on by name. The body read
        is straight-line but for `if`s the values decide (`if not current_platform.is_cpu():` on a device: its
        branch alone is read): the layer bound once, then calls of `layer.m(...)` or `layer.sub.m(layer, ...)` (a
        submodule's method given the layer). A body of another shape, or one that tests what nothing decides
        (`if use_aiter:`), is left to the kernel reader: the reason (str), said on the op. A call of another
        form, or a submodule the walk does not know, is a replacement not followed (None)."""
        fn, module = cast(cst.FunctionDef, target.node), target.module  # (a custom op's registered function)
        read = self._custom_op_body(fn.body.body, module)
        if isinstance(read, str):
            return read
        layer, calls = read
        if layer is None or not calls:
            return say("custom_op_body_not_read", fn=target.name, where=f"{module.rel}:{module.line_of(fn)}")
        frame, inst = s.frame, s.frame.inst
        bound = dict(bind_arguments(fn, args, kwargs, skip_self=False))

        def handed(expr):
            if type(expr) is cst.Name and expr.value == layer:
                return _InstanceValue(inst)
            if type(expr) is cst.Name and expr.value == "None":
                return _NONE
            return bound.get(expr.value, _NONE) if type(expr) is cst.Name else _NONE

        out: list[str] = []
        for call in calls:
            func = call.func
            pos = [handed(a.value) for a in call.args if a.keyword is None and not a.star]
            kw = {a.keyword.value: handed(a.value) for a in call.args if a.keyword is not None}
            owner, path, method = None, frame.path, None
            if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == layer:
                owner, method = inst, func.attr.value
            elif (type(func) is cst.Attribute and type(func.value) is cst.Attribute
                  and type(func.value.value) is cst.Name and func.value.value.value == layer):
                owner = self.ctor.attr(inst, func.value.attr.value)
                owner = owner if owner is not None and owner.cls is not None else None
                method, path = func.attr.value, f"{frame.path}.{func.value.attr.value}" if frame.path else func.value.attr.value
            if owner is None or method is None or self._forward_of(owner.cls, method, owner) is None:
                key = f"{dotted} ({module.rel}:{module.line_of(call)})"
                self.ctor.not_followed.setdefault(key, {
                    "target": dotted, "file": module.rel, "line": module.line_of(call),
                    "value": " ".join(module.code(call).split()), "form": "custom op",
                    "reason": say("custom_op_not_followed", call=" ".join(module.code(call).split()))})
                return None
            facts = Bindings(dict(), self._attr_facts(owner))
            out = self._expand(owner, method, pos, kw, path, facts, s.cond) or out
        return out

    def _custom_op_body(self, stmts, module, layer=None, calls=None):
        """(the name the layer is bound to, the calls of the body in order) of a custom op's function, through
        the `if`s its module's values decide (vLLM's platform checks, module constants); a str saying why it is
        not read where its shape is another or a test is not decided so (a test of the function's parameters,
        Qwen3-Next's GDN core `if use_aiter:`, is left to the kernel reader)."""
        calls = [] if calls is None else calls
        for stmt in stmts:
            if type(stmt) is cst.If:
                truth = self.ctor.evaluator.truth(stmt.test, module)
                if truth is Truth.UNKNOWN:
                    return say("custom_op_test_not_decided", test=" ".join(module.code(stmt.test).split()),
                               where=f"{module.rel}:{module.line_of(stmt)}")
                branch = stmt.body.body if truth is Truth.TRUE else (
                    [stmt.orelse] if type(stmt.orelse) is cst.If else stmt.orelse.body.body if stmt.orelse is not None else [])
                got = self._custom_op_body(branch, module, layer, calls)
                if isinstance(got, str):
                    return got
                layer = got[0]
                continue
            if type(stmt) is not cst.SimpleStatementLine:
                return say("custom_op_statement_not_read", where=f"{module.rel}:{module.line_of(stmt)}")
            for small in stmt.body:
                if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name:
                    value = small.value
                    if (type(value) is cst.Subscript and type(value.value) is cst.Attribute
                            and value.value.attr.value == "no_compile_layers"):
                        layer = small.targets[0].target.value
                elif isinstance(small, (cst.Expr, cst.Return)) and type(small.value) is cst.Call:
                    calls.append(small.value)  # (`return layer.m(...)`: what the op returns is the layer's)
                elif type(small) is cst.AnnAssign and type(small.value) is cst.Call:
                    continue  # forward_context: ForwardContext = get_forward_context()
                elif not (type(small) is cst.Expr and type(small.value) in (cst.SimpleString, cst.ConcatenatedString)):
                    return say("custom_op_statement_not_read", where=f"{module.rel}:{module.line_of(stmt)}")
        return layer, calls

    def _facade_method(self, frame, func):
        """(class, method) of `Facade.method(...)` where `Facade` is a module-level value the device decides
        (`DeviceOperator = get_device_adaptor()`, a hardware profile's adaptor class), as the kernel reader
        resolves it (kernels/backend_kernels.py); None otherwise."""
        from ..semantics.scope import Scope
        from ..semantics.values import ClassRef

        if type(func) is not cst.Attribute or type(func.value) is not cst.Name or func.value.value == "self":
            return None
        owner = self.backends._evaluator.infer(func.value, Scope(module=frame.module))
        if not (isinstance(owner, Known) and isinstance(owner.value, ClassRef)):
            return None
        found = self.ctor.method(owner.value.definition, func.attr.value)
        return found if found is not None and type(found[1]) is cst.FunctionDef else None

    def _class_function(self, frame, func):
        """(class, method) for `Class.method` with Class a class of the trees and method a static or class method
        of its MRO (not an instance method called on the class, whose first argument is the instance)."""
        if not (type(func) is cst.Attribute and isinstance(func.value, (cst.Name, cst.Attribute))):
            return None
        cls = self.index.resolve_expr(frame.module, func.value)
        if not (isinstance(cls, Definition) and cls.kind == "class"):
            return None
        got = self.ctor.method(cls, func.attr.value)
        if got is None:
            return None
        decorators = {d.decorator.value for d in got[1].decorators if type(d.decorator) is cst.Name}
        return got if decorators & {"staticmethod", "classmethod"} else None

    def _saved_method(self, target, call: cst.Call):
        """(class, method) for `saved(self, ...)` where `saved = SomeClass.method` at module level."""
        if not (isinstance(target, Definition) and target.kind == "assign" and type(target.node) is cst.Attribute):
            return None
        if not (call.args and type(call.args[0].value) is cst.Name and call.args[0].value.value == "self"):
            return None
        cls = self.index.resolve_expr(target.module, target.node.value)
        if not (isinstance(cls, Definition) and cls.kind == "class"):
            return None
        return self.ctor.own_method(cls, target.node.attr.value)  # the original, not the patch that saved it

    def _dispatch_target(self, inst: Instance) -> str:
        """`self._forward_method = self.forward_x` under platform ifs in __init__ (first branch the
        assume table does not rule out), else CustomOp's own per-backend method."""
        for c, fn, _scope in self.ctor.init_scopes(inst):
            for value, vcond, _pos in tables(fn, c.module).self_assignments.get("_forward_method", ()):
                if not (type(value) is cst.Attribute and _self_attr(value)):
                    continue
                terms = vcond.terms if vcond else ()
                if not any(self.ctor.evaluator.term_truth(t) is Truth.FALSE for t in terms if not t.negated):
                    return value.attr.value
        return self.backends.forward_name(inst.cls) if inst.cls is not None else "forward"

    def _inline(self, frame, owner, fn, module, args, kwargs, cond, steady, free=False, replaced=False,
                call: cst.Call | None = None) -> list[str]:
        """`replaced`: the method a patch replaced, called from the patch (not a recursion). `call`: the call
        expression, whose arguments the callee's tests read where the caller wrote them (`score_func=
        self.router_score_func`: the instance's value), a parameter it leaves alone its default
        (`use_fp8_w8a8: bool = False`)."""
        if len(self._stack) > MAX_DEPTH:
            return []
        # a method by its class (two classes of one module both define forward), a function by its module
        key = f"{owner.qualname}.{fn.name.value}" if owner is not None else f"{module.name}.{fn.name.value}"
        # (a patch's saved original runs under the patched method's own name, once)
        if self._stack.count(key) >= (2 if replaced else 1) or (not replaced and any(
                k.endswith(f".{fn.name.value}") and k.startswith(module.name) for k in self._stack[-1:])):
            self._unknown(frame.path, module, fn, say("recursive_call", fn=f"{fn.name.value}()"))
            return []
        sub = _Frame(frame.inst, owner or frame.cls, fn, module, frame.path, frame.facts.for_callee())
        if free:
            sub.scope = f"{module.name.rsplit('.', 1)[-1]}.{fn.name.value}"
        self._bind(sub, args, kwargs)
        if call is not None and not any(a.star == "*" for a in call.args):  # (a spread binds no position statically)
            bind_params(fn, call, frame.names, sub.names, skip_self=True)
        sub.loop_vars = {**frame.loop_vars, **sub.loop_vars}  # the caller's layers, and modules passed in
        sub.module_names = {**frame.module_names, **sub.module_names}
        self._stack.append(key)
        sub.entry = cond
        try:
            self._block(sub, fn.body.body, cond, steady)
        finally:
            self._stack.pop()
        return sub.returns


# a tensor method that casts to one dtype, and the dtypes a cast may name (`torch.<name>`)
_CAST_METHODS = {"float": "torch.float32", "half": "torch.float16", "bfloat16": "torch.bfloat16"}
_DTYPES = frozenset({"float32", "float", "float16", "half", "bfloat16", "float64", "double", "int8", "int32", "int64",
                     "uint8", "bool", "float8_e4m3fn", "float8_e5m2"})
# Tensor methods no Python container or module has: the receiver is a tensor even where the walk holds no
# value for it (a buffer read through a helper: `cos_sin_cache.index_select(0, positions)`)
_TENSOR_ONLY_METHODS = frozenset({"index_select", "gather", "chunk", "masked_fill", "masked_fill_", "bmm", "matmul",
                                  "softmax", "sigmoid", "rsqrt"})

# builtins whose result is a Python scalar (a count, a test, a conversion), never a tensor
_HOST_BUILTINS = frozenset({"len", "int", "float", "bool", "str", "hasattr", "isinstance", "range", "type", "id",
                            "print", "slice"})

# torch functions that only allocate a tensor (its shape from integers or another tensor): a value, no op
_ALLOCATORS = frozenset({"empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like",
                         "empty_strided", "arange", "tensor", "as_tensor"})


def _triton_jit(fn) -> bool:
    """A function under `@triton.jit` / `@triton.autotune(...)` / `@triton.heuristics(...)` (any spelling)."""
    for d in getattr(fn, "decorators", ()):
        expr = d.decorator.func if type(d.decorator) is cst.Call else d.decorator
        if type(expr) is cst.Attribute and expr.attr.value in ("jit", "autotune", "heuristics") \
                and type(expr.value) is cst.Name and expr.value.value in ("triton", "tl"):
            return True
        if type(expr) is cst.Name and expr.value in ("jit", "triton_jit"):
            return True
    return False


def _triton_jit_def(target: Definition) -> bool:
    """_triton_jit of a function of the trees, read from `ast` while it is not parsed (a launch site needs only its
    decorators, and a Triton kernel's body is long)."""
    import ast

    stmt = target.ast_node
    if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _triton_jit(target.node)
    for d in stmt.decorator_list:
        expr = d.func if isinstance(d, ast.Call) else d
        if isinstance(expr, ast.Attribute) and expr.attr in ("jit", "autotune", "heuristics") \
                and isinstance(expr.value, ast.Name) and expr.value.id in ("triton", "tl"):
            return True
        if isinstance(expr, ast.Name) and expr.id in ("jit", "triton_jit"):
            return True
    return False


def _attention_dispatch(name: str) -> bool:
    """A function that runs an attention layer's backend by the layer's name (kernels.yaml `dispatch: true`)."""
    return is_dispatcher(name) and "softmax" in kernel_covers(name)


def _key(t):
    return (t.text, t.negated)


def _under_path(sub, cond):
    """The built alternative the path condition allows: `if self.is_attention: ... return` then
    `self.mixer(h)` runs the module built under `not (self.is_attention)`, not the default pick."""
    if sub is None or not cond or not sub.alternatives:
        return sub
    held = {_key(t) for t in cond.terms}

    def ruled_out(inst):
        return inst.condition is not None and any((t.text, not t.negated) in held for t in inst.condition.terms)

    if not ruled_out(sub):
        return sub
    return next((a for a in sub.alternatives if a.cls is not None and not ruled_out(a)), sub)


def _not_walked(module: str) -> bool:
    from ..catalog import catalog

    return any(module == m or module.startswith(m + ".") for m in catalog().hf_fusers.get("not_walked", ()))
