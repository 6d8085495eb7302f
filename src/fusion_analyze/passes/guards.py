"""Graph-pass guards decided for one model: the `if`s a pass's __init__ tests before it registers a pattern
(`dtype not in (torch.bfloat16,)`, `layer.head_size != 128`), with the values the walk read from the
model's configuration and layers.

The passes are read once per session (in a child process, as data); each guard is read again here from its
file and line, and asked of the one evaluator with what vLLM's runtime hands the pass: `vllm_config` (the
model dtype `--dtype auto` picks, the configuration) and the model's layers (`get_layers_from_vllm_config`),
each with the values its op keeps (attrs.values). A guard that stops the registration makes the pattern fail
for this model; one the values do not decide stays a condition of the fused state.
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from ..index.facts import FactTable
from ..catalog import catalog
from ..config.reader import stated_dtype
from ..index.modules import ModuleIndex
from ..index.nodes import find_all
from ..semantics.scope import Scope
from ..semantics.environment import Environment
from ..semantics.evaluator import Evaluator
from ..ir.ops import Op
from ..semantics.function_bodies import tables
from ..catalog.taxonomy import leaf_ops
from ..semantics.values import Known, Symbol, Unknown, Value
from ..ir.conditions import Truth
from ..ir.texts import joined, say
from .registrations import PassGuard, _init_of
from .ascend_passes import GraphPass

GUARD_CODE = FactTable("pass_guard", "(module, class, line) -> a pass guard's code, scope and the names it reads")
PASS_INITS = FactTable("pass_init", "(module, class) -> (module, __init__, its local assignments) of a pass class")


def decide_guards(env: Environment, passes: list[GraphPass], ops: list[Op]) -> list[GraphPass]:
    """Copies of `passes` whose patterns carry `failed` / `undecided` for this model (its configuration) and
    device (its profile decides `get_current_hardware_profile().supports(...)`), both from the analysis's
    environment."""
    if not any(pat.guards or pat.keywords for p in passes for pat in p.patterns):
        return passes
    runtime = _Runtime(env, ops)
    out = []
    for p in passes:
        pats = []
        for pat in p.patterns:
            failed, undecided = [], []
            for g in pat.guards:
                truth, shown = runtime.decide(g)
                where = f"{g.file}:{g.line}"
                if truth is Truth.UNKNOWN:
                    undecided.append(joined([g.wanted(), f" ({where})"], ""))
                elif (truth is Truth.TRUE) == g.stops:
                    said = say("guard_holds" if g.stops else "guard_false", guard=g.text)
                    failed.append(joined([said, f"{shown} ({where})"], ""))
            values = tuple((kw, runtime.value(module, cls, code)) for kw, code, module, cls in pat.keywords)
            pats.append(replace(pat, failed=tuple(failed), undecided=tuple(undecided), keyword_values=values))
        out.append(replace(p, patterns=pats))
    return out


class _Runtime:
    def __init__(self, env: Environment, ops: list[Op]):
        self.index: ModuleIndex = env.index  # type: ignore[assignment]
        self.ops, self.config = ops, env.config
        calls = {n: self._layers_of for n in catalog().typed.walk.runtime.layers_of}
        self.evaluator = Evaluator(env, calls=calls)
        dtype = self._dtype()
        model_config = {"dtype": dtype.value} if isinstance(dtype, Known) else {}
        self.vllm_config = Known({"model_config": model_config})
        self._scopes: dict = {}

    def decide(self, g: PassGuard) -> tuple[Truth, str]:
        """The guard's truth for this model, and the values it read (` (layer.head_size = 256)`)."""
        found = self._scope(g)
        if found is None:
            return Truth.UNKNOWN, ""
        test, scope = found
        truth = self.evaluator.truth(test, scope.module, scope=scope)
        return truth, _shown(self.evaluator, test, scope) if truth is not Truth.UNKNOWN else ""

    def value(self, module: str, cls: str, code: str):
        """A registration keyword's value for this model (`routed_scaling_factor`, read in the pass's __init__
        with its locals); None when not known or not a number / string / bool."""
        found = _pass_init(self.index, module, cls)
        if found is None:
            return None
        info, _fn, local_values = found
        scope = self._init_scope(info, local_values)
        try:
            got = self.evaluator.infer(cst.parse_expression(code), scope)
        except cst.ParserSyntaxError:
            return None
        return got.value if isinstance(got, Known) and type(got.value) in (int, float, str, bool) else None

    def _scope(self, g: PassGuard):
        key = (g.module, g.cls, g.line)
        if key not in self._scopes:
            self._scopes[key] = self._read(g)
        return self._scopes[key]

    def _read(self, g: PassGuard):
        key = (g.module, g.cls, g.line)  # the code is the session's; only the values are the model's
        found = GUARD_CODE.get(self.index, key, lambda: _guard_code(self.index, g))
        if found is None:
            return None
        info, test, local_values = found
        return test, self._init_scope(info, local_values)

    def _init_scope(self, info, local_values) -> Scope:
        """The pass's __init__ as vLLM runs it for this model: its locals, and the model's vllm_config."""
        scope = Scope(module=info, values={"vllm_config": self.vllm_config})
        for name, value, cond in local_values:
            scope.locals.setdefault(name, []).append((value, cond))
        return scope

    def _layers_of(self, call: cst.Call, scope) -> Value:
        """`get_layers_from_vllm_config(vllm_config, Attention)`: the model's layers of that class, by path."""
        args = [a.value for a in call.args if a.keyword is None]
        if len(args) < 2 or not isinstance(args[1], cst.Name):
            return Unknown("layers of an unnamed class")
        entry = leaf_ops().classes.get(args[1].value)
        if entry is None or entry.values is None:
            return Unknown(f"the model's {args[1].value} layers are not read")
        layers = {}
        for op in self.ops:
            if op.kind == entry.kind and "values" in op.attrs and op.path not in layers:
                layers[op.path] = dict(op.attrs["values"])
        return Known(layers)

    def _dtype(self) -> Value:
        """The model dtype under vLLM's `--dtype auto`: the checkpoint's `dtype` (`torch_dtype`), a float32 one
        cast to the platform's first supported dtype; unknown without a checkpoint config that states it."""
        name = stated_dtype(self.config.values if self.config is not None else None)
        if name is None:
            return Unknown("the checkpoint's dtype is not stated")
        if name == "float32":
            return self._platform_default()
        return Known(Symbol(f"torch.{name}"))

    def _platform_default(self) -> Value:
        qual = catalog().typed.walk.runtime.platform.get(self.index.backend or "")
        if not qual:
            return Unknown("no platform class")
        mod, _, name = qual.rpartition(".")
        info = self.index.get(mod)
        cls = info.classes().get(name) if info is not None else None
        for stmt in cls.node.body.body if cls is not None else ():
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "supported_dtypes":
                for ret in find_all(stmt, cst.Return):
                    got = self.evaluator.infer(ret.value, Scope(module=info))
                    if isinstance(got, Known) and isinstance(got.value, tuple) and got.value:
                        return Known(got.value[0])
        return Unknown("the platform's supported dtypes are not read")


