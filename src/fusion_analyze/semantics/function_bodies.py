"""What one function body says, read once: its assignments, returns, `self.m()` calls and container fills.

Each table keeps the path condition of every entry as code (values.Condition): the `if` tests around it,
negated on `else` paths, decided only when an evaluator is asked.
"""

from __future__ import annotations

from functools import cached_property
from typing import NamedTuple

import libcst as cst

from ..index.facts import FactTable
from ..index.nodes import find_all, iter_nodes
from .values import Bindings
from ..ir.conditions import Condition, Truth, join

TABLES = FactTable("tables", "a function node -> its FunctionTables (what its body says)")
CLASS_METHODS = FactTable("class_method", "(class identity, name) -> the method's FunctionDef, or None")
IMPORTS_IN = FactTable("imports_in", "a function node -> {local name: (module, name)} of its own imports")
FUNCTION_IMPORTS = FactTable("function_imports", "None -> {name: (module, name)} imported inside any function")


class Assignment(NamedTuple):
    """One assignment of a function body: `target = value` under `condition`, at statement `position`."""

    target: cst.BaseExpression
    value: cst.BaseExpression
    condition: Condition | None
    position: int


class LocalAssignment(NamedTuple):
    """One `name = value` local of a function body, under `condition`, at statement `position`."""

    name: str
    value: cst.BaseExpression
    condition: Condition | None
    position: int


