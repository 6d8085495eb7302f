"""A call of a submodule: a leaf layer (linear, norm, attention, ...) becomes one op with the class that runs
it on the backend and its device kernels; a MoE layer brings the router GEMM and shared experts it runs inside;
a token mixer the model implements itself (an AttentionLayerBase, a Mamba mixer) is an op of its kind followed
by its own code."""

from __future__ import annotations

import re
from dataclasses import replace

import libcst as cst

from ..catalog import catalog, kernel_covers
from ..index.modules import Definition
from ..index.nodes import find_all
from .construction.constructor import Instance
from .frame import WalkerState, _NoneValue, _flat, _kwarg, _kwarg_text
from ..ir.ops import Kernel
from .kernels.runtime_paths import attention_paths, place_on_paths
from ..catalog.schema import LeafClass
from ..catalog.taxonomy import leaf_class_for, leaf_ops
from ..semantics.function_bodies import class_method, tables
from ..semantics.signatures import bind_arguments, none_defaults
from ..semantics.values import Bindings, Known, selecting
from ..ir.conditions import Condition, as_text, contradicts, join
from ..ir.texts import say


_MAX_OTHER_CLASSES = 4  # other classes of one undecided per-layer choice walked


class Layers(WalkerState):
    """Mixin of Walker: submodule calls."""

    def _module_call(self, frame, sub: Instance, name, call, args, kwargs, cond, steady, stmt, hint) -> list[str]:
        # a class choice of the decoder layer that its kind leaves undecided (a test on the layer index the
        # configuration does not decide): the default is the walk's sequence, each other class is walked too,
        # under its condition, as the other branch of that choice (as calls.py `_other_layers`)
        path = f"{frame.path}.{name}" if frame.path else name
        undecided = self.kind_undecided
        others = [a for a in sub.alternatives if a.cls is not None and not (cond and a.condition and
                  contradicts(cond, a.condition))] if undecided and sub.alternatives and any(
                      path == f"{undecided[0]}.{p}" for p in undecided[1]) else []
        first = len(self.ops)
        out = self._one_module_call(frame, sub, name, call, args, kwargs, cond, steady, stmt, hint)
        for alt in others[:_MAX_OTHER_CLASSES]:
            self.undecided_tests = number = self.undecided_tests + 1
            for op in self.ops[first:]:
                if op.steady:
                    op.branches.append((number, 0))
            start = len(self.ops)
            self._one_module_call(frame, replace(alt, alternatives=[]), name, call, args, kwargs, cond, steady, stmt, hint)
            for op in self.ops[start:]:
                op.branches.append((number, 1 if op.steady else 2))
                op.steady = False
                op.attrs.setdefault("other_branch", True)
        return out

    def _one_module_call(self, frame, sub: Instance, name, call, args, kwargs, cond, steady, stmt, hint) -> list[str]:
        if cond and sub.condition and contradicts(cond, sub.condition):
            # the class chosen cannot be built on this path (`if self.use_mha: self.self_attn(...)` with the
            # MLA class built when not use_mha): the one that can is called here; none, no call runs
            other = next((a for a in sub.alternatives if a.cls is not None and not contradicts(cond, a.condition)), None)
            if other is None:
                return []
            sub = replace(other, alternatives=[a for a in [sub, *sub.alternatives] if a is not other])
        assert sub.cls is not None  # the walk calls a module it knows the class of
        path = f"{frame.path}.{name}" if frame.path else name
        impl = self.backends.implementation(sub.cls)
        leaf = leaf_class_for(self.ctor.base_names(sub.cls))
        cond = self._chosen(path, sub, cond)
        if leaf is None:
            self._role_for_submodule(frame, name, sub)
            mixer = self._mixer_kind(sub.cls)
            # the class the backend builds in its place (vLLM's PluggableLayer.__new__ instantiates the class
            # registered out of tree under its name: AscendBailingMoELinearAttention): its methods run, each
            # resolved through its own MRO (an inherited forward calling an overridden _forward)
            replaced = {"ascend_class": impl.name, "ascend_file": impl.module.rel} if impl is not sub.cls else {}
            if mixer is not None:  # the layer's token mixer: an op of its kind, its own ops follow under it
                self._op(frame, mixer, name, sub.cls.name, stmt, _flat(args, kwargs), [f"{name}_mixer"], cond, steady,
                         attrs={"class_file": sub.cls.module.rel, "class_line": sub.cls.line, "mixer": True, **replaced,
                                **({"fused_by": sub.fused_by} if sub.fused_by else {})}, path=path)
            facts = Bindings(dict(), self._attr_facts(sub))
            return self._expand(replace(sub, cls=impl) if replaced else sub, "forward", args, kwargs, path, facts, cond)
        leaf_name, info = leaf
        if self.surely_built[-1] and not sub.condition:  # a leaf layer's own __init__ may refuse the deployment
            self._construction_raises(sub, path)
        kind = info.kind
        inputs = _flat(args, kwargs)
        attrs: dict = {}
        if info.merged:
            attrs["merged"] = info.merged
        for key in ("bias", "quant_config", "eps"):
            text = _kwarg_text(sub.call, key, sub.scope)
            if text is not None:
                attrs[key] = text
        if "bias" in attrs:  # decided by the configuration (qkv_bias=getattr(config, "attention_bias", False))
            value = self.ctor.evaluator.infer(_kwarg(sub.call, "bias"), sub.scope)
            if isinstance(value, Known) and isinstance(value.value, bool):
                attrs["bias"] = str(value.value)
        attrs["class_file"], attrs["class_line"] = sub.cls.module.rel, sub.cls.line
        held = _held(sub, name)
        if held:
            attrs["holds"] = held
        if "CustomOp" in self.ctor.base_names(sub.cls):  # vLLM's default compilation on CUDA runs its native forward
            attrs["custom_op"] = True
        if info.values:  # kept even when empty: the op is one of the layers a pass's guards count
            attrs["values"] = self._leaf_values(sub, info)
        facts = Bindings(dict(), self._attr_facts(sub))
        fwd = self._forward_of(impl, self.backends.forward_name(impl))
        nonnull = [a for a in args if not isinstance(a, _NoneValue)] + [v for v in kwargs.values() if not isinstance(v, _NoneValue)]
        if fwd is not None:
            for param in none_defaults(fwd[1]):
                facts.none[param] = True
            for param, a in bind_arguments(fwd[1], args, kwargs):
                facts.none[param] = isinstance(a, _NoneValue)
        with_residual = info.with_residual
        if with_residual and (facts.none.get("residual") is False or len(nonnull) >= 2):
            kind = with_residual
            attrs["residual"] = True
        if info.role == "router":
            attrs["role"] = "router"
        if info.weight_dtype:  # the weights' dtype where the code decides it (GateLinear's fp32 router)
            attrs.update(self._weight_dtype(impl, sub, info.weight_dtype))
        if kind == "moe":
            self._moe_parts(frame, sub, path, stmt, inputs, cond, steady)
        collectives: list | None = [] if kind == "matmul" else None
        if collectives is not None:  # a linear's GEMM and collective: decided with the values it was built with
            kernels = self.backends.kernels_of_instance(Instance(impl, sub.call, sub.scope, sub.condition), impl,
                                                        self.backends.forward_name(impl), facts, collectives)
        else:
            kernels = self._leaf_kernels(impl, kind, facts, sub, attrs)
        if impl is not sub.cls:
            attrs["ascend_class"] = impl.name
            attrs["ascend_file"] = impl.module.rel
        native = self.backends.runs_native(impl, Instance(impl, sub.call, sub.scope, sub.condition))
        if native:  # a dead fallback: Ascend runs the native PyTorch ops, whatever kernels the class names
            attrs["native"] = (say("native_runs", fn=f"{impl.name}.forward_oot", where=native) if impl is not sub.cls
                               else say("native_runs_no_replacement", fn="CustomOp.forward_oot", where=native))
            if self.backends.forward_name(impl) == "forward_oot":
                kernels = []  # (an own forward handing on to the dispatch keeps what it runs itself: a collective)
        if sub.fused_by:  # built by the Transformers backend's load-time rewrite
            attrs["fused_by"] = sub.fused_by
        if impl is not sub.cls:  # the backend's class casts the input in its own forward first (AscendGateLinear)
            cast = self._own_input_casts(sub, impl, args, kwargs, path, facts, cond, steady)
            inputs = [cast.get(v, v) for v in inputs]
        if collectives is not None and self.quant is not None:  # a quantised checkpoint's linear: its scheme's kernels
            quantised = self._quantised_linear(frame, name, stmt, inputs, cond, steady, path, attrs)
            if quantised is not None:
                inputs, kernels = quantised
        out = self._op(frame, kind, name, sub.cls.name, stmt, inputs, hint, cond, steady, attrs=attrs, path=path)
        self.ops[-1].kernels = kernels
        if kind == "moe" and frame.inst is not None:  # the MoE block: the module that calls the MoE layer (roles.py)
            self._moe_holders[self.ops[-1].id] = frame.inst
        if native and kind not in catalog().typed.composites.kinds:
            out = self._native_ops(sub, impl, name, args, kwargs, path, cond, out)
        if collectives:
            out = self._collective_ops(frame, name, stmt, out, collectives, cond, steady, path)
        elif info.reduce and not self._has_code(impl):  # the layer's code is not in the trees: its flag
            self._all_reduce(sub, info.reduce)
        composite = catalog().typed.composites.of(kind, self.index.backend)
        own = composite.own_method if composite is not None else None
        if own and impl is not sub.cls and class_method(impl, own) is not None:
            # the backend's own layer class does the work in its method (vllm-ascend's AscendFusedMoE before the
            # runner design): its kernels are the layer's, and the parts of the runner design are not its
            more = self.backends.kernels_of_instance(Instance(impl, sub.call, sub.scope, sub.condition), impl, own, facts)
            self.ops[-1].kernels += [k for k in more if k not in self.ops[-1].kernels]
            self.ops[-1].attrs["runs"] = f"{impl.name}.{own}"
            only = composite.own_method_parts if composite is not None else ()
            if only:  # what it runs through the forward context's comm method: a part, as in the runner design
                self._composite_parts(frame, sub, kind, path, inputs, cond, steady, only=only)
        elif kind in catalog().typed.composites.kinds:  # MoE, MLA: followed by their parts (composites.yaml)
            self._composite_parts(frame, sub, kind, path, inputs, cond, steady)
        self._flush_shared()  # (where no join part took them)
        self._role_for_submodule(frame, name, sub, kind)
        if with_residual and kind != with_residual and len(out) == 1:
            self.tensor_values.add(out[0])  # a norm called without its residual returns the tensor alone
        return out

    def _quantised_linear(self, frame, name, stmt, inputs, cond, steady, path, attrs):
        """A linear layer of a quantised checkpoint (semantics/quantization.py): the scheme vllm-ascend builds
        for its quant type, read from the trees. Its activation quantisation (`npu_dynamic_quant`,
        `npu_quantize`) is an op of its own before the GEMM, where the patterns see it (norm + quant, SwiGLU +
        quant); the GEMM op keeps the scheme's quantised GEMM. (inputs of the GEMM, its kernels), or None where
        the layer is unquantised (FLOAT, not in the description) or its type is not known (said on the op)."""
        quant = self.quant
        if quant is None:
            return None
        spec = quant.spec.get("linear") or {}
        q = quant.for_layer(path, spec.get("kind", "linear"))
        if q.mixed or (q.quant_type is not None and q.scheme is None):
            attrs["quant_type"] = None
            attrs["quant_unknown"] = q.why
            return None
        if q.quant_type is None:
            if q.keys:
                attrs["quant_type"] = "FLOAT"
            return None
        got = self.backends.kernels_of(q.scheme, Bindings(), method=spec.get("method", "apply"))
        quants = [k for k in got if set(kernel_covers(k.name)) == {"quant"}]
        rest = [k for k in got if k not in quants]
        attrs.update(quant_type=q.quant_type, quant_scheme=q.scheme.name, quant_scheme_file=q.scheme.module.rel,
                     quant_keys=list(q.keys))
        if not quants:
            return inputs, rest
        first = quants[0]
        out = self._op(frame, "quant", f"{name}.quant", None, stmt, inputs[:1], [f"{name}_input_q"], cond, steady,
                       attrs={"inside": name, "quantises": name, "quant_type": q.quant_type,
                              "quant_scheme": q.scheme.name}, path=path)
        self.ops[-1].file, self.ops[-1].line = first.file, first.line
        self.ops[-1].kernels = quants
        return out + list(inputs[1:]), rest

    def _mixer_kind(self, cls: Definition) -> str | None:
        """attention / ssm / linear_attention for a token mixer (leaf_ops.yaml `mixers`), None otherwise."""
        spec = leaf_ops().mixers
        if spec is None or spec.base not in self.ctor.base_names(cls):
            return None
        got = self.ctor.method(cls, spec.state_method)
        if got is None:
            return "attention"
        returns = [r.value for r in find_all(got[1], cst.Return) if r.value is not None]
        said = " ".join(got.module.code(r) for r in returns)
        return next((k.kind for k in spec.state_kinds if re.search(k.match, said)), "ssm")

    def _collective_ops(self, frame, name, stmt, inputs, collectives, cond, steady, path) -> list[str]:
        """The collectives a linear layer runs after its GEMM (RowParallelLinear's all-reduce), each an op at
        the line of the layer's code that calls it, under the tests on the way there (`tp_size > 1`)."""
        out = list(inputs)
        for kind, file, line, ccond, kernels in collectives:
            op_cond = " and ".join(c for c in (as_text(cond), ccond) if c) or None
            # the GEMM's output is reduced; what else the layer returns (its bias) passes by
            hint = [out[0].rsplit("#", 1)[0]] if out else [f"{name}_{kind}"]  # the model's name for the value
            out = self._op(frame, kind, f"{name}.{kind}", None, stmt, out[:1], hint, op_cond, steady,
                           attrs={"inside": name, "role": "collective"}, path=path) + out[1:]
            self.ops[-1].file, self.ops[-1].line = file, line
            self.ops[-1].kernels = kernels
        return out

    def _has_code(self, impl: Definition) -> bool:
        return self.ctor.method(impl, self.backends.forward_name(impl)) is not None

    def _chosen(self, path: str, sub: Instance, cond):
        """Record what else could be built at `path` (undecided, or what another configuration value builds);
        the condition of the op, with the one `sub` is built under."""
        if sub.alternatives:
            self.alternatives.append({
                "path": path, "chosen": sub.name, "condition": as_text(selecting(sub.condition)[0]),
                "others": sorted({(a.name, as_text(selecting(a.condition)[0]) or "") for a in sub.alternatives}), "decided": False,
            })
        if sub.decided and not any(a["path"] == path for a in self.alternatives):
            self.alternatives.append(self._decided_alternatives(path, sub))
        chosen = selecting(sub.condition)[0] if sub.condition else None
        return join(cond, chosen.with_prefix("built when ")) if chosen is not None else cond

    def _all_reduce(self, sub: Instance, flag: str) -> None:
        """A row-parallel linear's own all-reduce: `self.reduce_results` as its __init__ sets it, decided with
        the evaluator; False (the caller reduces, as for a MoE layer's shared expert) means none."""
        value = self.ctor.self_value(sub, flag, self.ctor.evaluator)
        if isinstance(value, Known):
            if value.value:
                self.ops[-1].attrs["all_reduce"] = "when tp_size > 1"
            return
        reduce = _kwarg_text(sub.call, flag, sub.scope)
        self.ops[-1].attrs["all_reduce"] = "when tp_size > 1" if reduce in (None, "True") else f"when {reduce} and tp_size > 1"

    def _decided_alternatives(self, path: str, sub: Instance) -> dict:
        """The configuration chose `sub`: what another value would build, and what runs it on this backend."""
        choices = []
        for cls, cond, file, line, selects in sub.decided:
            if not isinstance(cls, Definition):
                continue
            impl = self.backends.implementation(cls)
            choices.append({"class": cls.name, "runs": impl.name, "condition": cond, "file": file, "line": line,
                            "selected_by": [{"key": k, "value": v} for k, v in selects]})
        choices.sort(key=lambda c: (c["file"], c["line"], c["class"], c["condition"]))
        return {"path": path, "chosen": sub.name, "condition": None, "decided": True,
                "others": sorted({(c["class"], c["condition"]) for c in choices}), "choices": choices}

    def _leaf_values(self, sub: Instance, info: LeafClass) -> dict:
        """The attributes the layer's __init__ sets (head_size, eps) whose values the configuration decides."""
        out = {}
        for key, attr in (info.values or {}).items():
            value = self.ctor.self_value(sub, attr, self.ctor.evaluator)
            if isinstance(value, Known) and type(value.value) in (int, float, str, bool):
                out[key] = value.value
            else:  # not known: the expression it is built from, compared as code (`self.total_num_heads * ...`)
                code = self._value_code(sub, attr)
                if code is not None:
                    out[f"{key}_code"] = code
        return out

    def _value_code(self, sub: Instance, attr: str) -> str | None:
        """The code of the argument `self.<attr>` of the layer is set from, followed up the parameters that
        handed it on (RotaryEmbedding's head_size is get_rope's head_size, the attention's `self.head_dim`);
        None where __init__ does not assign it one parameter."""
        local = self.ctor.assigned_local(sub, attr)
        if local is None:
            return None
        for c, fn, scope in self.ctor.init_scopes(sub):
            if local in scope.params and attr in tables(fn, c.module).self_assignments:
                got = self.ctor.evaluator.origin(cst.Name(local), scope)
                module = getattr(got[1], "module", None) if got is not None else None
                if got is not None and module is not None:
                    return " ".join(module.code(got[0]).split())
        return None

    def _moe_parts(self, frame, sub: Instance, path, stmt, inputs, cond, steady) -> None:
        """The router GEMM and shared experts a MoE layer runs inside (gate=..., shared_experts=...)."""
        for key, role in (("gate", "router"), ("shared_experts", "shared")):
            expr = _kwarg(sub.call, key)
            if expr is None or sub.scope is None:
                continue
            built = self.ctor.evaluate(expr, sub.scope)
            # `shared_experts=(None if self.replicate_shared_expert else self.shared_expert)`: the module, under
            # the condition that passes it
            inst = next((b for b in built if b.cls is not None), None)
            if inst is None or inst.cls is None:
                continue
            icond = join(cond, inst.condition.with_prefix("built when ")) if inst.condition else cond
            if role == "router":
                impl = self.backends.implementation(inst.cls)
                facts = Bindings(dict(), {})
                if not self._router_where_run(frame, sub, key, inst, path, inputs, icond, steady):
                    self._op(frame, "matmul", key, inst.cls.name, stmt, inputs, ["router_logits"], icond, steady,
                             attrs={"role": "router", "inside": sub.name, **self._weight_dtype(impl, inst)},
                             path=f"{path}.{key}")
                    self.ops[-1].kernels = self._leaf_kernels(impl, "matmul", facts)
            elif self._shared_after_routed():  # walked where the runner runs them (composites.py, before the join)
                self._pending_shared = (inst, key, path, inputs, icond, sub)
            else:
                self._shared_experts(inst, key, path, inputs, icond, sub)

    def _shared_after_routed(self) -> bool:
        """The backend's runner runs the shared experts after the routed ones and joins them in a step of its
        own (composites.yaml: a `layer` part, AscendMoERunner's `torch._foreach_add`)."""
        spec = catalog().typed.composites.of("moe", self.index.backend)
        return spec is not None and any(p.layer for p in spec.parts)

    def _shared_experts(self, inst, key, path, inputs, cond, sub) -> None:
        """The shared experts' MLP, walked as ops of the MoE layer (role shared_expert): through the backend's
        class that runs them where composites.yaml names one (AscendSharedExperts: part1 -> gate_up_proj,
        apply_activation -> act_fn, part2 -> down_proj and the expert gate, each at its call there), else the
        model's MLP forward."""
        spec = catalog().typed.composites.of("moe", self.index.backend)
        runner = spec.shared if spec is not None else None
        mod, _, name = runner.cls.rpartition(".") if runner is not None else ("", "", "")
        cls = self.index.lookup(mod, name) if runner is not None else None
        if runner is not None and isinstance(cls, Definition) and cls.kind == "class" \
                and all(self.ctor.method(cls, m) is not None for m in runner.methods):
            holder = Instance(cls)
            holder.built[runner.holds] = inst  # `self.layer`: the model's shared MLP
            value, start = inputs, len(self.ops)
            for method in runner.methods:
                args = [inputs, value] if method in runner.with_input else [value]
                value = self._expand(holder, method, args, {}, f"{path}.{key}", Bindings(), cond) or value
            mine = f"{path}.{key}.{runner.holds}."
            for op in self.ops[start:]:  # the shared MLP's ops, named as the model's MLP (its scope, its paths)
                op.scope = f"{inst.name}.forward"
                if op.path.startswith(mine):
                    op.path = f"{path}.{key}." + op.path[len(mine):]
                if op.name.startswith(f"{runner.holds}."):  # self.layer.down_proj(...): the MLP's down_proj
                    op.name = op.name[len(runner.holds) + 1:]
        else:
            self._expand(inst, "forward", [inputs], {}, f"{path}.{key}", Bindings(), cond)
        for op in self.ops:
            if op.path.startswith(f"{path}.{key}"):
                op.attrs.setdefault("inside", sub.cls.name)
                op.attrs.setdefault("role", "shared_expert")
        if self.quant is not None and isinstance(cls, Definition):
            self._quantised_shared(cls, path, [op for op in self.ops if op.path.startswith(f"{path}.{key}.")])

    def _quantised_shared(self, cls: Definition, path: str, ops: list) -> None:
        """A quantised checkpoint's shared experts (walk.yaml `runtime.quantization.<method>.shared`): the path
        the runner's selection method (`_select_mlp_path`) takes with the routed experts' quant type and the
        shared linears' quantisation; where it is the fused one, the activation and the down projection's
        input quantisation are the fused method's kernel (`npu_dequant_swiglu_quant` in `_run_a8_int_mlp`)."""
        from ..semantics.runtime_choice import decided_return

        quant = self.quant
        if quant is None:
            return
        spec = quant.spec.get("shared") or {}
        select, fused = spec.get("select"), spec.get("fused") or {}
        got = self.ctor.method(cls, select) if select else None
        moe = quant.for_layer(path, (quant.spec.get("moe") or {}).get("kind", "moe"))
        if got is None or moe.scheme is None:
            return
        quant_type = self.ctor.evaluator._class_attribute(moe.scheme, "quant_type", 0)
        linears = {op.name: op for op in ops if op.kind == "matmul"}
        quantised = {name: {"weight_scale": True} for name, op in linears.items() if op.attrs.get("quant_type")}
        if not isinstance(quant_type, Known):
            return
        fields = {"quant_type": quant_type, "layer": Known(quantised),
                  **{k: Known(v) for k, v in (spec.get("fields") or {}).items()}}
        member = decided_return(self.ctor.evaluator, got[0], got[1], fields)
        if member is None or not str(member).endswith("." + str(fused.get("member"))):
            return
        kernels = self.backends.kernels_of(cls, Bindings(), method=fused.get("method"))
        act = [k for k in kernels if {"silu", "quant"} <= kernel_covers(k.name)]
        if not act:
            return
        gemms = [k for k in kernels if "matmul" in kernel_covers(k.name)]
        before = []
        for k in (k for m in fused.get("before") or () for k in self.backends.kernels_of(cls, Bindings(), method=m)):
            test = f"path is {member}"  # the path the selection returned: its kernels, the test decided
            if k.condition is None or test in k.condition and f"not ({test}" not in k.condition:
                before.append(replace(k, condition=None) if k.condition == test else k)
        down = str(fused.get("down", "down_proj"))
        where = {"class": cls.name, "file": cls.module.rel}
        for op in list(ops):
            runs = None
            if op.kind in ("silu_mul", "gelu_mul"):  # dequant + SwiGLU + quant of the down projection's input
                runs = act
            elif op.kind == "quant" and str(op.attrs.get("quantises", "")).split(".")[-1] == down:  # done by that kernel
                self._drop_op(op)
                continue
            elif op.kind == "matmul" and op.name.split(".")[-1] == down:
                runs = gemms
            elif op.kind in ("quant", "matmul"):  # the gate/up projection, prepared and run by the runner class
                runs = [k for k in before if ("quant" if op.kind == "quant" else "matmul") in kernel_covers(k.name)]
            if runs:
                op.kernels = list(runs)
                op.file, op.line = runs[0].file, runs[0].line
                op.attrs["shared_path"] = str(member)
                op.attrs["ascend_class"], op.attrs["ascend_file"] = where["class"], where["file"]

    def _drop_op(self, op) -> None:
        """Take an op out of the walk, its readers reading its input instead (a step another kernel does)."""
        i = self.ops.index(op)
        source = op.inputs[0] if op.inputs else None
        for later in self.ops[i + 1:]:
            later.inputs = [source if v in op.outputs and source is not None else v for v in later.inputs]
        del self.ops[i]

    def _flush_shared(self) -> None:
        """The shared experts held back for the runner's order, walked now (once)."""
        pending, self._pending_shared = getattr(self, "_pending_shared", None), None
        if pending is not None:
            self._shared_experts(*pending)

    def _router_where_run(self, frame, sub: Instance, key, gate: Instance, path, inputs, cond, steady) -> bool:
        """The router GEMM of a MoE layer given its gate, as an op in the method of the layer's backend class
        that runs it (composites.yaml `router_gemm`: AscendMoERunner._apply_router_linear, FP32 `F.linear` on
        a pre-cast weight or the gate's own forward, each under its test; MoERunner._forward_impl on CUDA), with
        what that method runs with it; False when the backend names no such method (the op stays at the
        model's call)."""
        assert sub.cls is not None and gate.cls is not None
        moe = self.backends.implementation(sub.cls)
        moe_parts = catalog().typed.composites.of("moe", self.index.backend)
        for method in moe_parts.router_gemm if moe_parts is not None else ():
            found = self.ctor.method(moe, method)
            if found is None:
                continue
            # only what the method itself runs with the gate, not the rest of it (vLLM's runner applies the
            # gate inline in its _forward_impl)
            kernels = self.backends.kernels_of_instance(Instance(moe, sub.call, sub.scope, sub.condition), moe,
                                                        method, Bindings(), own_calls=("matmul",), own_only=True)
            owner, fn = found
            impl = self.backends.implementation(gate.cls)
            attrs = {"role": "router", "inside": sub.cls.name, "runs": f"{owner.name}.{method}"}
            if impl is not gate.cls:
                attrs["ascend_class"], attrs["ascend_file"] = impl.name, impl.module.rel
            attrs.update(self._weight_dtype(impl, gate))
            op = self._op_in_method(frame, "matmul", key, gate.cls.name, found.module, fn, inputs, ["router_logits"],
                                    cond, steady, attrs, f"{path}.{key}")
            op.kernels = kernels
            at = next((k for k in kernels if k.condition is None), kernels[0] if kernels else None)
            if at is not None:  # at the call of the GEMM (the gate's forward or F.linear), not the method's def
                op.file, op.line = at.file, at.line
            return True
        return False

    def _weight_dtype(self, impl: Definition, gate: Instance, attr: str = "params_dtype") -> dict:
        """{"params_dtype": ...} when the code decides the layer's weights' dtype (`self.<attr>`): the backend's
        class whatever the model's (AscendGateLinear builds an FP32 router weight: `params_dtype=torch.float32`),
        or the model's argument; else nothing."""
        value = self.ctor.self_value(Instance(impl, gate.call, gate.scope, gate.condition), attr, self.ctor.evaluator)
        name = str(value.value) if isinstance(value, Known) and value.value is not None else ""
        return {"params_dtype": name} if name.startswith("torch.") else {}

    def _leaf_kernels(self, impl: Definition, kind: str, facts: Bindings, sub: Instance | None = None,
                      attrs: dict | None = None) -> list[Kernel]:
        """The device kernels of a leaf layer; an attention layer's are its backend implementation's too: the
        class the platform's selector picks for it (`get_impl_cls()` of `self.attn_backend`, attention_choice.py;
        where the selector is not run, leaf_ops.yaml `attention_impls`, and `attrs` says so), decided with the
        values the layer builds it with (`self.impl = impl_cls(..., sinks=...)`) when the walk knows them."""
        if sub is not None and sub.call is not None:  # decided with the values the layer is built with
            kernels = self.backends.kernels_of_instance(Instance(impl, sub.call, sub.scope, sub.condition), impl,
                                                        self.backends.forward_name(impl), facts)
        else:
            kernels = self.backends.kernels_of(impl, facts)
        if kind in ("attention", "mla_attention"):
            chosen = self._attention_backend(sub, impl, kind) if sub is not None and sub.call is not None else None
            target = chosen.impl if chosen is not None else None
            if chosen is not None and attrs is not None:
                attrs["attention_backend"] = chosen.to_attrs()
            if target is None:  # the selector is not run, or names no implementation of the trees: the table's
                qual = leaf_ops().attention_impls.get(self.index.backend or "", {}).get(kind)
                mod, _, cls_name = (qual or "").rpartition(".")
                target = self.index.lookup(mod, cls_name) if qual else None
                open_ = self._attention_open(sub, impl, kind) if chosen is None and sub is not None \
                    and sub.call is not None else None
                if attrs is not None and isinstance(target, Definition) and open_ is not None:
                    # the layer holds a backend the walk cannot tell (the model's own choice, not decided): said
                    attrs.setdefault("attention_backend", {
                        "impl": target.name, "selector": None, "decided": False, "open": True,
                        "why": say("attention_value_open", attr=open_[0], why=open_[1], impl=target.name)})
                elif attrs is not None and isinstance(target, Definition):
                    attrs.setdefault("attention_backend", {"impl": target.name, "selector": None,
                                                           "why": say("attention_impl_table", impl=target.name)})
            if isinstance(target, Definition) and target.kind == "class":
                built = (self.ctor.built_as(self._impl_holder(sub, impl, kind), "impl", target)
                         if sub is not None and sub.call is not None else None)
                kernels = kernels + (self.backends.kernels_of_instance(built, target, "forward") if built is not None
                                     else self.backends.kernels_of(target, Bindings(), method="forward"))
                kernels = kernels + self._impl_hops(kernels, target, built)
            # which of them run on decode and on prefill: the claim cites the path that runs, not the first found
            kernels = place_on_paths(kernels, attention_paths(self.index, self.ctor.evaluator), self.ctor.evaluator)
        return kernels

    def _impl_hops(self, kernels: list[Kernel], target: Definition, built) -> list[Kernel]:
        """The implementation's methods other than forward that the layer's custom ops run: a
        `torch.ops.vllm.<name>` the layer calls whose registered function calls `<layer>.impl.<method>(...)` on
        the layer it takes from the forward context (vLLM's unified_kv_cache_update ->
        `attn_layer.impl.do_kv_cache_update(...)`): that method's kernels, under the custom op's condition."""
        out: list[Kernel] = []
        for k in kernels:
            if not k.name.startswith("torch.ops.vllm."):
                continue
            fn = self.backends.custom_ops.get(k.name.rsplit(".", 1)[-1])
            if fn is None or type(fn.node) is not cst.FunctionDef:
                continue
            for method in _impl_methods(fn.node):
                if method == "forward" or self.ctor.method(target, method) is None:
                    continue
                got = (self.backends.kernels_of_instance(built, target, method) if built is not None
                       else self.backends.kernels_of(target, Bindings(), method=method))
                base = k.cond if isinstance(k.cond, Condition) else None
                for g in got:  # (a kernel reached on several paths keeps each path's condition: alts)
                    own = g.cond if isinstance(g.cond, Condition) else None
                    text = " and ".join(t for t in (as_text(base), g.condition) if t) or None
                    out.append(replace(g, condition=text, cond=join(base, own), paths=None,
                                       alts=tuple(join(base, a) for a in g.alts)))
        return out

    def _impl_holder(self, sub: Instance, impl: Definition, kind: str) -> Instance:
        """The instance whose __init__ builds the attention implementation (`self.impl = impl_cls(...)`): the
        layer itself, or for an MLA wrapper the attention layer it holds (composites.yaml
        `mla_attention.impl.holder`: vllm-ascend's AscendMultiHeadLatentAttention holds `self.mla_attn`), so
        that the implementation's `self.x` are read with the arguments it is built with."""
        own = Instance(impl, sub.call, sub.scope, sub.condition)
        if kind != "mla_attention":
            return own
        comp = catalog().typed.composites.of(kind, self.index.backend)
        holder = self._attention_layer(sub, comp.impl.holder, comp.impl.assigned) \
            if comp is not None and comp.impl is not None else None
        return holder if holder is not None and holder.cls is not None else own

    def _attention_open(self, sub: Instance, impl: Definition, kind: str) -> tuple[str, str] | None:
        """(`self.attn_backend`, why) where the layer's construction assigns the backend it holds but the walk
        cannot tell which (a model passing `attn_backend=` under a test not decided): the report says so, never
        the table's class as if chosen; None where the layer holds no such attribute (the table is the answer)."""
        from ..semantics.values import Unknown

        spec = catalog().typed.walk.runtime.attention_backend
        holder = self._backend_holder(sub, impl, kind)
        if spec is None or not spec.attr or holder is None or holder.cls is None:
            return None
        if not any(spec.attr in tables(fn, c.module).self_assignments for c, fn, _s in self.ctor.init_scopes(holder)):
            return None
        value = self.ctor.self_value(holder, spec.attr, self.ctor.evaluator)
        options = [value] if isinstance(value, (Known, Unknown)) else list(getattr(value, "options", ()))
        reasons = [o.reason for o in options if isinstance(o, Unknown)]
        return (f"self.{spec.attr}", "; ".join(dict.fromkeys(r for r in reasons if r)) or "-") if reasons else None

    def _backend_holder(self, sub: Instance, impl: Definition, kind: str) -> Instance | None:
        """The instance that holds `self.attn_backend`: the layer itself, or for an MLA wrapper the attention
        layer it holds (composites.yaml `mla_attention.impl.holder`)."""
        if kind != "mla_attention":
            return Instance(impl, sub.call, sub.scope, sub.condition)
        comp = catalog().typed.composites.of(kind, self.index.backend)
        spec = catalog().typed.walk.runtime.attention_backend
        return self._attention_layer(sub, comp.impl.holder, spec.attr if spec is not None else None) \
            if comp is not None and comp.impl is not None else None

    def _attention_layer(self, sub: Instance, holder: str, attr: str | None) -> Instance | None:
        """The attention layer of an MLA leaf whose construction assigns `self.<attr>` (the backend it holds,
        `attn_backend`, or the implementation it builds, `impl`): the attribute composites.yaml names
        (`mla_attention.impl.holder`: vllm-ascend's AscendMultiHeadLatentAttention holds `self.mla_attn`); else
        the leaf itself where its own construction assigns it (a model that builds vLLM's MLAAttention
        directly); else the one module the leaf's __init__ builds whose construction assigns it (an MLA
        wrapper holding an attention layer of another name); None where none or several do."""
        named = self._attr_path(sub, holder)
        if named is not None or not attr or sub.cls is None:
            return named
        memo = self.__dict__.setdefault("_attention_layers", {})
        key = (id(sub.call), id(sub.scope), sub.cls.qualname, attr)
        if key not in memo:
            memo[key] = self._layer_assigning(sub, attr)
        return memo[key]

    def _layer_assigning(self, sub: Instance, attr: str) -> Instance | None:
        own = self._running(sub)
        if self._assigns(own, attr):
            return own
        found: list[Instance] = []
        names = dict.fromkeys(n for c, fn, _s in self.ctor.init_scopes(own)
                              for n, got in tables(fn, c.module).self_assignments.items()
                              if any(type(e) is cst.Call for e, _c, _p in got))
        for name in names:
            held = self._attr_path(sub, name)
            if held is not None and held.cls is not None and self._assigns(self._running(held), attr):
                found.append(held)
        return found[0] if len(found) == 1 else None

    def _running(self, inst: Instance) -> Instance:
        """The instance as the backend runs it (its class the backend's replacement, if any)."""
        if inst.cls is None:
            return inst
        impl = self.backends.implementation(inst.cls)
        return Instance(impl, inst.call, inst.scope, inst.condition) if impl is not inst.cls else inst

    def _assigns(self, inst: Instance, attr: str) -> bool:
        """The instance's __init__ chain assigns `self.<attr>`."""
        return any(attr in tables(fn, c.module).self_assignments for c, fn, _s in self.ctor.init_scopes(inst))

    def _attention_backend(self, sub: Instance, impl: Definition, kind: str):
        """The backend the runtime selects for an attention layer and the implementation it names
        (attention_choice.Chosen), read on the instance that holds `self.attn_backend`: the layer itself, or
        for an MLA wrapper the attention layer it holds (composites.yaml `mla_attention.impl.holder`)."""
        from ..semantics.attention_choice import chosen_of

        spec = catalog().typed.walk.runtime.attention_backend
        if spec is None or not spec.attr:
            return None
        holder = self._backend_holder(sub, impl, kind)
        if holder is None or holder.cls is None:
            return None
        memo = self.__dict__.setdefault("_attention_chosen", {})
        key = (id(holder.call), id(holder.scope), holder.cls.qualname)
        if key not in memo:
            memo[key] = chosen_of(self.ctor.evaluator, self.ctor.self_value(holder, spec.attr, self.ctor.evaluator))
        return memo[key]

    def _attr_facts(self, inst: Instance) -> dict[str, list[str]]:
        """Classes of the instance's own submodules, for isinstance() checks in its forward."""
        out = {}
        if inst.cls is None:
            return out
        replaced = self.backends.implementation(inst.cls)
        classes = self.ctor.mro(inst.cls) + (self.ctor.mro(replaced) if replaced is not inst.cls else [])
        texts = [c._chunk.text if c._chunk is not None else (c.module.source or b"") for c in classes]
        for c in classes:  # a patched method's code is the patch's
            for name in sorted(self.patch_modules.get(c.qualname, ())):
                module = self.index.get(name)
                texts.append(module.source or b"" if module is not None else b"")
        tested = _isinstance_tested(texts)
        if not tested:
            return out
        for c, fn, _scope in self.ctor.init_scopes(inst)[:1]:
            for name in tables(fn, c.module).self_attr_names:
                if name not in tested:  # building every submodule only for its class costs a walk of each
                    continue
                sub = self.ctor.attr(inst, name)
                if sub is not None and sub.cls is not None:
                    impl = self.backends.implementation(sub.cls)
                    out[f"self.{name}"] = [c2.name for c2 in self.ctor.mro(impl)]
        return out


