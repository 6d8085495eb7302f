"""A printed condition read back as its tests (for the sweep test of issue 34): no test and its negation in one
condition, no literal test. Shared by tests/test_real_decided_or_said.py; parses what a report prints."""

from __future__ import annotations

import re

from fusion_analyze.ir.conditions import split_outside

_LITERALS = {"True", "False", "None", "0", "1", "()", "[]", "{}", "''", '""'}


def split_top(text: str, sep: str = " and ") -> list[str]:
    return split_outside(text, sep)


def _strip_parens(text: str) -> str:
    while text.startswith("(") and text.endswith(")") and len(split_top(text[1:-1], ",")) == 1 \
            and _balanced(text[1:-1]):
        text = text[1:-1].strip()
    return text


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return False
    return depth == 0


def terms(condition: str) -> list[tuple[str, bool]]:
    """(test, holds) of each conjunct; `built when` and a computed-from suffix ` [x = ...]` dropped, `not`
    folded into the polarity."""
    out = []
    for part in split_top(" ".join(condition.split())):
        part = re.sub(r"^(built when |enabled when |\w+: )", "", part)
        part = re.sub(r" \[[^\[\]]*(\[[^\[\]]*\][^\[\]]*)*\]$", "", part)
        holds = True
        part = _strip_parens(part)
        while part.startswith("not "):
            part, holds = _strip_parens(part[4:].strip()), not holds
        out.append((part, holds))
    return out


def problems(condition: str) -> list[str]:
    """What is wrong with a printed condition: a test and its negation, a literal test."""
    seen: dict[str, bool] = {}
    bad = []
    for test, holds in terms(condition):
        if test in _LITERALS:
            bad.append(f"literal test `{test}`")
        if test in seen and seen[test] != holds:
            bad.append(f"`{test}` and its negation")
        seen.setdefault(test, holds)
    return bad
