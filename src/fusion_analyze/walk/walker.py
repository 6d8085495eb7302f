"""Walk forward() from the model class: statements in order, submodules expanded, leaves become ops.

The Walker is put together from one mixin per job: statements.py (the statement walk), calls.py (call
dispatch, a handler per idiom), layers.py (submodule calls: leaf ops and their kernels, MoE parts) and
roles.py (code locations). This module holds the walk's state, expansion of a method and op creation."""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from typing import NamedTuple

from ..catalog import catalog
from ..index.nodes import find_all

from ..index.modules import Definition, ModuleIndex
from ..locate.ascend import Patch, Replacements
from .blockers import Blockers
from ..locate.op_libraries import op_libraries
from .calls import Calls
from .composites import Composites
from .hf.fusers import LoadTime
from .construction.constructor import Constructor, Instance
from ..semantics.environment import Environment
from .frame import MAX_DEPTH, MAX_OPS, _Frame, _InstanceValue, _Literal, _MaybeNone, _NoneValue
from ..ir.conditions import Condition
from ..ir.ops import Op, OpAttrs, RoleLocation, WalkResult
from ..ir.texts import say
from .kernels.backend_kernels import Backends
from .layers import Layers
from .host import HostValues
from .input_casts import InputCasts
from .native import NativeFallbacks
from .roles import Roles
from .statements import Statements
from ..semantics.scope import Scope
from ..semantics.signatures import bind_arguments, none_defaults, signature
from ..semantics.values import Bindings


