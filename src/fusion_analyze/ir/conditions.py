"""Conditions kept as code and three-valued truth: the data a binding, a branch and a report share.

A test (an `if`, a guard, a platform check) is kept as the code the model writes (a libcst node and the module
it is in); the evaluator (semantics/evaluator.py) decides it to TRUE, FALSE or UNKNOWN, and a report prints what
is left of it. Data only: no values are inferred here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

import libcst as cst


class Truth(Enum):
    """Three-valued, as in mypy's reachability: FALSE and TRUE are known, UNKNOWN is not a guess."""

    FALSE = 0
    TRUE = 1
    UNKNOWN = -1

    @staticmethod
    def of(value: bool | None) -> "Truth":
        return Truth.UNKNOWN if value is None else (Truth.TRUE if value else Truth.FALSE)

    def as_bool(self) -> bool | None:
        return None if self is Truth.UNKNOWN else self is Truth.TRUE

    def negate(self) -> "Truth":
        return {Truth.TRUE: Truth.FALSE, Truth.FALSE: Truth.TRUE}.get(self, Truth.UNKNOWN)

    def and_(self, other: "Truth") -> "Truth":
        if Truth.FALSE in (self, other):
            return Truth.FALSE
        return Truth.TRUE if self is other is Truth.TRUE else Truth.UNKNOWN

    def or_(self, other: "Truth") -> "Truth":
        if Truth.TRUE in (self, other):
            return Truth.TRUE
        return Truth.FALSE if self is other is Truth.FALSE else Truth.UNKNOWN


# -- conditions as code --------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Term:
    """One conjunct: the code of an `if` test (or a note with no code), possibly negated."""

    text: str  # the test's source text, as the model writes it
    expr: cst.BaseExpression | None = None
    module: object = None  # the ModuleInfo the expression is in (for names)
    negated: bool = False
    prefix: str = ""  # "built when "
    suffix: str = ""  # " [is_moe = ...]": what a local flag was computed from
    # the local this test reads under another name: `self.use_mha` in forward is the `use_mha` its class's
    # __init__ assigns to it (`self.use_mha = use_mha`), so a test of either is the same test (key())
    alias: str | None = None

    def render(self) -> str:
        body = f"not ({self.text})" if self.negated else self.text
        return f"{self.prefix}{body}{self.suffix}"

    def key(self) -> tuple[str, str, bool]:
        """(module, the test's code without its negations, whether it must hold): `not (not x)` is `x`, and
        a `built when` prefix or a computed-from suffix does not change what is tested."""
        kept = self.__dict__.get("_key")
        if kept is None:
            kept = self._key()
            object.__setattr__(self, "_key", kept)  # computed once per term (joins ask it often)
        return kept

    def _key(self) -> tuple[str, str, bool]:
        expr, holds = self.expr, not self.negated
        while isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            expr, holds = expr.expression, not holds
        if self.alias is not None:
            text = self.alias
        elif expr is None:
            text = self.text
        else:
            text = code_of(self.module, expr.with_changes(lpar=(), rpar=()) if getattr(expr, "lpar", None) else expr)
        return (getattr(self.module, "name", "") or "", " ".join(text.split()), holds)


@dataclass(frozen=True, eq=False)
class Condition:
    """A conjunction of terms; equal when it reads the same."""

    terms: tuple[Term, ...]

    @staticmethod
    def of(expr: cst.BaseExpression, module, text: str | None = None) -> "Condition":
        return Condition((Term(text if text is not None else code_of(module, expr), expr, module),))

    @staticmethod
    def note(text: str) -> "Condition":
        return Condition((Term(text),))

    def negate(self) -> "Condition":
        """`not (test)` of a single test; a conjunction negates as one note."""
        if len(self.terms) == 1 and not self.terms[0].negated and not self.terms[0].prefix and not self.terms[0].suffix:
            return Condition((replace(self.terms[0], negated=True),))
        return Condition((Term(f"not ({self})", None),))

    def with_prefix(self, prefix: str) -> "Condition":
        first = self.terms[0]
        return Condition((replace(first, prefix=prefix + first.prefix),) + self.terms[1:])

    def with_suffix(self, suffix: str) -> "Condition":
        last = self.terms[-1]
        return Condition(self.terms[:-1] + (replace(last, suffix=last.suffix + suffix),))

    def __str__(self) -> str:
        return " and ".join(t.render() for t in self.terms)

    def __eq__(self, other) -> bool:
        return isinstance(other, Condition) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def __bool__(self) -> bool:
        return bool(self.terms)


