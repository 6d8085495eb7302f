"""Where a graph pass registers each of its patterns: the `if`s of its __init__ on the way (early exits and
enclosing tests) and the constants it traces the pattern with (`for eps in [1e-6, 1e-5]: P(..., eps=eps)`).
pass_guards.py decides those `if`s for one model."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from ..index.modules import ModuleInfo
from ..index.nodes import find_all
from ..semantics.for_backend import evaluator
from ..ir.texts import say


@dataclass(frozen=True)
class PassGuard:
    """An `if` of the pass's __init__ on the way to a pattern's registration, kept as where it is (the parent
    process reads the code again to decide it for a model: passes are read in a child)."""

    text: str  # the test, in the pass's words
    file: str
    line: int
    stops: bool  # `if test: return / continue` before the registration (it must be false), else an enclosing `if`
    module: str  # the pass's module and class, whose __init__ holds the test
    cls: str

    def wanted(self) -> str:
        return say("guard_false" if self.stops else "guard_holds", guard=self.text)


def _init_guards(info: ModuleInfo, cls: cst.ClassDef) -> list[str]:
    out: list[str] = []
    for stmt in cls.body.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__":
            for n in find_all(stmt, cst.If):
                text = " ".join(info.code(n.test).split())
                if len(text) < 120 and text not in out:
                    out.append(say("guard_in_init", guard=text))
    return out


def _registered_as(info: ModuleInfo, node, called_names: list[str], patterns) -> list[str]:
    out = []
    for call in _calls_to(node, {n for n in called_names if patterns.get(n)}):
        text = " ".join(info.code(call).split())
        if any(a.keyword is not None and a.keyword.value not in ("vllm_config", "config") for a in call.args) and len(text) <= 140:
            g = say("registered_as", call=text)  # the constants the pattern is traced with
            if g not in out:
                out.append(g)
    return out


def _init_of(cls_node: cst.ClassDef) -> cst.FunctionDef | None:
    for stmt in cls_node.body.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__":
            return stmt
    return None


def _exits(block) -> bool:
    """The block ends in `return` or `continue`: an early exit, so its test guards what follows."""
    body = block.body
    last = body[-1] if body else None
    return isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, (cst.Return, cst.Continue)) for s in last.body)


def _registrations(info: ModuleInfo, cls, names: set[str]) -> dict[str, tuple[tuple, tuple, str]]:
    """Pattern class name -> (guards on the way to its first registration in __init__, constants it is
    registered with, where). Early exits (`if dtype not in ...: return`, `if head_size != 128: continue`) guard the
    statements after them in their block; an enclosing `if` guards its body."""
    fn = _init_of(cls.node)
    if fn is None:
        return {}
    found: dict = {}

    def guard(test, stops: bool) -> PassGuard:
        return PassGuard(" ".join(info.code(test).split()), info.rel, info.line_of(test), stops, info.name, cls.name)

    def scan(body, guards: tuple, loops: dict) -> tuple:
        """The guards that hold after the block (its early returns)."""
        after: tuple = ()
        for stmt in body:
            if isinstance(stmt, cst.If):
                if stmt.orelse is None and _exits(stmt.body):
                    scan(stmt.body.body, guards + (guard(stmt.test, False),), loops)
                    g = guard(stmt.test, True)
                    guards += (g,)
                    if any(isinstance(s, cst.Return) for s in stmt.body.body[-1].body):
                        after += (g,)
                else:
                    after += scan(stmt.body.body, guards + (guard(stmt.test, False),), loops)
                    if isinstance(stmt.orelse, cst.Else):
                        after += scan(stmt.orelse.body.body, guards + (guard(stmt.test, True),), loops)
            elif isinstance(stmt, cst.For):
                bound = dict(loops)
                if isinstance(stmt.target, cst.Name):
                    bound[stmt.target.value] = _loop_values(info, fn, stmt.iter)
                found_after = scan(stmt.body.body, guards, bound)
                guards += found_after
                after += found_after
            elif isinstance(stmt, (cst.With, cst.Try, cst.While)):
                inner = scan(stmt.body.body, guards, loops)
                guards += inner
                after += inner
            elif isinstance(stmt, cst.SimpleStatementLine):
                for call in _calls_to(stmt, names):
                    if call.func.value not in found:
                        found[call.func.value] = (guards, _constants(call, loops), f"{info.rel}:{info.line_of(stmt)}",
                                                  _keywords(info, cls, call, loops))
        return after

    scan(fn.body.body, (), {})
    return found


def _loop_values(info: ModuleInfo, fn, iterable) -> tuple | None:
    """The values a `for` runs over when the code states them (`[1e-6, 1e-5]`, or a local set to a list)."""
    from ..semantics.scope import Scope
    from ..semantics.function_bodies import tables
    from ..semantics.values import Known

    scope = Scope(module=info)
    for name, value, cond, _pos in tables(fn, info).local_assignments:
        scope.locals.setdefault(name, []).append((value, cond))
    got = evaluator("ascend").infer(iterable, scope)
    return tuple(got.value) if isinstance(got, Known) and isinstance(got.value, (tuple, list)) else None


def _constants(call: cst.Call, loops: dict) -> tuple:
    """(keyword, values) of the registration's keyword arguments bound to a loop over stated values."""
    out = []
    for a in call.args:
        if a.keyword is not None and isinstance(a.value, cst.Name) and loops.get(a.value.value):
            out.append((a.keyword.value, loops[a.value.value]))
    return tuple(out)




def _keywords(info: ModuleInfo, cls, call: cst.Call, loops: dict) -> tuple:
    """(keyword, its code, module, class) of each registration keyword set from the pass's own values
    (`MulsAddPattern(vllm_config, scale=routed_scaling_factor)`): pass_guards.py reads it for one model."""
    return tuple((a.keyword.value, " ".join(info.code(a.value).split()), info.name, cls.name) for a in call.args
                 if a.keyword is not None and a.keyword.value not in ("vllm_config", "config")
                 and not (isinstance(a.value, cst.Name) and a.value.value in loops))


def _calls_to(node: cst.CSTNode, names: set[str]) -> list[cst.Call]:
    return [n for n in find_all(node, cst.Call) if isinstance(n.func, cst.Name) and n.func.value in names]
