"""The leaf taxonomy (patterns/catalog/leaf_ops.yaml) as lookups."""

from __future__ import annotations

from . import COLLECTIVES, catalog


def taxonomy() -> dict:
    return catalog().leaf_ops


def leaf_for_class_names(names: list[str]) -> tuple[str, dict] | None:
    """First of `names` (a class and its bases, nearest first) that the taxonomy lists."""
    classes = taxonomy()["classes"]
    for n in names:
        if n in classes:
            return n, classes[n]
    return None


def hub_layer_kind(fn) -> str | None:
    """The op kind of a function decorated as a kernel-hub layer (leaf_ops.yaml `hub_layers`), else None."""
    import libcst as cst

    spec = taxonomy().get("hub_layers") or {}
    for d in getattr(fn, "decorators", ()):
        call = d.decorator
        name = call.func if type(call) is cst.Call else None
        name = name.attr.value if type(name) is cst.Attribute else name.value if type(name) is cst.Name else None
        if name == spec.get("decorator") and call.args and type(call.args[0].value) is cst.SimpleString:
            return spec.get("kinds", {}).get(call.args[0].value.evaluated_value)
    return None


def function_kind(dotted: str | None) -> str | None:
    if not dotted:
        return None
    funcs = taxonomy()["functions"]
    if dotted in funcs:
        return funcs[dotted]["kind"]
    tail = dotted.rsplit(".", 1)[-1]
    if tail in funcs and "." not in tail:
        return funcs[tail]["kind"]
    # F.silu / nn.functional.silu spelled through an alias
    for key, val in funcs.items():
        if key.startswith("torch.nn.functional.") and dotted.endswith("functional." + key.rsplit(".", 1)[-1]):
            return val["kind"]
    return None


def is_kernel(dotted: str | None) -> bool:
    return bool(dotted) and any(dotted.startswith(p) for p in taxonomy()["kernel_prefixes"])




def collective_kind(function_name: str) -> str | None:
    """The collective a function of the trees is (`tensor_model_parallel_all_reduce`: allreduce), by the
    functions table."""
    kind = (taxonomy()["functions"].get(function_name) or {}).get("kind")
    return kind if kind in COLLECTIVES else None


def tensor_method_kind(name: str) -> str | None:
    return taxonomy()["tensor_methods"].get(name)


def operator_kind(op_class: str) -> str | None:
    return taxonomy()["operators"].get(op_class)
