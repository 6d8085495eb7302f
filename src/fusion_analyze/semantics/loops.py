"""A small helper function of the trees with `for` loops, run statement by statement on its arguments: only ifs,
assignments to a name, returns, `continue` / `break` and `for x in <sequence>` where the sequence is known item
by item (a tuple written out at the call, `(hf_config, hf_text_config)`, or a known tuple). vllm-ascend reads
the model's configuration through such helpers (`_get_config_bool(configs, "use_index_cache")`: the first
configuration that has the attribute gives it). Every test on the way must be decided; otherwise, or where
anything else runs, nothing is said (None). Never a guess: the loop runs as Python would, item by item."""

from __future__ import annotations

from typing import cast

import libcst as cst

from ..index.facts import FactTable
from ..ir.conditions import Truth
from .scope import Scope, bind_params
from .values import Known, Value

LOOP_FUNCTIONS = FactTable("loop_functions", "a function node -> whether it only decides, loops and returns")

_RETURN, _CONTINUE, _BREAK = "return", "continue", "break"
_MAX_ITEMS = 64


class _Undecided(Exception):
    """A test not decided, or a statement this runner does not read: the call's value is not said."""


def loop_function(fn: cst.FunctionDef, module) -> bool:
    """The body holds a `for` loop, and only the statements `run` reads."""
    return LOOP_FUNCTIONS.get(module, fn, lambda: _has_loop(fn.body.body) and _readable(fn.body.body))


def _has_loop(body) -> bool:
    for stmt in body:
        if type(stmt) is cst.For:
            return True
        if type(stmt) is cst.If and (_has_loop(stmt.body.body) or _has_loop(_orelse(stmt))):
            return True
    return False


def _orelse(stmt: cst.If) -> list:
    orelse = stmt.orelse
    if type(orelse) is cst.If:
        return [orelse]
    return list(orelse.body.body) if type(orelse) is cst.Else else []


def _readable(body) -> bool:
    for stmt in body:
        if type(stmt) is cst.If:
            if not (_readable(stmt.body.body) and _readable(_orelse(stmt))):
                return False
        elif type(stmt) is cst.For:
            if stmt.orelse is not None or stmt.asynchronous is not None or type(stmt.target) is not cst.Name \
                    or not _readable(stmt.body.body):
                return False
        elif type(stmt) is cst.SimpleStatementLine:
            for small in stmt.body:
                if type(small) in (cst.Return, cst.Pass, cst.Continue, cst.Break):
                    continue
                if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name:
                    continue
                if type(small) is cst.AnnAssign and type(small.target) is cst.Name and small.value is not None:
                    continue
                if type(small) is cst.Expr and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
                    continue
                return False
        else:
            return False
    return True


def run(evaluator, fn: cst.FunctionDef, module, call: cst.Call, scope, depth: int) -> Value | None:
    """The value the call returns, run statement by statement; None where a test is not decided (or the loop's
    sequence is not known item by item)."""
    inner = Scope(module=module, values={})
    bind_params(fn, call, scope, inner, skip_self=False)
    try:
        got = _block(evaluator, fn.body.body, inner, depth)
    except _Undecided:
        return None
    if got is None:
        return Known(None)  # (it ran off its end)
    if got[0] != _RETURN:
        return None
    return got[1]


def _block(ev, body, scope: Scope, depth: int):
    for stmt in body:
        got = _statement(ev, stmt, scope, depth)
        if got is not None:
            return got
    return None


def _statement(ev, stmt, scope: Scope, depth: int):
    if type(stmt) is cst.If:
        t = ev.truth(stmt.test, scope.module, None, scope)
        if t is Truth.UNKNOWN:
            raise _Undecided()
        return _block(ev, stmt.body.body if t is Truth.TRUE else _orelse(stmt), scope, depth)
    if type(stmt) is cst.For:
        items = _items(ev, stmt.iter, scope, depth)
        if items is None:
            raise _Undecided()
        name = cast(cst.Name, stmt.target).value  # (a name: _readable)
        for item in items:
            _set(scope, name, item)
            got = _block(ev, stmt.body.body, scope, depth)
            if got is None or got[0] == _CONTINUE:
                continue
            if got[0] == _BREAK:
                break
            return got
        return None
    for small in stmt.body:
        kind = type(small)
        if kind is cst.Return:
            return _RETURN, ev.infer(small.value, scope, depth + 1) if small.value is not None else Known(None)
        if kind is cst.Continue:
            return _CONTINUE, None
        if kind is cst.Break:
            return _BREAK, None
        if kind is cst.Assign:
            _set(scope, small.targets[0].target.value, ev.infer(small.value, scope, depth + 1))
        elif kind is cst.AnnAssign:
            _set(scope, small.target.value, ev.infer(small.value, scope, depth + 1))
    return None


def _set(scope: Scope, name: str, value: Value) -> None:
    scope.values[name] = value
    scope.version += 1  # (what the evaluator kept of this scope's names is no longer so)


def _items(ev, expr, scope: Scope, depth: int) -> list | None:
    """The values a `for` loop takes from `expr`: a tuple or list written out (each item read where it was
    written: a configuration object is no literal), followed through parameters and locals assigned once
    unconditionally; or a known tuple. None where not known item by item."""
    for _ in range(24):
        if scope is None:
            return None
        if type(expr) in (cst.Tuple, cst.List):
            if any(type(e) is cst.StarredElement for e in expr.elements) or len(expr.elements) > _MAX_ITEMS:
                return None
            return [ev.infer(e.value, scope, depth + 1) for e in expr.elements]
        if type(expr) is cst.Name and expr.value not in (scope.values or {}):
            name = expr.value
            if name in scope.locals:
                values = scope.locals[name]
                if len(values) != 1 or values[0][1]:
                    break
                expr = values[0][0]
                continue
            if name in scope.params:
                expr, scope = scope.params[name]
                continue
        break
    got = ev.infer(expr, scope, depth + 1)
    if isinstance(got, Known) and isinstance(got.value, (tuple, list)) and len(got.value) <= _MAX_ITEMS:
        return [Known(v) for v in got.value]
    return None