def join(a: Condition | None, b: Condition | None) -> Condition | None:
    """Both hold (either may be absent); a test `a` already has is not said twice (`self.qk_norm and built
    when self.qk_norm` is one test)."""
    if a and b:
        have = {t.key() for t in a.terms if t.expr is not None}
        extra = tuple(t for t in b.terms if t.expr is None or t.key() not in have)
        return Condition(a.terms + extra) if extra else a
    return a or b


def _facts(term: Term) -> list[tuple[str, str, bool]]:
    """The tests a term asserts, as keys: its own, or each conjunct of an `a and b` that must hold (and of a
    `not (a or b)`), so `self.r and self.s is not None` asserts `self.r`."""
    if term.expr is None:
        return []
    expr, holds = term.expr, not term.negated
    while isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        expr, holds = expr.expression, not holds
    if term.alias is None and isinstance(expr, cst.BooleanOperation) and (
            isinstance(expr.operator, cst.And) if holds else isinstance(expr.operator, cst.Or)):
        out = []
        for side in (expr.left, expr.right):
            out += _facts(Term("", side, term.module, negated=not holds))
        return out
    return [term.key()]


def implied(cond: Condition | None, test: Condition) -> Truth:
    """What `cond` (a path's tests) says of a one-term `test`: TRUE where it asserts the same test, FALSE where
    it asserts its negation, UNKNOWN otherwise. A test of code only (not a note) is compared."""
    if not cond or len(test.terms) != 1 or test.terms[0].expr is None:
        return Truth.UNKNOWN
    module, text, holds = test.terms[0].key()
    for t in cond.terms:
        for f in _facts(t):
            if f[:2] == (module, text):
                return Truth.TRUE if f[2] == holds else Truth.FALSE
    return Truth.UNKNOWN


def contradicts(a: Condition | None, b: Condition | None) -> bool:
    """A test `b` asserts is negated in `a`: both cannot hold (the branch or construction cannot run)."""
    if not a or not b:
        return False
    seen = {f[:2]: f[2] for t in a.terms for f in _facts(t)}
    return any(seen.get(f[:2], f[2]) != f[2] for t in b.terms for f in _facts(t))


def as_text(cond: Condition | str | None) -> str | None:
    """The condition as a report prints it: on one line (a test written over several keeps its words)."""
    return None if cond is None else " ".join(str(cond).split())


def any_of_text(rests: list[str]) -> str:
    """`(a or b)`; beyond three paths or a few hundred characters, how many: a report line, not a proof."""
    text = "(" + " or ".join(rests) + ")"
    return text if len(rests) <= 3 and len(text) <= 400 else f"(one of {len(rests)} call paths)"


def split_outside(text: str, sep: str) -> list[str]:
    """`a and (b and c) and d` split on " and " -> [a, (b and c), d]: only outside brackets and quotes (a
    printed condition read back, or cut for a table cell without breaking a token)."""
    out, depth, quote, start, i = [], 0, None, 0, 0
    while i < len(text):
        ch = text[i]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            out.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    out.append(text[start:])
    return [p.strip() for p in out if p.strip()]


def code_of(module, expr) -> str:
    if module is not None:
        return module.code(expr).strip()
    return cst.Module([]).code_for_node(expr).strip()
