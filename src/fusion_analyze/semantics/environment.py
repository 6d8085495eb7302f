"""The environment one analysis runs against: the backend walked, the device, the trees (their versions), the
model's configuration and the runtime's defaults. Built once per analysis (analysis/pipeline.py); every
evaluator is made from one, so a test gets the same answer whoever asks it. A view that knows less is explicit:
`without_config()` (what the code decides without the model's configuration: a layer's kernels, the choices
the configuration did not make) and the binder's view (`for_binder`: the backend and the trees' versions only,
shared by every analysis of a session).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache

import libcst as cst

from typing import TYPE_CHECKING, Any, ClassVar

from ..ir.conditions import Truth

if TYPE_CHECKING:
    from ..ir.deployment import Deployment


# the parallel configuration's fields that are the TP size or grow with it: where --tensor-parallel-size is not
# stated, the tests on them stay open (the report shows the communication a TP deployment runs)
_MODEL_ATTRS_BUSY: list = []  # model_attrs being computed: the code it runs does not ask for them again


_TP_SIZED = frozenset({"tensor_parallel_size", "world_size", "world_size_across_dp"})


@dataclass(frozen=True, eq=False)
class Environment:
    # the class that runs the trees' code with an environment (semantics/evaluator.Evaluator, which registers
    # itself here when it is imported): the environment runs a tree's function without importing the evaluator
    evaluator_class: ClassVar[Any] = None

    backend: str | None = None  # "ascend", "cuda"; None: what holds on both
    index: Any = field(default=None, repr=False)  # index.ModuleIndex | None: the trees, their versions
    soc: str | None = None  # the device's SoC family (devices.yaml), also where the tree has no profile table
    hardware: object | None = None  # passes.hardware.Profile: get_current_hardware_profile()
    config: Any = None  # config.model_config.ConfigFacts | None: what decides the walk; None: nothing known
    runtime_defaults: bool = True  # get_ascend_config() & co. as their classes' declared defaults (walk.yaml)
    deployment: Deployment | None = None  # engine arguments, quantisation (ir/deployment.py); None: defaults
    scenarios: dict = field(default_factory=dict)  # runtime path -> its token counts (devices.yaml scenarios)
    transformers_backend: bool | None = None  # the model is served by vLLM's Transformers backend; None: not known

    def num_experts(self) -> int | None:
        """The routed experts of the model's configuration (vLLM's ModelConfig.get_num_experts)."""
        from .values import Known

        for name in ("n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts"):
            got = self.config.attr(name, True) if self.config is not None else None
            if isinstance(got, Known) and isinstance(got.value, int):
                return got.value
        return None

    def without_config(self) -> "Environment":
        return replace(self, config=None)

    @staticmethod
    def for_binder(backend: str | None, index) -> "Environment":
        """What decides an import binding (index.ModuleIndex.choose): the backend and the trees' versions."""
        return Environment(backend, index, runtime_defaults=False)

    def platform_truth(self, expr: cst.BaseExpression) -> Truth:
        """`current_platform.is_rocm()`, `<object>.is_cuda()`: what vLLM's platform answers on the backend walked
        (leaf_ops.yaml `platform`), decided from the call's code; UNKNOWN for anything else."""
        if type(expr) is cst.Attribute and type(expr.value) is not cst.Call:
            return _tensor_attribute(self.backend, expr)  # `input.is_cuda`: a tensor's device
        if type(expr) is not cst.Call or expr.args:
            return Truth.UNKNOWN
        func = expr.func
        if type(func) is cst.Attribute:
            name, on = func.attr.value, func.value
        elif type(func) is cst.Name:
            name, on = func.value, None
        else:
            return Truth.UNKNOWN
        answers, any_object, platform_object = _platform(self.backend)
        if name not in answers:
            if type(on) is cst.Name and on.value == platform_object and self.index is not None:
                return _platform_method(self.index, self.backend, name)
            return Truth.UNKNOWN
        if name in any_object or (type(on) is cst.Name and on.value == platform_object):
            return Truth.of(answers[name])
        return Truth.UNKNOWN

    def platform_returns(self, expr: cst.BaseExpression):
        """(module, expression) a `current_platform.<m>()` call with no argument returns on the backend walked
        (platform_return), to be read there; None where that is not one statement of the platform's class."""
        if type(expr) is not cst.Call or expr.args or type(expr.func) is not cst.Attribute or self.index is None:
            return None
        _answers, _any, platform_object = _platform(self.backend)
        on = expr.func.value
        if not (type(on) is cst.Name and on.value == platform_object):
            return None
        memo = _PLATFORM_METHODS.setdefault(id(self.index), (self.index, {}))
        if memo[0] is not self.index:
            memo = _PLATFORM_METHODS[id(self.index)] = (self.index, {})
        key = ("returns", self.backend, expr.func.attr.value)
        if key not in memo[1]:
            memo[1][key] = platform_return(self.index, self.backend, expr.func.attr.value)
        return memo[1][key]

    @cached_property
    def runtime_calls(self) -> dict:
        """What vLLM's runtime returns, by function name -> (call, scope) -> Value (semantics.runtime_defaults):
        `get_current_hardware_profile()` is the device's profile (no profile: the tests on it stay unknown),
        `get_ascend_device_type()` the member of the device-type Enum its SoC family names, `vllm_version_is`
        the vLLM tree's version, and each `defaults` function (`get_ascend_config()`) its configuration class
        with no user input (walk.yaml runtime)."""
        from ..catalog import catalog
        from .known_calls import _class_constant
        from .runtime_defaults import version_calls
        from .values import Defaults, Known

        profile, index = self.hardware, self.index
        runtime = catalog().typed.walk.runtime
        out = {}
        if profile is not None:
            out = {name: (lambda _call, _scope: Known(profile)) for name in runtime.hardware_profile}
        soc = self.soc or getattr(profile, "soc", None)
        for name, qualname in runtime.device_type.items() if index is not None and soc else ():
            mod, _, cls_name = qualname.rpartition(".")
            target = index.lookup(mod, cls_name)
            if getattr(target, "kind", None) == "class":
                member = _class_constant(target, soc)
                if isinstance(member, Known):
                    out[name] = lambda _call, _scope, member=member: member
        out.update(version_calls(index))
        out.update(_attention_backend_calls(index, self.backend))
        defaults = runtime.defaults if index is not None and self.runtime_defaults else {}
        extra = dict(getattr(self.deployment, "additional_config", None) or {})
        for name, qualname in defaults.items():
            mod, _, cls_name = qualname.rpartition(".")
            target = index.lookup(mod, cls_name)
            if getattr(target, "kind", None) == "class":  # the user's --additional-config over the defaults
                out[name] = lambda _call, _scope, target=target: Known(Defaults(target, extra))
        out.update(self._parallel_calls())
        return out

    def parallel_value(self, name: str):
        """A value of the deployment's parallel setup by its name in walk.yaml `runtime.parallel` (tp, dp, ep,
        uses_ep, world_size_across_dp, mc2_capacity): None where the deployment states no parallel sizes (the
        report then keeps the tests on them open, as vLLM's default would hide the communication)."""
        d = self.deployment
        if d is None or (d.tp is None and d.dp == 1 and not d.uses_ep):
            return None
        if name == "mc2_capacity":
            return self.mc2_capacity
        if name == "is_moe":
            return self._is_moe()
        return getattr(d, {"tp": "tp_size"}.get(name, name), None)

    @cached_property
    def _stated_attrs(self) -> dict:
        from ..catalog import catalog
        from .values import Known

        d = self.deployment
        if d is None:
            return {}
        out = {k: Known(v) for k, v in d.vllm_config(None)["parallel_config"].items()}
        stated = not (self.parallel_value("tp") is None and self.parallel_value("ep") is None)
        if not stated:  # vLLM's defaults (no EP, DP 1); the TP size, not stated, is not read (its tests stay open)
            out = {k: v for k, v in out.items() if k not in _TP_SIZED}
        derived = {}
        for name, where in (catalog().typed.walk.runtime.derived or {}).items():
            got = self._derived(where, out)
            if got is not None:  # decided whatever TP is (use_sequence_parallel_moe needs EP: off by default)
                derived[name] = got
        return {**out, **derived}

    def deployment_attrs(self) -> dict:
        """Attributes of vLLM's parallel configuration the deployment states (`enable_expert_parallel`,
        `tensor_parallel_size`) or leaves at vLLM's defaults (no EP, DP 1, PP 1; not the TP size, which stays
        open where --tensor-parallel-size is not stated), and the properties derived from them (walk.yaml
        `runtime.derived`: `use_sequence_parallel_moe`, run from its code in the trees), as Values."""
        return self._stated_attrs

    def _derived(self, where, attrs: dict):
        """The property `where` names (the first of the list the trees have), with `self` the parallel
        configuration as stated; None where it is not decided."""
        from .values import Known

        self_value = Known({k: v.value for k, v in attrs.items()})
        return self._run(where, self_value, replace(self, deployment=None))  # (no recursion: `self` handed in)

    def _run(self, where, self_value, env: "Environment"):
        """What the first function of `where` the trees have (`module.function` or `module.Class.method`)
        returns with `self` = self_value: its one return, or the first return that surely runs of a decision
        function (only ifs, assignments and returns); None where that is not known."""
        from .function_bodies import class_method, tables
        from .known_calls import _decision_function
        from .scope import Scope
        from .values import Bindings, Known

        for qualname in where:
            mod, _, name = qualname.rpartition(".")
            target = self.index.lookup(mod, name)
            fn = target.node if getattr(target, "kind", None) == "function" else None
            module = getattr(target, "module", None)
            if fn is None:  # a class's method: Module.Class.method
                cmod, _, cls_name = mod.rpartition(".")
                cls = self.index.lookup(cmod, cls_name)
                fn = class_method(cls, name) if getattr(cls, "kind", None) == "class" else None
                module = getattr(cls, "module", None)
            if fn is None:
                continue
            if not _decision_function(fn, module):
                return None
            ev = self.evaluator_class(env)  # (set by semantics/evaluator.py, which imports this module)
            scope = Scope(module=module, values={"self": self_value})
            table = tables(fn, module)
            for local, value, cond, _pos in table.local_assignments:
                scope.locals.setdefault(local, []).append((value, cond))
            returns = table.returns_decided(Bindings(), ev, scope)
            if not returns or returns[0][1] is not None:  # no return surely runs
                return None
            got = ev.infer(returns[0][0], scope)
            return got if isinstance(got, Known) else None
        return None

    @cached_property
    def _model_attrs(self) -> dict:
        from ..catalog import catalog
        from .values import Known

        spec = catalog().typed.walk.runtime.model_derived or {}
        if self.config is None or self.index is None or not spec or _MODEL_ATTRS_BUSY:
            return {}
        _MODEL_ATTRS_BUSY.append(True)
        try:
            plain = replace(self, deployment=None)
            known: dict = {}
            if self.transformers_backend is not None:
                known["using_transformers_backend()"] = self.transformers_backend
            out = {}
            for name, what in spec.items():
                attrs = dict(known)
                for attr, where in (what.get("self") or {}).items():
                    got = self._run(where, Known(dict(known)), plain)
                    if got is not None:
                        attrs[attr] = got.value
                got = self._run(what.get("code") or (), Known(attrs), plain)
                if got is not None:
                    out[name] = got
            return out
        finally:
            _MODEL_ATTRS_BUSY.pop()

    def model_attrs(self) -> dict:
        """Properties of vLLM's model configuration the code reads (walk.yaml `runtime.model_derived`:
        `model_config.use_mla`), run from their code in the trees with the model's configuration (as
        `hf_text_config`); {} without a configuration, and a property not decided is left out."""
        return self._model_attrs

    def _is_moe(self) -> bool | None:
        """vllm_ascend.utils.is_moe_model: a key of the text configuration naming experts."""
        values = getattr(self.config, "values", None)
        if not isinstance(values, dict):
            return None
        text = values.get("text_config")
        return any("expert" in str(k) for k in (text if isinstance(text, dict) else values))

    @cached_property
    def mc2_capacity(self) -> int | None:
        """The MC2 token capacity vllm-ascend sets at start-up (ascend_forward_context.set_mc2_tokens_capacity):
        the graph capture's largest size (else max_num_seqs × the decode query length) split over TP, capped at
        the per-rank limit the tree declares, times TP."""
        from .runtime_defaults import mc2_capacity

        return mc2_capacity(self.index, self.deployment) if self.deployment is not None else None

    def _parallel_calls(self) -> dict:
        """walk.yaml `runtime.parallel`: vLLM's parallel-state queries (`get_ep_group().world_size`,
        `get_tensor_model_parallel_world_size()`), answered by the deployment where it states the sizes."""
        from ..catalog import catalog
        from .values import Known

        out = {}
        for name, what in (catalog().typed.walk.runtime.parallel or {}).items():
            if isinstance(what, dict):
                values = {k: self.parallel_value(v) for k, v in what.items()}
                if all(v is not None for v in values.values()):
                    out[name] = lambda _call, _scope, values=values: Known(dict(values))
            else:
                value = self.parallel_value(what)
                if value is not None:
                    out[name] = lambda _call, _scope, value=value: Known(value)
        return out


