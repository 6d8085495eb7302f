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

from ..ir.conditions import Truth


@dataclass(frozen=True, eq=False)
class Environment:
    backend: str | None = None  # "ascend", "cuda"; None: what holds on both
    index: object | None = field(default=None, repr=False)  # index.ModuleIndex: the trees, their versions
    soc: str | None = None  # the device's SoC family (devices.yaml), also where the tree has no profile table
    hardware: object | None = None  # passes.hardware.Profile: get_current_hardware_profile()
    config: object | None = None  # config.model_config.ConfigFacts: what decides the walk; None: nothing known
    runtime_defaults: bool = True  # get_ascend_config() & co. as their classes' declared defaults (walk.yaml)

    def without_config(self) -> "Environment":
        return replace(self, config=None)

    @staticmethod
    def for_binder(backend: str | None, index) -> "Environment":
        """What decides an import binding (index.ModuleIndex.choose): the backend and the trees' versions."""
        return Environment(backend, index, runtime_defaults=False)

    def platform_truth(self, expr: cst.BaseExpression) -> Truth:
        """`current_platform.is_rocm()`, `<object>.is_cuda()`: what vLLM's platform answers on the backend walked
        (leaf_ops.yaml `platform`), decided from the call's code; UNKNOWN for anything else."""
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
            return Truth.UNKNOWN
        if name in any_object or (type(on) is cst.Name and on.value == platform_object):
            return Truth.of(answers[name])
        return Truth.UNKNOWN

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
        for name, qualname in defaults.items():
            mod, _, cls_name = qualname.rpartition(".")
            target = index.lookup(mod, cls_name)
            if getattr(target, "kind", None) == "class":
                out[name] = lambda _call, _scope, target=target: Known(Defaults(target))
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


def _attention_backend_calls(index, backend: str | None) -> dict:
    """`get_attn_backend(...)` (walk.yaml runtime.attention_backend): the backend class the selector returns on
    `backend` for the layer being built (its MLA class where the layer is one of `mla_layers`), as a class the
    code reads attributes of; nothing where the table names no class of the trees."""
    from ..catalog import catalog
    from .values import ClassRef, Known, Unknown

    spec = catalog().typed.walk.runtime.attention_backend
    if spec is None or index is None:
        return {}
    mla_layers, calls = set(spec.mla_layers), spec.calls
    table = spec.classes.get(backend or "") or {}
    if not table:
        return {}
    found: dict = {}  # kind -> the class, looked up when a layer first asks (its module is read then)

    def selected(_call, scope):
        owner = getattr(scope, "owner", None)
        cls = getattr(owner, "cls", None)
        names = {cls.name, *_base_names(cls)} if cls is not None else set()  # the layer's class, its bases
        kind = "mla" if names & mla_layers else "attention"
        if kind not in found and kind in table:
            mod, _, name = table[kind].rpartition(".")
            target = index.lookup(mod, name)
            found[kind] = target if getattr(target, "kind", None) == "class" else None
        target = found.get(kind)
        return Known(ClassRef(target)) if target is not None else Unknown(f"no {kind} backend class for {backend}")

    return {name: selected for name in calls}


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
