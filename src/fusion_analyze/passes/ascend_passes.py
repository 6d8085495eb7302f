"""Graph fusion passes read from the trees: vllm-ascend's (vllm_ascend/compilation/) and vLLM's CUDA ones.

A pass is a class whose patterns are functions named `pattern*` (nested in a pattern class's method or
in the pass itself). From each pattern we keep the device ops it calls, in order; from the pass manager
the `if` that adds the pass (its flag) and, from the config dataclass, that flag's default.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace

import libcst as cst

from ..index.facts import FactTable
from ..index.bindings import _dotted_name
from ..index.modules import Definition, ModuleIndex, ModuleInfo
from ..index.nodes import find_all, iter_nodes
from ..semantics.for_backend import evaluator
from ..ir.conditions import Condition, Truth, as_text, join
from ..ir.texts import say
from ..catalog import fuses, kernel_covers
from .registrations import PassGuard, _init_guards, _registered_as, _registrations

FIELD_DEFAULTS = FactTable("field_default", "(config module, flag) -> a pass-enabling flag's declared default")

# Tensor methods a pattern function uses that are primitives of a scenario (qkv.split -> split).
_METHOD_PRIMS = {"split": "split", "chunk": "split"}
_OPERATORS = {"Add": "add", "Multiply": "mul", "Subtract": "sub", "Divide": "div"}


@dataclass
class PassPattern:
    name: str
    file: str
    line: int
    calls: list[str]  # dotted kernel names, in order
    prims: frozenset[str]
    guards: tuple[PassGuard, ...] = ()  # what the pass's __init__ checks before registering it
    constants: tuple[tuple[str, tuple], ...] = ()  # (keyword, values) it is registered with: (eps, (1e-6, 1e-5))
    registered: str | None = None  # file:line of that registration
    failed: tuple[str, ...] = ()  # for one model: guards that stop the registration, with why (pass_guards.py)
    undecided: tuple[str, ...] = ()  # for one model: guards its values do not decide
    # the size of the last dimension a norm kernel of the pattern normalises, as the pattern writes it: the
    # last argument of the view its input is (`q.view(..., self.head_dim)`: per head); None when not a view
    norm_over: str | None = None
    # an arithmetic-only pattern (`tmp = x * self.scale; out = tmp + y`) as its graph, in order: (output, kind,
    # left operand, right operand), each operand ("in", param) / ("tmp", name) / ("const", code)
    arith: tuple = ()
    # registration keywords set from the pass's own values: (keyword, code, module, class); and for one model
    # (pass_guards.py) the value each has: (keyword, value or None when not known)
    keywords: tuple = ()
    keyword_values: tuple = ()
    # how many values the pattern returns (0: not read): with one, every other value it computes is an
    # intermediate, which Inductor's pattern matcher does not replace while something else uses it
    outputs: int = 0

    def kernels(self) -> list[str]:
        return [c for c in self.calls if kernel_covers(c)]


@dataclass
class GraphPass:
    name: str
    file: str
    line: int
    backend: str
    patterns: list[PassPattern] = field(default_factory=list)
    enable: str | None = None  # the condition text that adds the pass
    enable_file: str | None = None
    enable_line: int | None = None
    flag: str | None = None
    default: str | None = None
    default_file: str | None = None
    default_line: int | None = None
    guards: list[str] = field(default_factory=list)
    not_compiled: str | None = None  # why the deployment compiles nothing (--enforce-eager, -O0): no pass runs

    def fitting(self, covers: tuple[str, ...], optional: tuple[str, ...]) -> list[PassPattern]:
        return [p for p in self.patterns if fuses(p.prims, covers, optional)]

    def fuses(self, covers: tuple[str, ...], optional: tuple[str, ...]) -> bool:
        return bool(self.fitting(covers, optional))

    def applying(self, covers, optional, names: list[str]) -> list[PassPattern]:
        """The patterns of this pass that fit the scenario and whose kernels all occur in `names`, as many times
        as the pattern calls them (a q/k/v-norm pattern's three rms_norms need three norm ops)."""
        have = Counter(_tail(n) for n in names)
        out = []
        for p in self.fitting(covers, optional):
            need = Counter(_tail(k) for k in p.kernels())
            if need and all(have[k] >= n for k, n in need.items()):
                out.append(p)
        return out

    def enclosing(self, covers, names: list[str], matched: list[list[str]]) -> list[PassPattern]:
        """Patterns that do more than the scenario (its primitives and others) and whose kernels all occur in
        `names`, the matched ops' and their neighbours' kernels, with each matched op's own kernel among the
        pattern's: the scenario is fused as part of that rewrite (0.23's gemm + all-reduce + add + RMSNorm
        rewrite takes in the all-reduce + norm scenario, not a separate residual add)."""
        have = Counter(_tail(n) for n in names)
        out = []
        for p in self.patterns:
            need = Counter(_tail(k) for k in p.kernels())
            if not (len(covers) >= 2 and set(covers) < p.prims and p not in self.fitting(covers, ())
                    and need and all(have[k] >= n for k, n in need.items())):
                continue
            if all(not own or {_tail(n) for n in own} & set(need) for own in matched):
                out.append(p)
        return out

    def default_on(self) -> bool | None:
        """True / False when the default is a literal; None when a function or expression decides it."""
        if self.default is None:
            return None if self.flag else True
        head = self.default.split(" at ")[0].strip().split(" ")[0]
        head = head.removeprefix("Field(default=").rstrip(")") if head.startswith("Field(default=") else head
        if head in ("True", "true", "1"):
            return True
        if head in ("False", "false", "0", "None"):
            return False
        return None

    def conditions(self) -> list[str]:
        out = []
        if self.flag:
            value = self.default if self.default is not None else "?"
            out.append(say("flag_default_at", flag=self.flag, value=value, where=f"{self.default_file}:{self.default_line}")
                       if self.default_file else say("flag_default", flag=self.flag, value=value))
        if self.enable and self.flag and self.enable.strip() != self.flag:
            out.append(say("enabled_when", cond=self.enable))
        out.extend(self.guards)
        return out

    def evidence(self, pattern: PassPattern | None = None) -> dict:
        pat = pattern or (self.patterns[0] if self.patterns else None)
        what = (say("pass_pattern", name=self.name, pattern=pat.name, chain=" -> ".join(_tail(k) for k in pat.kernels()))
                if pat else self.name)
        if self.enable_file:
            what = say("pass_added_in", what=what, where=f"{self.enable_file}:{self.enable_line}")
        return {"file": self.file, "line": self.line, "what": what}

    def to_json(self) -> dict:
        return {"name": self.name, "file": self.file, "line": self.line, "flag": self.flag, "default": self.default,
                "enable": self.enable, "guards": list(self.guards),
                "patterns": [{"name": p.name, "line": p.line, "kernels": p.kernels()} for p in self.patterns]}


def _tail(name: str) -> str:
    return name.rsplit(".", 1)[-1] if name not in ("default",) else name


def _calls(index: ModuleIndex, info: ModuleInfo, fn: cst.CSTNode) -> tuple[list[str], set[str]]:
    calls: list[str] = []
    prims: set[str] = set()
    for node in find_all(fn, (cst.BinaryOperation, cst.Call)):
        if isinstance(node, cst.BinaryOperation):
            op = _OPERATORS.get(type(node.operator).__name__)
            if op:  # x * scale + y written with Python operators in the pattern
                calls.append(f"operator.{op}")
                prims.update(kernel_covers(f"operator.{op}"))
            continue
        func = node.func
        # torch.ops.npu.npu_rms_norm.default(...) and auto_functionalized(torch.ops._C.x.default, ...)
        targets = [func] + [a.value for a in node.args if isinstance(a.value, cst.Attribute)]
        for t in targets:
            d = index.dotted(info, t)
            if d is None:
                continue
            d = re.sub(r"\.(default|Tensor|out)$", "", d)
            c = kernel_covers(d)
            if c:
                calls.append(d)
                prims.update(c)
        if isinstance(func, cst.Attribute) and func.attr.value in _METHOD_PRIMS:
            prims.add(_METHOD_PRIMS[func.attr.value])
        if node.args and isinstance(node.args[0].value, cst.Attribute) and _is_self_rooted(node.args[0].value):
            # auto_functionalized(self.QUANT_OP, ...): the op a matcher chose from a table in __init__
            for d in _table_kernels(index, info, node.args[0].value):
                c = kernel_covers(d)
                if c:
                    calls.append(d)
                    prims.update(c)
    return calls, prims


def _is_self_rooted(expr) -> bool:
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return isinstance(expr, cst.Name) and expr.value == "self"


def _table_kernels(index: ModuleIndex, info: ModuleInfo, expr: cst.Attribute) -> list[str]:
    """The op `auto_functionalized(self.QUANT_OP, ...)` runs, chosen in __init__ from a table
    (`self.QUANT_OP = QUANT_OPS[key]`): the kernels that table (a module-level dict literal and its later
    `TABLE[k] = op` entries) holds. `self.QUANT_OP` is read in the pattern's module; `self.matcher.QUANT_OP` in
    the module of the class `self.matcher = Matcher(...)` builds there. Which entry runs is the key's, but
    every one does the same primitives."""
    holder = expr.value
    module: ModuleInfo | None = info
    if isinstance(holder, cst.Attribute) and isinstance(holder.value, cst.Name) and holder.value.value == "self":
        module = None  # self.<matcher>.<attr>: the matcher's class, built in this module
        for a in find_all(info.tree, cst.Assign):
            t = a.targets[0].target
            if (isinstance(t, cst.Attribute) and t.attr.value == holder.attr.value and isinstance(a.value, cst.Call)
                    and isinstance(a.value.func, (cst.Name, cst.Attribute))):
                cls = index.resolve_expr(info, a.value.func)
                if isinstance(cls, Definition) and cls.kind == "class":
                    module = cls.module
                    break
    elif not (isinstance(holder, cst.Name) and holder.value == "self"):
        return []
    if module is None:
        return []
    attr = expr.attr.value
    for a in find_all(module.tree, cst.Assign):
        t = a.targets[0].target
        if not (isinstance(t, cst.Attribute) and t.attr.value == attr and isinstance(a.value, cst.Subscript)
                and isinstance(a.value.value, cst.Name)):
            continue
        table = index.resolve_expr(module, a.value.value)
        home = getattr(table, "module", None)
        if home is None:
            continue
        out = []
        for b in find_all(home.tree, cst.Assign):  # the literal and the entries added to it
            bt = b.targets[0].target
            name = bt.value if isinstance(bt, cst.Name) else (
                bt.value.value if isinstance(bt, cst.Subscript) and isinstance(bt.value, cst.Name) else None)
            if name != a.value.value.value:
                continue
            values = [e.value for e in b.value.elements if isinstance(e, cst.DictElement)] \
                if isinstance(b.value, cst.Dict) else [b.value]
            for v in values:
                d = index.dotted(home, v) if isinstance(v, (cst.Name, cst.Attribute)) else None
                if d:
                    out.append(re.sub(r"\.(default|Tensor|out)$", "", d))
        if out:
            return sorted(set(out))
    return []


def _norm_over(index: ModuleIndex, info: ModuleInfo, fn: cst.FunctionDef) -> str | None:
    """The code of the last dimension a norm kernel of the pattern normalises, when its input is a local the
    pattern assigned from `x.view(..., dim)` (`q_by_head = q.view(..., self.head_dim)`)."""
    views = {}
    for node in find_all(fn, cst.Assign):
        value = node.value
        if (len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute) and value.func.attr.value in ("view", "reshape") and value.args):
            views[node.targets[0].target.value] = info.code(value.args[-1].value).strip()
    for call in find_all(fn, cst.Call):
        d = index.dotted(info, call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
        d = re.sub(r"\.(default|Tensor|out)$", "", d or "")
        if "rmsnorm" in kernel_covers(d) and call.args and isinstance(call.args[0].value, cst.Name):
            if call.args[0].value.value in views:
                return views[call.args[0].value.value]
    return None


def _outputs(fn: cst.FunctionDef) -> int:
    """The number of values the pattern function's last statement returns (`return out` 1, `return a, b` 2);
    0 where it ends otherwise."""
    body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else []
    last = body[-1] if body else None
    if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], cst.Return) and last.body[-1].value is not None:
        value = last.body[-1].value
        return len(value.elements) if isinstance(value, (cst.Tuple, cst.List)) else 1
    return 0


