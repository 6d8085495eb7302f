"""The declared shape of each file of patterns/catalog/, as frozen dataclasses (read by catalog.shape).

One top-level dataclass per file (`LeafOps` is leaf_ops.yaml, ...), the entries that have a fixed shape as
dataclasses of their own. A key the code reads with a default is optional here with that default; a key it
cannot do without is required. `key("class")` reads a key that is not a Python name; without a default it is
required too (such fields come last: a type checker takes the call for a default). What each key means is said in
the file itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .shape import Regex, key, keys_of

Backend = Literal["ascend", "cuda"]
BACKENDS: tuple[str, ...] = ("ascend", "cuda")
Problems = Iterator[tuple[str, str]]  # (key, what is wrong), reported at the key's line


# -- leaf_ops.yaml ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LeafClass:
    """`classes.<name>`: a layer class whose call is one op of `kind`."""

    kind: str
    merged: str | None = None  # the projections it merges (qkv, gate_up)
    parallel: Literal["row", "column"] | None = None
    reduce: str | None = None  # the constructor keyword that makes it all-reduce its output
    role: Literal["router"] | None = None
    with_residual: str | None = None  # its kind when it is called with a residual
    values: Mapping[str, str] | None = None  # op value -> the attribute its __init__ sets
    weight_dtype: str | None = None  # the attribute (the parameter, of a class outside the trees) giving its weights' dtype
    # a class outside the trees (torch.nn.Linear): its constructor's parameters, in order; `values` and
    # `weight_dtype` name these, read from the call's arguments
    params: tuple[str, ...] | None = None


@dataclass(frozen=True)
class LeafFunction:
    """`functions.<dotted name>`."""

    kind: str


@dataclass(frozen=True)
class StateKind:
    match: Regex  # searched in the code `state_method` returns
    kind: str


@dataclass(frozen=True)
class Mixers:
    base: str
    state_method: str
    state_kinds: tuple[StateKind, ...]


@dataclass(frozen=True)
class Assumption:
    """`assume[i]`: a condition text whose steady-state value is known."""

    match: Regex
    value: bool
    backend: Backend | None = None  # only on this backend; both without


@dataclass(frozen=True)
class PlatformChecks:
    platform_object: str
    any_object: tuple[str, ...]
    checks: Mapping[str, Mapping[str, bool]] = keys_of(BACKENDS, required=True)  # backend -> check -> answer
    # backend -> a tensor's device attribute (`x.is_cuda`, no call) -> its answer for every tensor there
    tensor_attributes: Mapping[str, Mapping[str, bool]] = keys_of(BACKENDS)


@dataclass(frozen=True)
class HubLayers:
    decorator: str
    kinds: Mapping[str, str]  # the decorator's layer name -> op kind


@dataclass(frozen=True)
class LeafOps:
    """leaf_ops.yaml."""

    classes: Mapping[str, LeafClass]
    functions: Mapping[str, LeafFunction]
    tensor_methods: Mapping[str, str]
    operators: Mapping[str, str]
    kernel_prefixes: tuple[str, ...]
    cuda_kernel_prefixes: tuple[str, ...] = ()  # kernels of vLLM's CUDA build: never an Ascend kernel
    mixers: Mixers | None = None
    attention_impls: Mapping[str, Mapping[str, str]] = keys_of(BACKENDS)  # backend -> kind -> class
    assume: tuple[Assumption, ...] = ()
    platform: PlatformChecks | None = None
    hub_layers: HubLayers | None = None


# -- kernels.yaml -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KernelEntry:
    """`kernels[i]`: what the kernels whose dotted name `match` finds do, as primitive ops."""

    match: Regex
    covers: tuple[str, ...]
    dispatch: bool = False
    examples: tuple[str, ...] = ()  # kernel names this entry is the first to match (tests/test_catalog.py)

    def problems(self) -> Problems:
        if not self.covers:
            yield "covers", "`covers` names no primitive"


@dataclass(frozen=True)
class Kernels:
    """kernels.yaml."""

    kernels: tuple[KernelEntry, ...]


# -- walk.yaml ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Limits:
    expand_depth: int
    max_ops: int
    construct_depth: int
    kernel_depth: int
    param_chain: int


@dataclass(frozen=True)
class Preference:
    """`default_choice[i]`."""

    id: str
    name: Regex
    ignore_case: bool = False
    unless_all: Regex | None = None


@dataclass(frozen=True)
class Role:
    """`roles[i]`."""

    role: str
    attr: Regex  # searched in the attribute name
    cls: Regex = key("class")  # searched in the lowercased class name


@dataclass(frozen=True)
class TableRef:
    """A module-level table of the trees: `module` and the name of the table in it."""

    module: str
    table: str


@dataclass(frozen=True)
class AutoModel:
    calls: tuple[str, ...]
    mapping: str


@dataclass(frozen=True)
class AttentionPaths:
    """`runtime.attention_paths.<backend>`: path name -> name -> code (or, for an object, attribute -> code)."""

    module: str
    paths: Mapping[str, Mapping[str, str | Mapping[str, str]]]


@dataclass(frozen=True)
class AttentionBackends:
    """walk.yaml `runtime.attention_backend`: the class the runtime's attention selector returns, per backend
    and layer kind (`mla` where the layer is one of `mla_layers`)."""

    calls: tuple[str, ...] = ()
    mla_layers: tuple[str, ...] = ()
    classes: Mapping[str, Mapping[str, str]] = keys_of(BACKENDS)  # fallback: backend -> attention / mla -> class
    selector: str | None = None  # the platform class's method that returns the backend (runtime.platform)
    attr: str | None = None  # the attribute an attention layer holds the selected backend in
    config: str | None = None  # the class get_attn_backend builds the selector's configuration with
    vllm_config: Mapping[str, str] = field(default_factory=dict)  # vllm_config attribute -> its class's defaults
    model_reads: tuple[str, ...] = ()  # of `vllm_config`, read at their defaults by any code (as the selector)
    member_class: str | None = None  # the method of a backend enum's member that returns its class (get_class)
    register: str | None = None  # the function that registers another class for a member (register_backend)
    register_path: str | None = None  # its parameter that names the class by its path (class_path)


@dataclass(frozen=True)
class Runtime:
    """walk.yaml `runtime`: what vLLM's runtime hands code."""

    layers_of: tuple[str, ...] = ()
    layer_index: tuple[str, ...] = ()  # functions that read a layer's index from its dotted module name
    hardware_profile: tuple[str, ...] = ()
    device_type: Mapping[str, str] = field(default_factory=dict)
    defaults: Mapping[str, str] = field(default_factory=dict)
    environment: tuple[TableRef, ...] = ()
    platform: Mapping[str, str] = keys_of(BACKENDS)
    registered_model: tuple[str, ...] = ()
    auto_model: AutoModel | None = None
    layer_dispatch: tuple[str, ...] = ()
    compile_decorators: tuple[str, ...] = ()  # class decorators under which vLLM compiles a module
    not_kernel_packages: tuple[str, ...] = ()  # packages outside the trees whose functions are no layer's kernel
    host_packages: tuple[str, ...] = ()  # packages that compute on the host: their values' arithmetic is no device op
    host_callables: tuple[str, ...] = ()  # dotted callables (or objects) whose calls compute on the host
    host_methods: tuple[str, ...] = ()  # methods only a Python scalar has: a call of one is no device op
    vllm_config_getters: tuple[str, ...] = ()  # functions that return the running engine's VllmConfig
    vllm_version_test: tuple[str, ...] = ()
    attention_paths: Mapping[str, AttentionPaths] = keys_of(BACKENDS)
    deployment: Mapping[str, Any] = field(default_factory=dict)
    attention_backend: AttentionBackends | None = None
    parallel: Mapping[str, Any] = field(default_factory=dict)  # parallel-state query -> deployment value name
    startup_globals: tuple[str, ...] = ()  # module globals set at start-up only for a config the deployment lacks
    moe_comm: Mapping[str, Any] = field(default_factory=dict)  # how the runtime picks the MoE comm method
    quantization: Mapping[str, Any] = field(default_factory=dict)  # how a quantised checkpoint's layers are built
    opaque_ops: tuple[str, ...] = ()  # custom ops that run a whole layer, opaque to graph passes
    load_hooks: tuple[str, ...] = ()  # methods the runtime calls once the weights are loaded (after __init__)
    derived: Mapping[str, Any] = field(default_factory=dict)  # parallel-config property -> its code, in order
    model_derived: Mapping[str, Any] = field(default_factory=dict)  # model-config property -> its code, self