class FunctionTables:
    """The tables of one function (a libcst FunctionDef in a ModuleInfo); get one with `tables(fn, module)`."""

    def __init__(self, fn: cst.FunctionDef, module):
        self.fn = fn
        self.module = module

    @cached_property
    def statements(self) -> list[tuple[cst.CSTNode, Condition | None]]:
        """(statement, path condition) through if/else/try/with/for blocks; the position is the list index."""
        return list(_walk_stmts(self.fn.body.body, self.module))

    def _small(self):
        for pos, (stmt, cond) in enumerate(self.statements):
            if type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    yield pos, cond, small

    @cached_property
    def assignments(self) -> list[Assignment]:
        """(target expr, value, condition, position); a tuple target yields each element with the value's item
        (`a, b, self.layers = make_layers(...)`: self.layers is `make_layers(...)[2]`)."""
        out = []
        for pos, cond, small in self._small():
            if type(small) is cst.Assign:
                targets, value = [t.target for t in small.targets], small.value
            elif type(small) is cst.AnnAssign and small.value is not None:
                targets, value = [small.target], small.value
            else:
                continue
            for t in targets:
                if not isinstance(t, (cst.Tuple, cst.List)):
                    out.append(Assignment(t, value, cond, pos))
                    continue
                for k, el in enumerate(e.value for e in t.elements):  # the k-th item of what the right side gives
                    item = cst.Subscript(value=value, slice=[cst.SubscriptElement(cst.Index(cst.Integer(str(k))))])
                    out.append(Assignment(el, item, cond, pos))
        return out

    @cached_property
    def self_assignments(self) -> dict[str, list[tuple]]:
        """name -> [(value, condition, position)] of each `self.<name> = value`."""
        out: dict = {}
        for t, v, c, p in self.assignments:
            if type(t) is cst.Attribute and _is_self(t.value):
                out.setdefault(t.attr.value, []).append((v, c, p))
        return out

    @cached_property
    def self_attr_names(self) -> list[str]:
        """Every `self.<name>` assigned anywhere in the body (nested blocks and functions too)."""
        return sorted({node.target.attr.value for node in find_all(self.fn, cst.AssignTarget)
                       if type(node.target) is cst.Attribute and _is_self(node.target.value)})

    @cached_property
    def local_assignments(self) -> list[LocalAssignment]:
        """(name, value, condition, position) of plain `x = ...` locals; a tuple-unpacked local is a runtime
        value, not a constructor. A nested `def get_layer(prefix): return Layer(...)` is recorded as a lambda
        (a layer factory passed by name), and its own locals resolve that call."""
        out, nested = [], []
        for pos, (stmt, cond) in enumerate(self.statements):
            if type(stmt) is cst.FunctionDef:
                inner = tables(stmt, self.module)
                rets = inner.returns
                if rets and type(rets[0][0]) is cst.Call:
                    # its parameters' names kept (the layer index a layer list binds: `prefix`)
                    params = cst.Parameters(params=[cst.Param(cst.Name(p.name.value)) for p in stmt.params.params])
                    out.append(LocalAssignment(stmt.name.value, cst.Lambda(params=params, body=rets[0][0]), cond, pos))
                nested += [LocalAssignment(t, v, join(cond, c), pos) for t, v, c, _p in inner.local_assignments]
                continue
            if type(stmt) is cst.If:  # `if layer_types := getattr(config, "layer_types", None):` binds a local
                out += _walrus(stmt, self.module, cond, pos)
                continue
            if type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    if type(small) is cst.Assign:
                        out += [LocalAssignment(t.target.value, small.value, cond, pos)
                                for t in small.targets if type(t.target) is cst.Name]
                    elif type(small) is cst.AnnAssign and small.value is not None and type(small.target) is cst.Name:
                        out.append(LocalAssignment(small.target.value, small.value, cond, pos))
        outer = {t for t, *_ in out}
        return out + [n for n in nested if n[0] not in outer]

    @cached_property
    def unpacked_calls(self) -> list[LocalAssignment]:
        """(name, `f(...)[k]`, condition, position) of each local unpacked from a call's result (`tp_size, tp_rank
        = f(...)`): read where a factory's return is built from them (FusedMoEParallelConfig.make)."""
        out = []
        for pos, cond, small in self._small():
            if type(small) is not cst.Assign or type(small.value) is not cst.Call:
                continue
            for t in small.targets:
                target = t.target
                if not isinstance(target, (cst.Tuple, cst.List)):
                    continue
                for k, el in enumerate(target.elements):
                    if type(el) is cst.Element and type(el.value) is cst.Name:
                        item = cst.Subscript(value=small.value, slice=[cst.SubscriptElement(cst.Index(cst.Integer(str(k))))])
                        out.append(LocalAssignment(el.value.value, item, cond, pos))
        return out

    @cached_property
    def all_locals(self) -> list[LocalAssignment]:
        """The plain locals and the ones unpacked from a call's result (`a, b, c = helper(...)`: each
        `helper(...)[k]`), in the order of their statements: what a construction's scope reads."""
        return sorted(self.local_assignments + self.unpacked_calls, key=lambda a: a[3])

    @cached_property
    def loop_names(self) -> dict[str, tuple]:
        """name -> (iterable, item) of each name a `for` statement or a comprehension of the body binds (not a
        nested function's): `for i in range(n)` -> (`range(n)`, None); `for i, t in enumerate(x)` -> item 0 and 1
        of each element. A name bound by two loops, or also assigned as a local, is left out: which loop a read
        is in is not told (two loops over the same iterable, written alike, are one)."""
        found: dict[str, list] = {}
        for node in iter_nodes(self.fn.body, lambda n: isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef))):
            if isinstance(node, (cst.For, cst.CompFor)):
                target = node.target
                if type(target) is cst.Name:
                    found.setdefault(target.value, []).append((node.iter, None))
                elif isinstance(target, (cst.Tuple, cst.List)):
                    for k, el in enumerate(target.elements):
                        if type(el) is cst.Element and type(el.value) is cst.Name:
                            found.setdefault(el.value.value, []).append((node.iter, k))
        assigned = {t for t, *_ in self.local_assignments} | {t for t, *_ in self.unpacked_calls}
        return {name: got[0] for name, got in found.items() if name not in assigned
                and len({(self.module.code(it).strip(), k) for it, k in got}) == 1}

    @cached_property
    def returns(self) -> list[tuple]:
        """(value, condition) of each `return value`."""
        return [(small.value, cond) for _pos, cond, small in self._small()
                if type(small) is cst.Return and small.value is not None]

    @cached_property
    def self_calls(self) -> list[tuple]:
        """(position, call) of each `self.<method>(...)` expression statement."""
        out = []
        for pos, _cond, small in self._small():
            call = small.value if type(small) is cst.Expr else None
            if type(call) is cst.Call and type(call.func) is cst.Attribute and _is_self(call.func.value):
                out.append((pos, call))
        return out

    @cached_property
    def container_fills(self) -> dict[str, list[tuple]]:
        """name -> [(position, condition, value)] of `self.<name>.append(value)` and `self.<name>[k] = value`."""
        return {name: fills for (where, name), fills in self._fills.items() if where == "self"}

    @cached_property
    def local_fills(self) -> dict[str, list[tuple]]:
        """The same for a local list or dict (`layers.append(value)`), later wrapped: nn.ModuleList(layers)."""
        return {name: fills for (where, name), fills in self._fills.items() if where == "local"}

    @cached_property
    def _fills(self) -> dict:
        out: dict = {}
        for pos, cond, small in self._small():
            target = value = None
            if (type(small) is cst.Expr and type(small.value) is cst.Call and small.value.args
                    and type(small.value.func) is cst.Attribute and small.value.func.attr.value == "append"):
                target, value = small.value.func.value, small.value.args[0].value
            elif type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Subscript:
                target, value = small.targets[0].target.value, small.value
            if type(target) is cst.Attribute and _is_self(target.value):
                out.setdefault(("self", target.attr.value), []).append((pos, cond, value))
            elif type(target) is cst.Name:
                out.setdefault(("local", target.value), []).append((pos, cond, value))
        return out

    @cached_property
    def kwarg_fills(self) -> list[tuple] | None:
        """[(position, condition, key, value)] of each `kwargs["key"] = value` into the function's own `**kwargs`
        parameter, a dict it passes on (`extra_impl_args["topk_indices_buffer"] = ...` before `impl_cls(...,
        **extra_impl_args)`, vllm/model_executor/layers/attention/mla_attention.py); None where the body changes
        that dict another way too (`.pop`, `.update`, `del`, a key not written out), or has no such parameter."""
        star = self.fn.params.star_kwarg
        if type(star) is not cst.Param:
            return None
        name, out = star.name.value, []
        for pos, cond, small in self._small():
            if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Subscript:
                target = small.targets[0].target
                if type(target.value) is cst.Name and target.value.value == name:
                    key = target.slice[0].slice if len(target.slice) == 1 else None
                    if type(key) is not cst.Index or type(key.value) is not cst.SimpleString:
                        return None
                    out.append((pos, cond, key.value.evaluated_value, small.value))
        for node in find_all(self.fn, cst.Attribute):  # kwargs.pop(...), kwargs.update(...): not read here
            if type(node.value) is cst.Name and node.value.value == name \
                    and node.attr.value in ("pop", "update", "setdefault", "clear", "popitem"):
                return None
        for node in find_all(self.fn, cst.Del):
            if name in {n.value for n in find_all(node, cst.Name)}:
                return None
        return out

    @cached_property
    def super_init_call(self) -> cst.Call | None:
        """`super().__init__(...)` (or `Base.__init__(self, ...)`, less `self`), not looking into nested functions."""
        for node in iter_nodes(self.fn, lambda n: type(n) is cst.FunctionDef):
            if not type(node) is cst.Call:
                continue
            f = node.func
            if type(f) is cst.Attribute and f.attr.value == "__init__":
                v = f.value
                if type(v) is cst.Call and type(v.func) is cst.Name and v.func.value == "super":
                    return node
                if isinstance(v, (cst.Name, cst.Attribute)) and node.args and _is_self(node.args[0].value):
                    return node.with_changes(args=node.args[1:])
        return None

    @cached_property
    def super_init_position(self) -> int | None:
        """The position of the statement that calls `super().__init__(...)` (super_init_call), None where none."""
        if self.super_init_call is None:
            return None
        for pos, (stmt, _cond) in enumerate(self.statements):
            if type(stmt) is cst.SimpleStatementLine:
                for node in find_all(stmt, cst.Call):
                    f = node.func
                    if type(f) is cst.Attribute and f.attr.value == "__init__":
                        return pos
        return None

    @cached_property
    def memo_names(self) -> frozenset[str]:
        """Names of dicts the function stores into (`_ROPE_DICT[key] = rotary_emb`): its memo."""
        out = set()
        for _pos, _cond, small in self._small():
            if type(small) is cst.Assign:
                for t in small.targets:
                    if type(t.target) is cst.Subscript and type(t.target.value) is cst.Name:
                        out.add(t.target.value.value)
        return frozenset(out)

    def _memo_hit(self, body) -> bool:
        """`if key in MEMO: return MEMO[key]`: a call that returns what an earlier call built, not another
        choice; what follows is not under its negation."""
        last = body[-1] if len(body) == 1 and type(body[-1]) is cst.SimpleStatementLine else None
        ret = last.body[0] if last is not None and len(last.body) == 1 else None
        value = ret.value if type(ret) is cst.Return else None
        return (type(value) is cst.Subscript and type(value.value) is cst.Name
                and value.value.value in self.memo_names)

    def returns_decided(self, env: Bindings, evaluator, scope=None, ruled_out: list | None = None) -> list[tuple]:
        """(value, condition) of each return; branches the bindings decide are dropped or implied. `ruled_out`
        collects (value, condition, statement) of the returns in branches a decided test skips, each under
        the tests that would select it (what another configuration value builds)."""
        module, out = self.module, []

        def visit(body, cond, skipped: bool):
            for stmt in body:
                if type(stmt) is cst.If:
                    value = Truth.UNKNOWN if skipped else evaluator.truth(stmt.test, module, env, scope)
                    test = Condition.of(stmt.test, module)
                    if value is not Truth.FALSE or ruled_out is not None:
                        visit(stmt.body.body, cond if value is Truth.TRUE else join(cond, test),
                              skipped or value is Truth.FALSE)
                    if stmt.orelse is not None and (value is not Truth.TRUE or ruled_out is not None):
                        neg = cond if value is Truth.FALSE else join(cond, test.negate())
                        visit([stmt.orelse] if type(stmt.orelse) is cst.If else stmt.orelse.body.body, neg,
                              skipped or value is Truth.TRUE)
                    if (stmt.orelse is None and exits_at_end(stmt.body.body, raises=False)
                            and value is not Truth.FALSE and not self._memo_hit(stmt.body.body)):
                        # `if test: return A` then `return B`: B runs only where the test fails (a `raise`
                        # is an error, not another choice: what follows is what runs)
                        if value is Truth.TRUE:
                            skipped = True
                        cond = join(cond, test.negate())
                elif isinstance(stmt, (cst.With, cst.For, cst.While, cst.Try)):
                    visit(stmt.body.body, cond, skipped)
                elif type(stmt) is cst.SimpleStatementLine:
                    for small in stmt.body:
                        if type(small) is cst.Return and small.value is not None:
                            if not skipped:
                                out.append((small.value, cond))
                            elif ruled_out is not None:
                                ruled_out.append((small.value, cond, stmt))

        visit(self.fn.body.body, None, False)
        return out


