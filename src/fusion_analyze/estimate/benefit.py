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
from ..ir.texts import say
from .cost import Parallel, StepModel, counted, fused_saving, is_moe_op, native_span
from .shapes import Shapes

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


def parallel_style(op) -> str | None:
    """How a linear is split across TP ranks: `row` (input split, output all-reduced), `column` (output split; a
    merged q/k/v or gate/up linear is one) or None (replicated: a router, a ReplicatedLinear), from leaf_ops.yaml."""
    from ..catalog import catalog

    cls = op.layer_class or ""
    leaf = catalog().typed.leaf_ops.classes.get(cls)
    if op.attrs.get("role") == "router" or "Replicated" in cls:
        return None
    if leaf is not None and leaf.parallel:
        return leaf.parallel
    if "RowParallel" in cls:
        return "row"
    if op.attrs.get("merged") or "ColumnParallel" in cls or "QKVParallel" in cls:
        return "column"
    return None


def step_models(ops, shapes: Shapes, device: dict, par: Parallel, kind_counts: list[int] | None = None) -> dict[str, StepModel]:
    """One cost model per scenario (prefill, decode) of the walked ops; empty without dimensions. `kind_counts`:
    the layer count of each kind of decoder layer (WalkResult.layer_kinds), where there are several."""
    if shapes.symbolic:
        return {}
    return {name: StepModel(ops, shapes.dims, shapes.dtype_bytes, device, name, dict(scen), par, parallel_style,
                            kind_counts)
            for name, scen in sorted(device["scenarios"].items())}


def apply_fused(models: dict[str, StepModel], opps) -> None:
    """What already runs fused shortens the step: the ops a graph pass of the backend fuses at run time are walked
    as written (separate ops), so each step loses what that fusion saves, each op once (the largest first)."""
    fused = [o for o in opps if o.status == "fused_by_ascend_graph_pass"]
    for model in models.values():
        used: set[str] = set()
        per_layer = once = in_layers = 0.0
        for o in sorted(fused, key=lambda o: (-max(len(m.op_list) for m in o.matches), o.id)):
            for m in o.matches:
                ids = {x.id for x in m.op_list}
                if ids & used or not all(counted(x) for x in m.op_list):
                    continue
                r = fused_saving(model, m.op_list, overlap=bool((o.pattern.estimate or {}).get("needs_tp")))
                if r is None:
                    continue
                used |= ids
                if all(x.section == "layer" for x in m.op_list):
                    per_layer += r.us
                    n = model.step.layers_of(m.op_list) if model.step.kind_counts else model.step.num_layers
                    in_layers += r.us * n
                    kinds = {x.attrs.get("layer_kind") for x in m.op_list} - {None}
                    for k in kinds if model.step.kind_counts else ():
                        model.step.kind_us[k] -= r.us
                else:
                    once += r.us
        step = model.step
        step.fused_us = in_layers + once
        step.layer_us -= in_layers / step.num_layers if step.kind_counts else per_layer
        step.total_us -= step.fused_us