def _arith(info: ModuleInfo, fn: cst.FunctionDef, calls: list[str]) -> tuple:
    """The graph of a pattern written only with Python operators, one binary operation per statement."""
    if not calls or not all(c.startswith("operator.") for c in calls):
        return ()
    params = {p.name.value for p in fn.params.params}
    temps: set[str] = set()
    out = []

    def operand(e):
        if isinstance(e, cst.Name) and e.value in params:
            return ("in", e.value)
        if isinstance(e, cst.Name) and e.value in temps:
            return ("tmp", e.value)
        return ("const", " ".join(info.code(e).split()))

    for stmt in fn.body.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            target, value = None, None
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                target, value = small.targets[0].target.value, small.value
            elif isinstance(small, cst.Return):
                target, value = "return", small.value
            if isinstance(value, cst.BinaryOperation) and type(value.operator).__name__ in _OPERATORS:
                out.append((target, _OPERATORS[type(value.operator).__name__], operand(value.left), operand(value.right)))
                temps.add(target)
    return tuple(out)


def _pattern_fns(node: cst.CSTNode) -> list[cst.FunctionDef]:
    return [n for n in find_all(node, cst.FunctionDef) if n.name.value.startswith(("pattern", "_pattern"))]


def _called_names(node: cst.CSTNode) -> list[str]:
    return [n.func.value for n in find_all(node, cst.Call) if isinstance(n.func, cst.Name)]