def exits_at_end(stmts, raises: bool = True) -> bool:
    """The block ends in `return` (or `raise`): what follows it runs only when it is not taken."""
    last = stmts[-1] if stmts else None
    kinds = (cst.Return, cst.Raise) if raises else (cst.Return,)
    return type(last) is cst.SimpleStatementLine and any(isinstance(s, kinds) for s in last.body)


def tables(fn: cst.FunctionDef, module) -> FunctionTables:
    """The tables of `fn`, built once per session (kept on its module)."""
    key = fn
    found = TABLES.of(module).get(key)
    if found is None:
        found = TABLES.of(module)[key] = FunctionTables(fn, module)
    return found


def _walrus(stmt: cst.If, module, cond: Condition | None, pos: int) -> list[LocalAssignment]:
    """The locals `name := value` binds in an `if` test and its `elif` tests, each under the tests that run
    before it (an `elif` test runs when the tests above it fail)."""
    out: list[LocalAssignment] = []
    node, before = stmt, cond
    while type(node) is cst.If:
        for named in find_all(node.test, cst.NamedExpr):
            if type(named.target) is cst.Name:
                out.append(LocalAssignment(named.target.value, named.value, before, pos))
        before = join(before, Condition.of(node.test, module).negate())
        node = node.orelse
    return out