def estimate(opp, models: dict[str, StepModel], shapes: Shapes, device: dict, par: Parallel,
             tp_given: bool = True) -> Benefit:
    """What fusing the opportunity's matches saves in each step: the time of their ops minus the time of the
    fused op (estimate/cost.py), per layer for each match on the step's path once (matches on the two sides of
    an undecided test are alternatives: the larger one counts), times the number of layers."""
    est = opp.pattern.estimate or {}
    rejected = note = None
    if est.get("needs_tp"):
        if par.tp == 1:
            rejected = say("rejected_tp1") if tp_given else say("rejected_tp_default")
    priority = SEVERITY_PRIORITY[opp.pattern.severity]
    if models:
        formula = ("saving = time(ops) - time(fused op); time = max(bytes / HBM, FLOPs / peak) + transfer / link"
                   " + launches × launch cost (estimate/cost.py)")
    else:  # no dimensions: what the pattern says it stops moving, as a formula
        saved = opp.pattern.saved_of(opp.matches[0] if opp.matches else None)  # in the match's interface's dimensions
        terms = " + ".join(f"({s})" for s in saved) or "0"
        formula = f"2 × {shapes.dtype_bytes} B × [{terms}]; {int(est.get('launches', 0))}"
    numbers: dict = {}
    for name, model in models.items() if opp.status == "open" else ():  # what is fused or inactive saves nothing now
        row = _saving(opp, model)
        if row is not None:
            numbers[name] = row
    if numbers and opp.status == "open" and not rejected:
        share = max(n["share_of_step"] for n in numbers.values())
        priority = 3 if share >= 0.03 else 2 if share >= 0.005 else 1
    elif models:
        priority = 1
    if not numbers and models and opp.status == "open":
        gone = sorted({n for m in opp.matches for x in m.op_list for n in x.attrs.get("unavailable", ())})
        # ops that call a kernel the backend's install lacks are not costed as if they ran (estimate/cost.py)
        note = say("not_costed_unavailable", kernels=gone) if gone else say("not_costed")
    slower = _measured_slower(opp.pattern.id, models, device)
    if slower and numbers and not rejected:
        # the device profile holds a measurement of this fusion's kernel at the scenario's shapes that does not pay:
        # said next to the estimate, and not ranked above what does
        for name, m in slower.items():
            if name in numbers:
                numbers[name]["measured"] = m
        note = "; ".join(f"measured on {device.get('name') or device.get('id')} ({name}, {m['mode']}): the fused kernel "
                         f"{m['fused_us']} µs against {m['reference_us']} µs unfused ({m['source']}): it does not pay yet"
                         for name, m in sorted(slower.items()))
        priority = 1
    if rejected:
        priority = 1
    return Benefit(priority, formula, numbers, rejected, note)


def _measured_slower(pattern_id: str, models: dict, device: dict) -> dict:
    """Scenario -> the device profile's measured entry of the pattern's kernel (`measured` of a profile, name =
    the pattern id) at the scenario's token count and dimensions, where the fused kernel was not faster: the
    entries measured as the step pays its launches (`queued`: eager with the host ahead), else at its mode."""
    out = {}
    for name, model in models.items():
        for mode in dict.fromkeys((model.launch, model.mode)):
            found = []
            for m in device.get("measured") or []:
                if not isinstance(m, dict) or m.get("name") != pattern_id or m.get("mode") != mode:
                    continue
                shape = dict(m.get("shape") or {})
                if shape.pop("num_tokens", None) == int(model.n) and all(model.d.get(k) == v for k, v in shape.items()):
                    found.append(m)
            for m in found:
                if float(m["fused_us"]) >= float(m["reference_us"]):
                    out[name] = {"mode": m["mode"], "fused_us": m["fused_us"], "reference_us": m["reference_us"],
                                 "source": m.get("source", "")}
            if found:
                break
    return out