@dataclass(frozen=True)
class Walk:
    """walk.yaml."""

    limits: Limits
    default_choice: tuple[Preference, ...] = ()
    placeholders: tuple[str, ...] = ()
    roles: tuple[Role, ...] = ()
    symbols: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # library -> constant names
    never_none: tuple[str, ...] = ()
    runtime: Runtime = field(default_factory=Runtime)
    waits_on: Mapping[str, Any] = field(default_factory=dict)  # what an undecided test reads (status/waits.py)


# -- composites.yaml ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    step: str
    kind: str
    methods: tuple[str, ...]
    covers: tuple[str, ...] = ()
    match: Regex | None = None


@dataclass(frozen=True)
class StepVariant:
    """`steps[i]` of a part: the first variant whose `when` methods were all walked applies."""

    steps: tuple[Step, ...]
    when: tuple[str, ...] = ()


@dataclass(frozen=True)
class Also:
    attr: str
    methods: tuple[str, ...] = ()


@dataclass(frozen=True)
class CalledBy:
    """`called_by` of a part: the object (an attribute path of the layer) whose `method` calls the part's
    entry methods; the arguments of that call bind their parameters (`quant_method=self`)."""

    attr: str
    method: str


@dataclass(frozen=True)
class RegisteredBy:
    function: str
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Part:
    """`parts[i]`: where the part's code is (one of layer, class, attr, registered_by) and what it runs."""

    part: str
    kind: str
    layer: bool = False
    cls: str | None = key("class", None)
    attr: str | None = None
    registered_by: RegisteredBy | None = None
    methods: tuple[str, ...] = ()
    also: tuple[Also, ...] = ()
    # the `also` code runs only where the part's class's methods call one of these (the comm method's
    # fused_experts runs the MoE MLP, which calls the quant method; FusedMC2CommImpl's runs one kernel instead)
    also_via: tuple[str, ...] = ()
    fields: Mapping[str, str] = field(default_factory=dict)
    # a tensor parameter of the part's methods -> the attribute path of the layer that is its last dimension
    # (the routed hidden states the runner pads to `moe_config.hidden_dim`)
    widths: Mapping[str, str] = field(default_factory=dict)
    called_by: CalledBy | None = None
    deployment: Mapping[str, Any] = field(default_factory=dict)
    # a `deployment` value the layer's own construction decides (`moe_config.is_sequence_parallel`): read there;
    # where it is not decided, not stated (its tests stay open)
    from_layer: Mapping[str, str] = field(default_factory=dict)
    at_call: str | None = None  # the op is at the call of this method in the module of the experts' class
    column: bool = False  # (a `cuda` part) read for the report's CUDA column of the Ascend walk's same part
    own_only: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    steps: tuple[StepVariant, ...] = ()
    # an attribute of the layer (read on its backend's class, as the walk built it) that holds what the part
    # works on: where the construction leaves it None, the part has nothing to do and is not emitted (the join
    # of the shared experts' output, where the model hands the runner no shared experts)
    needs: str | None = None

    def problems(self) -> Problems:
        where = [k for k, v in (("layer", self.layer), ("class", self.cls), ("attr", self.attr),
                                ("registered_by", self.registered_by)) if v]
        if len(where) != 1:
            yield "part", (f"part `{self.part}` needs exactly one of layer, class, attr, registered_by "
                           f"(has {', '.join(where) or 'none'})")


