"""The model vLLM's Transformers modeling backend builds: `AutoModel.from_config(...)` is the base model class
transformers' auto mapping gives the configuration's model type, in the transformers tree (--hf-root)."""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

import libcst as cst

from ..catalog import catalog
from ..ir.texts import say


def auto_model_class(index, call: cst.Call, module, model_type: str | None):
    """(is it such a call, the class Definition or None, why not known)."""
    spec = catalog().typed.walk.runtime.auto_model
    dotted = index.dotted(module, call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
    if spec is None or dotted not in spec.calls:
        return False, None, None
    tree = index.trees.get("transformers")
    if tree is None:
        return True, None, say("automodel_no_tree")
    if not model_type:
        return True, None, say("automodel_no_type")
    names = mapping(str(tree.package_dir / "models" / "auto" / "modeling_auto.py"), spec.mapping)
    name = names.get(model_type)
    if name is None:
        return True, None, say("automodel_unmapped", mapping=spec.mapping, model_type=repr(model_type))
    cls = find_class(index, tree, model_type, name)
    if cls is None:
        return True, None, say("automodel_class_missing", cls=name, model_type=model_type)
    return True, cls, None


def find_class(index, tree, model_type: str, name: str):
    """`name` in models/<type>/modeling_<type>.py, else in any modeling file that defines it."""
    models = tree.package_dir / "models"
    paths = [models / model_type / f"modeling_{model_type}.py"]
    paths += sorted(p for p in models.glob("*/modeling_*.py") if p not in paths and _defines(str(p), name))
    for path in paths:
        if not path.is_file():
            continue
        module = index.module_name_for(path)
        found = index.lookup(module, name) if module else None
        if getattr(found, "kind", None) == "class":
            return found
    return None


@lru_cache(maxsize=4096)
def _defines(path: str, name: str) -> bool:
    try:
        return f"class {name}(" in Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


@lru_cache(maxsize=8)
def mapping(path: str, table: str) -> dict:
    """model type -> class name of one `*_MAPPING_NAMES` table of modeling_auto.py."""
    out: dict = {}
    for name, model_type, cls in mapping_pairs(path):
        if name == table:
            out.setdefault(model_type, cls)
    return out


@lru_cache(maxsize=8)
def mapping_pairs(path: str) -> tuple:
    """(table, model type, class name) of every ("type", "Class") pair of modeling_auto.py's module-level tables,
    read with `ast` (never imported)."""
    out = []
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return ()
    for node in tree.body:
        names = [t.id for t in node.targets if isinstance(t, ast.Name)] if isinstance(node, ast.Assign) else []
        for pair in ast.walk(node.value) if names else ():
            if (isinstance(pair, ast.Tuple) and len(pair.elts) == 2
                    and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in pair.elts)):
                out.append((names[0], pair.elts[0].value, pair.elts[1].value))
    return tuple(out)
