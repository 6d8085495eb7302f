"""What one device kernel does, as primitive ops (patterns/catalog/kernels.yaml)."""

from __future__ import annotations

import re
from functools import lru_cache


from ..resources import data_dir, load_yaml


@lru_cache(maxsize=1)
def _table() -> list[tuple[re.Pattern, frozenset[str]]]:
    data = load_yaml((data_dir("patterns") / "catalog" / "kernels.yaml").read_text(encoding="utf-8"))
    return [(re.compile(e["match"]), frozenset(e["covers"])) for e in data["kernels"]]


@lru_cache(maxsize=4096)
def kernel_covers(name: str) -> frozenset[str]:
    """The primitives a kernel (dotted name) does in one launch; empty when the table does not know it."""
    for rx, covers in _table():
        if rx.search(name):
            return covers
    return frozenset()


def fuses(covers: frozenset[str], need: tuple[str, ...], optional: tuple[str, ...] = ()) -> bool:
    """A kernel or pass fuses a scenario when it does all of its primitives and nothing outside it."""
    want = set(need)
    return bool(want) and want <= covers and covers <= want | set(optional) | _NEUTRAL


# Primitives a fusing kernel may do besides the scenario's without changing what it is.
_NEUTRAL = {"split", "view", "cast", "scale"}


def kernel_fuses(covers: frozenset[str], need: tuple[str, ...]) -> bool:
    """One kernel fuses a scenario when it does at least all of the scenario's primitives."""
    return bool(need) and set(need) <= covers
