"""One analysis session: the opened trees, the module index over them and the resolver."""

from __future__ import annotations

from dataclasses import dataclass, field

from .index.modules import ModuleIndex
from .locate.resolve import Resolver
from .sources.trees import SourceTree, open_tree


def backend_for(backend: str | None, ascend: SourceTree | None) -> str:
    """The backend asked for, else Ascend when there is a vllm-ascend tree."""
    return backend or ("ascend" if ascend is not None else "cuda")


@dataclass
class Session:
    vllm: SourceTree
    ascend: SourceTree | None
    backend: str
    index: ModuleIndex
    resolver: Resolver
    patterns: list = field(default_factory=list)
    _passes: tuple | None = None
    shared_errors: set | None = None  # unreadable files met while reading what every model reads

    def passes(self) -> tuple[list, list]:
        """The Ascend and CUDA graph passes of the trees, read once per session."""
        if self._passes is None:
            from .status.cuda_passes import read_cuda_passes
            from .status.passes import read_ascend_passes

            self._passes = (read_ascend_passes(self.index), read_cuda_passes(self.index))
        return self._passes

    @classmethod
    def open(cls, vllm_root: str | None, ascend_root: str | None, backend: str | None = None,
             patterns_dir: str | None = None, cache: bool = True) -> "Session":
        vllm = open_tree(vllm_root, "vllm", required=True)
        ascend = open_tree(ascend_root, "vllm_ascend", required=False)
        backend = backend_for(backend, ascend)
        from .index.parse_cache import default_cache

        index = ModuleIndex([vllm, ascend], backend=backend, cache=default_cache() if cache else None)
        from .match.patterns import load_patterns

        return cls(vllm, ascend, backend, index, Resolver(index), load_patterns(patterns_dir))