def _pass_init(index: ModuleIndex, module: str, cls: str):
    """(module, the pass's __init__, its locals) read once per session; None when the class is not found."""
    key = (module, cls)
    if key not in PASS_INITS.of(index):
        info = index.get(module)
        found = info.classes().get(cls) if info is not None else None
        fn = _init_of(found.node) if found is not None else None
        PASS_INITS.of(index)[key] = (info, fn, [(n, v, c) for n, v, c, _p in tables(fn, info).local_assignments]) if fn else None
    return PASS_INITS.of(index)[key]


def _guard_code(index: ModuleIndex, g: PassGuard):
    """(module, the guard's test, the __init__'s locals) read from the pass's file."""
    found = _pass_init(index, g.module, g.cls)
    if found is None:
        return None
    info, fn, local_values = found
    tests = [n.test for n in find_all(fn, cst.If) if info.line_of(n.test) == g.line]
    return (info, tests[0], local_values) if tests else None


def _shown(evaluator: Evaluator, test, scope) -> str:
    """The value of a comparison's left side (` (layer.head_size = 256)`), to say why a guard decided."""
    while isinstance(test, cst.UnaryOperation):
        test = test.expression
    if not isinstance(test, cst.Comparison):
        return ""
    got = evaluator.infer(test.left, scope)
    if not isinstance(got, Known):
        return ""
    return f" ({scope.module.code(test.left).strip()} = {got.value!r})"
