"""What vllm-ascend changes about a model: registered overrides and monkey patches."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from ..index.modules import ModuleIndex
from ..index.nodes import find_all

ASCEND_MODELS = "vllm_ascend.models"


@dataclass(frozen=True)
class Override:
    architecture: str
    module: str
    class_name: str
    file: str
    line: int  # of the class definition (of the register call when the class is not found)


@dataclass(frozen=True)
class Patch:
    target: str  # absolute dotted name that is replaced: vllm.x.y.Class.forward
    file: str
    line: int
    value: str  # source text of what is assigned
    module: str  # the patch module (to resolve `value` in)
    value_node: object = None


def read_overrides(index: ModuleIndex) -> dict[str, Override]:
    info = index.get(ASCEND_MODELS)
    if info is None:
        return {}
    found: dict[str, Override] = {}
    for call in _calls(info.tree):
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "register_model"):
            continue
        args = [a.value for a in call.args]
        if len(args) < 2:
            continue
        arch, target = _str(args[0]), _str(args[1])
        if arch is None or target is None or ":" not in target:
            continue
        module, cls = target.split(":", 1)
        line = info.line_of(call)
        file = info.rel
        mod = index.get(module)
        if mod is not None:
            file = mod.rel
            d = mod.classes().get(cls)
            if d is not None:
                line = d.line
        found.setdefault(arch, Override(arch, module, cls, file, line))
    return found


def read_patches(index: ModuleIndex) -> list[Patch]:
    """Assignments and setattr calls in vllm_ascend/patch/ whose target is a vLLM name."""
    tree = index.trees.get("vllm_ascend")
    if tree is None:
        return []
    patch_dir = tree.package_dir / "patch"
    patches: list[Patch] = []
    for path in sorted(patch_dir.rglob("*.py")) if patch_dir.is_dir() else []:
        module = index.module_name_for(path)
        info = index.get(module) if module else None
        if info is None:
            continue
        for node, target_expr, value in _assignments(info.tree):
            target = _target_name(index, info, target_expr)
            if target is None or not target.startswith("vllm."):
                continue
            patches.append(Patch(target, info.rel, info.line_of(node), info.code(value).strip(), info.name, value))
    return sorted(patches, key=lambda p: (p.target, p.file, p.line))


def _target_name(index: ModuleIndex, info, expr) -> str | None:
    # Named through the patch file's own imports, without parsing the vLLM modules they name:
    # the patch files import half of vLLM, and only the spelled target matters here.
    if isinstance(expr, tuple):  # setattr(obj, "name", value)
        obj, attr = expr
        base = index.dotted(info, obj)
        return f"{base}.{attr}" if base else None
    if isinstance(expr, cst.Attribute):
        return index.dotted(info, expr)
    return None


def _assignments(module: cst.Module):
    """(statement, target expr, value) for `a.b = v` anywhere and `setattr(a, "b", v)` calls."""
    out = []
    for node in find_all(module, (cst.Assign, cst.Call)):
        if isinstance(node, cst.Assign):
            for t in node.targets:
                if isinstance(t.target, cst.Attribute):
                    out.append((node, t.target, node.value))
        elif isinstance(node.func, cst.Name) and node.func.value == "setattr" and len(node.args) == 3:
            attr = _str(node.args[1].value)
            if attr is not None:
                out.append((node, (node.args[0].value, attr), node.args[2].value))
    return out


def _calls(module: cst.Module) -> list[cst.Call]:
    return find_all(module, cst.Call)


def _str(node) -> str | None:
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        v = node.evaluated_value
        return v if isinstance(v, str) else None
    return None
