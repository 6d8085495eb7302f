"""What a fusion saves, per decoder layer and for the whole model, at prefill and at decode.

Each pattern's `estimate` names the intermediate tensors the fusion stops writing to HBM and reading back
(shapes in model dimensions) and the kernel launches it removes. Bytes = 2 (write + read) x dtype bytes x
elements; time = bytes / HBM bandwidth + launches x launch overhead (patterns/catalog/devices.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

from ..errors import UserError
from ..resources import load_yaml
from .shapes import Shapes, evaluate

STARS = {3: "⭐⭐⭐", 2: "⭐⭐", 1: "⭐"}
SEVERITY_PRIORITY = {"high": 3, "medium": 2, "low": 1}


@lru_cache(maxsize=4)
def _devices(path: str | None) -> dict:
    """The device profiles of --device-profile FILE, else the catalog's devices.yaml (checked against its declared
    shape, catalog/schema.py `Devices`)."""
    if not path:
        from ..catalog import catalog

        return catalog().devices
    p = Path(path)
    try:
        return load_yaml(p.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"device profile {p}: cannot read it ({exc}); give a YAML file like patterns/catalog/devices.yaml")


def device_profile(name: str | None = None, path: str | None = None) -> dict:
    data = _devices(path)
    key = name or data["default"]
    if key not in data["devices"]:
        raise UserError(f"unknown device {key}: use one of {', '.join(sorted(data['devices']))}")
    return {"id": key, **data["devices"][key], "scenarios": data["scenarios"]}


@dataclass
class Benefit:
    priority: int
    formula: str
    numbers: dict = field(default_factory=dict)  # scenario -> {per_layer: {...}, model: {...}}
    rejected: str | None = None
    note: str | None = None

    @property
    def stars(self) -> str:
        return STARS[self.priority]

    def to_json(self) -> dict:
        d = {"priority": self.priority, "formula": self.formula, "numbers": self.numbers}
        if self.rejected:
            d["rejected"] = self.rejected
        if self.note:
            d["note"] = self.note
        return d


def estimate(opp, shapes: Shapes, device: dict, tp: int | None) -> Benefit:
    est = opp.pattern.estimate or {}
    saved = list(est.get("saved", []))
    launches = int(est.get("launches", 0))
    # once per layer when every op is the layer's. The last layer's all-reduce into the final norm shares its
    # all-reduce with the layer's match into the next layer's norm (L - 1 of them): together one per layer
    layer_matches = [m for m in opp.matches if all(o.section == "layer" for o in m.op_list)]
    in_layer = len(layer_matches)
    layer_ops = {o.id for m in layer_matches for o in m.op_list}
    once = sum(1 for m in opp.matches if m not in layer_matches and not layer_ops & {o.id for o in m.op_list})
    b = shapes.dtype_bytes
    terms = " + ".join(f"({s})" for s in saved) or "0"
    formula = f"2 × {b} B × [{terms}] and {launches} launch(es) saved, per instance"
    formula += f"; {in_layer} instance(s) per layer × num_layers" if in_layer else ""
    formula += f" + {once} outside the layers" if once else ""
    rejected = note = None
    if est.get("needs_tp"):
        if tp == 1:
            rejected = "tp_size = 1: there is no all-reduce to fuse; pays only when tp_size > 1"
        elif tp is None:
            note = "assumes tp_size > 1 (no all-reduce at TP = 1); pass --tp N"
    numbers: dict = {}
    priority = SEVERITY_PRIORITY[opp.pattern.severity]
    if not shapes.symbolic:
        layers = shapes.dims.get("num_layers") or 1
        for name, scen in sorted(device["scenarios"].items()):
            dims = shapes.with_scenario(scen)
            if tp:
                dims["tp_size"] = tp
            elems = [evaluate(s, dims) for s in saved]
            if any(e is None for e in elems):
                numbers = {}
                break
            per_inst = 2 * b * sum(elems)
            per_layer_bytes = per_inst * in_layer
            model_bytes = per_layer_bytes * layers + per_inst * once
            model_launches = launches * (in_layer * layers + once)
            numbers[name] = {
                "num_tokens": dims["num_tokens"],
                "per_layer": _row(per_layer_bytes, launches * in_layer, device),
                "model": _row(model_bytes, model_launches, device),
            }
        if numbers and not rejected:
            step = decode_step_us(shapes, device)
            us = numbers["decode"]["model"]["time_us"]
            share = us / step if step else 0.0
            numbers["decode"]["share_of_step"] = round(share, 4)
            numbers["decode"]["step_us"] = round(step, 1)
            priority = 3 if share >= 0.05 else 2 if share >= 0.01 else 1
    if rejected:
        priority = 1
    return Benefit(priority, formula, numbers, rejected, note)


def decode_step_us(shapes: Shapes, device: dict) -> float:
    """The yardstick for priority: a memory-bound decode step reads every active weight once."""
    d = shapes.dims
    h, nh, nkv, hd = d.get("hidden_size", 0), d.get("num_heads", 0), d.get("num_kv_heads", 0), d.get("head_dim", 0)
    attn = h * (nh + 2 * nkv) * hd + nh * hd * h
    if d.get("num_experts") and d.get("top_k"):
        mlp = d["top_k"] * 3 * h * d.get("moe_intermediate_size", 0) + h * d["num_experts"]
    else:
        mlp = 3 * h * d.get("intermediate_size", 0)
    nbytes = (attn + mlp) * (d.get("num_layers") or 1) * shapes.dtype_bytes
    return nbytes / (device["hbm_gb_s"] * 1e3)


def _row(nbytes: float, launches: int, device: dict) -> dict:
    us = nbytes / (device["hbm_gb_s"] * 1e3) + launches * device["launch_us"]
    return {"bytes": int(nbytes), "launches": int(launches), "time_us": round(us, 2)}


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