def _saving(opp, model: StepModel) -> dict | None:
    from .cost import counted, crossing_kind

    step = model.step
    found = []
    takes = (opp.pattern.estimate or {}).get("takes") or {}  # node -> the one kernel of its op the fusion replaces
    for m in opp.matches:
        ops = native_span(model, m.op_list)  # a layer's native forward: the kernel replaces all of it
        r = fused_saving(model, ops, {m.ops[n].id: part for n, part in takes.items() if n in m.ops},
                         overlap=bool((opp.pattern.estimate or {}).get("needs_tp")))
        if r is None:
            continue
        ids = frozenset(o.id for o in ops)
        sides = {(t, side) for o in ops for t, side in o.branches}
        branches = dict(sides)
        if len(branches) < len(sides):  # ops on two sides of one test: they never run together
            continue
        if step.kind_counts and len({o.attrs.get("layer_kind") for o in ops} - {None}) > 1 \
                and crossing_kind(ops) is None:
            continue  # ops of two kinds of decoder layer: no layer runs them all (unless across the boundary)
        # a match across the layer boundary holds other layers' instances of its ops than a match in one kind
        # (layer 1's input norm fed by layer 0, not the one the later layers feed): it shares no op with those
        key = frozenset((i, "across") for i in ids) if crossing_kind(ops) is not None else ids
        found.append((r, ids, branches, all(counted(o) for o in m.op_list), all(o.section == "layer" for o in m.op_list),
                      key))
    if not found:
        return None
    # each path once: the largest savings first (equal ones, to rounding, a layer's match before one of the
    # prologue or epilogue: it pays in every layer), a match skipped when it shares an op with one taken, or sits
    # on the other side of an undecided test than one taken
    found.sort(key=lambda f: (-round(f[0].us, 6), not f[4], sorted(f[1])))
    taken: list = []
    for f in found:
        if any(f[5] & t[5] or any(t[2].get(k, s) != s for k, s in f[2].items()) for t in taken):
            continue
        taken.append(f)
    layer = [f for f in taken if f[4]]
    once = [f[0] for f in taken if not f[4]]
    if step.kind_counts:  # each match pays in the layers of its own kind
        counts = [step.layers_of(_ops_of(opp, f[1])) for f in layer]
        kinds = {k for f in layer for o in _ops_of(opp, f[1]) for k in [o.attrs.get("layer_kind")] if k is not None}
        n = sum(step.kind_counts[k] for k in kinds if k < len(step.kind_counts)) or step.num_layers
    else:  # a fusion of a MoE layer's ops pays in the MoE layers only (not in the first dense ones)
        moe = any(is_moe_op(o) for m in opp.matches for o in m.op_list)
        n = step.moe_layers if moe else step.num_layers
        counts = [n] * len(layer)

    def in_layers(attr: str) -> float:  # over the layers that run each match (its kind's count)
        return sum(getattr(f[0], attr) * c for f, c in zip(layer, counts))

    def per_layer(attr: str) -> float:  # a layer that runs the fusion, on average over those layers
        return in_layers(attr) / n if n else 0.0

    total = in_layers("us") + sum(s.us for s in once)
    share = total / step.total_us if step.total_us else 0.0
    return {
        "num_tokens": int(model.n), "mode": model.mode, "launch": model.launch,
        "per_layer": {"bytes": int(per_layer("bytes")), "launches": round(per_layer("launches")),
                      "time_us": round(per_layer("us"), 2), "before_us": round(per_layer("before_us"), 2),
                      "after_us": round(per_layer("after_us"), 2)},
        "model": {"bytes": int(in_layers("bytes") + sum(s.bytes for s in once)),
                  "launches": round(in_layers("launches")) + sum(s.launches for s in once),
                  "time_us": round(total, 1)},
        # matches a layer runs (on average over the layers running any: one kind's and the boundary's alike),
        # and those of the prologue or epilogue
        "instances": (round(sum(counts) / n) if n else len(layer)) + len(once), "off_path": sum(1 for f in taken if not f[3]),
        # every match taken saves the same (one shape in every kind of layer: the first layer's copy of the
        # others'): a layer's figures are one match's, which a generated kernel's benchmark recomputes
        "uniform": not once and len({round(f[0].us, 2) for f in layer}) <= 1,
        "step_us": round(step.total_us, 1), "share_of_step": round(min(share, 1.0), 4),
    }


def _row(nbytes: float, launches: int, device: dict) -> dict:
    us = nbytes / (device["hbm_gb_s"] * 1e3) + launches * device["launch_us"]
    return {"bytes": int(nbytes), "launches": int(launches), "time_us": round(us, 2)}


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _ops_of(opp, ids: frozenset) -> list:
    """The ops of the opportunity's match whose op ids are `ids`."""
    for m in opp.matches:
        if frozenset(o.id for o in m.op_list) == ids:
            return m.op_list
    for m in opp.matches:  # a match costed over its layer's native forward (cost.native_span)
        if frozenset(o.id for o in m.op_list) <= ids:
            return m.op_list
    return []
