"""vllm-ascend's hardware profiles, read statically: which capabilities each SoC family has.

vllm-ascend decides per-device paths with `get_current_hardware_profile().supports(HardwareCapability.X)`
(the 310P compatibility kernels, the QKV-norm-rope graph pattern, the MoE router, ...). The profiles are a
literal table in `vllm_ascend/device/hardware_profile.py` (`_HARDWARE_PROFILES`: device type -> profile with
`capabilities=` sets built from module-level frozensets and `|`). The device the report is for (`--device`,
whose entry in devices.yaml names its `soc`) picks one; without the file (older trees) nothing is known.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from ..index.facts import FactTable
from ..index.modules import ModuleIndex

HARDWARE_PROFILES = FactTable("hardware_profiles", "None -> {SoC family: its hardware profile}")

PROFILE_MODULE = "vllm_ascend.device.hardware_profile"


@dataclass(frozen=True)
class HardwareProfile:
    """The capabilities of one SoC family (names of HardwareCapability members)."""

    soc: str
    capabilities: frozenset[str]
    file: str
    line: int
    fields: dict = field(default_factory=dict)  # device_adaptor_family -> "DeviceAdaptorFamily.STANDARD", ...

    def supports(self, capability: str) -> bool:
        return capability in self.capabilities


def read_profiles(index: ModuleIndex) -> dict[str, HardwareProfile]:
    """SoC family name (A2, A3, _310P, A5) -> its profile; empty when the tree has no profile table."""
    key = None
    if key in HARDWARE_PROFILES.of(index):
        return HARDWARE_PROFILES.of(index)[key]
    out: dict[str, HardwareProfile] = {}
    info = index.get(PROFILE_MODULE) if "vllm_ascend" in index.trees else None
    table = _assigned(info, "_HARDWARE_PROFILES") if info is not None else None
    if isinstance(table, cst.Call) and table.args:  # MappingProxyType({...})
        table = table.args[0].value
    if isinstance(table, cst.Dict):
        for el in table.elements:
            if not (isinstance(el, cst.DictElement) and isinstance(el.key, cst.Attribute) and isinstance(el.value, cst.Call)):
                continue
            caps = next((a.value for a in el.value.args if a.keyword is not None and a.keyword.value == "capabilities"), None)
            names = _capabilities(info, caps, 0) if caps is not None else None
            fields = {a.keyword.value: f"{a.value.value.value}.{a.value.attr.value}" for a in el.value.args
                      if a.keyword is not None and isinstance(a.value, cst.Attribute) and isinstance(a.value.value, cst.Name)}
            if names is not None:
                out[el.key.attr.value] = HardwareProfile(el.key.attr.value, names, info.rel, info.line_of(el.key), fields)
    HARDWARE_PROFILES.of(index)[key] = out
    return out


def _assigned(info, name: str):
    defs = [d for d in info.defs.get(name, ()) if d.kind == "assign"]
    return defs[0].node if len(defs) == 1 else None


def _capabilities(info, expr, depth: int) -> frozenset[str] | None:
    """The member names a capabilities expression holds: a set literal of `HardwareCapability.X`,
    `frozenset(...)` of one, a module-level name, or `a | b`; None when it is anything else."""
    if depth > 8:
        return None
    if isinstance(expr, (cst.Set, cst.List, cst.Tuple)):
        names = [e.value.attr.value for e in expr.elements if isinstance(e.value, cst.Attribute)]
        return frozenset(names) if len(names) == len(expr.elements) else None
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("frozenset", "set"):
        return _capabilities(info, expr.args[0].value, depth + 1) if expr.args else frozenset()
    if isinstance(expr, cst.Name):
        value = _assigned(info, expr.value)
        return _capabilities(info, value, depth + 1) if value is not None else None
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.BitOr):
        left, right = _capabilities(info, expr.left, depth + 1), _capabilities(info, expr.right, depth + 1)
        return left | right if left is not None and right is not None else None
    return None
