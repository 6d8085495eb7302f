"""What the sweeps count: does a report give a complete decoder layer? (issue 17)

A layer is complete when the walk found its token mixer (attention, MLA, an SSM or linear-attention mixer)
and its MLP or MoE: an op of an FFN kind outside the mixers' own code, or the layer's MLP / MoE submodule
(roles). A layer that builds nothing but its mixer and norms (Mamba: no MLP in the architecture) is complete
as "mixer only": every op it runs is listed. Read from the JSON report, so a batch run's files serve too."""

from __future__ import annotations

MIXERS = {"attention", "mla_attention", "ssm", "linear_attention"}
FFN = {"moe", "silu_mul", "gelu_mul", "act_mul", "activation", "relu", "gelu", "silu"}  # an activation by its kind


def layer_state(report: dict) -> str:
    """'complete', 'mixer only', or what is missing."""
    if "decoder_layer" not in report["locations"]:
        return "no decoder layer"
    layer = [op for op in report["ops"] if op["section"] == "layer"]
    mixers = [op for op in layer if op["kind"] in MIXERS]
    if not mixers:
        return "no token mixer"
    inside = [op["path"] for op in mixers if op["attrs"].get("mixer")]  # a walked mixer's own code

    def outside(op):
        return not any(op["path"] == p or op["path"].startswith(p + ".") for p in inside)

    if any(op["kind"] in FFN and outside(op) for op in layer) or {"mlp", "moe"} & set(report["locations"]):
        return "complete"
    if not any(op["kind"] in FFN | {"matmul", "unknown"} and outside(op) for op in layer):
        return "mixer only"
    return "no MLP/MoE"


def figures(reports: dict[str, dict]) -> tuple[int, int, dict[str, str]]:
    """(complete, total, {architecture: what is missing}) over one release's reports."""
    states = {arch: layer_state(r) for arch, r in reports.items()}
    bad = {a: s for a, s in states.items() if s not in ("complete", "mixer only")}
    return len(states) - len(bad), len(states), dict(sorted(bad.items()))
