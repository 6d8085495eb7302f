"""Derived facts, declared: each kind of fact read from the trees is a FactTable with a name and a sentence
saying what it holds, computed once per holder (the session's ModuleIndex, or one ModuleInfo) and kept for the
session, as libcst's metadata providers declare what they compute. A holder keeps one dict per table
(`holder.facts`); a table's keys are its own (a node, a qualname, a backend), never shared with another.
"""

from __future__ import annotations

from typing import Callable, Generic, Hashable, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class HasFacts(Protocol):
    facts: dict["FactTable", dict]


class FactTable(Generic[K, V]):
    """One kind of derived fact: `name` says which, `holds` what each entry is."""

    __slots__ = ("name", "holds")

    def __init__(self, name: str, holds: str) -> None:
        self.name = name
        self.holds = holds

    def of(self, holder: HasFacts) -> dict[K, V]:
        """The holder's entries of this table (made empty on first use)."""
        table = holder.facts.get(self)
        if table is None:
            table = holder.facts[self] = {}
        return table

    def get(self, holder: HasFacts, key: K, compute: Callable[[], V]) -> V:
        """The entry for `key`, computed once."""
        table = self.of(holder)
        if key in table:
            return table[key]
        value = table[key] = compute()
        return value

    def __repr__(self) -> str:
        return f"<facts {self.name}>"
