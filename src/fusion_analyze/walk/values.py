"""One place that decides: conditions kept as code, three-valued truth, and the evaluator every choice asks.

A branch, a factory's `if`, a guard, a platform check: each asks `Evaluator.truth` of the code itself (a libcst
node and the module it is in), and gets TRUE, FALSE or UNKNOWN. UNKNOWN is never guessed into an answer: the
walk keeps both paths and prints the condition, in the model's own words, only when a report renders it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import lru_cache

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


# -- values --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Known:
    """A value the code states: a literal, or a parameter default the call leaves alone."""

    value: object


@dataclass(frozen=True)
class Unknown:
    """Not known statically; `reason` says why (never replaced by a guess)."""

    reason: str = ""


@dataclass(frozen=True)
class OneOf:
    """One of several values, each under its condition (an `x if c else y`)."""

    options: tuple


Value = Known | Unknown | OneOf  # the walk's modules (construct.Instance) are values of their own kind


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

    def render(self) -> str:
        body = f"not ({self.text})" if self.negated else self.text
        return f"{self.prefix}{body}{self.suffix}"


@dataclass(frozen=True, eq=False)
class Condition:
    """A conjunction of terms; equal when it reads the same."""

    terms: tuple[Term, ...]

    @staticmethod
    def of(expr: cst.BaseExpression, module, text: str | None = None) -> "Condition":
        return Condition((Term(text if text is not None else _code(module, expr), expr, module),))

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
    """Both hold (either may be absent)."""
    if a and b:
        return Condition(a.terms + b.terms)
    return a or b


def as_text(cond: Condition | str | None) -> str | None:
    """The condition as a report prints it."""
    return None if cond is None else str(cond)


# -- what is known at a call ---------------------------------------------------------------------
@dataclass
class Bindings:
    """What is known at one call: which parameters are None, which attributes hold which classes."""

    none: dict[str, bool] = field(default_factory=dict)  # param -> is None?
    attr_classes: dict[str, list[str]] = field(default_factory=dict)  # "self.rotary_emb" -> class + bases

    def key(self) -> tuple:
        return (tuple(sorted(self.none.items())), tuple(sorted((k, tuple(v)) for k, v in self.attr_classes.items())))

    def for_callee(self) -> "Bindings":
        """What a called method starts from: the attribute classes carry over (same instance); None-ness is
        per parameter name, so the callee's comes from its own arguments (Walker._bind), not the caller's."""
        return Bindings(dict(), dict(self.attr_classes))

    def for_call(self, fn: cst.FunctionDef, call: cst.Call) -> "Bindings":
        """Bindings of a helper called with `call`: None-ness of its parameters from the arguments."""
        from .tables import bind_arguments, call_arguments, none_defaults

        new = Bindings(dict(), dict(self.attr_classes))
        for name in none_defaults(fn):
            new.none[name] = True
        for name, expr in bind_arguments(fn, *call_arguments(call)):
            state = self._arg_none(expr)
            if state is not None:
                new.none[name] = state
            else:
                new.none.pop(name, None)
        return new

    def _arg_none(self, expr) -> bool | None:
        if isinstance(expr, cst.Name):
            return True if expr.value == "None" else self.none.get(expr.value)
        return False


# -- the platform and the assume table -----------------------------------------------------------
@lru_cache(maxsize=4)
def _assume_table(backend: str | None) -> tuple:
    from ..catalog import catalog

    return tuple((re.compile(a["match"]), bool(a["value"])) for a in catalog().leaf_ops.get("assume", [])
                 if a.get("backend") in (None, backend))


def assumed(text: str, backend: str | None = None) -> Truth:
    """What the assume table (patterns/catalog/leaf_ops.yaml) says of a leaf test on `backend` (entries
    without a backend hold on both)."""
    for rx, value in _assume_table(backend):
        if rx.search(text):
            return Truth.of(value)
    return Truth.UNKNOWN


# -- the evaluator -------------------------------------------------------------------------------
class Evaluator:
    """Turns a test into a Truth, given the bindings of the call it is in and the backend walked (one per
    backend: `evaluator(backend)`)."""

    def __init__(self, backend: str | None = None):
        self.backend = backend

    def truth(self, expr: cst.BaseExpression, module, env: Bindings | None = None) -> Truth:
        env = env or _EMPTY
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            return self.truth(expr.expression, module, env).negate()
        if isinstance(expr, cst.BooleanOperation):
            left, right = self.truth(expr.left, module, env), self.truth(expr.right, module, env)
            return left.and_(right) if isinstance(expr.operator, cst.And) else left.or_(right)
        decided = self._none_test(expr, env)
        if decided is not Truth.UNKNOWN:
            return decided
        decided = self._isinstance_test(expr, module, env)
        if decided is not Truth.UNKNOWN:
            return decided
        return assumed(_code(module, expr), self.backend)

    def term_truth(self, term: Term, env: Bindings | None = None, none_only: bool = False) -> Truth:
        if term.expr is None:
            return Truth.UNKNOWN
        value = self._none_test(term.expr, env or _EMPTY) if none_only else self.truth(term.expr, term.module, env)
        if none_only and value is Truth.UNKNOWN and isinstance(term.expr, cst.UnaryOperation):
            value = self._none_test(term.expr.expression, env or _EMPTY).negate()
        return value.negate() if term.negated else value

    def condition_truth(self, cond: Condition | None, env: Bindings | None = None) -> Truth:
        out = Truth.TRUE
        for term in cond.terms if cond else ():
            out = out.and_(self.term_truth(term, env))
        return out

    def decide(self, cond: Condition | None, env: Bindings, none_only: bool = False) -> Condition | Truth:
        """The condition less the terms the bindings make true; FALSE if one is false; TRUE if none is left."""
        if not cond:
            return Truth.TRUE
        kept = []
        for term in cond.terms:
            value = self.term_truth(term, env, none_only)
            if value is Truth.FALSE:
                return Truth.FALSE
            if value is Truth.UNKNOWN:
                kept.append(term)
        return Condition(tuple(kept)) if kept else Truth.TRUE

    def infer(self, expr: cst.BaseExpression | None, scope=None, depth: int = 0) -> Value:
        """A literal, or a name followed through the parameters of the construction chain to a literal."""
        if expr is None:
            return Unknown("no expression")
        lit = literal(expr)
        if lit is not None:
            return lit
        where = self.origin(expr, scope)
        if where is not None and where[0] is not expr:
            return self.infer(where[0], where[1], depth + 1) if depth < 8 else Unknown("too deep")
        if isinstance(expr, cst.IfExp):
            return OneOf((self.infer(expr.body, scope, depth + 1), self.infer(expr.orelse, scope, depth + 1)))
        return Unknown(f"`{_code(getattr(scope, 'module', None), expr)}` is not known statically")

    def origin(self, expr: cst.BaseExpression, scope):
        """(expr, scope) where a name is set: through the parameters a call bound, then the defaults it left
        (bias=qkv_bias -> getattr(config, "attention_bias", False))."""
        from ..catalog import catalog

        for _ in range(catalog().limit("param_chain")):
            if not isinstance(expr, cst.Name) or scope is None:
                break
            if expr.value in scope.params:
                expr, scope = scope.params[expr.value]
            elif expr.value in scope.defaults and expr.value not in scope.locals:
                expr = scope.defaults[expr.value]
            else:
                break
        return (expr, scope) if scope is not None else None

    # -- tests the bindings decide ------------------------------------------------------------------
    def _none_test(self, expr, env: Bindings) -> Truth:
        """`p is None` / `p is not None` for a parameter whose None-ness the call decides."""
        if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1 and isinstance(expr.left, cst.Name):
            comp = expr.comparisons[0]
            if _is_none(comp.comparator) and expr.left.value in env.none:
                state = env.none[expr.left.value]
                if isinstance(comp.operator, cst.Is):
                    return Truth.of(state)
                if isinstance(comp.operator, cst.IsNot):
                    return Truth.of(not state)
        return Truth.UNKNOWN

    def _isinstance_test(self, expr, module, env: Bindings) -> Truth:
        """`isinstance(self.x, C)` when the walk knows which class built self.x."""
        if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "isinstance"
                and len(expr.args) == 2):
            return Truth.UNKNOWN
        classes = env.attr_classes.get(_code(module, expr.args[0].value))
        if classes is None:
            return Truth.UNKNOWN
        wanted = expr.args[1].value
        names = [e.value for e in wanted.elements] if isinstance(wanted, cst.Tuple) else [wanted]
        tails = {_code(module, n).rsplit(".", 1)[-1] for n in names}
        return Truth.of(bool(tails & set(classes)))


_EMPTY = Bindings()


@lru_cache(maxsize=4)
def evaluator(backend: str | None) -> Evaluator:
    """The evaluator of one backend ("ascend", "cuda"); None knows only what holds on both."""
    return Evaluator(backend)


def literal(expr) -> Known | None:
    """Known(value) of a Python literal (None, True, 1, "silu", -1.0), else None."""
    if isinstance(expr, cst.Name) and expr.value in ("None", "True", "False"):
        return Known({"None": None, "True": True, "False": False}[expr.value])
    if isinstance(expr, (cst.Integer, cst.Float)):
        return Known(expr.evaluated_value)
    if isinstance(expr, cst.SimpleString):
        return Known(expr.evaluated_value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus) and isinstance(expr.expression, (cst.Integer, cst.Float)):
        return Known(-expr.expression.evaluated_value)
    return None


def _is_none(expr) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _code(module, expr) -> str:
    if module is not None:
        return module.code(expr).strip()
    return cst.Module([]).code_for_node(expr).strip()
