"""The states a fusion scenario can be in, in report order (open first: what is left to do)."""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    OPEN = "open"
    FUSED_BY_ASCEND_GRAPH_PASS = "fused_by_ascend_graph_pass"
    FUSED_BY_ASCEND_KERNEL = "fused_by_ascend_kernel"
    FUSED_IN_MODEL = "fused_in_model"
    INACTIVE = "inactive"

    def __str__(self) -> str:  # rendered and serialised as the plain name, on every Python >= 3.10
        return self.value

    __format__ = str.__format__


STATUSES = tuple(s.value for s in Status)
ORDER = {s.value: i for i, s in enumerate(Status)}
FUSED = frozenset(s.value for s in Status if s.value.startswith("fused_"))
