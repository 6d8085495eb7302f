"""The leaf taxonomy (patterns/catalog/leaf_ops.yaml) as lookups."""

from __future__ import annotations

from typing import TypeGuard

from . import COLLECTIVES, catalog
from .schema import LeafClass, LeafOps


def taxonomy() -> dict:
    """leaf_ops.yaml as plain YAML (for the code that reads it so; `leaf_ops()` is its declared shape)."""
    return catalog().leaf_ops


def leaf_ops() -> LeafOps:
    return catalog().typed.leaf_ops


def leaf_for_class_names(names: list[str]) -> tuple[str, dict] | None:
    """First of `names` (a class and its bases, nearest first) that the taxonomy lists, with its entry as plain
    YAML (`leaf_class_for` gives the entry's declared shape)."""
    classes = taxonomy()["classes"]
    for n in names:
        if n in classes:
            return n, classes[n]
    return None


def leaf_class_for(names: list[str]) -> tuple[str, LeafClass] | None:
    """First of `names` (a class and its bases, nearest first) that the taxonomy lists, with its entry."""
    classes = leaf_ops().classes
    for n in names:
        if n in classes:
            return n, classes[n]
    return None


def hub_layer_kind(fn) -> str | None:
    """The op kind of a function decorated as a kernel-hub layer (leaf_ops.yaml `hub_layers`), else None."""
    import libcst as cst

    spec = leaf_ops().hub_layers
    if spec is None:
        return None
    for d in getattr(fn, "decorators", ()):
        call = d.decorator
        name = call.func if type(call) is cst.Call else None
        name = name.attr.value if type(name) is cst.Attribute else name.value if type(name) is cst.Name else None
        if name == spec.decorator and call.args and type(call.args[0].value) is cst.SimpleString:
            layer = call.args[0].value.evaluated_value
            return spec.kinds.get(layer) if isinstance(layer, str) else None
    return None


def function_kind(dotted: str | None) -> str | None:
    if not dotted:
        return None
    funcs = leaf_ops().functions
    if dotted in funcs:
        return funcs[dotted].kind
    tail = dotted.rsplit(".", 1)[-1]
    if tail in funcs and "." not in tail:
        return funcs[tail].kind
    # F.silu / nn.functional.silu spelled through an alias
    for key, val in funcs.items():
        if key.startswith("torch.nn.functional.") and dotted.endswith("functional." + key.rsplit(".", 1)[-1]):
            return val.kind
    return None


def is_kernel(dotted: str | None) -> TypeGuard[str]:
    return bool(dotted) and any(dotted.startswith(p) for p in leaf_ops().kernel_prefixes)


def is_cuda_kernel(dotted: str | None) -> bool:
    """A kernel of vLLM's CUDA build (leaf_ops.yaml `cuda_kernel_prefixes`): not one Ascend runs."""
    return bool(dotted) and any(dotted.startswith(p) for p in leaf_ops().cuda_kernel_prefixes)


def collective_kind(function_name: str) -> str | None:
    """The collective a function of the trees is (`tensor_model_parallel_all_reduce`: allreduce), by the
    functions table."""
    entry = leaf_ops().functions.get(function_name)
    kind = entry.kind if entry is not None else None
    return kind if kind in COLLECTIVES else None


def tensor_method_kind(name: str) -> str | None:
    return leaf_ops().tensor_methods.get(name)


def operator_kind(op_class: str) -> str | None:
    return leaf_ops().operators.get(op_class)
