"""What a patch of a module attribute reaches, and whether it runs at all.

A vllm-ascend patch that rebinds a module attribute (`_cc1d.causal_conv1d_update = _npu_update`, or the
package's name `fla_ops.chunk_gated_delta_rule = chunk_gated_delta_rule`) changes what code that reads that
attribute after the patch ran gets: a call `mod.f(...)` reads it when it runs; `from mod import f` reads it when
the importing module is imported. The walk (constructor.py `Constructor.runs`) asks, for each attribute read on
the way from a call to the function (index/modules.py `ModuleIndex.traced`), whether a patch of it reaches the
call; these helpers answer the two questions that are about the trees, not about values:

- which modules the patch module's own imports ran before its patches (`imported_first`): a `from m import f`
  in one of those bound the original (importing `a.b.c` runs `a` and `a.b` first, and a package's `__init__`
  imports run with it). Other importing modules are taken to be imported after the worker's patches, as
  vLLM imports a model's modules when it loads the model;
- whether an import a `try` body runs before the patch fails (`failing_import`): `from m import n` where `m` is
  a module of the trees that binds no `n` raises ImportError, and the patch after it never runs.
"""

from __future__ import annotations

from ...index.facts import FactTable
from ...ir.conditions import Truth

IMPORTED_FIRST = FactTable("imported_first", "a patch module -> the modules its imports ran before its patches")
_MAX_MODULES = 400  # a bound on the package closure (real patch modules stay well under it)


def imported_first(index, module: str) -> frozenset[str]:
    """The modules the patch module `module` has imported when its patches run: what its module-level imports
    name, the packages above them, and what those packages' `__init__` import (in the trees, transitively
    through packages)."""
    return IMPORTED_FIRST.get(index, module, lambda: _imported_first(index, module))


def _imported_first(index, module: str) -> frozenset[str]:
    out: set[str] = {module}
    todo = _named(index, module)
    while todo and len(out) < _MAX_MODULES:
        parts = todo.pop().split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            if name in out:
                continue
            out.add(name)
            where = index.module_path(name) if parts[0] in index.trees else None
            if where is not None and where[1]:  # a package: its __init__'s imports ran with it
                todo += _named(index, name)
    return frozenset(out)


def _named(index, module: str) -> list[str]:
    """The modules (and `module.name`s, which may be modules) a module's module-level imports name, leaving
    out those under a test the backend decides false (`if TYPE_CHECKING:`)."""
    info = index.get(module)
    if info is None:
        return []
    out = []
    for bindings in info.imports.values():
        for b in bindings:
            if b.condition is not None and index.binding_truth(b.condition) is Truth.FALSE:
                continue
            out.append(b.module)
            if b.name is not None:
                out.append(f"{b.module}.{b.name}")
    return out


def failing_import(index, needs) -> str | None:
    """The first of a try body's imports (Patch.needs) that fails in the trees, as code: `from m import n` where
    `m` is a readable module of the trees that binds no `n` (no definition, no import, no submodule, and no star
    import or module `__getattr__` that might). None where each may succeed (a module outside the trees, or
    one the tree does not hold, is not decided)."""
    for module, name in needs:
        if name is None or module.split(".")[0] not in index.trees:
            continue
        info = index.get(module)
        if info is None:
            continue
        if name in info.defs or name in info.imports or info.star_imports or "__getattr__" in info.defs:
            continue
        if info.is_package and index.module_path(f"{module}.{name}"):
            continue
        return f"from {module} import {name}"
    return None