def _references(index: ModuleIndex, info: ModuleInfo, node: cst.CSTNode) -> tuple[list[str], set[str]]:
    """Every op a pattern class names anywhere (matcher helpers it builds, ops in its tables)."""
    names: list[str] = []
    prims: set[str] = set()

    def covered(n) -> bool:  # a dotted kernel name is one reference: its parts are not looked at again
        if not isinstance(n, cst.Attribute):
            return False
        d = index.dotted(info, n)
        return bool(d and kernel_covers(re.sub(r"\.(default|Tensor|out)$", "", d)))

    for n in iter_nodes(node, covered):
        if isinstance(n, cst.Attribute):
            if covered(n):
                names.append(re.sub(r"\.(default|Tensor|out)$", "", index.dotted(info, n)))
            elif n.attr.value in _METHOD_PRIMS:
                prims.add(_METHOD_PRIMS[n.attr.value])
        elif isinstance(n, cst.Name) and kernel_covers(n.value) and n.value[:1].isalpha():
            names.append(n.value)
        elif (isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == "auto_functionalized"
              and n.args and isinstance(n.args[0].value, cst.Attribute) and _is_self_rooted(n.args[0].value)):
            names += _table_kernels(index, info, n.args[0].value)  # auto_functionalized(self.QUANT_OP, ...)
    for n in names:
        prims.update(kernel_covers(n))
    return list(dict.fromkeys(names)), prims