class Walker(Statements, Calls, Layers, InputCasts, Composites, NativeFallbacks, Roles, HostValues, Blockers):
    def __init__(self, index: ModuleIndex, patches: "list[Patch] | Replacements", env: Environment | None = None):
        self.index = index
        # env: the analysis's environment (semantics/environment.py): the configuration facts that decide the
        # walk, the device's SoC family and profile; without one, the backend's with nothing else known
        self.env = env if env is not None else Environment(index.backend, index)
        self.ctor = Constructor(index, self.env, load_time=LoadTime)
        self.backends = Backends(index, self.ctor, device=self.env.soc)
        self.ctor.implementation = self.backends.implementation  # vllm-ascend's class of a vLLM layer
        # the replacement index of the Ascend tree (locate/ascend.py), consulted at every method and function
        # lookup through the constructor (Constructor.method / replaced)
        self.patches = (patches if isinstance(patches, Replacements) else Replacements(list(patches))) \
            if index.backend == "ascend" else Replacements([])
        self.ctor.patches = self.patches
        self.patch_modules = self.patches.modules_of_class  # class qualname -> the modules of its methods' patches
        self._compile_seen: dict[str, Definition] = {}  # the classes expanded, for their compile decorators
        self._not_followed_seen = 0  # not-followed replacements already carried by an op
        self.blockers: list[dict] = []  # raises the walked deployment surely reaches (walk/blockers.py)
        self.uncertain_depth = 0  # try bodies and loops that may not run, being walked (statements.py)
        self.picked_depth = 0  # branches decided by None-ness or the walk's pick, not by values, being walked
        self._inits_checked: set = set()
        # per expanded instance: whether it (and each module holding it) is built under no undecided test
        self.surely_built: list[bool] = [True]
        self.transient_depth = 0  # branches taken only while an argument is None (the first layer's) being walked
        self.undecided_tests = 0  # the tests (and per-layer class choices) no value decides, numbered in walk order
        # an undecided test on parameters of the function it is in (one conjunct, as printed) -> the code those
        # parameters are bound to where the caller wrote them (and what a `self.x` there is computed from): what
        # it reads, for status/waits.py
        self.test_reads: dict[str, list[str]] = {}
        self.ops: list[Op] = []
        self._pending_shared = None  # a MoE layer's shared experts, walked where its runner runs them (layers.py)
        self.unknowns: list[dict] = []
        self.alternatives: list[dict] = []
        self.locations: dict[str, RoleLocation] = {}
        self._role_paths: dict[str, str] = {}  # role -> module path of the submodule that plays it
        self._role_kinds: dict[tuple, object] = {}  # (role, layer kind) -> its location in that kind of layer
        self._moe_holders: dict[str, Instance] = {}  # a MoE op's id -> the module whose forward calls it
        self._counter = 0
        self._ids: dict[str, int] = {}
        self.section = "prologue"
        self.repeat: str | None = None
        self._stack: list[str] = []
        self._walked_lists: set = set()
        self._cuda_backends: Backends | None = None
        self._streams: list[str] = []  # the device-stream scopes the statement walk is in (statements.py)
        # the replacements of module functions (a vllm-ascend patch) whose code the walk is in (calls.py)
        self._replacing: list = []
        self.quant = None  # semantics.quantization.Quantization of a quantised deployment
        self.layer_kind: int | None = None  # while one of several kinds of decoder layer is walked: its number
        self.layer_kinds: list[dict] = []  # those kinds: their layers, count and what sets each apart
        # while a kind is walked: (the layer's path, the submodules whose class its construction leaves undecided)
        self.kind_undecided: tuple | None = None
        self._value_types: dict[str, Definition] = {}  # value -> the class of the trees its parameter declares
        self.tensor_values: set[str] = set()  # values a leaf returned alone (a norm without its residual): no tuple
        self._field_kinds: dict[tuple[str, str], object] = {}  # (class, field) -> what its annotation declares

    def _checkpoint(self) -> "Saved":
        """What a walk adds to the walker's state, as it is now: `_rollback` undoes a walk made since (a kind of
        decoder layer walked again, whose ops turn out the same as another's)."""
        return Saved(len(self.ops), dict(self._ids), self._counter, len(self.unknowns), len(self.alternatives),
                     self.undecided_tests, dict(self.locations), dict(self._role_paths), dict(self._role_kinds),
                     set(self._walked_lists), dict(self.ctor.not_followed), self._not_followed_seen,
                     dict(self.ctor.undecided_patches), set(self.tensor_values), self._pending_shared,
                     dict(self._compile_seen), dict(self._value_types), dict(self._field_kinds), dict(self._moe_holders))

    def _rollback(self, saved: "Saved") -> None:
        (_ops, self._ids, self._counter, _unknowns, _alternatives, self.undecided_tests, self.locations,
         self._role_paths, self._role_kinds, self._walked_lists, _nf, self._not_followed_seen, _up,
         self.tensor_values, self._pending_shared, self._compile_seen, self._value_types, self._field_kinds,
         self._moe_holders) = saved
        del self.ops[saved.ops:], self.unknowns[saved.unknowns:], self.alternatives[saved.alternatives:]
        self.ctor.not_followed.clear()
        self.ctor.not_followed.update(saved.not_followed)
        self.ctor.undecided_patches.clear()
        self.ctor.undecided_patches.update(saved.undecided_patches)

    @property
    def cuda_backends(self) -> Backends:
        """The same trees' kernels read as vLLM runs them on CUDA (the report's CUDA column: what a composite
        layer's part launches there), built on first use; the walk itself stays the backend's."""
        if self._cuda_backends is None:
            env = Environment("cuda", self.index)
            self._cuda_backends = Backends(self.index, Constructor(self.index, env, load_time=LoadTime),
                                           device="cuda (reference)")
        return self._cuda_backends

    def walk_model(self, model_cls: Definition) -> WalkResult:
        root = Instance(model_cls)
        d = self.env.deployment
        if d is not None and d.quantization and d.quant_description:  # the checkpoint's layers as vllm-ascend builds them
            from ..semantics.quantization import Quantization

            quant = Quantization(self.env, model_cls, self.ctor)
            self.quant = quant if quant.active else None
        if self.ctor.hf is not None:
            self.ctor.hf.root = model_cls.name
            self.ctor.hf.root_instance = root  # `self` of the backend's methods that build its layers
        self._role("model", root)
        self._expand(root, "forward", [], {}, path="", facts=Bindings())
        if self.ctor.method(model_cls, "compute_logits") is not None:
            self.section = "epilogue"
            self._expand(root, "compute_logits", [self._value("hidden_states")], {}, path="", facts=Bindings())
        self._moe_block_role()
        self._mark_opaque()
        self._mark_unavailable()
        hf = self.ctor.hf
        load_time = hf.summary() if hf is not None and hf.used else None
        # a replacement followed under tests no value decides: what runs otherwise, as an undecided alternative
        self.alternatives += [alt for target, alt in sorted(self.ctor.undecided_patches.items())
                              if not any(a["path"] == target for a in self.alternatives)]
        return WalkResult(self.ops, self.locations, self.repeat, self.unknowns, self.alternatives, load_time,
                          not_followed=sorted(self.ctor.not_followed.values(), key=lambda r: (r["file"], r["line"], r["target"])),
                          layer_kinds=self.layer_kinds, compiled_by=self._compile_decorated(),
                          blockers=list(self.blockers))

    def _mark_unavailable(self) -> None:
        """The kernels the backend's install does not have (locate/op_libraries.py: vLLM's `_C` and `_moe_C` on
        Ascend, where vllm-ascend installs vLLM without its compiled build): each says why, and an op that calls
        one on every path through it lists it (`attrs.unavailable`): it fails there, it is not costed, and a
        fusion row resting on it says so."""
        libs = op_libraries(self.index)
        for op in self.ops:
            if not op.kernels:
                continue
            marked = []
            for k in op.kernels:
                gone = libs.missing(k.name)
                if gone is None:
                    marked.append(k)
                    continue
                why = say("kernel_not_built", ns=gone.namespace, target=gone.target,
                          installed=gone.installed_at, cleared=gone.cleared_at)
                marked.append(replace(k, unavailable=why))
            op.kernels = marked
            always = sorted({k.name for k in marked if k.unavailable and not k.condition})
            if always:
                op.attrs["unavailable"] = always

    def _mark_opaque(self) -> None:
        """The ops a layer runs inside one of vLLM's opaque custom ops (walk.yaml `runtime.opaque_ops`: the MoE
        runner's `torch.ops.vllm.moe_forward_shared`, MLA's `torch.ops.vllm.mla_forward`): a graph pass sees the
        custom op, not what runs in it. A composite layer (moe, mla_attention) whose class (its MRO, on this
        backend) calls one has its nested ops marked `opaque` with that op and the line that calls it."""
        names = tuple(catalog().typed.walk.runtime.opaque_ops or ())
        if not names:
            return
        found: dict = {}
        for op in self.ops:
            if op.kind not in catalog().typed.composites.kinds or not op.layer_class:
                continue
            key = (op.attrs.get("class_file"), op.attrs.get("class_line"))
            if key not in found:
                found[key] = self._opaque_call(op, names)
            at = found[key]
            if at is None:
                continue
            prefix = op.path + "."
            for inner in self.ops:
                if inner.path.startswith(prefix) and "opaque" not in inner.attrs:
                    inner.attrs["opaque"] = at

    def _opaque_call(self, op, names: tuple) -> str | None:
        """`torch.ops.vllm.x (file:line)` where the layer's backend class (its MRO) refers to an opaque op."""
        info = self._module_at(op.attrs["class_file"]) if op.attrs.get("class_file") else None
        cls = next((d for d in (info.defs.get(op.layer_class, ()) if info is not None else ())
                    if d.kind == "class"), None)
        if cls is None:
            return None
        impl = self.backends.implementation(cls)
        for c in self.ctor.mro(impl):
            found = [(text, c.module.line_of(node)) for node in find_all(c.node, cst.Attribute)
                     if (text := _dotted(node)) in names]
            if found:
                return " / ".join(f"{text} ({c.module.rel}:{line})" for text, line in dict(found).items())
        return None

    def _forward_of(self, cls: Definition, method: str, inst: Instance | None = None):
        """The method that runs for `cls.method` on this backend: a patch first, then the MRO; for a Hugging
        Face class, the forward the Transformers backend's fusers leave (hf_fusers.py)."""
        hf = self.ctor.hf
        if hf is not None and method == "forward" and inst is not None and hf.applies(cls):
            found = hf.forward(inst, cls)
            if found is not None:
                fn, module = found
                return self.ctor.method(cls, method)[0], fn, module, None
        found = self.ctor.method(cls, method)
        if found is None:
            return None
        return found[0], found[1], found.module, found.patch

    def _expand(self, inst: Instance, method: str, args: list, kwargs: dict, path: str, facts: Bindings,
                cond=None) -> list[str]:
        """Walk `inst.method`; its ops run under the call site's condition (`if self.use_mha: self.self_attn(...)`).
        A module's ops stay steady whichever branch calls it: the walk's default branch of an undecided test is
        a pick, and a module's scenarios must not vanish because the pick fell on the other branch (DeciLM
        calls its attention in the else of `if self._is_no_op_attention: pass`)."""
        if inst.cls is None or len(self._stack) > MAX_DEPTH or len(self.ops) > MAX_OPS:
            return []
        key = f"{inst.cls.qualname}.{method}"
        if self._stack.count(key) >= 2:
            self._unknown(None, inst.cls.module, inst.cls.node, say("recursion_stopped", key=key))
            return []
        self._compile_seen.setdefault(inst.cls.qualname, inst.cls)
        found = self._forward_of(inst.cls, method, inst)
        if found is None:
            self._unknown(path, inst.cls.module, inst.cls.node, say("has_no_method", cls=inst.cls.name, method=f"{method}()"))
            return []
        owner, fn, module, patch = found
        built = self.surely_built[-1] and not inst.condition  # it and every module holding it, unconditionally
        if built:
            self._construction_raises(inst, path)
        frame = _Frame(inst, owner, fn, module, path, facts.for_callee())
        if patch is not None:
            frame.scope = f"{owner.name}.{method}"
        self._bind(frame, args, kwargs)
        self._stack.append(key)
        self.surely_built.append(built)
        try:  # steady, unless called from a branch only the first layer takes (statements._transient_branch)
            frame.entry = cond
            self._block(frame, fn.body.body, cond, not self.transient_depth)
        finally:
            self._stack.pop()
            self.surely_built.pop()
        return frame.returns

    def _compile_decorated(self) -> list[str]:
        """"file:line" of each compile decorator (walk.yaml `runtime.compile_decorators`: `@support_torch_compile`,
        also called) on a class of the MROs of the classes the walk expanded: vLLM compiles a module only where its
        class is so decorated. Read once the walk is done, from the classes it met."""
        names = set(catalog().runtime.get("compile_decorators", ()))
        out: set[str] = set()
        for cls in self._compile_seen.values():
            for c in self.ctor.mro(cls):
                text = c._chunk.text if c._chunk is not None else (c.module.source or b"")
                if not any(n.encode() in text for n in names):  # the class's code never names one: nothing to read
                    continue
                for d in getattr(c.skeleton if c.kind == "class" else c.node, "decorators", ()):
                    expr = d.decorator.func if type(d.decorator) is cst.Call else d.decorator
                    name = expr.attr.value if type(expr) is cst.Attribute else expr.value if type(expr) is cst.Name else None
                    if name in names:
                        out.add(f"{c.module.rel}:{c.module.line_of(d)}")
        return sorted(out)

    def _bind(self, frame: _Frame, args: list, kwargs: dict) -> None:
        positional, kwonly = signature(frame.fn)
        for p in positional + kwonly:
            frame.env[p.name.value] = [self._value(p.name.value)]
            frame.transient.add(p.name.value)
        for name in none_defaults(frame.fn):
            frame.facts.none[name] = True
        for name, value in bind_arguments(frame.fn, args, kwargs):
            self._assign_param(frame, name, value)
        self._typed_params(frame)  # a parameter declared `int` holds no tensor (walk/host.py)

    def _assign_param(self, frame: _Frame, name: str, value) -> None:
        if getattr(value, "exact", False):  # a value the layer loop carries: its None-ness is this layer's
            frame.exact.add(name)
        if isinstance(value, _NoneValue):
            frame.facts.none[name] = True
            frame.env[name] = []
        elif isinstance(value, _InstanceValue):
            frame.loop_vars[name] = value.inst
            if value.name:
                frame.module_names[name] = value.name
        elif isinstance(value, _MaybeNone):  # values or None: its tests stay open, and it is passed on as such
            frame.facts.none.pop(name, None)
            frame.maybe_none.add(name)
            frame.env[name] = list(value)
        elif isinstance(value, _Literal):  # a Python value the caller wrote: the evaluator reads it
            frame.facts.none[name] = False
            frame.env[name] = []
            frame.host.add(name)
            frame.names.params[name] = (value.node, Scope(module=frame.module))
        else:
            frame.facts.none[name] = False
            frame.env[name] = list(value) if isinstance(value, list) else [value]

    def _value(self, name: str) -> str:
        self._counter += 1
        return f"{name}#{self._counter}"

    def _op(self, frame, kind, name, layer_class, stmt, inputs, hint, cond, steady, attrs=None, path=None) -> list[str]:
        path = path if path is not None else frame.path
        op_id = self._op_id(f"{path}:{name}" if path else name)
        outs = [self._value(h) for h in (hint or [name + "_out"])]
        op = Op(
            id=op_id, kind=kind, name=name, layer_class=layer_class, file=frame.module.rel,
            line=frame.module.line_of(stmt), scope=frame.scope, path=path, section=self.section,
            inputs=list(dict.fromkeys(i for i in inputs if isinstance(i, str))), outputs=outs,
            condition=" ".join(str(cond).split()) if cond else None, steady=steady,
            attrs=OpAttrs(**(attrs or {})), cond=cond if isinstance(cond, Condition) and cond else None,
        )
        if self.section == "layer" and self.repeat:
            op.attrs["repeat"] = self.repeat
        nf = self.ctor.not_followed
        if len(nf) > self._not_followed_seen:  # a replacement met while this op was reached that is not followed
            op.attrs["not_followed"] = [_not_followed_text(r) for r in list(nf.values())[self._not_followed_seen:]]
            self._not_followed_seen = len(nf)
        if self.section == "layer" and self.layer_kind is not None:
            op.attrs["layer_kind"] = self.layer_kind
        if self._streams:
            op.attrs["stream"] = self._streams[-1]
        if self._replacing:  # the code of a function a patch put in place of the one the model calls
            by = self._replacing[-1]
            op.attrs["replaced_by"] = by.text
            if by.skipped:
                op.attrs["replacement_skipped"] = list(by.skipped)
            if by.order is not None:
                op.attrs["replacement_open"] = by.order
        self.ops.append(op)
        return outs

    def _op_id(self, base: str) -> str:
        """`base`, numbered from its second use (`#2`): an op's id is unique in the walk."""
        n = self._ids.get(base, 0) + 1
        self._ids[base] = n
        return base if n == 1 else f"{base}#{n}"

    def _unknown_op(self, frame, stmt, name, inputs, hint, cond, steady, reason) -> list[str]:
        out = self._op(frame, "unknown", name, None, stmt, inputs, hint, cond, steady, attrs={"reason": reason})
        self.unknowns.append({"file": frame.module.rel, "line": frame.module.line_of(stmt), "name": name, "reason": reason})
        return out

    def _unknown(self, path, module, node, reason) -> None:
        self.unknowns.append({"file": module.rel, "line": module.line_of(node), "name": path or "", "reason": reason})


class Saved(NamedTuple):
    """The walker's state at a checkpoint (Walker._checkpoint): lengths of what only grows, copies of the rest."""

    ops: int
    ids: dict
    counter: int
    unknowns: int
    alternatives: int
    undecided_tests: int
    locations: dict
    role_paths: dict
    role_kinds: dict
    walked_lists: set
    not_followed: dict
    not_followed_seen: int
    undecided_patches: dict
    tensor_values: set
    pending_shared: object
    compile_seen: dict
    value_types: dict
    field_kinds: dict
    moe_holders: dict


def _not_followed_text(r: dict) -> str:
    return f"{r['target']} = {r['value']} ({r['file']}:{r['line']})"


def _dotted(node) -> str | None:
    parts = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is not cst.Name:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))
