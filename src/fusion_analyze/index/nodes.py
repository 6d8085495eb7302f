"""Fast read-only traversal of libcst trees.

`node.visit(visitor)` rebuilds every node it passes (libcst visitors may transform), which made tree walks
the largest cost of a run, larger than parsing. The analysis only reads, so it walks the dataclass fields
instead: about ten times faster. Whitespace, comments and punctuation fields are skipped. Children come in
source order (the few node types whose fields are declared out of source order are listed in _ORDER).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import libcst as cst

_SKIP = {"lpar", "rpar", "lbracket", "rbracket", "lbrace", "rbrace", "leading_lines", "lines_after_decorators",
         "header", "footer", "comma", "semicolon", "equal", "colon", "dot", "whitespace", "newline",
         "asynchronous", "first_line", "trailing_whitespace"}

# fields declared in another order than the source shows them
_ORDER: dict[type, tuple[str, ...]] = {
    cst.FunctionDef: ("decorators", "name", "params", "returns", "body"),
    cst.ClassDef: ("decorators", "name", "bases", "keywords", "body"),
    cst.IfExp: ("body", "test", "orelse"),
    cst.Arg: ("keyword", "value"),
    cst.ExceptHandler: ("type", "name", "body"),
    cst.Parameters: ("posonly_params", "params", "star_arg", "kwonly_params", "star_kwarg"),
}

_FIELDS: dict[type, tuple[str, ...]] = {}
_IS_NODE: dict[type, bool] = {}  # isinstance() against libcst's ABC is slow: decide once per type


def _is_node(value) -> bool:
    t = type(value)
    found = _IS_NODE.get(t)
    if found is None:
        found = _IS_NODE[t] = issubclass(t, cst.CSTNode)
    return found


def _fields(t: type) -> tuple[str, ...]:
    found = _FIELDS.get(t)
    if found is None:
        found = _ORDER.get(t) or tuple(
            f.name for f in dataclasses.fields(t) if f.name not in _SKIP and not f.name.startswith("whitespace"))
        _FIELDS[t] = found
    return found


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []
    for name in _fields(type(node)):
        value = getattr(node, name)
        if _is_node(value):
            out.append(value)
        elif type(value) in (tuple, list):
            out.extend(v for v in value if _is_node(v))
    return out


def iter_nodes(root: cst.CSTNode, prune=None) -> Iterator[cst.CSTNode]:
    """Pre-order, source order. `prune(node)` true: the node is yielded but its children are not walked."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if prune is not None and node is not root and prune(node):
            continue
        kids = children(node)
        kids.reverse()
        stack.extend(kids)


def find_all(root: cst.CSTNode, kind, prune=None) -> list:
    """Every node of type `kind` (a type or tuple of types) under root, root included, in source order."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return [n for n in iter_nodes(root, prune) if _is_a(type(n), kinds)]


_IS_A: dict[tuple, bool] = {}


def _is_a(t: type, kinds: tuple) -> bool:
    key = (t, kinds)
    found = _IS_A.get(key)
    if found is None:
        found = _IS_A[key] = issubclass(t, kinds)
    return found