def _bases_in_module(d, classes: dict) -> list:
    out, stack = [], [d]
    while stack:
        c = stack.pop()
        if any(c is o for o in out):
            continue
        out.append(c)
        for b in c.bases:
            if isinstance(b.value, cst.Name) and b.value.value in classes:
                stack.append(classes[b.value.value])
    return out


def read_pass_module(index: ModuleIndex, modname: str, backend: str, whole_class: bool = False,
                     only: set[str] | None = None) -> list[GraphPass]:
    """Every pass class of a module (or those named in `only`) with its patterns (pattern classes it
    instantiates, or its own).

    `whole_class`: vLLM's CUDA patterns build their ops through matcher helpers (MatcherRMSNorm, ...)
    held on the pattern object, so everything the pattern class names counts, not only pattern()."""
    info = index.get(modname)
    if info is None:
        return []
    classes = {n: d for n, d in info.classes().items()}
    patterns = _PatternsOf(index, info, classes, whole_class)
    out: list[GraphPass] = []
    for name, d in classes.items():
        if not name.endswith("Pass") or (only is not None and name not in only):
            continue
        pats: list[PassPattern] = list(patterns.get(name))
        called_names = _called_names(d.node)
        for called in dict.fromkeys(called_names):
            if called != name:
                pats.extend(patterns.get(called))
        if not pats:
            continue
        if backend == "ascend":  # decided per model (pass_guards.py): each pattern with the path to its registration
            regs = _registrations(info, d, {p.name for p in pats})
            pats = [replace(p, guards=regs[p.name][0], constants=regs[p.name][1], registered=regs[p.name][2],
                            keywords=regs[p.name][3]) if p.name in regs else p for p in pats]
            guards = []
        else:
            guards = _init_guards(info, d.node) + _registered_as(info, d.node, called_names, patterns)
        out.append(GraphPass(name, info.rel, d.line, backend, pats, guards=guards))
    return out