def _walk_stmts(body, module, cond: Condition | None = None):
    """Yield (stmt, condition) through if/else/try/with/for blocks of a function body."""
    for stmt in body:
        yield stmt, cond
        if type(stmt) is cst.If:
            test = Condition.of(stmt.test, module)
            yield from _walk_stmts(stmt.body.body, module, join(cond, test))
            orelse, neg = stmt.orelse, test.negate()
            while orelse is not None:
                if type(orelse) is cst.If:
                    t2 = Condition.of(orelse.test, module)
                    yield from _walk_stmts(orelse.body.body, module, join(cond, join(neg, t2)))
                    neg = join(neg, t2.negate())
                    orelse = orelse.orelse
                else:
                    yield from _walk_stmts(orelse.body.body, module, join(cond, neg))
                    orelse = None
        elif isinstance(stmt, (cst.With, cst.For, cst.While)):
            yield from _walk_stmts(stmt.body.body, module, cond)
        elif type(stmt) is cst.Try:
            yield from _walk_stmts(stmt.body.body, module, cond)


def class_method(cls, name: str) -> cst.FunctionDef | None:
    """The method `name` defined in the body of class `cls` (a Definition); the last definition wins."""
    if not cls.may_define(name):
        return None
    key = (cls.identity, name)  # asked for at every step up every MRO
    methods = CLASS_METHODS.of(cls.module)
    if key not in methods:  # the same node all run long, whether parsed alone or with its class
        methods[key] = cls.method_alone(name) or _class_method(cls, name)
    return methods[key]


