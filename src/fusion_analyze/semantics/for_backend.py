"""Evaluators made for a backend alone, without an analysis: what the graph-pass readers and the binder ask.
Above both the evaluator and its Environment (the evaluator knows its Environment only as a type)."""

from __future__ import annotations

from functools import lru_cache

from .environment import Environment
from .evaluator import Evaluator


@lru_cache(maxsize=4)
def evaluator(backend: str | None) -> Evaluator:
    """The evaluator of one backend ("ascend", "cuda") that knows no configuration, no device and no trees' versions;
    None knows only what holds on both (pass managers read once per session, tests)."""
    return Evaluator(Environment(backend))


def binding_decider(index, backend: str):
    """What the binder (index.ModuleIndex.choose) asks of an import binding's condition: the backend's evaluator
    that knows the vLLM version (vllm-ascend imports one class per version) and no configuration."""
    return Evaluator(Environment.for_binder(backend, index)).condition_truth