@dataclass(frozen=True)
class Impl:
    """`impl`: the runtime-built implementation a composite layer hands its work to, walked as code, op by op:
    the class, the attribute of the layer whose __init__ builds it (`holder`) and the name it is stored under
    there (`self.<assigned> = impl_cls(..., **extra_impl_args)`), the method the layer's custom op calls, and the
    names of that method's arguments that are the layer's input (the rest are runtime state)."""

    cls: str = key("class", "")
    holder: str = ""
    assigned: str = "impl"
    method: str = "forward"
    inputs: tuple[str, ...] = ("hidden_states",)

    def problems(self) -> Problems:
        if not self.cls or not self.holder:
            yield "impl", "`impl` needs `class` and `holder`"


@dataclass(frozen=True)
class Shared:
    """`shared`: the backend's class that runs the shared experts the model hands to the MoE layer, the
    attribute of it that holds the model's MLP, and its methods in the order they run (each walked as code, the
    first on the layer's input, the next on what the one before returned; `with_input`: also on the input)."""

    cls: str = key("class", "")
    holds: str = "layer"
    methods: tuple[str, ...] = ()
    with_input: tuple[str, ...] = ()

    def problems(self) -> Problems:
        if not self.cls or not self.methods:
            yield "shared", "`shared` needs `class` and `methods`"


