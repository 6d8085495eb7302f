"""vLLM's own (CUDA) compile fusion passes, read from the vLLM tree."""

from __future__ import annotations

from ..index.modules import ModuleIndex
from .passes import GraphPass


def read_cuda_passes(index: ModuleIndex) -> list[GraphPass]:
    return []
