"""One analysis session: the opened trees, the module index over them and the resolver."""

from __future__ import annotations

from dataclasses import dataclass

from .index.modules import ModuleIndex
from .locate.resolve import Resolver
from .sources.trees import SourceTree, open_tree


@dataclass
class Session:
    vllm: SourceTree
    ascend: SourceTree | None
    backend: str
    index: ModuleIndex
    resolver: Resolver

    @classmethod
    def open(cls, vllm_root: str | None, ascend_root: str | None, backend: str | None = None) -> "Session":
        vllm = open_tree(vllm_root, "vllm", required=True)
        ascend = open_tree(ascend_root, "vllm_ascend", required=False)
        if backend is None:
            backend = "ascend" if ascend is not None else "cuda"
        index = ModuleIndex([vllm, ascend], backend=backend)
        return cls(vllm, ascend, backend, index, Resolver(index))
