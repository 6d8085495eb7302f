"""Raises the deployment surely reaches: a `raise` on the path the walk decided, in a forward it walks or in
the `__init__` chain of an object it builds (Qwen4Exp's QSA implementation raises "requires FlashAttention"
off CUDA, XPU and ROCm). Such a model (or that kind of layer) cannot run on the backend walked: the report says
so, with the raise's file:line, instead of presenting its ops as what runs.

Only a raise every test on its way decides to reach counts: in a forward, one met on the steady path with no
undecided test in its condition, outside a `try`, a loop that may not run, a branch only the first layer takes
and a lazy one-time init; in an `__init__`, one whose enclosing `if`s the evaluator decides (with the arguments
the construction bound) toward it, at the top of the body or in decided branches only. A raise under a test the
walk leaves open says nothing new (the op's condition already carries the test)."""

from __future__ import annotations

import libcst as cst

from .construction.constructor import Instance
from .frame import WalkerState, _Frame
from ..ir.conditions import Truth
from ..semantics.scope import forget_assigned
from ..semantics.values import Bindings


class Blockers(WalkerState):
    """Mixin of Walker: the raises the walked deployment reaches (`self.blockers`)."""

    blockers: list[dict]
    uncertain_depth: int  # `try` bodies and loops that may not run, being walked
    picked_depth: int  # branches decided by None-ness alone or the walk's own pick, being walked
    _inits_checked: set

    def _forward_raise(self, frame: _Frame, small: cst.Raise, stmt, cond, steady: bool) -> None:
        """`raise X(...)` met by the statement walk: a blocker where nothing left open leads to it."""
        if small.exc is None or not steady or cond or self.transient_depth or self.uncertain_depth or self.picked_depth:
            return
        self._blocker(frame.module, stmt, small, f"{frame.cls.name}.{frame.fn.name.value}", frame.path, "forward")

    def _construction_raises(self, inst: Instance, path: str) -> None:
        """The raises of `inst`'s `__init__` chain its construction surely reaches (once per class and path); the
        caller asks only for an object built under no undecided test, in modules built so (walker.surely_built)."""
        if inst.cls is None:
            return
        key = (inst.cls.qualname, path)
        if key in self._inits_checked:
            return
        self._inits_checked.add(key)
        if inst.raises is not None:  # a call on the way that builds it, refused by Python before it runs
            module, call, message = inst.raises
            self._add_blocker(module, call, message, inst.factory or inst.cls.name, path, "construction")
            return
        try:  # the class the backend builds (on Ascend the one vllm-ascend registers for a vLLM layer)
            chain = self.ctor.init_scopes(self.ctor.running_instance(inst))
        except Exception:  # noqa: BLE001 - a construction the tool cannot bind says nothing here
            return
        for c, fn, scope in chain:
            last = _last_raise_line(fn, scope.module)
            if last is None:
                continue  # no raise in this __init__: nothing to find, no test to decide
            self._init_block(c, fn, scope, fn.body.body, path, last)

    def _init_block(self, cls, fn, scope, stmts, path: str, last: int) -> bool:
        """Walk an `__init__`'s statements in order as far as every test on the way is decided; a raise reached is
        a blocker. False once the walk stops (a return, a raise, a test left open, or past `last`, the line of
        the __init__'s last raise: nothing is left to find); True to go on."""
        module = scope.module
        for stmt in stmts:
            if module.line_of(stmt) > last:
                return False
            if type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    if type(small) is cst.Raise:
                        if small.exc is not None:
                            self._blocker(module, stmt, small, f"{cls.name}.{fn.name.value}", path, "construction")
                        return False
                    if type(small) is cst.Return:
                        return False
                    if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name:
                        scope.locals.setdefault(small.targets[0].target.value, []).append((small.value, None))
                        scope.version += 1
                    elif type(small) is cst.AnnAssign and small.value is not None and type(small.target) is cst.Name:
                        scope.locals.setdefault(small.target.value, []).append((small.value, None))
                        scope.version += 1
                    else:
                        forget_assigned(scope, small)  # `a, b = f()`, `x += 1`: not followed
            elif type(stmt) is cst.If:
                branch = self._decided_branch(module, scope, stmt)
                if branch is None:
                    return False  # a test left open: what follows is not surely reached the same way
                if branch and not self._init_block(cls, fn, scope, branch, path, last):
                    return False
            else:  # a loop, try or with body may not run (or catches): not read, what it assigns not known
                forget_assigned(scope, stmt)
        return True

    def _decided_branch(self, module, scope, stmt: cst.If):
        """The statements an `if` surely runs ([] for none), or None where its test is not decided."""
        truth = self.ctor.evaluator.truth(stmt.test, module, Bindings(), scope)
        if truth is Truth.TRUE:
            return list(stmt.body.body)
        if truth is not Truth.FALSE:
            return None
        orelse = stmt.orelse
        if orelse is None:
            return []
        if type(orelse) is cst.If:
            return [orelse]
        return list(orelse.body.body)

    def _blocker(self, module, stmt, small: cst.Raise, where: str, path: str, when: str) -> None:
        self._add_blocker(module, stmt, " ".join(module.code(small.exc).split()), where, path, when)

    def _add_blocker(self, module, node, raises: str, where: str, path: str, when: str) -> None:
        line = module.line_of(node)
        key = (module.rel, line, path)
        if any((b["file"], b["line"], b["path"]) == key for b in self.blockers):
            return
        entry = {"file": module.rel, "line": line, "raises": raises, "in": where, "path": path, "when": when}
        if self.section == "layer" and self.layer_kind is not None:
            entry["layer_kind"] = self.layer_kind
        self.blockers.append(entry)


def _last_raise_line(fn: cst.FunctionDef, module) -> int | None:
    """The line of the last statement with a `raise` in the function's body (nested functions' included: a
    bound, never short), None where it has none; kept per function."""
    from ..index.nodes import find_all

    found = _LAST_RAISE.get(id(fn))
    if found is None or found[0] is not fn:
        lines = [module.line_of(stmt) for stmt in find_all(fn.body, cst.SimpleStatementLine)
                 if any(type(small) is cst.Raise for small in stmt.body)]
        found = _LAST_RAISE[id(fn)] = (fn, max(lines) if lines else None)
    return found[1]


_LAST_RAISE: dict[int, tuple] = {}  # id(__init__ node) -> (the node, its last raise's line)