@lru_cache(maxsize=4)
def _platform(backend: str | None) -> tuple[dict, frozenset, str]:
    """(check -> answer, the checks answered on any object, the name of vLLM's platform object) for `backend`;
    for None, the checks every backend answers alike."""
    from ..catalog import catalog

    spec = catalog().typed.leaf_ops.platform
    if spec is None:
        return {}, frozenset(), ""
    tables = spec.checks
    if backend is None:
        first, *rest = list(tables.values()) or [{}]
        answers = {k: v for k, v in first.items() if all(t.get(k) == v for t in rest)}
    else:
        answers = dict(tables.get(backend) or {})
    return answers, frozenset(spec.any_object), spec.platform_object


def _tensor_attribute(backend: str | None, expr: cst.Attribute) -> Truth:
    """`x.is_cuda` (an attribute, not a call; leaf_ops.yaml `platform.tensor_attributes`): what every tensor
    answers on `backend` (false on Ascend); UNKNOWN for another attribute or backend, and on vLLM's platform
    object (whose `is_cuda` is a method)."""
    from ..catalog import catalog

    spec = catalog().typed.leaf_ops.platform
    if spec is None or backend is None:
        return Truth.UNKNOWN
    answers = dict(spec.tensor_attributes.get(backend) or {})
    name = expr.attr.value
    on = expr.value
    while type(on) is cst.Attribute:
        on = on.value
    if name not in answers or (type(on) is cst.Name and on.value == spec.platform_object):
        return Truth.UNKNOWN
    return Truth.of(answers[name])