class _PatternsOf:
    """name -> the patterns of the pattern class, or module-level pattern function (older vLLM trees), of that
    name; read when a pass class names it, so the classes no pass uses are not parsed."""

    def __init__(self, index: ModuleIndex, info: ModuleInfo, classes: dict, whole_class: bool):
        self.index, self.info, self.classes, self.whole_class = index, info, classes, whole_class
        self.functions = {n: ds[-1] for n, ds in info.defs.items()
                          if ds[-1].kind == "function" and n.startswith(("pattern", "_pattern"))}
        self._found: dict[str, list[PassPattern]] = {}
        self._refs: dict = {}  # class node -> _references of it: a base class many pattern classes share, read once

    def get(self, name: str) -> list[PassPattern]:
        if name not in self._found:
            self._found[name] = self._of_class(name) + self._of_function(name)
        return self._found[name]

    def _of_class(self, name: str) -> list[PassPattern]:
        d = self.classes.get(name)
        if d is None:
            return []
        index, info = self.index, self.info
        pats = []
        for fn in ([] if self.whole_class else _pattern_fns(d.node)):
            calls, prims = _calls(index, info, fn)
            if calls:
                pats.append(PassPattern(name, info.rel, info.line_of(fn), calls, frozenset(prims),
                                        norm_over=_norm_over(index, info, fn), arith=_arith(info, fn, calls),
                                        outputs=_outputs(fn)))
        if not pats and self.whole_class and not name.endswith("Pass"):
            calls, prims = [], set()
            for c in _bases_in_module(d, self.classes):  # matchers are often built in a shared base class
                found = self._refs.get(c.node)
                if found is None:
                    found = self._refs[c.node] = _references(index, info, c.node)
                cs, ps = found
                calls += [x for x in cs if x not in calls]
                prims |= ps
            if calls:
                pats.append(PassPattern(name, info.rel, d.line, calls, frozenset(prims)))
        return pats

    def _of_function(self, name: str) -> list[PassPattern]:
        d = self.functions.get(name)
        if d is None:
            return []
        calls, prims = _calls(self.index, self.info, d.node)
        return [PassPattern(name, self.info.rel, self.info.line_of(d.node), calls, frozenset(prims))] if calls else []


