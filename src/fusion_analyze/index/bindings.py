"""Read a module's top-level bindings (classes, functions, assignments, imports) into its name index.

_collect walks the top-level statements, looking inside if/try blocks (recording their condition, so the
index can pick the binding for a backend) but not into functions; import_from_bindings and
all_import_from_bindings list the `from m import X` inside functions too, which the index leaves out.
Relative imports are made absolute with _absolute."""

from __future__ import annotations

import ast
import re
from types import SimpleNamespace

import libcst as cst

from ..ir.conditions import Condition, join
from .chunks import Chunk, ast_statements
from .module_info import Definition, ImportBinding, ModuleInfo


def _collect(info: ModuleInfo, body, condition: Condition | None) -> None:
    """Top-level bindings, looking inside if/try blocks (with their condition), not into functions."""
    for stmt in body:
        if type(stmt) is cst.ClassDef:
            _add_def(info, "class", stmt.name.value, stmt, condition)
        elif type(stmt) is cst.FunctionDef:
            _add_def(info, "function", stmt.name.value, stmt, condition)
        elif type(stmt) is cst.If:
            cond = Condition.of(stmt.test, info)
            _collect(info, stmt.body.body, join(condition, cond))
            orelse = stmt.orelse
            neg = cond.negate()
            while orelse is not None:
                if type(orelse) is cst.If:
                    c2 = Condition.of(orelse.test, info)
                    _collect(info, orelse.body.body, join(condition, join(neg, c2)))
                    neg = join(neg, c2.negate())
                    orelse = orelse.orelse
                else:
                    _collect(info, orelse.body.body, join(condition, neg))
                    orelse = None
        elif type(stmt) is cst.Try:
            _collect(info, stmt.body.body, condition)
            for handler in stmt.handlers:
                _collect(info, handler.body.body, join(condition, Condition.note("except")))
        elif type(stmt) is cst.SimpleStatementLine:
            for small in stmt.body:
                _collect_small(info, small, stmt, condition)


def _add_def(info: ModuleInfo, kind: str, name: str, node: cst.CSTNode | None, condition: Condition | None,
             chunk: Chunk | None = None) -> None:
    info.defs.setdefault(name, []).append(Definition(kind, name, info, node, condition, chunk))


def collect_ast(info: ModuleInfo, chunk: Chunk) -> None:
    """_collect for a run of statements that holds no `if` it reads (Chunk.tested), from the run's `ast`
    statements: the same imports and definitions in the same order, each definition's node left to be parsed
    when first asked for (the run is parsed then, and the node is the n-th of binding_nodes). Most of the
    module-level text a model's files hold is never asked for: imports, registries, tables of constants."""
    count = 0

    def walk(stmts, condition: Condition | None) -> None:
        nonlocal count
        for stmt in stmts:
            kind = type(stmt)
            if kind is ast.ClassDef or kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                info.defs.setdefault(stmt.name, []).append(Definition(
                    "class" if kind is ast.ClassDef else "function", stmt.name, info, None, condition,
                    at=(chunk, count, stmt)))
                count += 1
            elif kind is ast.Try:
                walk(stmt.body, condition)
                for handler in stmt.handlers:
                    walk(handler.body, join(condition, Condition.note("except")))
            elif kind is ast.Import:
                for alias in stmt.names:
                    if alias.asname is not None:
                        info.imports.setdefault(alias.asname, []).append(ImportBinding(alias.name, None, 0, condition))
                    else:
                        head = alias.name.split(".")[0]
                        info.imports.setdefault(head, []).append(ImportBinding(head, None, 0, condition))
            elif kind is ast.ImportFrom:
                absolute = _absolute(info, stmt.level, stmt.module)
                if stmt.names and stmt.names[0].name == "*":
                    info.star_imports.append(absolute)
                    continue
                for alias in stmt.names:
                    info.imports.setdefault(alias.asname or alias.name, []).append(
                        ImportBinding(absolute, alias.name, 0, condition))
            elif (kind is ast.Assign or kind is ast.AnnAssign) and stmt.value is not None:
                for target in (stmt.targets if kind is ast.Assign else [stmt.target]):
                    if type(target) is ast.Name:
                        info.defs.setdefault(target.id, []).append(
                            Definition("assign", target.id, info, None, condition, at=(chunk, count, stmt.value)))
                        count += 1

    walk(chunk.statements or [], None)


