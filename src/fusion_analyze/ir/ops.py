"""What a walk produces, as data: ops with their kernels, role locations, the whole result.

`match/`, `status/` and `render/` read these and nothing else of `walk/`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypedDict


@dataclass(frozen=True)
class Kernel:
    name: str
    file: str
    line: int
    condition: str | None = None
    # the runtime paths it can run on (walk/kernels/runtime_paths.py): (path, what is left of its condition there or None, how
    # many of those tests must hold); () when it runs on none of them; None when the op's paths were not read
    paths: tuple[tuple[str, str | None, int], ...] | None = None
    # the condition as code, for deciding it on a path; not part of what the kernel is
    cond: object = field(default=None, compare=False, repr=False)
    # a call site reached on several paths whose conditions do not merge: each path's condition (`cond` is
    # then the tests they share, and `condition` reads "shared and (a or b)")
    alts: tuple = field(default=(), compare=False, repr=False)
    # what the name stands for where its code cannot be read (a function of a package outside the trees)
    note: str | None = None
    # why the backend's install has no such kernel (vLLM's `_C` not built on Ascend: locate/op_libraries.py):
    # a path that calls it fails there
    unavailable: str | None = None

    def to_json(self) -> dict:
        d = {"name": self.name, "file": self.file, "line": self.line, "condition": self.condition}
        if self.note is not None:
            d["note"] = str(self.note)
        if self.unavailable is not None:
            d["unavailable"] = self.unavailable
        if self.paths is not None:
            d["paths"] = {name: rest for name, rest, _positive in self.paths}
        return d


class OpAttrs(TypedDict, total=False):
    """What the walk (walk/*.py) records about an op beyond its fields, by key; every key is optional. The JSON
    report's `attrs` (schemas/report.schema.json `$defs/op_attrs`) declares the same keys: tests/test_op_attrs.py
    keeps the two in step. At run time a plain dict."""

    # the class that runs the layer
    class_file: str  # file of the layer's class (the model's, or the composite part's), relative to its tree
    class_line: int  # line of that class
    ascend_class: str  # the backend's class that replaces it (vllm-ascend's CustomOp / registered class)
    ascend_file: str  # file of that class, relative to its tree
    # the attention backend the platform's selector returned for the layer and the implementation its
    # get_impl_cls() names (semantics/attention_choice.py): {backend, impl, impl_file, selector, decided, why,
    # alternatives}; selector None: the catalog's class, no selector run
    attention_backend: dict[str, object]
    runs: str  # Class.method of the backend's code that runs the op (AscendMoERunner._apply_router_linear)
    native: str  # why it runs as separate PyTorch ops (forward_oot falls back to forward_native; a hub function)
    triton: str  # a `@triton.jit` kernel launched here: where the kernel is defined (file:line)
    native_of: str  # an op of the forward_native a layer runs on the backend: the layer's name
    stream: str  # the device-stream scope the op runs in (`with npu_stream_switch(...)`), with its file:line
    custom_op: bool  # the layer is a vLLM CustomOp (its backend picks forward_oot / forward_cuda / forward_native)
    native_ops: int  # how many device kernels its forward_native surely launches (ops listed after it, `native_of`)
    native_ops_if: int  # how many more it launches under tests the walk could not decide (casts included)
    same_math: str  # a registered Ascend class whose kernels compute what this native forward does
    cuda_kernels: list[str]  # what the layer of a native op runs on CUDA instead (its forward_cuda's kernels)
    cuda_runs: str  # the method they are called in (Class.forward_cuda)
    cuda_kernel_conditions: dict[str, str]  # kernel name -> the test it runs under on CUDA (a composite part's kernels)
    fused_by: str  # the Transformers backend's load-time rewrite that built the layer (`RMSNormFuser (file:line)`)
    external: str  # dotted class outside the trees that builds the module (torch.nn.Embedding)
    mixer: bool  # a token mixer (attention / SSM layer, or the attention dispatch function); its own ops follow it
    # what the layer was built with
    # the module `self.<name>` holds where its builder built it under another name, each with the condition it
    # is held under (None: the configuration decided it): [{name: "q_b_proj", condition: None}]
    holds: list[dict[str, str | None]]
    merged: str  # the projections a merged linear computes in one GEMM (leaf_ops.yaml `merged`: qkv, gate_up)
    bias: str  # the `bias=` argument's code, or "True" / "False" when the configuration decides it
    quant_config: str  # the `quant_config=` argument's code
    eps: str  # the `eps=` argument's code
    params_dtype: str  # the weights' dtype the code builds them in (torch.float32), where it decides it
    dtype: str  # a cast's target dtype (torch.float32), where the code decides it
    # the values the layer's __init__ sets that the configuration decides (leaf_ops.yaml `values`: input_size,
    # output_size, eps, hidden_size, head_size, num_heads, num_kv_heads); kept even when empty
    values: dict[str, int | float | str | bool]
    residual: bool  # a norm called with the residual: its kind is the fused one (add_rmsnorm)
    all_reduce: str  # when a row-parallel layer whose code is not in the trees reduces (`when tp_size > 1`)
    # where it sits
    repeat: str  # the decoder layer's repeat count, as the code writes it (ops of the layer section)
    layer_kind: int  # the kind of decoder layer it runs in (WalkResult.layer_kinds), where the layers differ
    role: Literal["router", "collective", "shared_expert"]  # a MoE router GEMM, a linear's collective, a shared expert
    inside: str  # the class of the MoE / composite layer (or part) it runs inside; a collective's: its linear's name
    part: str  # a composite layer's part (composites.yaml: router, experts, join, ...)
    found_by: str  # how the part's class was found (an attribute path, a registry function, the layer itself)
    paths: list[str]  # the runtime paths the part runs on (decode, prefill)
    step: str  # a step of the part above it (composites.yaml: prepare, dispatch, gemm1, combine, ...)
    expanded: list[str]  # a composite layer's parts emitted after it (the runner design)
    parts: list[str]  # the parts a backend's own layer class still runs through a runtime object
    other_branch: bool  # on the side of an undecided test (or another layer class) that is not steady
    once: str  # run once, not per step: the lazy initialisation's guard that holds from the second call on (walk/host.py)
    reason: str  # an unknown op: why the walk could not follow the call
    # a vLLM custom op (torch.ops.vllm.<name>) running the calling layer's methods whose function the walk does not
    # follow (a test nothing decides, a statement of another form): why; only its kernels are read
    not_walked: str
    # kernels it calls on every path through it that the backend's install does not have (`torch.ops._C.rms_norm`
    # on Ascend, where vLLM's `_C` is not built): the op fails there and is not costed; each kernel says why
    unavailable: list[str]
    # replacements met while the op was reached that the walk could not resolve (the original ran in their place):
    # `target = value (file:line)` each
    not_followed: list[str]
    # the op is in the code of a function a vllm-ascend patch put in place of the module function the model
    # calls (`_cc1d.causal_conv1d_update = _npu_causal_conv1d_update`): `target = value (file:line)`
    replaced_by: str
    # later patches of that target that never run (an import their try body runs first fails), as sentences
    replacement_skipped: list[str]
    # why the model's code may run the original instead (its `from m import f` may run before the patch), a sentence
    replacement_open: str
    # an arithmetic op's operands, as a graph pass's pattern compares them
    scalar: bool  # one side is not a tensor
    lhs: str  # the tensor value on the left (operand order of `a + b`)
    scalar_side: Literal["left", "right"]  # the side of the scalar
    scalar_code: str  # the scalar's code
    scalar_value: int | float  # the scalar's value, when the evaluator knows it
    # the deployment (ir/deployment.py)
    runs_on: list[str]  # the runtime paths a part runs on, where the runtime picks another class on the others
    opaque: str  # the custom op the layer runs it in (torch.ops.vllm.moe_forward_shared (file:line)): no graph pass sees it
    quant_type: str | None  # a quantised checkpoint's type of the layer ("W8A8_DYNAMIC", "FLOAT"; None: not known)
    quant_scheme: str  # the scheme class vllm-ascend builds for it (registered for the type and layer kind)
    quant_scheme_file: str  # file of that class
    quant_keys: list[str]  # the checkpoint description's keys it was read from (a few)
    quant_unknown: str  # why the layer's quant type is not known (the layers differ, no scheme registered)
    quantises: str  # a quantised linear's activation quantisation: the linear's name
    shared_path: str  # the shared experts' MLP path the runner takes (SharedExpertMLPPath.A8_INT_FUSED)


@dataclass
class Op:
    id: str
    kind: str
    name: str
    layer_class: str | None
    file: str
    line: int
    scope: str
    path: str
    section: str
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    condition: str | None = None
    steady: bool = True
    kernels: list[Kernel] = field(default_factory=list)
    attrs: OpAttrs = field(default_factory=OpAttrs)
    # the undecided tests it stands under, innermost first: (test number, 0 for the `if` side, 1 for `else`,
    # 2 for an other layer class's op that is not steady there either); status/derive.py matches each test's
    # `else` side in place of its `if` side (not in the report)
    branches: list = field(default_factory=list, compare=False, repr=False)
    # `condition` as code (ir.conditions.Condition), for telling two ops apart that cannot run on one path (the
    # matcher, match/matcher.py); not part of what the op is
    cond: object = field(default=None, compare=False, repr=False)
    # where the decoder layers are of several kinds: output value -> the loop variable it leaves a layer of its
    # kind in (`hidden_states`); match/matcher.py feeds every kind's, not only the last walked kind's, into the
    # next layer's first ops (not in the report)
    carried: dict = field(default_factory=dict, compare=False, repr=False)
    # an op of the loop's first decoder layer, walked apart with the values the loop starts with (`residual` None):
    # no layer before it feeds it (loop_carried's back edges do not reach it: match/matcher.py, estimate/cost.py),
    # where the layers are of several kinds (not in the report)
    entry: bool = field(default=False, compare=False, repr=False)

    def to_json(self) -> dict:
        return {
            "id": self.id, "kind": self.kind, "name": self.name, "layer_class": self.layer_class,
            "file": self.file, "line": self.line, "scope": self.scope, "path": self.path,
            "section": self.section, "inputs": list(self.inputs), "outputs": list(self.outputs),
            "condition": self.condition, "steady": self.steady,
            # on the path a step adds: steady, and on the first side of each test the walk could not decide (an op
            # on another side is an alternative to those, estimate/cost.py `counted`)
            "on_path": self.steady and not self.attrs.get("other_branch") and all(s == 0 for _t, s in self.branches),
            "kernels": [k.to_json() for k in self.kernels], "attrs": dict(sorted(self.attrs.items())),
        }


@dataclass
class RoleLocation:
    cls: str
    file: str
    line: int
    forward_file: str | None
    forward_line: int | None
    patched_by: str | None = None

    def to_json(self) -> dict:
        d = {"class": self.cls, "file": self.file, "line": self.line,
             "forward_file": self.forward_file, "forward_line": self.forward_line}
        if self.patched_by:
            d["patched_by"] = self.patched_by
        return d


@dataclass
class WalkResult:
    ops: list[Op]
    locations: dict[str, RoleLocation]
    repeat: str | None
    unknowns: list[dict]
    alternatives: list[dict]
    load_time: dict | None = None  # the Transformers backend's load-time rewrites the walk applied (hf_fusers.py)
    # the replacements (vllm-ascend patches) met on the walked path whose value the walk cannot resolve, so the
    # original ran in their place: {target, file, line, value, form, reason}
    not_followed: list[dict] = field(default_factory=list)
    # the raises the walked deployment surely reaches (walk/blockers.py): {file, line, raises, in, path, when
    # (construction | forward)[, layer_kind]}; the model (or that kind of layer) cannot run on the backend
    blockers: list[dict] = field(default_factory=list)
    # the kinds of decoder layer where the layers' index decides their construction (a configuration given):
    # [{layers: [i, ...], count, of: the layer count, differs: {self.<name>: what it is in this kind}}]; the ops
    # of kind k carry attrs.layer_kind = k; empty where the layers are all of one kind
    layer_kinds: list[dict] = field(default_factory=list)
    # where the walked model's classes carry vLLM's compile decorator (`@support_torch_compile`): "file:line" of
    # each class decorated; empty where none does (vLLM compiles none of the model: no graph pass runs)
    compiled_by: list[str] = field(default_factory=list)


def loop_carried(ops: list[Op]) -> dict[str, list[str]]:
    """The decoder layer is walked once; from the second layer on, what it reads from the prologue is what the
    layer before left: the layer's values the epilogue reads. Each value a layer op reads from the prologue ->
    those layer outputs (sorted; empty where the epilogue reads none), over `ops` (match/matcher.py's back
    edges, one layer's output into the next layer's first ops; estimate/cost.py `next_readers`)."""
    producer = {v: op for op in ops for v in op.outputs}
    layer_out = sorted({v for op in ops if op.section == "epilogue" for v in op.inputs
                        if v in producer and producer[v].section == "layer"})
    # several kinds of decoder layer: what each kind leaves in the same loop variables feeds the next layer too
    # (the epilogue reads only the kind walked last)
    names = {producer[v].carried.get(v) for v in layer_out} - {None}
    if names:
        layer_out = sorted(set(layer_out) | {v for op in ops if op.section == "layer"
                                             for v, name in op.carried.items() if name in names})
    back: dict[str, list[str]] = {}
    if layer_out:
        for op in ops:
            if op.section != "layer":
                continue
            for v in op.inputs:
                p = producer.get(v)
                if p is not None and p.section == "prologue":
                    back[v] = layer_out
    return back
