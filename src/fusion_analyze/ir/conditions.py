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
    # the test with each value it reads that was handed down replaced by a name for where it is set
    # (walk/construction/constructor.py `_traced`): vllm-ascend's MLA impl's `self.q_lora_rank` and its layer's
    # are the one `q_lora_rank` the decoder layer passes, so their tests are one test too (keys())
    same: cst.BaseExpression | None = None

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
        expr, holds = _positive(self.expr, not self.negated)
        if self.alias is not None:
            text = self.alias
        elif expr is None:
            text = self.text
        else:
            text = code_of(self.module, expr)
        return (getattr(self.module, "name", "") or "", " ".join(text.split()), holds)

    def keys(self) -> tuple[tuple[str, str, bool], ...]:
        """key(), and the key of the test read where its values are set (`same`), where it has one."""
        if self.same is None:
            return (self.key(),)
        kept = self.__dict__.get("_keys")
        if kept is None:
            kept = (self.key(), _traced(self).key())
            object.__setattr__(self, "_keys", kept)
        return kept


class _Traced:
    """The module of a traced test (Term.same): its names say where values are set, in no one module."""

    name = "(traced)"
    _module = cst.Module([])
    _codes: dict = {}  # node -> its code: the same traced test is keyed again and again (nodes live on)

    @classmethod
    def code(cls, node) -> str:
        found = cls._codes.get(node)
        if found is None:
            found = cls._codes[node] = cls._module.code_for_node(node)
        return found


def _traced(term: Term) -> Term:
    return Term(term.text, term.same, _Traced(), term.negated)


def _positive(expr, holds: bool):
    """(test, whether it must hold) with its negations taken off and its brackets dropped: `not (x)` is x not
    holding, `x is not None` is `x is None` not holding, `a != b` is `a == b` not holding."""
    while isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        expr, holds = expr.expression, not holds
    if expr is None:
        return expr, holds
    if getattr(expr, "lpar", None):
        expr = expr.with_changes(lpar=(), rpar=())
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        comp = expr.comparisons[0]
        flipped = cst.Is() if isinstance(comp.operator, cst.IsNot) else \
            cst.Equal() if isinstance(comp.operator, cst.NotEqual) else None
        if flipped is not None:
            expr, holds = expr.with_changes(comparisons=[comp.with_changes(operator=flipped)]), not holds
    return expr, holds


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
        have = {k for t in a.terms if t.expr is not None for k in t.keys()}
        extra = tuple(t for t in b.terms if t.expr is None or not have.intersection(t.keys()))
        return Condition(a.terms + extra) if extra else a
    return a or b


def either(a: Condition | None, b: Condition | None) -> tuple[bool, Condition | None]:
    """`a or b` where it is a conjunction: (True, None: always) where either is empty; (True, the terms they
    share) where the rest of each is one test the other negates (`x and t`, `x and not t`: `x`) or nothing
    (`x`, `x and t`: `x`); (False, None) otherwise."""
    if not a or not b:
        return True, None

    def shared(t: Term, others) -> bool:
        if t.expr is None:
            return any(u.expr is None and u.text == t.text for u in others)
        return any(u.expr is not None and set(t.keys()) & set(u.keys()) for u in others)

    rest_a = [t for t in a.terms if not shared(t, b.terms)]
    rest_b = [t for t in b.terms if not shared(t, a.terms)]
    if not rest_a:
        return True, a
    if not rest_b:
        return True, b
    if len(rest_a) == 1 == len(rest_b) and rest_a[0].expr is not None and rest_b[0].expr is not None and any(
            (k[0], k[1], not k[2]) in rest_b[0].keys() for k in rest_a[0].keys()):
        common = tuple(t for t in a.terms if t is not rest_a[0])
        return True, (Condition(common) if common else None)
    return False, None


def _facts(term: Term) -> list[tuple[str, str, bool]]:
    """The tests a term asserts, as keys: its own, or each conjunct of an `a and b` that must hold (and of a
    `not (a or b)`), so `self.r and self.s is not None` asserts `self.r` (computed once per term)."""
    kept = term.__dict__.get("_facts")
    if kept is None:
        kept = _term_facts(term)
        object.__setattr__(term, "_facts", kept)
    return kept


def _term_facts(term: Term) -> list[tuple[str, str, bool]]:
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
        if term.same is not None:
            out += _facts(replace(_traced(term), same=None))
        return out
    return list(term.keys())


def implied(cond: Condition | None, test: Condition) -> Truth:
    """What `cond` (a path's tests) says of a one-term `test`: TRUE where it asserts the same test, FALSE where
    it asserts its negation, UNKNOWN otherwise. A test of code only (not a note) is compared."""
    if not cond or len(test.terms) != 1 or test.terms[0].expr is None:
        return Truth.UNKNOWN
    wanted = {k[:2]: k[2] for k in test.terms[0].keys()}
    for t in cond.terms:
        for f in _facts(t):
            if f[:2] in wanted:
                return Truth.TRUE if f[2] == wanted[f[:2]] else Truth.FALSE
    return Truth.UNKNOWN


def contradicts(a: Condition | None, b: Condition | None) -> bool:
    """A test `b` asserts is negated in `a`: both cannot hold (the branch or construction cannot run)."""
    if not a or not b:
        return False
    seen = {f[:2]: f[2] for t in a.terms for f in _facts(t)}
    return any(seen.get(f[:2], f[2]) != f[2] for t in b.terms for f in _facts(t))


def impossible(cond: Condition | None) -> bool:
    """The condition asserts a test and its negation (`t and not t`, read where the values are set)."""
    seen: dict = {}
    for t in cond.terms if cond else ():
        for f in _facts(t):
            if seen.setdefault(f[:2], f[2]) != f[2]:
                return True
    return False


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


def conjuncts(expr) -> list:
    """The parts of an `a and b and c` test, in order (an expression that is no `and` is its own one part)."""
    parts, stack = [], [expr]
    while stack:
        e = stack.pop()
        if type(e) is cst.BooleanOperation and type(e.operator) is cst.And:
            stack += [e.right, e.left]
        else:
            parts.append(e)
    return parts


def code_of(module, expr) -> str:
    if module is not None:
        return module.code(expr).strip()
    return cst.Module([]).code_for_node(expr).strip()