def _platform_method(index, backend: str | None, name: str) -> Truth:
    """`current_platform.<name>()` on `backend`: the answer of the platform's class (walk.yaml
    `runtime.platform`: vllm-ascend's NPUPlatform) where the first class of its MRO that defines the method
    returns a bool literal and nothing else (`def opaque_attention_op(cls) -> bool: return True`, vllm_ascend/
    platform.py; Platform's own in vllm/platforms/interface.py where NPUPlatform has none). Kept per index."""
    memo = _PLATFORM_METHODS.setdefault(id(index), (index, {}))
    if memo[0] is not index:
        memo = _PLATFORM_METHODS[id(index)] = (index, {})
    key = (backend, name)
    if key not in memo[1]:
        memo[1][key] = _read_platform_method(index, backend, name)
    return memo[1][key]


_PLATFORM_METHODS: dict = {}


def _read_platform_method(index, backend: str | None, name: str) -> Truth:
    from .values import literal

    found = platform_return(index, backend, name)
    got = literal(found[1]) if found is not None else None
    return Truth.of(got.value) if got is not None and isinstance(got.value, bool) else Truth.UNKNOWN


def platform_return(index, backend: str | None, name: str):
    """(module, expression) that `current_platform.<name>()` returns on `backend`: the one statement of the
    first class of the platform class's MRO (walk.yaml `runtime.platform`) that defines the method, where that
    statement is a `return` of a value (`def fp8_dtype(cls) -> torch.dtype: return torch.float8_e4m3fn` in
    vllm/platforms/interface.py, NPUPlatform defining none); None otherwise."""
    from ..catalog import catalog
    from .function_bodies import class_method

    qualname = (catalog().typed.walk.runtime.platform or {}).get(backend or "") if backend else None
    if not qualname:
        return None
    mod, _, cls_name = qualname.rpartition(".")
    cls, seen = index.lookup(mod, cls_name), set()
    todo = [cls] if getattr(cls, "kind", None) == "class" else []
    while todo:  # depth-first along the bases, as the MRO of a single-inheritance chain
        c = todo.pop(0)
        if c.qualname in seen:
            continue
        seen.add(c.qualname)
        fn = class_method(c, name)
        if fn is not None:
            body = [s for s in fn.body.body if not (type(s) is cst.SimpleStatementLine and len(s.body) == 1
                                                    and type(s.body[0]) is cst.Expr)]  # (its docstring)
            if (len(body) == 1 and type(body[0]) is cst.SimpleStatementLine and len(body[0].body) == 1
                    and type(body[0].body[0]) is cst.Return and body[0].body[0].value is not None):
                return c.module, body[0].body[0].value
            return None
        for base in c.bases:
            target = index.resolve_expr(c.module, base.value)
            if getattr(target, "kind", None) == "class":
                todo.append(target)
    return None