def _impl_methods(fn: cst.FunctionDef) -> list[str]:
    """Names m of the calls `<x>.impl.m(...)` in a custom op's function, in order."""
    out: list[str] = []
    for c in find_all(fn, cst.Call):
        f = c.func
        if (type(f) is cst.Attribute and type(f.value) is cst.Attribute and f.value.attr.value == "impl"
                and f.attr.value not in out):
            out.append(f.attr.value)
    return out


_TESTED = re.compile(rb"isinstance\(\s*self\.(\w+)")


def _isinstance_tested(texts: list[bytes]) -> set[str]:
    """Names x of `isinstance(self.x, ...)` in these texts (the code of the classes whose methods the walk of
    an instance may run, and of their patches): only those submodules' classes are asked for."""
    out: set[str] = set()
    for text in texts:
        if b"isinstance" in text:
            out.update(m.decode() for m in _TESTED.findall(text))
    return out


def _held(sub: Instance, name: str) -> list[dict]:
    """The module `self.<name>` holds where its builder built it under another name (vllm-ascend's MLA impl:
    `self.q_proj = kwargs["q_proj"] if self.q_lora_rank is None else kwargs["q_b_proj"]`): each module with the
    condition it is held under (none where the configuration decided it); empty where it is the name's own."""
    if sub.holds:
        return [{"name": n or name, "condition": as_text(selecting(c)[0]) if c else None} for n, c in sub.holds]
    if sub.attr_name and sub.attr_name != name:
        return [{"name": sub.attr_name, "condition": None}]
    return []