@dataclass(frozen=True)
class Composite:
    """`<kind>.<backend>`: the parts a composite layer's op is walked to on that backend (or, with `impl`, the
    implementation it hands its work to, walked op by op)."""

    parts: tuple[Part, ...] = ()
    impl: Impl | None = None
    shared: Shared | None = None
    own_method: str | None = None
    own_method_parts: tuple[str, ...] = ()
    router_gemm: tuple[str, ...] = ()
    locations: Mapping[str, str] = field(default_factory=dict)  # role -> attribute path
    location_methods: Mapping[str, str] = field(default_factory=dict)  # role -> the method the runner calls

    def problems(self) -> Problems:
        names = [p.part for p in self.parts]
        for name in self.own_method_parts:
            if name not in names:
                yield "own_method_parts", f"`own_method_parts` names `{name}`, not a part (have: {', '.join(names)})"


@dataclass(frozen=True)
class Composites:
    """composites.yaml: per composite leaf kind, backend -> its parts."""

    moe: Mapping[str, Composite] = keys_of(BACKENDS)
    mla_attention: Mapping[str, Composite] = keys_of(BACKENDS)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The leaf kinds the file lists parts for."""
        return tuple(k for k in _COMPOSITE_KINDS if getattr(self, k))

    def of(self, kind: str, backend: str | None) -> Composite | None:
        """The parts of a `kind` layer on `backend`; None when the file lists none."""
        table: Mapping[str, Composite] = getattr(self, kind) if kind in _COMPOSITE_KINDS else {}
        return table.get(backend) if backend is not None else None


_COMPOSITE_KINDS = ("moe", "mla_attention")


# -- hf_fusers.yaml -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LinearPlan:
    torch_class: str
    styles_in: str
    default_style: str
    tp_plan: str


@dataclass(frozen=True)
class LayerProviders:
    calls: tuple[str, ...]
    package: str


@dataclass(frozen=True)
class RmsNormByName:
    suffix: str
    zero_centered: str
    zero_init: str
    cls: str = key("class")


@dataclass(frozen=True)
class WithoutRegistry:
    describe: str
    rewrites: tuple[str, ...]
    rms_norm_by_name: RmsNormByName


@dataclass(frozen=True)
class MoeMixin:
    classes: tuple[str, ...]
    experts_attr: str
    by: str
    method: str
    factory: str
    block_forward: str
    router_state: tuple[str, ...]
    shared: str
    external_routing_skips: tuple[str, ...]
    external_runner: str


@dataclass(frozen=True)
class Merged:
    name: str
    cls: str = key("class")


@dataclass(frozen=True)
class Activations:
    module: str
    table: str
    instantiated: str


@dataclass(frozen=True)
class GluFuser:
    rewrite: Literal["glu"]
    merged: Merged
    and_mul: TableRef
    activations: Activations
    down_style: str


@dataclass(frozen=True)
class QkvFuser:
    rewrite: Literal["qkv"]
    merged: Merged
    out_style: str


@dataclass(frozen=True)
class PackedQkvFuser:
    rewrite: Literal["packed_qkv"]
    out_style: str
    cls: str = key("class")


@dataclass(frozen=True)
class RmsNormFuser:
    rewrite: Literal["rms_norm"]
    zero_centered: str
    cls: str = key("class")


@dataclass(frozen=True)
class AttentionFuser:
    rewrite: Literal["attention_interface"]
    interface: str
    attr: str
    cls: str = key("class")
    runs: str | None = None
    built_in: str | None = None  # the backend's method that builds the layer: `attn_cls(**kwargs)` in it
    # a method of the fuser that returns None unless the module's interface call passes that keyword
    keyword_methods: Mapping[str, str] | None = None
    layer_index: str | None = None  # the module's attribute the backend keys its layer loop by


Fuser = GluFuser | QkvFuser | PackedQkvFuser | RmsNormFuser | AttentionFuser


@dataclass(frozen=True)
class HfFusers:
    """hf_fusers.yaml."""

    package: str
    backend_module: str
    text_classes: tuple[str, ...]
    registry: TableRef
    linear: LinearPlan
    without_registry: WithoutRegistry
    moe_mixin: MoeMixin
    fusers: Mapping[str, Fuser]
    layer_providers: LayerProviders | None = None
    not_walked: tuple[str, ...] = ()


# -- aliases.yaml -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Alias:
    match: Regex  # the whole query, case-insensitive
    architectures: tuple[str, ...]
    evidence: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()  # queries this alias is the first to take (tests/test_catalog.py)

    def problems(self) -> Problems:
        if not self.architectures:
            yield "architectures", "`architectures` names no architecture"


@dataclass(frozen=True)
class Aliases:
    """aliases.yaml."""

    aliases: tuple[Alias, ...] = ()


# -- presets.yaml -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Preset:
    """`presets.<name>`: a checkpoint's published config.json (the name is a marketing name: a query that names
    it applies it, as `--config <name>` does)."""

    source: str  # the checkpoint's config.json on the Hugging Face hub
    config: Mapping[str, Any]  # the published config.json fields
    complete: bool = False  # `config` is the whole config.json but for `left_out`: a field it lacks is absent
    left_out: tuple[str, ...] = ()  # fields of the published file deliberately left out (unknown, not absent)
    note: str = ""  # where the values were read, when not from `source` itself; what was left out and why

    def problems(self) -> Problems:
        if not self.source.startswith("https://huggingface.co/"):
            yield "source", "`source` is not a Hugging Face hub URL of the checkpoint's config.json"
        archs = self.config.get("architectures")
        if not (isinstance(archs, list) and archs and all(isinstance(a, str) for a in archs)):
            yield "config", "`config` has no `architectures` list"
        for name in self.left_out:
            if name in self.config:
                yield "left_out", f"`{name}` is both in `config` and left out"


@dataclass(frozen=True)
class Presets:
    """presets.yaml."""

    presets: Mapping[str, Preset]


# -- devices.yaml -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Launch:
    """`launch_us`: the fixed cost of one kernel in µs (dispatch and the kernel's minimum time), per run mode."""

    eager: float  # launched by the host, which paces the kernels (its dispatch cost)
    graph: float  # replayed from a captured graph (aclgraph / CUDA graph)
    # launched eagerly with the host ahead of the device: the device's cost per kernel; None: as in a graph
    queued: float | None = None


@dataclass(frozen=True)
class Measured:
    """`measured[i]`: one scenario timed on the device (fusion-analyze calibrate), reference vs fused."""

    name: str  # the scenario (add_rmsnorm, silu_mul, ...)
    shape: Mapping[str, int]  # num_tokens, hidden_size, ...
    mode: Literal["eager", "queued", "graph"]
    reference_us: float
    fused_us: float
    source: str = ""  # how it was measured (the kernel the fused side ran)


@dataclass(frozen=True)
class Device:
    name: str
    hbm_gb_s: float  # memory bandwidth of one device (one rank)
    tflops: float  # dense bf16 / fp16 matrix peak of one device
    launch_us: Launch
    link_gb_s: float | None = None  # the bus bandwidth of an all-reduce among the devices of one node; None: unknown
    soc: str | None = None
    memory_gib: float | None = None  # device memory of one device (one rank); None: unknown (nothing is said of fit)
    # what an access whose address is loaded first (a row at an index) adds to a kernel; None: not measured (0)
    dependent_access_us: float | None = None
    sources: Mapping[str, str] = field(default_factory=dict)  # field -> where its number comes from
    measured: tuple[Measured, ...] = ()


@dataclass(frozen=True)
class Scenario:
    num_tokens: int
    batch: int
    q_len: int
    kv_len: int
    mode: Literal["eager", "graph"] = "eager"  # how the step runs: vllm-ascend captures decode in graphs by default


@dataclass(frozen=True)
class Devices:
    """devices.yaml."""

    default: str
    devices: Mapping[str, Device]
    scenarios: Mapping[str, Scenario] = keys_of(("prefill", "decode"), required=True)

    def problems(self) -> Problems:
        if self.default not in self.devices:
            yield "default", f"`default: {self.default}` is not a device (have: {', '.join(self.devices)})"


# -- the catalog --------------------------------------------------------------------------------------------
FILES: dict[str, type] = {"leaf_ops": LeafOps, "kernels": Kernels, "walk": Walk, "composites": Composites,
                          "hf_fusers": HfFusers, "aliases": Aliases, "presets": Presets, "devices": Devices}