def _enables(index: ModuleIndex, manager: str, backend: str) -> dict[str, tuple[Condition | None, str, int, str]]:
    """Pass class name -> (condition, file, line, module) from `if cond: from .passes.x import P; add(P(...))`,
    less the passes added only on another platform than `backend` (the tree's own: a CUDA pass manager is read
    as on CUDA even for an Ascend report's `cuda` column)."""
    info = index.get(manager)
    out: dict = {}
    imported: dict = {}
    made: dict = {}
    if info is None:
        return out
    base = manager.rsplit(".", 1)[0]

    def scan(body, cond: Condition | None):
        for stmt in body:
            if isinstance(stmt, cst.If):
                test = Condition.of(stmt.test, info, " ".join(info.code(stmt.test).split()))
                scan(stmt.body.body, join(cond, test))
                if stmt.orelse is not None and isinstance(stmt.orelse, cst.Else):
                    scan(stmt.orelse.body.body, join(cond, test.negate()))
            elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                scan(stmt.body.body, cond)
            elif isinstance(stmt, cst.SimpleStatementLine):
                for called in _called_names(stmt):
                    if called.endswith("Pass") and called not in made:
                        made[called] = (cond, info.rel, info.line_of(stmt))
                for small in stmt.body:
                    if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                        mod = _dotted_name(small.module) if small.module else ""
                        level = len(small.relative)
                        absmod = ".".join(base.split(".")[: len(base.split(".")) - (level - 1)] + ([mod] if mod else [])) if level else mod
                        for alias in small.names:
                            n = alias.name.value if isinstance(alias.name, cst.Name) else None
                            if n and n.endswith("Pass"):
                                imported.setdefault(n, (cond, info.rel, info.line_of(stmt), absmod))
            elif isinstance(stmt, (cst.For, cst.While, cst.With, cst.Try)):
                scan(stmt.body.body, cond)

    scan(info.tree.body, None)
    # the `if` around the instantiation (self.passes += [P(config)]) is the enabling condition when the
    # class is imported at module level; otherwise the `if` around the import is
    for n, (cond, file, line, mod) in imported.items():
        guard = cond
        if n in made and (cond is None or _flag_of(cond) is None):
            cond, file, line = made[n]
        if _ruled_out(guard, backend) or _ruled_out(cond, backend):
            continue  # imported or added only on a platform this tool does not walk (ROCm, XPU, ...)
        out[n] = (cond, file, line, mod)  # the condition stays code: callers render it (passes cross processes)
    return out


def _ruled_out(cond: Condition | None, backend: str) -> bool:
    """The condition is false on `backend` (ROCm/XPU-only branches, CUDA-only ones on Ascend)."""
    return evaluator(backend).condition_truth(cond) is Truth.FALSE


def _flag_of(cond: Condition | None) -> str | None:
    """The config flag a pass-enabling condition tests: the last name of a `...config...x` attribute chain,
    or the key of a `.get("x", ...)`, in the first conjunct that has one."""
    for term in cond.terms if cond else ():
        for leaf in _leaves(term.expr):
            found = _config_flag(leaf)
            if found:
                return found
    return None


def _leaves(expr):
    """The operands of and / or / not, left to right."""
    if isinstance(expr, cst.BooleanOperation):
        yield from _leaves(expr.left)
        yield from _leaves(expr.right)
    elif isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        yield from _leaves(expr.expression)
    elif expr is not None:
        yield expr


def _config_flag(leaf) -> str | None:
    if isinstance(leaf, cst.Attribute):
        names, node = [], leaf
        while isinstance(node, cst.Attribute):
            names.append(node.attr.value)
            node = node.value
        if isinstance(node, cst.Name):
            names.append(node.value)
        if any(("config" in n or "cfg" in n) for n in names[1:]):
            return names[0]
    for call in find_all(leaf, cst.Call):
        f = call.func
        if (isinstance(f, cst.Attribute) and f.attr.value == "get" and call.args
                and isinstance(call.args[0].value, cst.SimpleString)):
            return call.args[0].value.evaluated_value
    return None


