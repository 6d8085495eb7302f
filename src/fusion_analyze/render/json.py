"""The analysis as the JSON report (schemas/report.schema.json): the one data form every renderer reads."""

from __future__ import annotations

from ..ir.texts import table as texts_table


def to_json(a) -> dict:
    from .. import __version__

    errors = [{"file": e.file, "reason": e.reason} for e in a.errors]
    report = {
        "schema_version": 1,
        "tool": {"name": "fusion-analyze", "version": __version__},
        "backend": a.session.backend,
        "sources": a.location.sources,
        "model": a.location.to_json(),
        "locations": {k: v.to_json() for k, v in sorted(a.walk.locations.items())},
        "repeat": a.walk.repeat,
        "layer_kinds": [{"kind": k, "layers": list(kd["layers"]), "ranges": layer_ranges(kd["layers"]), "count": kd["count"],
                         "of": kd["of"], "differs": dict(kd["differs"])} for k, kd in enumerate(a.walk.layer_kinds)],
        "ops": [op.to_json() for op in a.walk.ops],
        "alternatives": _alternatives(a.walk.alternatives),
        "opportunities": [_opportunity(a, o) for o in a.opportunities],
        "deployment": _deployment(a),
        "estimate": _estimate_inputs(a),
        "configuration": a.configuration.to_json() if a.configuration is not None else None,
        "passes": {k: [p.to_json() for p in v] for k, v in sorted(a.passes.items())},
        "compile": getattr(a, "compile_path", None),
        "errors": errors,
        "unknown_callees": sorted(a.walk.unknowns, key=lambda u: (u["file"], u["line"], u["name"])),
        "not_followed": list(a.walk.not_followed),
        "blockers": list(a.walk.blockers),
        "unavailable_kernels": _unavailable(a.walk.ops),
        "load_time_fusers": a.walk.load_time,
    }
    # every sentence above that code wrote through ir/texts.py `say`, with its key and arguments: the English
    # stays where it is, and a renderer says it again in the report's language
    report["texts"] = texts_table(report)
    return report


def _unavailable(ops) -> list[dict]:
    """The kernels the walk reached that the backend's install does not have, each with why, the ops that call it
    (in walk order) and whether the walked path surely calls it (`fails`: an op on it calls it on every path
    through the op); elsewhere only under tests the walk left open."""
    out: dict[str, dict] = {}
    for op in ops:
        # on the path a step adds and called on every path through the op: the walked path surely fails
        sure = op.steady and not op.attrs.get("other_branch") and all(side == 0 for _t, side in op.branches)
        for k in op.kernels:
            if k.unavailable:
                entry = out.setdefault(k.name, {"kernel": k.name, "why": k.unavailable, "ops": [], "fails": False})
                if op.id not in entry["ops"]:
                    entry["ops"].append(op.id)
                entry["fails"] = entry["fails"] or (sure and k.name in op.attrs.get("unavailable", ()))
    return [out[name] for name in sorted(out)]


def _opportunity(a, o) -> dict:
    from .stubs import interface_of, stub_source

    where = [f"{e['file']}:{e['line']}" for e in o.evidence if e["line"]][:6]
    match = o.matches[0]
    shapes = a.shapes.for_ops(match.op_list or match.ops.values()) if a.shapes is not None else None
    stub = stub_source(o.pattern, match, shapes, where=where)
    return {**o.to_json(), "benefit": a.benefits[o.id].to_json(), "message": o.pattern.message,
            "target": dict(o.pattern.target), "interface": {"name": interface_of(o.pattern, o.matches[0])["name"], "stub": stub}}


def _estimate_inputs(a) -> dict:
    shapes = a.shapes
    dev = {k: v for k, v in a.device.items() if k != "scenarios"}
    return {"shapes": dict(sorted(shapes.dims.items())) if shapes is not None else {},
            "shapes_source": shapes.source if shapes is not None else None,
            "dtype_bytes": shapes.dtype_bytes if shapes is not None else 2,
            "device": dev, "scenarios": a.device.get("scenarios", {}), "tp": a.tp, "ep": a.ep,
            "steps": {name: m.step.to_json(m.device) for name, m in sorted(a.steps.items())}}


def _deployment(a) -> dict | None:
    """What the report answers for (ir/deployment.py): the engine arguments, the quantisation, the device,
    and the choices the runtime makes with them per path (the MoE comm method and its MC2 capacity)."""
    d = getattr(a, "deployment", None)
    if d is None:
        return None
    out = {**d.as_json(), "device": a.device.get("id"), "mode": {name: scen.get("mode") for name, scen in
                                                              sorted(a.device.get("scenarios", {}).items())}}
    comm = []
    for op in a.walk.ops:
        if op.kind == "moe_experts" and op.layer_class and (op.attrs.get("runs_on") or "select_moe" in str(op.attrs.get("found_by", ""))):
            item = {"class": op.layer_class, "paths": op.attrs.get("runs_on") or sorted(a.device.get("scenarios", {})),
                    "found_by": op.attrs.get("found_by")}
            if item not in comm:
                comm.append(item)
    out["moe_comm"] = comm
    attention = []  # the attention backend each attention layer runs, as the platform's selector picks it
    for op in a.walk.ops:
        chosen = op.attrs.get("attention_backend")
        if chosen and op.kind in ("attention", "mla_attention"):
            item = {"backend": chosen.get("backend"), "impl": chosen.get("impl"), "selector": chosen.get("selector"),
                    "decided": bool(chosen.get("decided")), "why": str(chosen.get("why") or ""),
                    "alternatives": chosen.get("alternatives") or []}
            if chosen.get("passed_by"):  # the model's construction names the backend: no selector runs
                item["passed_by"] = chosen["passed_by"]
            if chosen.get("open"):  # the backend the layer holds is not decided (said, never the default silently)
                item["open"] = True
            if item not in attention:
                attention.append(item)
    out["attention"] = attention
    out["mc2_capacity"] = getattr(a, "mc2_capacity", None) if comm else None
    out["memory"] = getattr(a, "memory", None)
    return out


def _alternatives(items: list[dict]) -> list[dict]:
    seen, out = set(), []
    for alt in items:
        if alt["path"] not in seen:
            seen.add(alt["path"])
            out.append({**alt, "others": [list(o) for o in alt["others"]]})
    return out


def layer_ranges(layers: list[int]) -> list[list[int]]:
    """[0, 1, 2, 4] -> [[0, 2], [4, 4]]: consecutive layers as first-last ranges."""
    out: list[list[int]] = []
    for i in layers:
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out
