"""libcst's parse of a chunk without libcst's per-node validation.

Every libcst node checks its fields when built (`CSTNode.__post_init__` -> `_validate`): about a fifth of
a parse, spent on nodes the parser itself built, which are valid by construction (libcst's own comment on
`__post_init__` says validation could be skipped when parsing). The trees are the same objects either way;
nodes the tool builds itself (`parse_expression`, `with_changes`) are still validated, because the hook is
switched off only around the parse of source text."""

from __future__ import annotations

import libcst as cst
from libcst._nodes.base import CSTNode

# A C method that takes the node and does nothing observable: the generated __init__ calls
# `self.__post_init__()` on every node, and a Python no-op would cost a frame per node.
_SKIP = object.__sizeof__


def parse_module(text: bytes | str) -> cst.Module:
    """cst.parse_module(text), the nodes not validated again (see the module's docstring)."""
    validate = CSTNode.__dict__["__post_init__"]
    CSTNode.__post_init__ = _SKIP  # type: ignore[method-assign]
    try:
        return cst.parse_module(text)
    finally:
        CSTNode.__post_init__ = validate  # type: ignore[method-assign]
