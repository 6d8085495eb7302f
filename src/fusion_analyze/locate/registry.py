"""Read the architecture tables that vllm/model_executor/models/registry.py declares, statically."""

from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst

from ..errors import UserError
from ..index.modules import ModuleIndex

REGISTRY_MODULE = "vllm.model_executor.models.registry"
MODELS_PACKAGE = "vllm.model_executor.models"
TEXT_TABLE = "_TEXT_GENERATION_MODELS"


@dataclass(frozen=True)
class RegistryEntry:
    architecture: str
    module: str  # absolute module name
    class_name: str
    table: str
    line: int


def _string(node) -> str | None:
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value if isinstance(node.evaluated_value, str) else None
    if isinstance(node, cst.ConcatenatedString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def absolute_module(stem: str) -> str:
    # Entries name a module of vllm.model_executor.models by stem, or a full dotted
    # package (vllm.models.<pkg> in newer trees).
    return stem if stem.startswith("vllm.") else f"{MODELS_PACKAGE}.{stem}"


def read_registry(index: ModuleIndex) -> list[RegistryEntry]:
    """Every (architecture -> module, class) pair of every table; first table wins on repeats."""
    info = index.get(REGISTRY_MODULE)
    if info is None:
        rel = "vllm/model_executor/models/registry.py"
        err = index.errors.get(rel)
        why = err.reason if err else "file not found"
        raise UserError(f"cannot read the model registry {rel} ({why}); point --vllm-root at a complete vLLM tree")
    entries: list[RegistryEntry] = []
    seen: set[str] = set()
    for name, defs in info.defs.items():
        for d in defs:
            read = d.ast_value if d.kind == "assign" else None
            if isinstance(read, ast.Dict):  # read by `ast` (bindings.collect_ast): the tables need no libcst parse
                for key, value in zip(read.keys, read.values):
                    if not isinstance(key, ast.Constant) or not isinstance(key.value, str) \
                            or not isinstance(value, ast.Tuple) or len(value.elts) < 2:
                        continue  # (a None key: **other_table spreads entries read from their own table)
                    arch = key.value
                    stem, cls = (v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else None
                                 for v in value.elts[:2])
                    if stem is not None and cls is not None:
                        entries.append(RegistryEntry(arch, absolute_module(stem), cls, name, key.lineno))
                continue
            if d.kind != "assign" or not isinstance(d.node, cst.Dict):
                continue
            for element in d.node.elements:
                if not isinstance(element, cst.DictElement):
                    continue  # **other_table spreads repeat entries we read from their own table
                arch = _string(element.key)
                value = element.value
                if arch is None or not isinstance(value, cst.Tuple) or len(value.elements) < 2:
                    continue
                stem = _string(value.elements[0].value)
                cls = _string(value.elements[1].value)
                if stem is None or cls is None:
                    continue
                entries.append(RegistryEntry(arch, absolute_module(stem), cls, name, info.line_of(element)))
    entries.sort(key=lambda e: (e.line, e.architecture))
    unique = []
    for e in entries:
        if e.architecture not in seen:
            seen.add(e.architecture)
            unique.append(e)
    if not unique:
        raise UserError(
            "the model registry vllm/model_executor/models/registry.py declares no architecture table this tool "
            "understands (dicts of \"Arch\": (\"module\", \"Class\")); report the vLLM version to the maintainers"
        )
    return unique


def served_text_model(entry: RegistryEntry) -> bool:
    """A text-generation architecture vLLM serves through its Transformers modeling backend (hf_fusers.yaml
    `backend_module`, `text_classes`), not one of the backend's own generic class names."""
    from ..catalog import catalog

    spec = catalog().typed.hf_fusers
    return (entry.module == spec.backend_module and entry.class_name in spec.text_classes
            and entry.architecture != entry.class_name)