def _attention_backend_calls(index, backend: str | None) -> dict:
    """`get_attn_backend(...)` (walk.yaml runtime.attention_backend): the backend class the platform's selector
    returns for the layer being built, run from the trees with the call's arguments (attention_choice.py); where
    the platform has no selector the tool runs, the table's class on `backend` (its MLA class where the layer is
    one of `mla_layers`), the choice saying it is the table's. The value is a class the code reads attributes of
    (`attention_choice.Selected`, carrying how it was chosen)."""
    from ..catalog import catalog
    from .attention_choice import BackendChoice, Selected, select_backend
    from ..ir.texts import say
    from .values import Known, Unknown

    spec = catalog().typed.walk.runtime.attention_backend
    if spec is None or index is None:
        return {}
    mla_layers, calls = set(spec.mla_layers), spec.calls
    table = spec.classes.get(backend or "") or {}
    found: dict = {}  # kind -> the class, looked up when a layer first asks (its module is read then)

    def selected(call, scope, evaluator=None):
        choice = select_backend(evaluator.env, evaluator, call, scope, spec) if evaluator is not None else None
        if choice is not None and choice.classes:
            return choice.value()
        why = choice.why if choice is not None else say("attention_no_selector", platform=backend or "?")
        owner = getattr(scope, "owner", None)
        cls = getattr(owner, "cls", None)
        names = {cls.name, *_base_names(cls)} if cls is not None else set()  # the layer's class, its bases
        kind = "mla" if names & mla_layers else "attention"
        if kind not in found and kind in table:
            mod, _, name = table[kind].rpartition(".")
            target = index.lookup(mod, name)
            found[kind] = target if getattr(target, "kind", None) == "class" else None
        target = found.get(kind)
        if target is None:
            return Unknown(f"no {kind} backend class for {backend}")
        return Known(Selected(target, BackendChoice((target,), None, {}, why)))

    selected.with_evaluator = True  # type: ignore[attr-defined]
    return {name: selected for name in calls} if table or spec.selector else {}


def _base_names(cls) -> list[str]:
    """The names of a class's bases as written (`class MLAAttention(nn.Module, AttentionLayerBase)`)."""
    node = cls.node
    out = []
    for arg in getattr(node, "bases", ()):
        expr = arg.value
        while isinstance(expr, cst.Attribute):
            expr = expr.attr
        if isinstance(expr, cst.Name):
            out.append(expr.value)
    return out