def _field_default(index: ModuleIndex, info, flag: str) -> tuple | None:
    """(node, default expr) of the flag's declared default in the module: a `flag: T = default` field or an
    `__init__(..., flag: T = default)` parameter of a config class; else the first `.get("flag", default)`.
    The declaration wins over a `.get` elsewhere: vllm-ascend 0.23 syncs every field of
    AscendCompilationConfig into additional_config (platform.py), so a later
    `additional_config[...].get("fuse_allreduce_rms", True)` reads the field's False, not its own True.
    Only statements whose text names the flag can hold it."""
    key = (info.name, flag)
    if key in FIELD_DEFAULTS.of(index):
        return FIELD_DEFAULTS.of(index)[key]
    declared, got = None, None
    for stmt in info.nodes_with(flag.encode()):
        for n in find_all(stmt, (cst.AnnAssign, cst.FunctionDef, cst.Call)):
            if isinstance(n, cst.AnnAssign):
                t = n.target
                name = t.value if isinstance(t, cst.Name) else (t.attr.value if isinstance(t, cst.Attribute) else None)
                if name == flag and n.value is not None:
                    declared = (n, n.value)
            elif isinstance(n, cst.FunctionDef):
                declared = _param_default(n, flag)
            elif (got is None and isinstance(n.func, cst.Attribute) and n.func.attr.value == "get" and len(n.args) >= 2
                    and isinstance(n.args[0].value, cst.SimpleString) and n.args[0].value.evaluated_value == flag):
                got = (n, n.args[1].value)
            if declared:
                break
        if declared:
            break
    found = declared or got
    FIELD_DEFAULTS.of(index)[key] = found
    return found


def _param_default(fn: cst.FunctionDef, flag: str) -> tuple | None:
    """(node, expr) of `def __init__(self, ..., flag: T = default)`: the default, or what the function stores
    as `self.flag` when that is not the parameter itself (0.13's `self.fuse_qknorm_rope = HAS_TRITON or
    fuse_qknorm_rope`: the expression, which a literal reading does not decide)."""
    params = list(fn.params.params) + list(fn.params.kwonly_params)
    param = next((q for q in params if q.name.value == flag and q.default is not None), None)
    if param is None:
        return None
    for a in find_all(fn, cst.Assign):
        t = a.targets[0].target
        if (isinstance(t, cst.Attribute) and t.attr.value == flag and isinstance(t.value, cst.Name)
                and t.value.value == "self"):
            return (param, param.default) if isinstance(a.value, cst.Name) and a.value.value == flag else (a, a.value)
    return param, param.default


def _default_of(index: ModuleIndex, modules: list[str], flag: str) -> tuple[str, str, int] | None:
    """`flag: bool = True` in a config dataclass, or `.get("flag", True)` / `self.flag = ...`."""
    for modname in modules:
        info = index.get(modname)
        if info is None:
            continue
        found = _field_default(index, info, flag)
        if found:
            node, value = found
            return info.code(value).strip(), info.rel, info.line_of(node)
    return None


ASCEND_MANAGERS = ["vllm_ascend.compilation.graph_fusion_pass_manager", "vllm_ascend.compilation.npugraph_ex_passes.graphex_fusion_pass_manager"]
ASCEND_CONFIGS = ["vllm_ascend.ascend_config"]


def read_ascend_passes(index: ModuleIndex) -> list[GraphPass]:
    if "vllm_ascend" not in index.trees:
        return []
    out: list[GraphPass] = []
    seen: set[str] = set()
    for manager in ASCEND_MANAGERS:
        for cls_name, (cond, file, line, modname) in sorted(_enables(index, manager, "ascend").items()):
            for p in read_pass_module(index, modname, "ascend", only={cls_name}):
                if p.name != cls_name or p.name in seen:
                    continue
                seen.add(p.name)
                p.enable, p.enable_file, p.enable_line = as_text(cond), file, line
                p.flag = _flag_of(cond)
                if p.flag:
                    d = _default_of(index, ASCEND_CONFIGS, p.flag)
                    if d:
                        p.default, p.default_file, p.default_line = d
                out.append(p)
    return out