def _class_method(cls, name: str) -> cst.FunctionDef | None:
    body = cls.node.body.body if type(cls.node.body) is cst.IndentedBlock else []
    found = None
    for stmt in body:
        if type(stmt) is cst.FunctionDef and stmt.name.value == name:
            if found is not None and _accessor(stmt):
                continue  # `@x.setter`: the name stays the property whose getter was defined before
            found = stmt  # the last definition wins, as at runtime
        elif type(stmt) is cst.If:
            for s in stmt.body.body:
                if type(s) is cst.FunctionDef and s.name.value == name and found is None:
                    found = s
    return found


def _accessor(fn: cst.FunctionDef) -> bool:
    """`@name.setter` / `@name.deleter`: what it defines is the property `name` already is, its getter kept."""
    return any(type(d.decorator) is cst.Attribute and d.decorator.attr.value in ("setter", "deleter")
               and type(d.decorator.value) is cst.Name and d.decorator.value.value == fn.name.value
               for d in fn.decorators)


def imports_in(fn: cst.FunctionDef, module) -> dict[str, tuple[str, str]]:
    """Names bound by `from m import X` inside one function (a later import of a name wins, as at run time)."""
    key = fn
    found = IMPORTS_IN.of(module).get(key)
    if found is None:
        from ..index.bindings import import_from_bindings

        found = IMPORTS_IN.of(module)[key] = dict(import_from_bindings(module, fn))
    return found


def function_imports(module) -> dict[str, tuple[str, str]]:
    """Names bound by `from m import X` anywhere in the module (the first binding of a name wins): module-level
    names were tried before this, so what is left are imports inside functions."""
    key = None
    found = FUNCTION_IMPORTS.of(module).get(key)
    if found is None:
        from ..index.bindings import all_import_from_bindings

        found = {}
        for bound, where in all_import_from_bindings(module):
            found.setdefault(bound, where)
        FUNCTION_IMPORTS.of(module)[key] = found
    return found


def _is_self(expr) -> bool:
    return type(expr) is cst.Name and expr.value == "self"