def _dotted_name(node) -> str:
    if type(node) is cst.Name:
        return node.value
    if type(node) is cst.Attribute:
        return f"{_dotted_name(node.value)}.{node.attr.value}"
    return ""


def _collect_small(info: ModuleInfo, small, line_node, condition: Condition | None) -> None:
    line = 0  # import lines are not reported; skip the position pass
    if type(small) is cst.Import:
        for alias in small.names:
            full = _dotted_name(alias.name)
            if alias.asname is not None:
                bound = alias.asname.name.value
                info.imports.setdefault(bound, []).append(ImportBinding(full, None, line, condition))
            else:
                head = full.split(".")[0]
                info.imports.setdefault(head, []).append(ImportBinding(head, None, line, condition))
    elif type(small) is cst.ImportFrom:
        level = len(small.relative)
        mod = _dotted_name(small.module) if small.module is not None else None
        absolute = _absolute(info, level, mod)
        if type(small.names) is cst.ImportStar:
            info.star_imports.append(absolute)
            return
        for alias in small.names:
            name = _dotted_name(alias.name)
            bound = alias.asname.name.value if alias.asname is not None else name
            info.imports.setdefault(bound, []).append(ImportBinding(absolute, name, line, condition))
    elif isinstance(small, (cst.Assign, cst.AnnAssign)):
        targets = [t.target for t in small.targets] if type(small) is cst.Assign else [small.target]
        value = small.value
        if value is None:
            return
        for target in targets:
            if type(target) is cst.Name:
                info.defs.setdefault(target.value, []).append(
                    Definition("assign", target.value, info, value, condition)
                )


def import_from_bindings(info: ModuleInfo, root: cst.CSTNode) -> list[tuple[str, tuple[str, str]]]:
    """(bound name, (absolute module, name)) of every `from m import X` under root, in source order; for the
    imports inside functions, which the module-level index leaves out."""
    from .nodes import find_all

    out = []
    for node in find_all(root, cst.ImportFrom):
        if type(node.names) is cst.ImportStar:
            continue
        mod = _absolute(info, len(node.relative), _dotted_name(node.module) if node.module else None)
        for alias in node.names:
            name = _dotted_name(alias.name)
            out.append((alias.asname.name.value if alias.asname else name, (mod, name)))
    return out


def all_import_from_bindings(info: ModuleInfo) -> list[tuple[str, tuple[str, str]]]:
    """import_from_bindings over the whole file, read with `ast`: scanning a file's functions for their
    imports should not make libcst parse every one of them."""
    if info.source is None or not re.search(rb"(^|\n)[ \t]*from[ \t]", info.source):
        return []
    if any(c.statements is None for c in info.chunks):  # a file read whole: libcst can say
        return import_from_bindings(info, info.tree)
    found = (n for n in ast_statements([s for c in info.chunks for s in c.statements]) if isinstance(n, ast.ImportFrom))
    nodes = sorted(found, key=lambda n: (n.lineno, n.col_offset))
    return [(alias.asname or alias.name, (_absolute(info, n.level, n.module), alias.name))
            for n in nodes for alias in n.names if alias.name != "*"]


def _absolute(info: ModuleInfo | SimpleNamespace, level: int, module: str | None) -> str:
    """`module` imported at `level` (`from ..m import x`: 2) in the module `info` names (its `name` and
    `is_package`: a ModuleInfo, or a namespace of the two where the module is not parsed), made absolute."""
    if level == 0:
        return module or ""
    parts = info.name.split(".")
    if not info.is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([module] if module else []))
