"""The one place that decides: an expression becomes a known value (or Unknown), a test becomes a Truth.

Every choice of the walk asks it: `if` branches of a forward or a factory, conditional constructions in an
`__init__`, registry lookups keyed by a config string, per-platform dispatch, the conditions that enable a graph
pass. What it knows: literals; parameters through the call that bound them (`super().__init__` chains, factory
calls, parameter defaults); `self.x` through the `__init__` that assigns it; the model's configuration
(`--config`, a preset, or the defaults of its configuration class: facts.py); the backend (assume table).
What it does not know stays Unknown, and a test on it UNKNOWN: never a guess.
"""

from __future__ import annotations

import ast

import operator
import re
from dataclasses import replace
from functools import lru_cache
from typing import Any, cast

import libcst as cst

from .callees import Callee
from ..index.modules import Definition
from .environment import Environment
from .runtime_defaults import config_default, setter_keeps
from .scope import Scope, forget_assigned, star_kwarg
from .loops import loop_function, run as run_loops
from .objects import dataclass_argument, static_method
from .known_calls import (_BUILTINS, BUILTIN_TYPES, _builds_objects, _held, _item, _never_none, _class_constant,
                          _decision_function, _dotted_text, _is_unbound_chain, _only_decisions, _rebound, isinstance_test,
                          isinstance_value, known_isinstance, none_test)
from .values import (Bindings, ClassRef, ConfigRef, Defaults, EnumMember, Known, NotNone, OneOf, Symbol, Tensor, Unknown,
                     Value, _is_none, assumed, literal)
from ..ir.conditions import Condition, Term, Truth, code_of, conjuncts

_EMPTY = Bindings()
_CONFIG_NAMES = {"config": False, "hf_config": False, "text_config": True, "hf_text_config": True}
_COMPARE = {cst.Equal: operator.eq, cst.NotEqual: operator.ne, cst.LessThan: operator.lt,
            cst.LessThanEqual: operator.le, cst.GreaterThan: operator.gt, cst.GreaterThanEqual: operator.ge,
            cst.Is: operator.is_, cst.IsNot: operator.is_not,
            cst.In: lambda a, b: a in b, cst.NotIn: lambda a, b: a not in b}
_MAX_INFER = 24  # hops through parameters, locals and attributes for one expression
_MAX_ITEMS = 256  # the most values a loop or a comprehension is read over
_ARITH = {cst.Add: operator.add, cst.Subtract: operator.sub, cst.Multiply: operator.mul,
          cst.FloorDivide: operator.floordiv, cst.Divide: operator.truediv, cst.Modulo: operator.mod,
          cst.Power: operator.pow}
_NOT_GLOBAL = Unknown("not a module-level constant")
_CONFIG_BASES = {"PretrainedConfig", "PreTrainedConfig"}  # transformers' configuration base class
# ConfigRef.rebuilt key -> the configuration class read there (model_config): for every evaluator of the process,
# as a memo of one analysis's kernels is read again with another's (Constructor.reads)
_CONFIG_CLASSES: dict = {}
# ConfigRef.set_by key -> (the function, its module, the parameter it sets attributes on), likewise
_CONFIG_SETTERS: dict = {}


class Evaluator:
    """Decides tests and infers values for one analysis, made from its Environment (semantics/environment.py):
    the backend walked, the model's configuration facts (or None: nothing is known of it), what the runtime
    returns; `attrs` reads `self.x` from an instance's `__init__`; `calls` adds what one reader knows of its
    own calls (a pass guard's `layers_of`)."""

    def __init__(self, env: Environment, attrs=None, calls=None):
        self.env = env
        self.backend = env.backend
        self.config = env.config  # config.model_config.ConfigFacts | None
        self.attrs = attrs  # walk.construction.Constructor | None
        # function name -> (call, scope) -> Value: what vLLM's runtime returns
        self.calls = {**env.runtime_calls, **calls} if calls else env.runtime_calls
        # the value of a local, per (scope, its version, name); only what is computed with no local hidden
        # (`x = x or d` hides x while its right side is read) is kept, so a kept value is the same anywhere
        self._locals: dict = {}
        self._terms: dict = {}  # (test, scope, its version, bindings) -> truth, kept the same way
        self._hiding = 0
        self._globals: dict = {}  # (module, dotted text) -> the value of a module-level name or class constant
        # a decision function's call on plain arguments -> (function, call, its value); also what readers of this
        # analysis decide from values alone (attention_choice: the platform's selector run on its fields)
        self.decided_calls: dict = {}
        self._too_deep = 0  # how often a step limit cut a reading short (a memo keeps only what none cut)
        self._last_run: tuple = (None, [])  # the scope and undecided returns of the last decision function run
        self._restarted = 0  # configuration reads started again from depth 0, in progress (_restart)

    # -- truth ----------------------------------------------------------------------------------
    def truth(self, expr: cst.BaseExpression, module, env: Bindings | None = None, scope=None) -> Truth:
        env = env or _EMPTY
        kind = type(expr)  # (the dispatch on it as in `infer`; each branch's node type cast, not tested again)
        if kind is cst.UnaryOperation and type(cast(cst.UnaryOperation, expr).operator) is cst.Not:
            return self.truth(cast(cst.UnaryOperation, expr).expression, module, env, scope).negate()
        if kind is cst.BooleanOperation:
            expr = cast(cst.BooleanOperation, expr)
            left, right = self.truth(expr.left, module, env, scope), self.truth(expr.right, module, env, scope)
            return left.and_(right) if type(expr.operator) is cst.And else left.or_(right)
        decided = none_test(expr, env)
        if decided is not Truth.UNKNOWN:
            return decided
        decided = isinstance_test(expr, module, env)
        if decided is not Truth.UNKNOWN:
            return decided
        if scope is not None:
            decided = truth_of(self.infer(expr, scope))
            if decided is not Truth.UNKNOWN:
                return decided
        decided = self.env.platform_truth(expr)
        if decided is not Truth.UNKNOWN:
            return decided
        params = getattr(scope, "params", None)
        local = getattr(scope, "locals", None) or {}
        if isinstance(expr, cst.Name) and params and expr.value in params and expr.value not in local:
            # a parameter's test is its argument's, read where the caller wrote it
            # (`use_rocm_aiter=rocm_aiter_ops.is_fused_moe_enabled()`: the platform's answer)
            arg, where = params[expr.value]
            arg_module = getattr(where, "module", module)
            quick = self.env.platform_truth(arg)  # a platform check needs no reading of what it calls
            if quick is Truth.UNKNOWN:
                quick = assumed(code_of(arg_module, arg), self.backend)
            return quick if quick is not Truth.UNKNOWN else self.truth(arg, arg_module, env, where)
        return assumed(code_of(module, expr), self.backend)

    def residual(self, expr: cst.BaseExpression, module, env: Bindings | None = None, scope=None):
        """(truth, condition) of an `if` test: an `a and b and c` whose known parts hold keeps only its
        undecided conjuncts (`self.reduce_results and self.tp_size > 1` with reduce_results True is
        `self.tp_size > 1`), so a printed condition never carries a decided part."""
        parts = conjuncts(expr)
        kept = []
        for part in parts:
            value = self.truth(part, module, env, scope)
            if value is Truth.FALSE:
                return Truth.FALSE, None
            if value is Truth.UNKNOWN:
                # less its own decided parts (`shared_output is None or <a test known false>`)
                kept.append(self.simplified(part, module, env, scope)[1]
                            if type(part) in (cst.BooleanOperation, cst.UnaryOperation) else part)
        if not kept:
            return Truth.TRUE, None
        if len(kept) == len(parts) and all(k is p for k, p in zip(kept, parts)):
            return Truth.UNKNOWN, Condition.of(expr, module)
        return Truth.UNKNOWN, Condition(tuple(t for k in kept for t in Condition.of(k, module).terms))

    def simplified(self, expr: cst.BaseExpression, module, env: Bindings | None = None, scope=None):
        """(truth, expression) of a test, less its decided parts: in `a and b` a part known to hold is dropped,
        in `a or b` a part known not to; through `not` and nested parts (`not self.is_sequence_parallel and
        self.tp_size > 1` with no sequence parallelism is `self.tp_size > 1`). The expression is the test's own
        where nothing was dropped."""
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            value, inner = self.simplified(expr.expression, module, env, scope)
            if value is not Truth.UNKNOWN or inner is expr.expression:
                return value.negate(), expr
            if isinstance(inner, cst.BooleanOperation) and not inner.lpar:
                inner = inner.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            spaced = cst.Not(whitespace_after=cst.SimpleWhitespace(" ")) if not getattr(inner, "lpar", None) else expr.operator
            return Truth.UNKNOWN, expr.with_changes(operator=spaced, expression=inner)
        if not isinstance(expr, cst.BooleanOperation):
            return self.truth(expr, module, env, scope), expr
        op = type(expr.operator)
        parts, stack = [], [expr]
        while stack:
            e = stack.pop()
            if isinstance(e, cst.BooleanOperation) and type(e.operator) is op and (e is expr or not e.lpar):
                stack += [e.right, e.left]
            else:
                parts.append(e)
        absorbing = Truth.FALSE if op is cst.And else Truth.TRUE
        kept, changed = [], False
        for part in parts:
            value, new = self.simplified(part, module, env, scope)
            if value is absorbing:
                return absorbing, expr
            if value is not Truth.UNKNOWN:
                changed = True
                continue
            changed = changed or new is not part
            kept.append(new)
        if not kept:
            return absorbing.negate(), expr
        if not changed:
            return Truth.UNKNOWN, expr
        out = kept[0]
        for part in kept[1:]:
            out = cst.BooleanOperation(left=out, operator=expr.operator, right=part)
        if isinstance(out, cst.BooleanOperation):
            out = out.with_changes(lpar=expr.lpar, rpar=expr.rpar)
        return Truth.UNKNOWN, out

    def _config_read(self, key: tuple, read, base: ConfigRef | None = None) -> Value:
        """A value of the model's configuration (of the configuration `base` rebuilt from it, where it is one);
        noted when a memo of an instance's kernels depends on it."""
        if self.config is None:
            return Unknown(f"config.{key[1]}: no configuration")
        chain = base.rebuilt if base is not None else ()
        value = read(self._facts(self.config, chain))
        reads = getattr(self.attrs, "reads", None)
        if reads is not None:
            reads[("config",) + key + chain] = (
                lambda ctor, _i: repr(read(ctor.evaluator._facts(ctor.evaluator.config, chain)))
                if ctor.evaluator.config is not None else None, repr(value))
        return value

    def _config_setter(self, target, call: cst.Call, scope, depth: int) -> Value | None:
        """`config = _normalize_config(vllm_config.model_config.hf_config)`: a function of the trees whose body
        only sets attributes of one parameter (`config.num_experts = config.n_routed_experts`, no test around)
        and returns that parameter, called with the model's configuration: that configuration with those
        attributes set (ConfigRef.set_by); None for any other call."""
        from .scope import Scope, bind_params
        from .signatures import signature

        fn, module = target.node, target.module
        if not isinstance(fn, cst.FunctionDef) or type(fn.body) is not cst.IndentedBlock or not fn.body.body:
            return None
        names = {p.name.value for group in signature(fn, False) for p in group}
        param, sets = None, False
        for i, stmt in enumerate(fn.body.body):
            if type(stmt) is not cst.SimpleStatementLine or len(stmt.body) != 1:
                return None
            small = stmt.body[0]
            if type(small) is cst.Expr and type(small.value) in (cst.SimpleString, cst.ConcatenatedString) and i == 0:
                continue  # the docstring
            if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Attribute \
                    and type(small.targets[0].target.value) is cst.Name:
                owner = small.targets[0].target.value.value
                if owner not in names or param not in (None, owner):
                    return None
                param, sets = owner, True
                continue
            if type(small) is cst.Return and type(small.value) is cst.Name and small.value.value == param \
                    and i == len(fn.body.body) - 1:
                continue
            return None
        last = fn.body.body[-1]
        if not sets or type(last) is not cst.SimpleStatementLine or type(last.body[0]) is not cst.Return:
            return None
        inner = Scope(module=module)
        bind_params(fn, call, scope, inner, skip_self=False)
        if param not in inner.params:
            return None
        expr, where = inner.params[param]
        base = self.infer(expr, where, depth + 1)
        if not isinstance(base, ConfigRef):
            return None
        key = (str(module.path), fn.name.value)
        _CONFIG_SETTERS[key] = (fn, module, param)
        return ConfigRef(base.text, base.rebuilt, base.set_by + (key,))

    def _config_set(self, base: ConfigRef, name: str, depth: int) -> Value | None:
        """`config.<name>` where a function the configuration was handed to set it (ConfigRef.set_by): what the
        last such assignment stores, read on the configuration as it was before that function; None where none
        sets it."""
        from .function_bodies import tables
        from .scope import Scope

        for i in range(len(base.set_by) - 1, -1, -1):
            fn, module, param = _CONFIG_SETTERS[base.set_by[i]]
            for target, value, cond, _pos in reversed(tables(fn, module).assignments):
                if type(target) is cst.Attribute and target.attr.value == name and cond is None \
                        and type(target.value) is cst.Name and target.value.value == param:
                    before = ConfigRef(base.text, base.rebuilt, base.set_by[:i])
                    return self.infer(value, Scope(module=module, values={param: before}), depth + 1)
        return None

    def _facts(self, facts, chain: tuple):
        """The facts of the configuration rebuilt along `chain` (ConfigRef.rebuilt) from `facts`."""
        for key in chain:
            facts = facts.rebuilt(_CONFIG_CLASSES[key], key[2])
        return facts

    def _rebuilt_config(self, cls, call: cst.Call, scope, depth: int) -> Value | None:
        """`FlashConfig(**vllm_config.model_config.hf_config.__dict__)`: a configuration class (one derived from
        transformers' configuration base) built from every attribute of the model's configuration: that
        configuration built again (ConfigFacts.rebuilt); None for any other call."""
        if self.config is None or len(call.args) != 1 or call.args[0].star != "**":
            return None
        handed = call.args[0].value
        if not (type(handed) is cst.Attribute and handed.attr.value == "__dict__"):
            return None
        base = self.infer(handed.value, scope, depth)
        if not isinstance(base, ConfigRef):
            return None
        names = self.attrs.base_names(cls) if self.attrs is not None else []
        if not _CONFIG_BASES & set(names):
            return None
        index = self.env.index
        tree = index.tree_for(cls.module.name) if index is not None else None
        # the configuration's own reader reads the class (semantics does not import config: the facts object
        # it was handed does)
        found = self.config.class_named(str(cls.module.path), cls.name, tree, list(index.trees.values())) \
            if index is not None and tree is not None else None
        if found is None:
            return None
        key = (str(cls.module.path), cls.name, base.text)
        _CONFIG_CLASSES[key] = found
        return ConfigRef(False, base.rebuilt + (key,))

    def term_truth(self, term: Term, env: Bindings | None = None, none_only: bool = False, scope=None) -> Truth:
        if term.expr is None:
            return Truth.UNKNOWN
        if none_only:
            value = none_test(term.expr, env or _EMPTY)
        else:
            # one factory's elif chain repeats the same tests in every branch's condition: decided once
            key = (id(term.expr), id(scope), getattr(scope, "version", 0), id(env))
            kept = self._terms.get(key) if self._hiding == 0 else None
            if kept is not None and kept[0] is term.expr and kept[1] is scope and kept[2] is env:
                value = kept[3]
            else:
                value = self.truth(term.expr, term.module, env, scope)
                if self._hiding == 0:
                    self._terms[key] = (term.expr, scope, env, value)
        return value.negate() if term.negated else value

    def condition_truth(self, cond: Condition | None, env: Bindings | None = None, scope=None) -> Truth:
        out = Truth.TRUE
        for term in cond.terms if cond else ():
            out = out.and_(self.term_truth(term, env, scope=scope))
        return out

    def decide(self, cond: Condition | None, env: Bindings, none_only: bool = False, scope=None) -> Condition | Truth:
        """The condition less the terms that are known to hold; FALSE if one is known not to; TRUE if none is
        left. A decided term never reaches a report."""
        if not cond:
            return Truth.TRUE
        kept = []
        for term in cond.terms:
            value = self.term_truth(term, env, none_only, scope)
            if value is Truth.FALSE:
                return Truth.FALSE
            if value is Truth.UNKNOWN:
                kept.append(term)
        return Condition(tuple(kept)) if kept else Truth.TRUE

    # -- values ---------------------------------------------------------------------------------
    def infer(self, expr: cst.BaseExpression | None, scope=None, depth: int = 0) -> Value:
        """What `expr` evaluates to where `scope` (a construct.Scope) binds its names."""
        if expr is None:
            return Unknown("no expression")
        if depth > _MAX_INFER:
            self._too_deep += 1
            return Unknown("too many steps to follow")
        lit = literal(expr)
        if lit is not None:
            return lit
        step = depth + 1
        kind = type(expr)  # libcst's node classes are ABCs: an isinstance chain costs here, on every step
        if kind in (cst.Subscript, cst.Call) and isinstance(scope, Scope) and scope.star_kwargs:
            got = star_kwarg(expr, scope)
            if got is not None:  # kwargs["q_lora_rank"], kwargs.get("g_proj"): what the caller passed by that name
                value, where = got
                return self.infer(value, where, step)
        # each branch casts `expr` to the node class `kind` is (libcst's classes are not subclassed)
        if kind is cst.Name:
            return self._name(cast(cst.Name, expr).value, scope, step)
        if kind is cst.Attribute:
            return self._attribute(cast(cst.Attribute, expr), scope, step)
        if kind is cst.Call:
            return self._call(cast(cst.Call, expr), scope, step)
        if kind is cst.Subscript:
            expr = cast(cst.Subscript, expr)
            if len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index:
                return self._subscript(expr, scope, step)
        if kind is cst.Comparison:  # a < b <= c: each pair, all must hold
            expr = cast(cst.Comparison, expr)
            left, out = self.infer(expr.left, scope, step), None
            for comp in expr.comparisons:
                right = self.infer(comp.comparator, scope, step)
                got = _compare(type(comp.operator), left, right)
                if isinstance(got, Known) and got.value is False:
                    return got
                out = got if out is None or not isinstance(got, Known) else out
                left = right
            assert out is not None  # (a Comparison has at least one comparison)
            return out
        if kind is cst.UnaryOperation and type(cast(cst.UnaryOperation, expr).operator) is cst.Not:
            t = truth_of(self.infer(cast(cst.UnaryOperation, expr).expression, scope, step))
            return Known(t is Truth.FALSE) if t is not Truth.UNKNOWN else Unknown("not of an unknown value")
        if kind is cst.BooleanOperation:
            return self._boolean(cast(cst.BooleanOperation, expr), scope, step)
        if kind is cst.BinaryOperation and type(cast(cst.BinaryOperation, expr).operator) in _ARITH:
            expr = cast(cst.BinaryOperation, expr)
            left, right = self.infer(expr.left, scope, step), self.infer(expr.right, scope, step)
            return _arith(type(expr.operator), left, right)
        if kind in (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp):
            got = self._comprehension(expr, scope, step)
            if got is not None:
                return got
        if kind is cst.NamedExpr and isinstance(expr, cst.NamedExpr):  # `(x := value)` is value
            return self.infer(expr.value, scope, step)
        if kind is cst.IfExp:
            expr = cast(cst.IfExp, expr)
            t = truth_of(self.infer(expr.test, scope, step))
            if t is Truth.UNKNOWN:
                t = self.branch_that_cannot_run(expr, scope, step)
            if t is Truth.TRUE:
                return self.infer(expr.body, scope, step)
            if t is Truth.FALSE:
                return self.infer(expr.orelse, scope, step)
            body, orelse = self.infer(expr.body, scope, step), self.infer(expr.orelse, scope, step)
            return body if _same(body, orelse) else OneOf((body, orelse))  # (the same value either way)
        if kind is cst.Tuple or kind is cst.List:
            expr = cast("cst.Tuple | cst.List", expr)
            items = []
            for e in expr.elements:
                got = self.infer(e.value, scope, step)
                if type(e) is cst.StarredElement:  # `(*key, flag)`: the known sequence's items, spread
                    if not (isinstance(got, Known) and isinstance(got.value, (tuple, list))):
                        return Unknown("a starred item that is not a known sequence")
                    items += [Known(v) for v in got.value]
                else:
                    items.append(got)
            if all(isinstance(i, Known) for i in items):
                return Known(tuple(i.value for i in items))
        if kind is cst.Dict:
            expr = cast(cst.Dict, expr)
            pairs = []
            for e in expr.elements:
                if type(e) is cst.StarredDictElement:  # `{**config.rope_parameters, "rope_theta": t}`: its items
                    spread = self.infer(e.value, scope, step)
                    if not (isinstance(spread, Known) and isinstance(spread.value, dict)):
                        pairs = None
                        break
                    pairs += [(Known(k), v if isinstance(v, Unknown) else Known(v)) for k, v in spread.value.items()]
                else:  # (a DictElement: the other kind of element)
                    e = cast(cst.DictElement, e)
                    pairs.append((self.infer(e.key, scope, step), self.infer(e.value, scope, step)))
            if pairs is not None and all(isinstance(k, Known) for k, _v in pairs):
                try:  # an item whose value is not known stays Unknown inside (`"rope_type": "yarn"` still reads)
                    return Known({k.value: v.value if isinstance(v, Known) else v for k, v in pairs})
                except TypeError:  # an unhashable key
                    pass
        if isinstance(expr, cst.FormattedString):  # f"{prefix}.self_attn": a layer's module name, its index in it
            text: list[str] = []
            for part in expr.parts:
                if isinstance(part, cst.FormattedStringText):
                    text.append(part.value)
                    continue
                got = self.infer(part.expression, scope, step) if isinstance(part, cst.FormattedStringExpression) \
                    and part.format_spec is None and part.conversion is None else None
                if not isinstance(got, Known) or type(got.value) not in (str, int):
                    break
                text.append(str(got.value))
            else:
                return Known("".join(text))
        return Unknown(f"`{code_of(getattr(scope, 'module', None), expr)}` is not known statically")

    def _loop_value(self, name: str, scope, depth: int) -> Value:
        """A name a loop of the function binds (`for block_idx in range(n)`, a comprehension's `idx`), read
        where no iteration is told apart: one of the values its iterable gives (OneOf), where it gives a known
        few; a test on it is decided where every value decides it alike."""
        iterable, item = scope.loops[name]
        items = self._iterated(iterable, scope, depth)
        if items is None or not items:
            return Unknown(f"`{name}`: a loop's variable over values not known")
        if item is not None:
            if not all(isinstance(v, tuple) and len(v) > item for v in items):
                return Unknown(f"`{name}`: an item of a loop's elements that are not tuples")
            items = [v[item] for v in items]
        options = tuple(dict.fromkeys(Known(v) for v in items if _hashable(v)))
        if len(options) != len(set(map(repr, items))):
            return Unknown(f"`{name}`: a loop's values that are not plain")
        return options[0] if len(options) == 1 else OneOf(options)

    def _iterated(self, expr, scope, depth: int) -> list | None:
        """The values a loop over `expr` takes, where known and few (_MAX_ITEMS): a known sequence, `range(...)`
        and `enumerate(...)` of known values; None otherwise."""
        value = self.infer(expr, scope, depth + 1)
        if isinstance(value, Known) and isinstance(value.value, (tuple, list)) and len(value.value) <= _MAX_ITEMS:
            return list(value.value)
        return None

    def _comprehension(self, expr, scope, depth: int) -> Value | None:
        """`[f(x) for x in xs]` (a list, set, generator or dict comprehension) of one `for` over known few
        values, each element (key and value) read with the loop's names written in place: the known sequence
        (a tuple) or dict; None where a part is not known."""
        fin = expr.for_in
        if fin.inner_for_in is not None or fin.asynchronous is not None:
            return None
        items = self._iterated(fin.iter, scope, depth)
        target = fin.target
        names = [target.value] if type(target) is cst.Name else [
            el.value.value if type(el) is cst.Element and type(el.value) is cst.Name else None
            for el in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else None
        if items is None or not names or None in names:
            return None
        out: list = []
        for item in items:
            values = [item] if type(target) is cst.Name else list(item) if isinstance(item, tuple) else None
            if values is None or len(values) != len(names) or not all(_writable(v) for v in values):
                return None
            named = list(zip(cast("list[str]", names), values))  # (no None among the names: tested above)

            def placed(node: cst.BaseExpression) -> cst.BaseExpression:
                for name, v in named:  # (a name replaced by an expression: an expression still)
                    node = cast(cst.BaseExpression, node.visit(_Substitute(name, cst.parse_expression(repr(v)))))
                return node
            if any(truth_of(self.infer(placed(c.test), scope, depth + 1)) is not Truth.TRUE for c in fin.ifs):
                if all(truth_of(self.infer(placed(c.test), scope, depth + 1)) is not Truth.UNKNOWN for c in fin.ifs):
                    continue  # an element its `if` leaves out
                return None
            parts = [expr.key, expr.value] if isinstance(expr, cst.DictComp) else [expr.elt]
            got = [self.infer(placed(p), scope, depth + 1) for p in parts]
            known = [g.value for g in got if isinstance(g, Known)]
            if len(known) != len(got):
                return None
            out.append(tuple(known) if type(expr) is cst.DictComp else known[0])
        if type(expr) is cst.DictComp:
            try:
                return Known(dict(out))
            except TypeError:
                return None
        if type(expr) is cst.SetComp:
            try:
                return Known(frozenset(out))
            except TypeError:
                return None
        return Known(tuple(out))

    def branch_that_cannot_run(self, expr: cst.IfExp, scope, depth: int) -> Truth:
        """`f(x) if f else y` where `f` can only hold what the configuration gives for a name its class gives no
        attribute (`getattr(config, "get_nemotron_h_config_for_layer", None)`: a key of config.json, data, or
        the default None): calling it raises, so a deployment that runs takes the other side: FALSE (TRUE where
        the orelse is that call); UNKNOWN otherwise."""
        for side, truth in ((expr.body, Truth.FALSE), (expr.orelse, Truth.TRUE)):
            if type(side) is cst.Call and self._not_callable(side.func, scope, depth):
                return truth
        return Truth.UNKNOWN

    def _not_callable(self, func, scope, depth: int) -> bool:
        """`func` holds a value of the configuration (read with `getattr(config, "k", <no callable>)` or
        `config.k`) of a name its class gives no attribute, through locals assigned once and parameters."""
        for _ in range(_MAX_INFER - depth):
            if type(func) is cst.Name and scope is not None:
                values = scope.locals.get(func.value)
                if values is not None:
                    if len(values) != 1 or values[0][1]:
                        return False
                    func = values[0][0]
                    continue
                if func.value in scope.params:
                    func, scope = scope.params[func.value]
                    continue
                return False
            if type(func) is cst.Call and type(func.func) is cst.Name and func.func.value == "getattr" \
                    and len(func.args) in (2, 3) and not any(a.keyword or a.star for a in func.args):
                base, key = func.args[0].value, literal(func.args[1].value)
                default = literal(func.args[2].value) if len(func.args) == 3 else None
                if len(func.args) == 3 and (default is None or callable(default.value)):
                    return False  # a default that may be a callable
            elif type(func) is cst.Attribute:
                base, key = func.value, Known(func.attr.value)
            else:
                return False
            ref = self.infer(base, scope, depth + 1)
            return isinstance(ref, ConfigRef) and not ref.rebuilt and isinstance(key, Known) \
                and isinstance(key.value, str) and self.config is not None \
                and bool(getattr(self.config, "gives_no_attribute", lambda *_a: False)(key.value, ref.text))
        return False

    def _subscript(self, expr, scope, step: int) -> Value:
        """`x[k]`: the item of a known value; `a, b, c = f(...)` (read as `f(...)[k]`): item k of the tuple f
        returns, alone, where the whole is not known; `x.shape[-1]` of a tensor whose last dimension a call
        binds (Bindings.widths)."""
        key = self.infer(expr.slice[0].slice.value, scope, step)
        if type(expr.value) is cst.Attribute and expr.value.attr.value == "shape" and key == Known(-1):
            held = self.infer(expr.value.value, scope, step)
            if isinstance(held, Tensor):
                return Known(held.width)
        got = _item(self.infer(expr.value, scope, step), key)
        if isinstance(got, Unknown) and type(expr.value) is cst.Call and isinstance(key, Known) and type(key.value) is int:
            item = self._called(expr.value, scope, step, item=key.value)
            return item if isinstance(item, Known) else got
        return got

    def _name(self, name: str, scope, depth: int) -> Value:
        if scope is not None:
            handed = getattr(scope, "values", None)
            if handed and name in handed:
                return handed[name]
            if name in scope.locals:
                key = (id(scope), getattr(scope, "version", 0), name)
                kept = self._locals.get(key) if self._hiding == 0 else None
                if kept is not None and kept[0] is scope:
                    return kept[1]
                values = scope.locals.pop(name)  # `x = x or default` reads the parameter x on the right
                self._hiding += 1
                try:
                    before = self._name(name, scope, depth) if (name in scope.params or name in scope.defaults) else None
                    if before is None and name in getattr(scope, "globals_owned", ()):
                        before = self._initial_global(name, scope, depth)  # `global x` none of whose assignments runs
                    value = self._assigned(values, scope, depth, before)
                finally:
                    scope.locals[name] = values
                    self._hiding -= 1
                if self._hiding == 0:
                    self._locals[key] = (scope, value)
                return value
            if name in scope.params:
                expr, where = scope.params[name]
                return self.infer(expr, where, depth)
            if name in scope.defaults:
                from .scope import Scope

                return self.infer(scope.defaults[name], Scope(module=scope.module, owner=scope.owner), depth)
            if name in (getattr(scope, "loops", None) or ()):
                return self._loop_value(name, scope, depth)
        if name in _CONFIG_NAMES:  # an unbound `config`: the model's configuration handed to every layer
            return ConfigRef(_CONFIG_NAMES[name])
        found = self._global(cst.Name(name), scope, depth)
        return found if found is not _NOT_GLOBAL else Unknown(f"`{name}` is not bound statically")

    def _initial_global(self, name: str, scope, depth: int) -> Value | None:
        """The value a module binds `name` to once (`_aux_stream = None`), for the one function that declares it
        `global` and assigns it, where none of its assignments runs: while that function alone rebinds it, the
        binding stands until one of them does. None where the module binds it otherwise."""
        from .scope import Scope

        module = scope.module
        found = [d for d in module.defs.get(name, ()) if d.kind == "assign" and d.condition is None]
        if len(found) != 1 or len(module.defs.get(name, ())) != 1:
            return None
        return self.infer(found[0].node, Scope(module=module), depth + 1)

    def _global(self, expr: cst.Name | cst.Attribute, scope, depth: int) -> Value:
        """A module-level name assigned once (`_ENABLED = True`), a class's constant (`AttentionType.DECODER`),
        or an outside library's listed constant (`torch.bfloat16`), as the module of `scope` sees it."""
        module = getattr(scope, "module", None)
        index = getattr(module, "_index", None)
        if index is None or module is None:
            return _NOT_GLOBAL
        text = _dotted_text(expr)
        key = (module.name, text)
        if key in self._globals:
            return self._globals[key]
        self._globals[key] = _NOT_GLOBAL  # while it is read: a constant defined by itself is not one
        value = self._read_global(index, module, expr, text, depth)
        self._globals[key] = value
        return value

    def _read_global(self, index, module, expr, text, depth: int) -> Value:
        from ..catalog import catalog
        from .scope import Scope

        if text is None:
            return _NOT_GLOBAL
        dotted = index.dotted(module, expr)
        if dotted in catalog().symbols:
            return Known(Symbol(dotted))
        for env in catalog().runtime.get("environment") or ():
            if dotted and dotted.startswith(env["module"] + ".") and dotted.count(".") == env["module"].count(".") + 1:
                return self._environment_default(index, env, dotted.rsplit(".", 1)[1], depth)
        if type(expr) is cst.Attribute:
            owner = index.resolve_expr(module, expr.value)
            if getattr(owner, "kind", None) == "class":
                return _class_constant(owner, expr.attr.value)
        target = index.resolve_expr(module, expr)
        if getattr(target, "kind", None) == "class":
            return Known(ClassRef(target))
        if getattr(target, "kind", None) == "function" and getattr(target, "condition", None) is None:
            return NotNone(f"function {target.name}")  # a function object (custom_routing_function=fn)
        if getattr(target, "kind", None) != "assign" or target.condition is not None:
            return _NOT_GLOBAL
        if len(target.module.defs.get(target.name, ())) != 1:
            return Unknown(f"`{target.name}` is assigned more than once")
        if _rebound(target.module, target.name) and not self._kept_at_startup(target, depth):
            return Unknown(f"`{target.name}` is rebound at run time (`global {target.name}`)")
        return self.infer(target.node, Scope(module=target.module), depth)

    def _kept_at_startup(self, target, depth: int) -> bool:
        """A module global set at start-up (walk.yaml `runtime.startup_globals`: `_KV_CONNECTOR_AGENT`, set by
        ensure_kv_transfer_initialized) keeps its initial value where each function of its module that
        rebinds it (`global NAME`) assigns the initial value again, or under a test the deployment fails
        (`kv_transfer_config is not None and ...` with no KV-transfer config)."""
        from ..catalog import catalog
        from .function_bodies import tables
        from .scope import Scope

        qualname = f"{target.module.name}.{target.name}"
        if qualname not in (catalog().runtime.get("startup_globals") or ()) or qualname in _STARTUP_BUSY:
            return False
        initial = literal(target.node)
        _STARTUP_BUSY.add(qualname)
        try:
            for d in (d for defs in target.module.defs.values() for d in defs if d.kind == "function"):
                fn = d.node
                if not _declares_global(fn, target.name):
                    continue
                table = tables(fn, d.module)
                scope = Scope(module=d.module)
                for local, value, cond, _pos in table.local_assignments:
                    if local != target.name:  # (the global itself is read as the global)
                        scope.locals.setdefault(local, []).append((value, cond))
                for local, value, cond, _pos in table.local_assignments:
                    if local != target.name or (initial is not None and literal(value) == initial):
                        continue
                    if self.condition_truth(cond, scope=scope) is not Truth.FALSE:
                        return False
            return True
        finally:
            _STARTUP_BUSY.discard(qualname)

    def _environment_default(self, index, env: dict, name: str, depth: int) -> Value:
        """`envs.VLLM_X` in the default environment: its entry's lambda in vLLM's `environment_variables`
        table, with every `os.getenv(key, default)` at its default."""
        from .scope import Scope

        info = index.get(env["module"])
        table = [d for d in (info.defs.get(env["table"], ()) if info is not None else ()) if d.kind == "assign"]
        read = table[0].ast_value if len(table) == 1 else None
        if isinstance(read, ast.Dict) and info is not None:  # read by `ast`: parse the one entry's lambda, not the table
            for key, value in zip(read.keys, read.values):
                if isinstance(key, ast.Constant) and key.value == name and isinstance(value, ast.Lambda):
                    return self.infer(info.expression_alone(value.body), Scope(module=info), depth)
            return Unknown(f"{name} is not in {env['module']}.{env['table']}")
        node = table[0].node if len(table) == 1 else None
        for el in node.elements if type(node) is cst.Dict else ():
            if type(el) is cst.DictElement and literal(el.key) == Known(name) and type(el.value) is cst.Lambda:
                return self.infer(el.value.body, Scope(module=info), depth)
        return Unknown(f"{name} is not in {env['module']}.{env['table']}")

    def _assigned(self, values: list, scope, depth: int, before: Value | None = None) -> Value:
        """The value of a local assigned (value, condition) in order: the last assignment whose condition
        holds, as long as no undecided one comes after it; `before`, the parameter of that name, where none
        runs."""
        result: Value = before if before is not None else Unknown("assigned under a condition that is not decided")
        for value, cond in values:
            t = self.condition_truth(cond, scope=scope)
            if t is Truth.TRUE:
                result = self.infer(value, scope, depth)
            elif t is Truth.UNKNOWN and not (isinstance(result, Known) and _same(result, self.infer(value, scope, depth))):
                # (the value it had already, assigned again under a test: `sliding_window = config.sliding_window`
                # under `if is_sliding:` after `sliding_window = None`, with a configuration whose window is None)
                result = Unknown("assigned under a condition that is not decided")
        return result

    def _attribute(self, expr: cst.Attribute, scope, depth: int) -> Value:
        attr = expr.attr.value
        if type(expr.value) is cst.Name and expr.value.value == "self" and "self" not in (getattr(scope, "values", None) or ()):
            if scope is not None and scope.owner is not None and self.attrs is not None:
                return self.attrs.self_value(scope.owner, attr, self, depth)
            return _carried(scope, attr, self.env) or Unknown(f"self.{attr} outside a construction")
        if type(expr.value) is cst.Attribute and type(expr.value.value) is cst.Name and expr.value.value.value == "self" \
                and "self" not in (getattr(scope, "values", None) or ()) and self.attrs is not None \
                and getattr(scope, "owner", None) is not None:
            got = self._submodule_attribute(scope.owner, expr.value.attr.value, attr, depth)
            if got is not None:  # `self.dt_proj.bias`: what the submodule's construction assigns
                return got
        if type(expr.value) is cst.Name and self.attrs is not None and expr.value.value in (getattr(scope, "instances", None) or ()):
            held = scope.instances[expr.value.value]  # `layer.use_sequence_parallel`: the layer the loop walks
            return self.attrs.self_value(held, attr, self, depth)
        if attr in ("hf_config", "hf_text_config"):
            return ConfigRef(attr == "hf_text_config")
        got = self._set_on_local(expr, scope, depth)
        if got is not None:  # `upstream_config.mla_use_output_gate = use_output_gate` before it is read
            return got
        base = self.infer(expr.value, scope, depth)
        if isinstance(base, (Unknown, NotNone)) and _names_model_config(expr.value) and self.env is not None:
            derived = self.env.model_attrs().get(attr)  # `model_config.use_mla`: run from vLLM's code
            if derived is not None:
                return derived
        carried = _carried(scope, attr, self.env) if isinstance(base, (Unknown, NotNone)) else None  # an object, value unknown
        if carried is not None:
            return carried
        holder = _holder(expr.value, scope)
        if holder is None and _config_getter(expr.value):  # get_current_vllm_config().engram_config
            holder = "vllm_config"
        if holder == "vllm_config" and isinstance(base, (Unknown, NotNone)) and self.env is not None:
            got = _deployment_none(self.env.deployment, attr)
            if got is not None:  # `vllm_config.lora_config`: no LoRA and no speculative config in this deployment
                return got
            got = self._config_property(attr, depth)
            if got is not None:  # `vllm_config.num_speculative_tokens`: VllmConfig's property, run on its fields
                return got
            got = self._field_never_set(attr)
            if got is not None:  # `vllm_config.engram_config`: None, and no start-up code sets it on this backend
                return got
        if holder and holder.endswith("_config") and isinstance(base, (Unknown, NotNone)) and self.env is not None:
            from .runtime_defaults import vllm_config_default

            got = vllm_config_default(self.env.index, holder, attr, lambda e, sc: self.infer(e, sc, depth + 1))
            if got is not None:  # `cache_config.kv_sharing_fast_prefill`: vLLM's default, no argument changes it
                return got
            got = self._engine_local(holder, attr, expr.value, scope)
            if got is not None:  # `cache_config.sliding_window`: None where the configuration states none
                return got
            got = self._selector_default(holder, attr, depth)
            if got is not None:  # `attention_config.backend`: the default the attention selector reads too
                return got
        if isinstance(base, ConfigRef) and attr == "text_config" and not base.text:
            # `config.text_config`: the text part of the configuration, read where it is one (what
            # `hf_text_config` and `get_text_config()` are), unless the configuration gives it as None
            got = self._config_read(("attr", attr, False), lambda config: config.attr(attr, False), base)
            return got if isinstance(got, Known) and got.value is None else ConfigRef(True, base.rebuilt)
        if isinstance(base, ConfigRef):
            got = self._config_set(base, attr, depth)
            if got is not None:  # an attribute a function of the trees set on it
                return got
            return self._config_read(("attr", attr, base.text), lambda config: config.attr(attr, base.text), base)
        if isinstance(base, Known) and isinstance(base.value, dict):
            return _held(base.value[attr]) if attr in base.value else Unknown(f"`{attr}` is not in the configuration")
        if isinstance(base, Known) and isinstance(base.value, Defaults):
            start = self._restart(depth)  # (a configuration's field is the same however deep it is asked)
            try:
                return config_default(base.value, attr, lambda e, sc: self.infer(e, sc, start + 1))
            finally:
                self._restarted -= start != depth
        if isinstance(base, Known) and hasattr(base.value, "fields") and attr in base.value.fields:
            return Known(Symbol(base.value.fields[attr]))  # a hardware profile's family / policy member
        member = base.value if isinstance(base, Known) and isinstance(base.value, EnumMember) else None
        if member is not None and attr in ("name", "value"):
            return Known(member.member if attr == "name" else str(member))  # `requested.name`
        if _is_unbound_chain(expr, scope):
            found = self._global(expr, scope, depth)
            if found is not _NOT_GLOBAL:
                return found
        if isinstance(base, (Unknown, NotNone)) and self.attrs is not None:
            held = self._instance_of(expr.value, scope, depth)
            if held is not None:  # `self.moe_config.is_sequence_parallel`: read on the object the walk built
                return self.attrs.self_value(held, attr, self, depth)
        if isinstance(base, Known) and isinstance(base.value, ClassRef):  # a class the code holds as a value
            return self._class_attribute(base.value.definition, attr, depth)
        if isinstance(base, NotNone):  # `mla_modules.is_sparse`: a field of the dataclass the code built
            got = self._dataclass_field(expr.value, attr, scope, depth)
            if got is not None:
                return got
        return Unknown(f"`.{attr}` of an unknown value")

    def _set_on_local(self, expr: cst.Attribute, scope, depth: int) -> Value | None:
        """`x.attr` where `x` is (through the parameters that handed it on) a local whose function assigned
        `x.attr = value` before (Scope.attr_sets: a copy of the configuration with one field set, vllm_ascend's
        AscendKimiMLAAttention): the last such value that runs, unknown where one is under a test not decided;
        None where no such assignment is seen."""
        node, where = expr.value, scope
        for _ in range(8):
            if type(node) is not cst.Name or not isinstance(where, Scope):
                return None
            name = node.value
            if name in where.values:
                return None
            if name in where.locals:
                found = (where.attr_sets.get(name) or {}).get(expr.attr.value)
                return self._assigned(found, where, depth) if found else None
            if name not in where.params:
                return None
            node, where = where.params[name]
        return None

    def _selector_default(self, holder: str, attr: str, depth: int) -> Value | None:
        """`<holder>.<attr>` of a part of vllm_config that walk.yaml `attention_backend.model_reads` says code
        reads at its class's declared default (the deployment states none of it: as the attention selector's
        run reads it, attention_choice._vllm_config); None for any other holder."""
        from ..catalog import catalog
        from .values import Defaults

        spec = catalog().typed.walk.runtime.attention_backend
        qualname = (spec.vllm_config or {}).get(holder) if spec is not None and holder in spec.model_reads else None
        cls = self.env.index.lookup(*str(qualname).rsplit(".", 1)) if qualname and self.env.index is not None else None
        if getattr(cls, "kind", None) != "class":
            return None
        return config_default(Defaults(cls, {}), attr, lambda e, sc: self.infer(e, sc, depth + 1))

    def _submodule_attribute(self, owner, name: str, attr: str, depth: int) -> Value | None:
        """`self.<name>.<attr>` where the walk built `self.<name>` (a module of the trees): its `self.<attr>` after
        its __init__ chain, read on the class the backend runs (`ColumnParallelLinear(..., bias=True)`: `self.bias
        = Parameter(...)` under `if bias:`, never None); None where that is not decided (an attribute set
        another way, `register_parameter("bias", None)`, is not read)."""
        attrs = self.attrs
        sub = attrs.attr(owner, name) if attrs is not None else None
        if attrs is None or sub is None or getattr(sub, "cls", None) is None:
            return None
        running = attrs.running_instance(sub) if hasattr(attrs, "running_instance") else sub
        got = attrs.self_value(running, attr, self, depth)
        return got if isinstance(got, (Known, NotNone)) else None

    def _field_never_set(self, attr: str) -> Value | None:
        """`vllm_config.<attr>` that starts as None (runtime_defaults.engine_field_starts_none) and that no start-up
        code sets on this backend: every assignment `<x>.<attr> = ...` of the setter modules (VllmConfig, the
        platforms, vllm-ascend's platform) is behind a test decided against it, read with the field still None
        (VllmConfig._resolve_and_verify_engram_config returns first where `not current_platform.is_cuda()`; vllm-ascend
        sets it only for DeepseekV41). Known(None) then, else None (not decided). By induction: from None, no setter
        runs, so it stays None."""
        from .runtime_defaults import engine_field_starts_none, field_setters

        memo = self.__dict__.setdefault("_never_set", {})
        if attr in memo:
            return memo[attr]
        memo[attr] = None
        index = self.env.index if self.env is not None else None
        if index is None or not engine_field_starts_none(index, attr):
            return None
        setters = field_setters(index, attr)
        if setters is None or not all(self._not_reached(info, fn, stmt, attr) for info, fn, stmt in setters):
            return None
        memo[attr] = Known(None)
        return memo[attr]

    def _not_reached(self, module, fn: cst.FunctionDef, target, attr: str) -> bool:
        """The statement `target` of `fn` surely does not run: an `if` on its way decided against it, or an early
        return (raise) before it decided to be taken; tests read with `<any>.<attr>` None and the locals assigned
        before them."""
        from .function_bodies import exits_at_end
        from ..index.nodes import find_all

        scope = Scope(module=module, fields={attr: Known(None)})

        def holds(stmt) -> bool:
            return stmt is target or any(n is target for n in find_all(stmt, cst.SimpleStatementLine))

        def branch(block):
            return [block] if type(block) is cst.If else list(block.body.body) if block is not None else []

        def search(stmts) -> str:  # "reached" (may run), "blocked" (surely not), "absent" (not in stmts)
            for stmt in stmts:
                inside = holds(stmt)
                if stmt is target:
                    return "reached"
                if type(stmt) is cst.If:
                    truth = self.truth(stmt.test, module, None, scope)
                    if inside:
                        in_body = any(holds(s) for s in stmt.body.body)
                        if (truth is Truth.TRUE and not in_body) or (truth is Truth.FALSE and in_body):
                            return "blocked"
                        found = search(list(stmt.body.body) if in_body else branch(stmt.orelse))
                        return found if found != "absent" else "reached"
                    if truth is Truth.TRUE and stmt.orelse is None and exits_at_end(stmt.body.body):
                        return "blocked"
                    continue
                if inside:
                    return "reached"  # in a loop, a with or a try: not read further
                if type(stmt) is cst.SimpleStatementLine:
                    for small in stmt.body:
                        if isinstance(small, (cst.Return, cst.Raise)):
                            return "blocked"
                        if type(small) is cst.Assign and len(small.targets) == 1 \
                                and type(small.targets[0].target) is cst.Name:
                            scope.locals.setdefault(small.targets[0].target.value, []).append((small.value, None))
                            scope.version += 1
                        else:
                            forget_assigned(scope, small)
                else:
                    forget_assigned(scope, stmt)  # a loop, a with, a try: what it assigns is not known
            return "absent"

        return search(list(fn.body.body)) == "blocked"

    def _config_property(self, attr: str, depth: int) -> Value | None:
        """`vllm_config.<attr>` where VllmConfig's `attr` is a property that only decides (`num_speculative_tokens`:
        `if self.speculative_config is not None and ...: return ...`, vllm/config/vllm.py): its first return whose
        tests hold, every test before it decided false, each `self.x` read as `vllm_config.x` (the deployment's
        configuration objects, what the engine builds); None where a test is not decided."""
        from .function_bodies import class_method, tables
        from .runtime_defaults import VLLM_CONFIG

        memo = self.__dict__.setdefault("_config_properties", {})
        if attr in memo:
            return memo[attr]
        memo[attr] = None
        cls = self.env.index.lookup(*VLLM_CONFIG) if self.env.index is not None else None
        if cls is None or cls.kind != "class":
            return None
        fn = class_method(cls, attr)
        if fn is None or not any(type(d.decorator) is cst.Name and d.decorator.value == "property"
                                 for d in fn.decorators) or not _decision_function(fn, cls.module):
            return None
        scope, swap = Scope(module=cls.module), _SelfAs("vllm_config")
        for value, cond in tables(fn, cls.module).returns:
            truth = Truth.TRUE
            for term in cond.terms if cond is not None else ():
                truth = truth.and_(self.term_truth(replace(term, expr=term.expr.visit(swap)) if term.expr is not None
                                                   else term, scope=scope))
            if truth is Truth.FALSE:
                continue
            if truth is Truth.TRUE:
                got = self.infer(value.visit(swap), scope, depth + 1)
                memo[attr] = got if isinstance(got, Known) else None
            break
        return memo[attr]

    def _engine_local(self, holder: str, attr: str, expr=None, scope=None) -> Value | None:
        """`<holder>.<attr>` where EngineArgs.create_engine_config builds it from a local of its own
        (runtime_defaults.engine_local): that local's last assignment whose test holds, its tests read in that
        method with the model's configuration (`layer_types is None or all(lt == "sliding_attention" for lt in
        layer_types)`, `layer_types = getattr(model_config.hf_text_config, "layer_types", None)`), a
        `model_config.<m>()` read through ModelConfig's method (`get_sliding_window`: `getattr(self.hf_text_config,
        "sliding_window", None)`) and what ModelConfig makes of it (model_config_keeps). A value other than None
        only where no module the object was handed through assigns `<holder>.<attr>` (Step3p5's layer sets
        `cache_config.sliding_window = None` before it builds its attention). None: not decided."""
        from .runtime_defaults import engine_local

        if self.config is None:
            return None
        found = engine_local(self.env.index, holder, attr)
        if found is None:
            return None
        memo = self.__dict__.setdefault("_engine_locals", {})
        if (holder, attr) not in memo:
            memo[(holder, attr)] = _ENGINE_BUSY  # a test that reads it again: not decided
            memo[(holder, attr)] = self._engine_local_value(found)
        got = memo[(holder, attr)]
        if not isinstance(got, Known):
            return None
        if got.value is not None and _set_on_the_way(expr, scope, holder, attr):
            return None
        return got

    def _engine_local_value(self, found) -> Value:
        from .scope import Scope

        scope = Scope(module=found.module, values=self._engine_self())
        for local, value, cond in found.before:
            scope.locals.setdefault(local, []).append((value, cond))
        result: Value = Unknown("not assigned")
        for value, cond, _pos in found.assignments:
            t = self.condition_truth(cond, scope=scope)
            if t is Truth.FALSE:
                continue
            got = self._model_config_getter(value) if type(value) is cst.Call else None
            if got is None:
                got = self.infer(value, scope)
            if t is Truth.TRUE:
                result = got
            elif not _same(result, got):
                result = Unknown("assigned under a test that is not decided")
        if isinstance(result, Known) and not setter_keeps(found.setters, result.value,
                                                          lambda term: _fails_field_test(term, result.value)):
            return Unknown("start-up code may set it again")
        return result

    def _engine_self(self) -> dict:
        """{"self": EngineArgs as the deployment builds it}: each field the engine argument stated
        (`--kv-cache-dtype fp8`: `self.kv_cache_dtype`), else EngineArgs' declared default (`kv_cache_dtype:
        CacheDType = CacheConfig.cache_dtype`, "auto"); one stated as JSON or a level is not read. {} where
        EngineArgs is not in the trees."""
        from ..ir.deployment import Deployment
        from .runtime_defaults import ENGINE_ARGS_CLASS

        engine = self.env.index.lookup(*ENGINE_ARGS_CLASS) if self.env.index is not None else None
        if getattr(engine, "kind", None) != "class":
            return {}
        values, other = (self.env.deployment or Deployment()).engine_fields()
        overrides = {**values, **{name: Unknown(f"--{name.replace('_', '-')} is stated as more than a value")
                                  for name in other}}
        return {"self": Known(Defaults(engine, overrides))}

    def _model_config_getter(self, call: cst.Call) -> Value | None:
        """`model_config.<m>()` where ModelConfig's `m` is one `return getattr(self.hf_text_config | self.hf_config,
        "k", <literal>)`: that read of the model's configuration, where ModelConfig leaves the field at that value
        (runtime_defaults.model_config_keeps: `self.hf_text_config.sliding_window = None` when it is 0); else
        None."""
        from .function_bodies import class_method
        from .runtime_defaults import MODEL_CONFIG, iter_returns, model_config_keeps

        func = call.func
        if call.args or type(func) is not cst.Attribute or type(func.value) is not cst.Name \
                or func.value.value != "model_config":
            return None
        cls = self.env.index.lookup(*MODEL_CONFIG)
        method = class_method(cls, func.attr.value) if getattr(cls, "kind", None) == "class" else None
        returns = [r.value for r in iter_returns(method)] if method is not None else []
        if len(returns) != 1 or type(returns[0]) is not cst.Call:
            return None
        ret = returns[0]
        if not (type(ret.func) is cst.Name and ret.func.value == "getattr" and len(ret.args) == 3):
            return None
        obj, key, default = (a.value for a in ret.args)
        if not (type(obj) is cst.Attribute and type(obj.value) is cst.Name and obj.value.value == "self"
                and obj.attr.value in ("hf_config", "hf_text_config")):
            return None
        k, d = literal(key), literal(default)
        if k is None or d is None or not isinstance(k.value, str):
            return None
        text = obj.attr.value == "hf_text_config"
        got = self._config_read(("getattr", k.value, text, repr(d)), lambda config: config.getattr(k.value, d, text))
        if isinstance(got, Known) and not model_config_keeps(self.env.index, func.attr.value, k.value, got.value):
            return Unknown(f"ModelConfig may change {k.value} from {got.value!r}")
        return got

    def _dataclass_field(self, expr, attr: str, scope, depth: int) -> Value | None:
        """`x.<attr>` where `x` is bound (a parameter, a local assigned once) to a call of a @dataclass of the
        trees that passes `attr=` by keyword: that argument, read where it was written; else None."""
        cls = None
        for _ in range(_MAX_INFER):
            if scope is None:
                return None
            if type(expr) is cst.Name:
                name = expr.value
                if name in scope.locals:
                    values = scope.locals[name]
                    if len(values) != 1 or values[0][1]:
                        return None
                    expr = values[0][0]
                elif name in scope.params:
                    expr, scope = scope.params[name]
                else:
                    return None
                continue
            if type(expr) is not cst.Call:
                return None
            module = getattr(scope, "module", None)
            index = getattr(module, "_index", None)
            target = index.resolve_expr(module, expr.func) if index is not None and isinstance(
                expr.func, (cst.Name, cst.Attribute)) else None
            if getattr(target, "kind", None) == "class":
                cls = target
                break
            # `plan = _resolve_plan(prefix=prefix, ...)`: a decision function's first return that runs, where
            # it builds the dataclass (vllm_ascend/ops/vocab_parallel_embedding.py `VocabParallelPlan(...)`)
            got = self._first_return(target, expr, scope) if getattr(target, "kind", None) == "function" else None
            if got is None:
                return None
            expr, scope = got
        if cls is None or not any("dataclass" in code_of(cls.module, d.decorator) for d in cls.skeleton.decorators):
            return None
        got = dataclass_argument(cls, expr, attr)
        if got is None:
            return None
        value, where = got
        if where == "call":
            return self.infer(value, scope, depth + 1)
        got = self.infer(value, Scope(module=cls.module), depth + 1)  # the field's declared default, a literal only
        return got if isinstance(got, Known) else None

    def _first_return(self, target, call: cst.Call, scope):
        """(the expression, its scope) a decision function (only ifs, assignments and returns) returns for this
        call: its first return whose path holds, where every test before it is decided; else None."""
        from .function_bodies import tables
        from .scope import Scope, bind_params

        fn = target.node
        if type(fn) is not cst.FunctionDef or not _decision_function(fn, target.module):
            return None
        table = tables(fn, target.module)
        inner = Scope(module=table.module)
        bind_params(fn, call, scope, inner, skip_self=False)
        for name, value, cond, _pos in table.local_assignments:
            inner.locals.setdefault(name, []).append((value, cond))
        returns = table.returns_decided(_EMPTY, self, inner)
        if returns and returns[0][1] is None and returns[0][0] is not None:
            return returns[0][0], inner
        return None

    def _class_attribute(self, cls, attr: str, depth: int) -> Value:
        """`Cls.x` of a class the code holds (the attention backend the runtime picks): the first class of its
        MRO whose body assigns x (`x: bool = True` included) gives its value; a method is a function object."""
        from .function_bodies import class_method
        from .runtime_defaults import _declared
        from .scope import Scope

        mro = self.attrs.mro(cls) if self.attrs is not None else [cls]
        for c in mro:
            declared = _declared(c)
            if attr in declared:
                value = declared[attr]
                if value is None:  # a bare annotation: the next class may give it a value
                    continue
                return self.infer(value, Scope(module=c.module), depth + 1)
            if class_method(c, attr) is not None:
                return NotNone(f"{c.name}.{attr}")
        if any(c.module.name.split(".")[0] not in ("vllm", "vllm_ascend", "transformers") for c in mro[:-1]):
            return Unknown(f"{cls.name}.{attr} may come from a base outside the trees")
        return Unknown(f"{cls.name} has no attribute {attr}")

    def _call(self, call: cst.Call, scope, depth: int) -> Value:
        func, args = call.func, [a.value for a in call.args if a.keyword is None and not a.star]
        if type(func) is cst.Name and func.value == "getattr" and len(args) in (2, 3):
            base, key = self.infer(args[0], scope, depth), self._key(args[1], scope, depth)
            if isinstance(base, ConfigRef) and key is not None and isinstance(key.value, str):
                got = self._config_set(base, key.value, depth)
                if got is not None:
                    return got
                if self.config is None:
                    return Unknown(f"config.{key.value}: no configuration")
                default = self.infer(args[2], scope, depth) if len(args) == 3 else Unknown("no default")
                return self._config_read(("getattr", key.value, base.text, repr(default)),
                                         lambda config: config.getattr(key.value, default, base.text), base)
            if isinstance(base, Known) and isinstance(base.value, dict) and key is not None:
                default = self.infer(args[2], scope, depth) if len(args) == 3 else Unknown("no default")
                return _held(base.value[key.value]) if key.value in base.value else default
            carried = _carried(scope, key.value, self.env) if key is not None and isinstance(key.value, str) \
                and isinstance(base, (Unknown, NotNone)) else None
            if carried is not None:
                return carried
            name = key.value if key is not None and isinstance(key.value, str) else None
            held = self._instance_of(args[0], scope, depth) if name is not None else None
            has = self._has_attr(held, name) if held is not None and name is not None and self.attrs is not None \
                else None
            if has == Known(True) and self.attrs is not None:  # getattr(self, "ascend_shared_experts", None)
                return self.attrs.self_value(held, name, self, depth)
            if has == Known(False) and len(args) == 3 and self._module_has(args[0], Known(name), scope) == Known(False):
                # getattr(self, "g_proj", None) where none is built (of `self` or `self.x` only: another object
                # may be given the attribute from outside, at load time), unless the plugin's code sets it so
                # (`layer._kda_state_copy_ready = True`: Constructor.set_from_outside)
                outside = getattr(self.attrs, "set_from_outside", None)
                where = outside(name) if outside is not None else None
                if where is not None:
                    return Unknown(f"{name} is set on the object from outside its class ({where})")
                return self.infer(args[2], scope, depth)
            if name is not None and isinstance(base, NotNone) and isinstance(args[0], (cst.Name, cst.Attribute)):
                # getattr(mla_modules, "topk_indices_buffer", None): a field the built dataclass declares
                got = self._dataclass_field(args[0], name, scope, depth)
                if got is not None:
                    return got
            if name is not None and len(args) == 3 and isinstance(base, (NotNone, Unknown)) \
                    and isinstance(args[0], (cst.Name, cst.Attribute)) and (_holder(args[0], scope) or "").endswith("_config"):
                # getattr(vc, "cache_config", None): a part of vLLM's configuration read as `vc.cache_config` is
                got = self._attribute(cst.Attribute(value=args[0], attr=cst.Name(name)), scope, depth)
                if isinstance(got, (Known, NotNone, ConfigRef)):
                    return got
            if name in ("hf_config", "hf_text_config") and isinstance(base, (NotNone, Unknown)) \
                    and isinstance(args[0], (cst.Name, cst.Attribute)) and _names_model_config(args[0]):
                return ConfigRef(name == "hf_text_config")  # ModelConfig's, as `model_config.hf_config` reads
            return Unknown("getattr of an unknown object")
        if type(func) is cst.Name and func.value == "hasattr" and len(args) == 2:
            held = self._module_has(args[0], self._key(args[1], scope, depth), scope)
            if held is not None:  # hasattr(self.layer, "expert_gate"): the module's class decides
                return held
            base, key = self.infer(args[0], scope, depth), self._key(args[1], scope, depth)
            if isinstance(base, Known) and isinstance(base.value, dict) and key is not None:
                return Known(key.value in base.value)  # a runtime object stated as its attributes
            if isinstance(base, ConfigRef) and key is not None and isinstance(key.value, str) \
                    and self._config_set(base, key.value, depth) is not None:
                return Known(True)  # an attribute a function of the trees set on it
            if isinstance(base, ConfigRef) and key is not None and isinstance(key.value, str) and self.config is not None:
                # a field the configuration holds (a key of config.json, a field its class gives a value) is an
                # attribute; one a whole config.json lacks and its class does not declare is not (ConfigFacts.has)
                name = key.value
                return self._config_read(("hasattr", name, base.text), lambda config: config.has(name, base.text), base)
        if type(func) is cst.Name and func.value in self.calls:
            hook = self.calls[func.value]  # (one that runs the tree's code reads with this evaluator)
            return hook(call, scope, self) if getattr(hook, "with_evaluator", False) else hook(call, scope)
        if type(func) is cst.Name and func.value in _layer_index_functions() and args:
            name = self.infer(args[0], scope, depth)  # extract_layer_index("model.layers.3"): its one integer
            ints = [int(p) for p in name.value.split(".") if p.isdigit()] if isinstance(name, Known) and isinstance(name.value, str) else []
            return Known(ints[0]) if len(ints) == 1 else Unknown("the layer index of an unknown module name")
        if type(func) is cst.Attribute and _dotted_text(func) in ("os.getenv", "os.environ.get") and args:
            # the default environment: every variable unset
            return self.infer(args[1], scope, depth) if len(args) > 1 else Known(None)
        if type(func) is cst.Name and func.value in ("all", "any") and len(args) == 1 and len(call.args) == 1:
            got = self._all_any(func.value == "all", args[0], scope, depth)
            if got is not None:  # all(dim == 0 for dim in (a, b)): each element's test, read in place
                return got
        if type(func) is cst.Name and func.value == "isinstance" and len(args) == 2 and len(call.args) == 2:
            wanted = [e.value for e in args[1].elements] if type(args[1]) is cst.Tuple else [args[1]]
            value = self.infer(args[0], scope, depth)
            got = known_isinstance(value, [self._class_of(c, scope, depth) for c in wanted])
            if isinstance(got, Unknown):  # a list or dict of the configuration against builtin types
                got = isinstance_value(value, args[1])
            return got
        if type(func) is cst.Name and func.value in ("max", "min") and len(args) >= 2 and len(args) == len(call.args) \
                and not _bound_here(func.value, scope):
            got = [self.infer(a, scope, depth) for a in args]  # max(layer_id - offset + 1, 0): known numbers only
            numbers = [g.value for g in got if isinstance(g, Known) and isinstance(g.value, (int, float))
                       and type(g.value) in (int, float)]
            if len(numbers) == len(got):
                return Known((max if func.value == "max" else min)(numbers))
            return Unknown(f"{func.value}() of a value not known")
        if len(args) == 1 and len(call.args) == 1 and isinstance(func, (cst.Name, cst.Attribute)) \
                and _dotted_of(func, scope) in ("copy.copy", "copy.deepcopy"):
            return self.infer(args[0], scope, depth)  # a copy holds what the original holds
        if type(func) is cst.Name and func.value in ("range", "enumerate") and 1 <= len(args) == len(call.args) <= 3:
            got = [self.infer(a, scope, depth) for a in args]  # a loop's values: a tuple of few known items
            ints = [g.value for g in got if isinstance(g, Known) and type(g.value) is int]
            if func.value == "range" and len(ints) == len(got):
                values = range(*ints)
                return Known(tuple(values)) if len(values) <= _MAX_ITEMS else Unknown("a range of many values")
            if func.value == "enumerate" and len(got) == 1 and isinstance(got[0], Known) \
                    and isinstance(got[0].value, (tuple, list)) and len(got[0].value) <= _MAX_ITEMS:
                return Known(tuple(enumerate(got[0].value)))
        if type(func) is cst.Name and func.value in _BUILTINS and len(args) == 1 and len(call.args) == 1:
            got = _BUILTINS[func.value](self.infer(args[0], scope, depth))
            if func.value == "bool" and isinstance(got, Unknown) and getattr(scope, "module", None) is not None:
                # bool(x) is x's truth, as a test reads it (`bool(rocm_aiter_ops.is_..._enabled())`: off ROCm)
                t = self.truth(args[0], scope.module, None, scope)
                if t is not Truth.UNKNOWN:
                    return Known(t is Truth.TRUE)
            return got
        if type(func) is cst.Attribute:
            name = func.attr.value
            if not call.args and type(func.value) is cst.Name:  # current_platform.opaque_attention_op()
                platform = self.env.platform_truth(call)
                if platform is not Truth.UNKNOWN:
                    return Known(platform is Truth.TRUE)
                returned = self.env.platform_returns(call)
                if returned is not None:  # current_platform.fp8_dtype(): torch.float8_e4m3fn, read where it is returned
                    got = self.infer(returned[1], Scope(module=returned[0]), depth)
                    if isinstance(got, Known):
                        return got
            base = self.infer(func.value, scope, depth)
            held = base.value if isinstance(base, Known) else None
            if isinstance(held, EnumMember) and not call.args:
                from .attention_choice import member_class

                got = member_class(self, held, name, call, scope)
                if got is not None:  # AttentionBackendEnum.TRITON_ATTN_DIFFKV.get_class(): the class it names
                    return got
            if isinstance(held, Defaults):
                got = self._defaults_method(held, name, call, scope, depth)
                if got is not None:  # get_ascend_config().is_sparse_li_c8_layer(prefix): run on its fields
                    return got
            if isinstance(held, ClassRef):
                got = self._class_method(held.definition, name, call, scope, depth)
                if got is not None:  # fa_backend.is_supported_on_current_device(...): the class's own answer
                    return got
            if isinstance(base, Known) and isinstance(base.value, dict) and f"{name}()" in base.value and not call.args:
                return _held(base.value[f"{name}()"])  # what a runtime object's method returns (ir/deployment.py)
            if isinstance(base, Known) and isinstance(base.value, dict) and name in ("values", "keys", "items") and not args:
                if name != "keys" and any(isinstance(v, Unknown) for v in base.value.values()):
                    return Unknown("a dict with values that are not known")
                return Known(tuple(getattr(base.value, name)()))
            if isinstance(base, ConfigRef) and name == "get_text_config":
                return ConfigRef(True, base.rebuilt)
            if isinstance(base, ConfigRef) and self.config is not None \
                    and self._facts(self.config, base.rebuilt).has_method(name, base.text):
                # `config.is_kda_layer(layer_idx)`: the configuration class's method run over its fields
                given = [g for g in (self.infer(a, scope, depth) for a in args) if isinstance(g, Known)]
                if len(given) != len(call.args):
                    return Unknown(f"config.{name}(...) of arguments not known")
                values = tuple(g.value for g in given)
                return self._config_read(("call", name, base.text, repr(values)),
                                         lambda config: config.method(name, values, base.text), base)
            if isinstance(base, Known) and name == "supports" and hasattr(base.value, "capabilities") and len(args) == 1:
                wanted = args[0]  # profile.supports(HardwareCapability.X): the device's capability table decides
                if type(wanted) is cst.Attribute:
                    return Known(base.value.supports(wanted.attr.value))
            if isinstance(base, Known) and isinstance(base.value, dict) and name == "get" and args:
                key = self.infer(args[0], scope, depth)
                if isinstance(key, Known):
                    if key.value in base.value:
                        return _held(base.value[key.value])
                    return self.infer(args[1], scope, depth) if len(args) > 1 else Known(None)
            if isinstance(base, Known) and isinstance(base.value, str) and name in ("lower", "upper", "strip") and not args:
                return Known(getattr(base.value, name)())
            if isinstance(base, Known) and isinstance(base.value, str) and name in ("split", "rsplit") \
                    and len(call.args) <= 2:
                sep = self.infer(call.args[0].value, scope, depth) if call.args else Known(None)
                most = self.infer(call.args[1].value, scope, depth) if len(call.args) > 1 else Known(-1)
                if isinstance(sep, Known) and (sep.value is None or isinstance(sep.value, str)) and sep.value != "" \
                        and isinstance(most, Known) and type(most.value) is int:
                    # `prefix.split(sep=".")`, `prefix.rsplit(".", 1)`
                    return Known(tuple(getattr(base.value, name)(sep.value, most.value)))
            if isinstance(base, Known) and isinstance(base.value, str) and name in ("startswith", "endswith") and len(args) == 1:
                arg = self.infer(args[0], scope, depth)
                if isinstance(arg, Known) and isinstance(arg.value, (str, tuple)):
                    return Known(getattr(base.value, name)(arg.value))
        return self._called(call, scope, depth)

    def _key(self, expr, scope, depth: int) -> Known | None:
        """The attribute name of `getattr` / `hasattr`: a string literal, or a name bound to one (a helper's
        parameter, `hasattr(config, attr)`); None otherwise."""
        lit = literal(expr)
        if lit is not None or type(expr) is not cst.Name:
            return lit
        got = self.infer(expr, scope, depth)
        return got if isinstance(got, Known) and isinstance(got.value, str) else None

    def _class_of(self, expr, scope, depth: int):
        """What a class operand of `isinstance` names: a class of the trees (ClassRef), a builtin type where the
        name is not bound otherwise (`int`, `type(None)`), or None where that is not known."""
        if type(expr) is cst.Call and type(expr.func) is cst.Name and expr.func.value == "type" and len(expr.args) == 1 \
                and _is_none(expr.args[0].value):
            return type(None)
        got = self.infer(expr, scope, depth)
        if isinstance(got, Known) and isinstance(got.value, ClassRef):
            return got.value
        bound = (getattr(scope, n, None) or {} for n in ("params", "locals", "defaults"))
        if isinstance(got, Unknown) and type(expr) is cst.Name and expr.value in BUILTIN_TYPES \
                and not any(expr.value in names for names in bound):
            return BUILTIN_TYPES[expr.value]
        return None

    def _called(self, call: cst.Call, scope, depth: int, item: int | None = None) -> Value:
        """What calling a class or a function of the trees gives: an instance (never None); a small decision
        function (only ifs, assignments and returns) run on its arguments; a factory whose every return builds
        an object; else unknown. `item`: only item k of the tuple the decision function returns (`return None,
        rank, size`: the size is known where the rank is not)."""
        from .function_bodies import tables

        module = getattr(scope, "module", None)
        index = getattr(module, "_index", None)
        if index is None:
            return Unknown("the result of a call")
        if type(call.func) is cst.Subscript:  # `_SELECTORS[policy](...)`: the function a module dict maps it to
            picked = self._dict_item(call.func, scope, depth)
            return self._called(call.with_changes(func=picked), scope, depth + 1) if picked is not None \
                else Unknown("a call of an item that is not known")
        callee = Callee(index, module, call, runs=getattr(self.attrs, "runs", None))  # patches of the backend
        if callee.self_rooted:
            return self._method_call(call, scope, depth)
        if not callee.is_named:
            return Unknown("the result of a call")
        target = callee.named
        if callee.named is None and type(call.func) is cst.Attribute:  # `shared_experts.parallel_mode()`: an object's
            got = self._method_call(call, scope, depth)
            if not isinstance(got, Unknown):
                return got
            # `FusedMoEParallelConfig.flatten_tp_across_dp_and_pcp(...)`: a static method, a function
            static: Any = static_method(index, module, call.func, self.attrs.method if self.attrs is not None else None)
            target = static
        kind = getattr(target, "kind", None)
        if kind == "class":
            rebuilt = self._rebuilt_config(target, call, scope, depth)
            return rebuilt if rebuilt is not None else NotNone(target.name)
        if target is None and index.dotted(module, call.func) in _never_none():  # torch.nn.Parameter(...)
            return NotNone(index.dotted(module, call.func))
        if target is None and _outside_layer_class(index, index.dotted(module, call.func)):
            return NotNone(index.dotted(module, call.func))  # `nn.LayerNorm(...)`: a module object, never None
        if kind != "function" or depth > _MAX_INFER // 2:
            if kind == "function":
                self._too_deep += 1
            return Unknown("the result of a call")
        target = cast(Definition, target)  # (a function of the trees)
        fn = cast(cst.FunctionDef, target.node)
        table = tables(fn, target.module)
        if item is None:
            got = self._config_setter(target, call, scope, depth)
            if got is not None:  # `config = _normalize_config(hf_config)`: the configuration, attributes set
                return got
        if _decision_function(fn, target.module):
            key = self._decision_key(fn, call, scope, depth, item)
            kept = self.decided_calls.get(key) if key is not None else None
            if kept is not None and kept[1] is call and getattr(self.attrs, "reads", None) is None:
                got = kept[2]
            else:
                deep = self._too_deep
                got = self._run_decision(fn, table, call, scope, depth, item)
                if key is not None and self._too_deep == deep:  # no step limit met: the same anywhere
                    self.decided_calls[key] = (fn, call, got)
            if got is not None:
                if isinstance(got, Unknown):
                    self._note_function(target, call, scope)
                return got
        if item is None and loop_function(fn, target.module):  # `for config in configs: if hasattr(...): return`
            got = run_loops(self, fn, target.module, call, scope, depth)
            if got is not None:
                return got
        if item is not None:
            return Unknown("an item of the result of a call")
        if _builds_objects(target, index):
            return NotNone(f"what {target.name}() builds")
        self._note_function(target, call, scope)
        return Unknown("the result of a call")

    def _note_function(self, target, call: cst.Call, scope) -> None:
        """A call of a function of the trees whose value stays unknown: the walk's constructor keeps it, for
        what a test calling it waits on (status/waits.py, Constructor.unknown_sources)."""
        note = getattr(self.attrs, "note_function", None)
        if note is not None:
            note(target, call, scope)

    def _run_decision(self, fn, table, call: cst.Call | None, scope, depth: int, item: int | None,
                      owner=None, cls=None, skip_self: bool = False, values: dict | None = None,
                      decides: bool = True) -> Value | None:
        """A small decision function run on the call's arguments: its value, else None (not decided). `owner`
        (an Instance) or `cls`: a method, its `self` that object (or an object of that class). `skip_self`: a
        method whose first parameter `values` binds (`cls` of a classmethod). `decides` False: a function that
        does more than decide, run only where a return is reached through decisions alone (`if not available():
        return False` before a `try`)."""
        from .scope import Scope, bind_params

        method = owner is not None or cls is not None or skip_self
        inner = Scope(module=table.module, owner=owner, cls=cls if owner is None else None,
                      fields=getattr(scope, "fields", None) or {},  # (what a part's runtime objects carry)
                      values=dict(values or {}))
        bind_params(fn, call, scope, inner, skip_self=method)
        declared = _declared_globals(fn)
        if declared:  # `global _aux_stream`: the module's binding where the function's own assignments do not run
            owned = frozenset(n for n in declared if _global_statements(table.module, n) == 1)
            inner.globals_owned = owned
            for name in declared - owned:  # another function of the module assigns it too: not known here
                inner.values[name] = Unknown(f"the global {name} other functions of its module assign")
        for name, value, cond, _pos in table.local_assignments:
            inner.locals.setdefault(name, []).append((value, cond))
        returns = table.returns_decided(_EMPTY, self, inner)
        self._last_run = (inner, returns)  # what is left of it, for a caller that says what it waits on
        if item is not None:
            returns = [(_tuple_item(v, item), c) for v, c in returns]
            if not all(v is not None for v, _c in returns):
                return Unknown("an item of a return that is not a tuple")
        if not decides:
            first = returns[0][0] if returns and returns[0][1] is None else None
            return self.infer(first, inner, depth) if isinstance(first, cst.BaseExpression) \
                and _reached_by_decisions(fn, first) else None
        if returns and returns[0][1] is None:  # the first return that can run does
            return self.infer(returns[0][0], inner, depth)
        # a function that ends in a return always returns one of the returns left: when they all give one
        # value, that is its value (`if a: return False` undecided, `if crf is not None: return False` decided)
        last = fn.body.body[-1] if fn.body.body else None  # (ending in a raise: it returns one of them or none)
        if returns and type(last) is cst.SimpleStatementLine and type(last.body[-1]) in (cst.Return, cst.Raise):
            got = [self.infer(v, inner, depth) for v, _c in returns]
            if all(isinstance(g, Known) for g in got) and len({repr(g.value) for g in got if isinstance(g, Known)}) == 1:
                return got[0]
            one = self._one_configuration(got)
            if one is not None:  # `return config.text_config` / `return config`: the text configuration either way
                return one
        return None

    def _one_configuration(self, got: list) -> ConfigRef | None:
        """The configuration every one of `got` reads (a function that returns `config.text_config` where the
        configuration has one, else `config` itself: gemma4.py `_get_text_config`): ConfigRefs of one
        configuration whose text part is the configuration itself (it gives no `text_config` of its own), so
        that whichever is returned the same fields are read; None otherwise."""
        if not got or not all(isinstance(g, ConfigRef) for g in got) or len({g.rebuilt for g in got}) != 1 \
                or self.config is None:
            return None
        first = got[0]
        if len({g.text for g in got}) == 1:
            return first
        facts = self._facts(self.config, first.rebuilt)
        return ConfigRef(True, first.rebuilt) if "text_config" not in facts.values else None

    def _decision_key(self, fn, call: cst.Call, scope, depth: int, item: int | None):
        """The memo key of a decision function's call: the function, the argument expressions (a test of a
        parameter may read its argument's text) and their values, where every value is a plain constant or the
        configuration, so that what the function decides depends on nothing else (a local hidden while its own
        value is read changes only what the arguments give, and they are the key); else None. A layer's
        construction asks the same (`_should_skip_indexer_init(config, prefix, _skip_topk)`) from every
        copy of its __init__'s scope."""
        deep = self._too_deep
        parts = []
        for a in call.args:
            if a.star:
                return None
            value = self.infer(a.value, scope, depth)
            if not _plain(value):
                return None
            # (by repr: Known(1), Known(1.0) and Known(True) are equal as dataclasses)
            parts.append((a.keyword.value if a.keyword is not None else None, id(a.value),
                          repr(value) if isinstance(value, Known) else value))
        if self._too_deep != deep:
            return None
        return (id(fn), id(call), depth, item, tuple(parts))

    def _dict_item(self, sub: cst.Subscript, scope, depth: int) -> cst.BaseExpression | None:
        """The value expression of a module-level dict literal's entry whose key the index equals
        (`{Policy.A: _select_a, ...}[policy]` -> `_select_a`), where the dict is in the same module; else None."""
        from .scope import Scope

        module = scope.module
        if len(sub.slice) != 1 or type(sub.slice[0].slice) is not cst.Index or type(sub.value) is not cst.Name:
            return None
        target = module._index.resolve_expr(module, sub.value)
        if getattr(target, "kind", None) != "assign" or target.module is not module or type(target.node) is not cst.Dict:
            return None
        key = self.infer(sub.slice[0].slice.value, scope, depth + 1)
        if not isinstance(key, Known):
            return None
        where = Scope(module=module)
        for el in target.node.elements:
            if type(el) is cst.DictElement:
                k = self.infer(el.key, where, depth + 1)
                if isinstance(k, Known) and k.value == key.value:
                    return el.value
        return None

    def _all_any(self, is_all: bool, arg, scope, depth: int) -> Value | None:
        """`all(test for x in (a, b))` / `any(...)` over a tuple or list written out, or a name holding a known
        sequence of literals: the test read with each element in place of `x`; decided as soon as one element decides it, unknown when one is unknown and
        none decides; None for any other argument."""
        if not (isinstance(arg, (cst.GeneratorExp, cst.ListComp)) and arg.for_in.inner_for_in is None
                and not arg.for_in.ifs and type(arg.for_in.target) is cst.Name):
            return None
        if isinstance(arg.for_in.iter, (cst.Tuple, cst.List)):
            items = [el.value for el in arg.for_in.iter.elements]
        else:  # `for lt in layer_types`: a known sequence of literals, each written in place
            seq = self.infer(arg.for_in.iter, scope, depth)
            if not (isinstance(seq, Known) and isinstance(seq.value, (tuple, list))
                    and all(v is None or type(v) in (str, int, float, bool) for v in seq.value)):
                return None
            items = [cst.parse_expression(repr(v)) for v in seq.value]
        name = arg.for_in.target.value
        unknown = False
        for item in items:
            test = arg.elt.visit(_Substitute(name, item))
            if not isinstance(test, cst.BaseExpression):
                return None
            t = truth_of(self.infer(test, scope, depth))
            if t is Truth.UNKNOWN:
                unknown = True
            elif (t is Truth.FALSE) == is_all:  # a false element decides all(), a true one any()
                return Known(not is_all)
        return Unknown("all / any of an unknown value") if unknown else Known(is_all)

    def _module_has(self, expr, key, scope) -> Value | None:
        """`hasattr(self.<sub>, "name")` where the walk built `self.<sub>` (or `hasattr(self, "name")` on the
        instance the walk is in: a replacement's method run on the class it patches; or any object the walk
        built, `_instance_of`): whether its class or its __init__ chain gives it that attribute (a method, a
        class attribute, `self.name = ...`); None when not such a test or the module is not known."""
        owner = getattr(scope, "owner", None)
        if not (self.attrs is not None and key is not None and isinstance(key.value, str)):
            return None
        if owner is not None and type(expr) is cst.Name and expr.value == "self":
            sub = owner
        elif owner is not None and type(expr) is cst.Attribute and type(expr.value) is cst.Name \
                and expr.value.value == "self":
            sub = self.attrs.attr(owner, expr.attr.value)
        else:  # another object of the walk: an attribute its class or construction gives; not one they do not
            # (set from outside at load time: `gate.weight_fp32`), which stays unknown
            got = self._has_attr(self._instance_of(expr, scope, 0), key.value)
            return got if got == Known(True) else None
        return self._has_attr(sub, key.value)

    def _has_attr(self, sub, name: str) -> Value | None:
        """Whether an object the walk built has attribute `name` (see _module_has); None where not known."""
        from .function_bodies import class_method, tables
        from .runtime_defaults import _declared

        attrs = self.attrs
        if sub is None or getattr(sub, "cls", None) is None or attrs is None:
            return None
        mro = attrs.mro(sub.cls)
        for c in mro:  # (may_assign only rules out: a parsed class says yes to all)
            if class_method(c, name) is not None or (c.may_assign(name) and name in _declared(c)):
                return Known(True)
        for c, fn, _scope in attrs.init_scopes(sub):
            if name in tables(fn, c.module).self_assignments:
                decided = attrs.assigned(sub, name) if hasattr(attrs, "assigned") else Truth.TRUE
                if decided is Truth.FALSE:
                    break  # every assignment under a test decided false: given by the class's other code, or not
                return Known(True) if decided is Truth.TRUE else None
        if any(c.module.name.split(".")[0] not in ("vllm", "vllm_ascend", "transformers") for c in mro[:-1]):
            return None  # a base outside the trees may give it
        needle = re.compile(rb"self\.%s\b" % re.escape(name).encode())  # only the methods that name it are parsed
        if any(name in tables(fn, c.module).self_assignments for c in mro for fn in c.methods_with(needle)
               if fn.name.value != "__init__"):
            return None  # a method other than __init__ (a weight loader, a setter) may set it later
        return Known(False)

    def _instance_of(self, expr, scope, depth: int):
        """The object the walk built that `expr` surely is (a walk.construction.Instance), else None: `self`
        (the instance whose code is read), `self.a.b` (what its construction assigns, as the backend runs it:
        Constructor.member), an object a call binds (`scope.instances`), a local assigned once or a parameter
        bound to one of those (`shared_experts = getattr(self, "ascend_shared_experts", None)`)."""
        got = self._receiver(expr, scope, depth)
        return got if got is not None and not isinstance(got, Definition) else None

    def _receiver(self, expr, scope, depth: int):
        """What `_instance_of` finds, or the class of an object a call passes where nothing else of it is known
        (`scope.objects`: a Definition); None for anything else."""
        if scope is None:
            return None
        for _ in range(_MAX_INFER):
            kind = type(expr)
            if kind is cst.Name:
                name = expr.value
                if name in (getattr(scope, "objects", None) or ()):
                    return scope.objects[name]
                if self.attrs is None or name in (getattr(scope, "values", None) or ()):
                    return None
                if name == "self":
                    owner = getattr(scope, "owner", None)
                    return owner if getattr(owner, "cls", None) is not None else None
                if name in (getattr(scope, "instances", None) or ()):
                    return scope.instances[name]
                if name in scope.locals:
                    values = scope.locals[name]
                    if len(values) != 1 or values[0][1]:
                        return None
                    expr = values[0][0]
                    continue
                if name in scope.params:
                    expr, scope = scope.params[name]
                    continue
                return None
            if self.attrs is None:
                return None
            if kind is cst.Attribute:
                base = self._instance_of(expr.value, scope, depth + 1)
                return self.attrs.member(base, expr.attr.value) if base is not None else None
            if kind is cst.Call and type(expr.func) is cst.Name and expr.func.value == "getattr" \
                    and len(expr.args) in (2, 3) and not any(a.keyword or a.star for a in expr.args):
                key = literal(expr.args[1].value)  # getattr(self, "x", None) of an object that has x: self.x
                base = self._instance_of(expr.args[0].value, scope, depth + 1)
                if key is None or not isinstance(key.value, str) or base is None \
                        or self._has_attr(base, key.value) != Known(True):
                    return None
                return self.attrs.member(base, key.value)
            return None
        return None

    def _method_call(self, call: cst.Call, scope, depth: int) -> Value:
        """`self.m(...)` / `obj.m(...)` where the object's class is known (the instance whose code is read, or
        its class where no instance is: a part's code; an object of the walk, `_instance_of`) and `m` is a small
        decision function: its value, run with `self` that object and its arguments bound
        (`self._should_reduce_routed_before_combine()`, `shared_experts.parallel_mode()`,
        `self.is_fused_supported(hidden_states)`); else unknown."""
        from .function_bodies import class_method, tables

        func = call.func
        if type(func) is not cst.Attribute or depth > _MAX_INFER // 2:
            if depth > _MAX_INFER // 2:
                self._too_deep += 1
            return Unknown("the result of a call")
        recv = func.value
        if type(recv) is cst.Name and recv.value == "self" and "self" not in (getattr(scope, "values", None) or ()):
            owner = getattr(scope, "owner", None)
            owner = owner if getattr(owner, "cls", None) is not None else None
            cls = owner.cls if owner is not None else getattr(scope, "cls", None)
        else:  # an object of the walk, or the class of one a call passes (`quant_method=self`)
            got = self._receiver(recv, scope, depth)
            owner = got if got is not None and not isinstance(got, Definition) else None
            cls = owner.cls if owner is not None else got
        if cls is None:
            return Unknown("the result of a call")
        if self.attrs is not None:
            found = self.attrs.method(cls, func.attr.value)
            fn, module = (found[1], found.module) if found is not None else (None, None)
        else:  # no construction to ask (a class's code read on its own): the class's own method
            fn, module = class_method(cls, func.attr.value), cls.module
        static = fn is not None and [code_of(module, d.decorator) for d in fn.decorators] == ["staticmethod"]
        if fn is None or (fn.decorators and not static) or not _decision_function(fn, module):
            return Unknown("the result of a call")
        # (a static method called through `self.m(...)` binds no `self`: its first parameter takes the argument)
        got = self._run_decision(fn, tables(fn, module), call, scope, depth + 1, None, owner=owner, cls=cls)
        note = getattr(self.attrs, "note_call", None)
        if (got is None or isinstance(got, Unknown)) and owner is not None and note is not None:
            inner, returns = self._last_run  # what it still depends on: the tests left and the returns
            note(owner, func.attr.value, inner,
                 [t.expr for _v, c in returns for t in (c.terms if c else ()) if t.expr is not None]
                 + [v for v, _c in returns], call, scope if isinstance(scope, Scope) else None)
        return got if got is not None else Unknown("the result of a call")

    def run_property(self, inst, found, depth: int = 0) -> Value | None:
        """The value of a `@property` (a small decision function) read on the object `inst`: `found` is
        (class, getter); None where it is not decided."""
        from .function_bodies import tables

        if depth > _MAX_INFER // 2 or not _decision_function(found[1], found.module):
            return None
        return self._run_decision(found[1], tables(found[1], found.module), None, None, depth + 1, None, owner=inst)

    def _defaults_method(self, defaults, name: str, call: cst.Call, scope, depth: int) -> Value | None:
        """`get_ascend_config().is_sparse_li_c8_layer(prefix)`: a method (or static method) of a configuration
        object built from no user input (values.Defaults) that only decides, run with `self` that object (its
        fields its declared defaults, or what its validators keep); None where it is no such method or not
        decided."""
        from .function_bodies import class_method, tables

        if any(a.star for a in call.args):
            return None
        mro = self.attrs.mro(defaults.definition) if self.attrs is not None else [defaults.definition]
        found = next(((c, f) for c in mro if (f := class_method(c, name)) is not None), None)
        if found is None:
            return None
        owner, fn = found
        kinds = {code_of(owner.module, d.decorator) for d in fn.decorators}
        if kinds - {"staticmethod"} or not _decision_function(fn, owner.module):
            return None
        static = "staticmethod" in kinds
        start = self._restart(depth)
        if start > _MAX_INFER // 2:
            self._too_deep += 1
            return None
        try:
            return self._run_decision(fn, tables(fn, owner.module), call, scope, start + 1, None,
                                      skip_self=not static, values={} if static else {"self": Known(defaults)})
        finally:
            self._restarted -= start != depth

    def _restart(self, depth: int) -> int:
        """The depth to read a configuration object's field or method at: from 0 again where `depth` is past
        half the limit (what it gives does not depend on how deep it is asked), at most a few times nested;
        `self._restarted` counts those in progress (the caller takes one off when done)."""
        if depth > _MAX_INFER // 2 and self._restarted < 3:
            self._restarted += 1
            return 0
        return depth

    def _class_method(self, cls, name: str, call: cst.Call, scope, depth: int) -> Value | None:
        """`C.m(...)` of a class the code holds as a value, `m` a classmethod or staticmethod of its MRO: run on
        the call's arguments (`cls` the class), as far as decisions alone reach a return; None where it is no
        such method."""
        from .function_bodies import class_method, tables

        if any(a.star for a in call.args) or depth > _MAX_INFER // 2:
            return None
        mro = self.attrs.mro(cls) if self.attrs is not None else [cls]
        found = next(((c, f) for c in mro if (f := class_method(c, name)) is not None), None)
        if found is None:
            return None
        owner, fn = found
        kinds = {d.decorator.value for d in fn.decorators if type(d.decorator) is cst.Name}
        if not kinds & {"classmethod", "staticmethod"}:
            return None
        got = self._run_decision(fn, tables(fn, owner.module), call, scope, depth + 1, None,
                                 skip_self="classmethod" in kinds, values={"cls": Known(ClassRef(cls))},
                                 decides=_decision_function(fn, owner.module))
        return got if got is not None else Unknown(f"{cls.name}.{name}(...) is not decided")

    def _boolean(self, expr: cst.BooleanOperation, scope, depth: int) -> Value:
        left = self.infer(expr.left, scope, depth)
        t = truth_of(left)
        if t is Truth.UNKNOWN and scope is not None:  # a test the platform decides (rocm_aiter_ops.is_enabled())
            t = self.truth(expr.left, scope.module, scope=scope)
            left = Known(t is Truth.TRUE)  # its truth is all that `and` / `or` return when they stop at it
        is_and = type(expr.operator) is cst.And
        if t is Truth.UNKNOWN:
            # `a and False` is falsy and `a or True` truthy whatever `a` is: the truth is decided (the value is
            # `a` or the right side; a test reads only its truth)
            right = truth_of(self.infer(expr.right, scope, depth))
            if right is (Truth.FALSE if is_and else Truth.TRUE):
                return Known(not is_and)
            return Unknown("and / or of an unknown value")
        if (t is Truth.TRUE) == is_and:  # `a and b` with a true, `a or b` with a false: b decides
            return self.infer(expr.right, scope, depth)
        return left

    def origin(self, expr: cst.BaseExpression, scope):
        """(expr, scope) where a name is set: through the parameters a call bound, then the defaults it left
        (bias=qkv_bias -> getattr(config, "attention_bias", False))."""
        from ..catalog import catalog

        for _ in range(catalog().limit("param_chain")):
            if not type(expr) is cst.Name or scope is None:
                break
            if expr.value in scope.params:
                expr, scope = scope.params[expr.value]
            elif expr.value in scope.defaults and expr.value not in scope.locals:
                expr = scope.defaults[expr.value]
            else:
                break
        return (expr, scope) if scope is not None else None


Environment.evaluator_class = Evaluator  # the environment runs tree code with it (environment.py)


class _Substitute(cst.CSTTransformer):
    """A comprehension's element with its loop name replaced by one element expression."""

    def __init__(self, name: str, value: cst.BaseExpression):
        super().__init__()
        self.name, self.value = name, value

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name):
        return self.value if original_node.value == self.name else updated_node

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute):
        return updated_node.with_changes(attr=original_node.attr)  # `x.name`: an attribute's name is no variable

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg):
        return updated_node.with_changes(keyword=original_node.keyword)  # `f(name=...)`: nor a keyword


def truth_of(value: Value) -> Truth:
    """Python's truth of a value, when it is known."""
    if isinstance(value, Known):
        try:
            return Truth.of(bool(value.value))
        except Exception:  # a value whose truth Python itself would not decide
            return Truth.UNKNOWN
    if isinstance(value, ConfigRef):
        return Truth.TRUE
    if isinstance(value, OneOf):
        truths = {truth_of(v) for v in value.options}
        return truths.pop() if len(truths) == 1 else Truth.UNKNOWN
    return Truth.UNKNOWN


def _arith(op: type, left: Value, right: Value) -> Value:
    if isinstance(left, OneOf) or isinstance(right, OneOf):  # every pair of options: one value where they agree
        got = [_arith(op, a, b) for a in (left.options if isinstance(left, OneOf) else (left,))
               for b in (right.options if isinstance(right, OneOf) else (right,))]
        if not all(isinstance(g, Known) and _hashable(g.value) for g in got):
            return Unknown("arithmetic on values that may differ")
        options = tuple(dict.fromkeys(got))
        return options[0] if len(options) == 1 else OneOf(options)
    if isinstance(left, Known) and isinstance(right, Known):
        try:
            return Known(_ARITH[op](left.value, right.value))
        except (TypeError, ZeroDivisionError, OverflowError):
            return Unknown("arithmetic on values that do not combine")
    return Unknown("arithmetic on an unknown value")


def _hashable(v) -> bool:
    return v is None or type(v) in (int, float, bool, str)


def _writable(v) -> bool:
    """A value written back as code (a literal that reads as itself)."""
    return _hashable(v) or (isinstance(v, tuple) and all(_writable(x) for x in v))


def _compare(op: type, left: Value, right: Value) -> Value:
    if isinstance(left, OneOf) or isinstance(right, OneOf):  # decided where every pair of options agrees
        got = {_compare(op, a, b) for a in (left.options if isinstance(left, OneOf) else (left,))
               for b in (right.options if isinstance(right, OneOf) else (right,))}
        one = got.pop() if len(got) == 1 else None
        return one if isinstance(one, Known) else Unknown("a comparison of values that may differ")
    if isinstance(left, Known) and isinstance(right, Known) and op in (cst.Is, cst.IsNot) \
            and isinstance(left.value, (Symbol, ClassRef)) and isinstance(right.value, (Symbol, ClassRef)):
        # an Enum member (`SharedExpertParallelMode.TENSOR_PARALLEL`) read in two places is one object
        return Known((left.value == right.value) is (op is cst.Is))
    if isinstance(left, Known) and isinstance(right, Known) and op in _COMPARE:
        try:
            return Known(bool(_COMPARE[op](left.value, right.value)))
        except TypeError:
            return Unknown("values that do not compare")
    if op in (cst.Is, cst.IsNot) and isinstance(right, Known) and right.value is None and isinstance(left, (ConfigRef, NotNone)):
        return Known(op is cst.IsNot)
    return Unknown("a comparison of unknown values")


class _SelfAs(cst.CSTTransformer):
    """`self` -> another name (a property of VllmConfig read as `vllm_config.<field>`)."""

    def __init__(self, name: str):
        self.name = name

    def leave_Name(self, original, updated):
        return updated.with_changes(value=self.name) if original.value == "self" else updated


def _dotted_of(func, scope) -> str | None:
    """The dotted name a called name stands for where `scope`'s module imports it (`copy` of `from copy import
    copy`: copy.copy); None where not known."""
    module = getattr(scope, "module", None)
    index = getattr(module, "_index", None)
    if index is None or _bound_here(func.value if type(func) is cst.Name else "", scope):
        return None
    return index.dotted(module, func)


def _holder(node, scope) -> str | None:
    """The name an object is read by (`cache_config` of `vllm_config.cache_config`, `vllm_config` of a local
    `vc = vllm_config` assigned once): what says which of vLLM's configuration objects it is."""
    for _ in range(4):
        if type(node) is cst.Attribute:
            return node.attr.value
        if type(node) is not cst.Name:
            return None
        values = (getattr(scope, "locals", None) or {}).get(node.value)
        if not values or len(values) != 1 or values[0][1] is not None \
                or type(values[0][0]) not in (cst.Name, cst.Attribute) or (getattr(scope, "values", None) or {}).get(node.value):
            return node.value
        node = values[0][0]
    return None


def _fails_field_test(term: Term, value) -> bool:
    """Whether a setter's test (one term of its path condition) surely fails with the field it reads at `value`:
    `<x>.<field> == "bfloat16"` with "auto", `<x>.<field> in ("a", "b")` with another value (negated: the
    reverse)."""
    test = term.expr
    if type(test) is not cst.Comparison or len(test.comparisons) != 1 or type(test.left) is not cst.Attribute:
        return False
    op, lit = type(test.comparisons[0].operator), literal(test.comparisons[0].comparator)
    if lit is None:
        return False
    if op in (cst.Equal, cst.NotEqual):
        holds = (value == lit.value and type(value) is type(lit.value)) == (op is cst.Equal)
    elif op in (cst.In, cst.NotIn) and isinstance(lit.value, tuple):
        holds = (value in lit.value) == (op is cst.In)
    else:
        return False
    return holds == bool(term.negated)


def _bound_here(name: str, scope) -> bool:
    """`name` is a parameter, local or handed value of `scope` (a builtin's name it shadows)."""
    return any(name in (getattr(scope, n, None) or ()) for n in ("params", "locals", "defaults", "values"))


def _same(a: Value, b: Value) -> bool:
    """Two known values that are the same value (and of one type: 1, 1.0 and True are not)."""
    return isinstance(a, Known) and isinstance(b, Known) and type(a.value) is type(b.value) and a.value == b.value


def _carried(scope, attr: str, env=None) -> Value | None:
    """What every object of a composite part's runtime carries as `.attr` (Bindings.fields), else what the
    report's deployment says of the runtime's configuration objects (walk.yaml `runtime.deployment`), else
    None."""
    fields = getattr(scope, "fields", None)
    if fields and attr in fields:
        return fields[attr]
    deployment = _deployment()
    if attr in deployment and not (attr == "speculative_config" and getattr(getattr(env, "deployment", None), attr, None)):
        return Known(deployment[attr])  # (not where --speculative-config states one)
    stated = env.deployment_attrs() if env is not None else {}
    return stated.get(attr)


_STARTUP_BUSY: set = set()  # start-up globals being decided: a test of their own function reading them waits
_ENGINE_BUSY = Unknown("an engine-built field read while it is decided")


def _set_on_the_way(expr, scope, holder: str, attr: str) -> bool:
    """Whether a module the object `expr` was handed through (parameters and locals followed back to where it was
    read, across the scopes that bound them) assigns `<holder>.<attr> = ...` (`cache_config.sliding_window = None`
    in Step3p5's decoder layer, vllm/model_executor/models/step3p5.py): the value the engine built may not be
    what the code reads. True also where the path cannot be followed."""
    import re

    setter = re.compile(rf"\b{re.escape(holder)}\.{re.escape(attr)}\s*=(?!=)")
    seen: set = set()
    todo = [(expr, scope)]
    while todo:
        node, where = todo.pop()
        if node is None or where is None or len(seen) > 64:
            return True
        module = getattr(where, "module", None)
        if module is None:
            return True
        if id(module) not in seen:
            seen.add(id(module))
            if setter.search(module.text()):
                return True
        c = getattr(getattr(where, "owner", None), "cls", None)
        if c is not None and id(c.module) not in seen:  # `self.cache_config`: the class's module too
            seen.add(id(c.module))
            if setter.search(c.module.text()):
                return True
        if type(node) is cst.Attribute:
            node = node.value
            while type(node) is cst.Attribute:
                node = node.value
        if type(node) is not cst.Name:
            continue
        if node.value in where.locals:
            todo += [(value, where) for value, _cond in where.locals[node.value]]
        elif node.value in where.params:
            todo.append(where.params[node.value])
    return False


def _declares_global(fn: cst.FunctionDef, name: str) -> bool:
    """`global name` among the function's top-level statements."""
    return any(isinstance(small, cst.Global) and name in [n.name.value for n in small.names]
               for stmt in fn.body.body if isinstance(stmt, cst.SimpleStatementLine) for small in stmt.body)


def _reached_by_decisions(fn: cst.FunctionDef, ret: cst.BaseExpression) -> bool:
    """The top-level statements of `fn` up to the one holding the return of `ret` only decide (known_calls
    `_only_decisions`): what comes after it never runs on that path."""
    from ..index.nodes import iter_nodes

    body = list(fn.body.body)
    for k, stmt in enumerate(body):
        if any(n is ret for n in iter_nodes(stmt)):
            return _only_decisions(body[:k + 1])
    return False


def _tuple_item(expr, k: int):
    """Item k of a returned tuple literal (no starred items), else None."""
    if not isinstance(expr, cst.Tuple) or any(type(e) is not cst.Element for e in expr.elements):
        return None
    return expr.elements[k].value if 0 <= k < len(expr.elements) else None


def _outside_layer_class(index, dotted: str | None) -> bool:
    """`dotted` names a layer class outside the trees that the taxonomy lists (leaf_ops.yaml `classes`:
    torch.nn.LayerNorm): calling it builds a module."""
    from ..catalog.taxonomy import leaf_for_class_names

    if not dotted or "." not in dotted or dotted.split(".")[0] in index.trees:
        return False
    return leaf_for_class_names([dotted.rsplit(".", 1)[-1]]) is not None


def _config_getter(expr) -> bool:
    """`get_current_vllm_config()`: a call of a function walk.yaml `runtime.vllm_config_getters` names, which returns
    the running engine's VllmConfig."""
    from ..catalog import catalog

    if type(expr) is not cst.Call or expr.args:
        return False
    func = expr.func
    name = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else None
    return name in (catalog().runtime.get("vllm_config_getters") or ())


def _names_model_config(expr) -> bool:
    """`model_config`, `vllm_config.model_config`, `self.model_config`: vLLM's model configuration object."""
    tail = expr.attr.value if type(expr) is cst.Attribute else expr.value if type(expr) is cst.Name else None
    return tail == "model_config"


@lru_cache(maxsize=1)
def _deployment() -> dict:
    from ..catalog import catalog

    return dict(catalog().typed.walk.runtime.deployment)


@lru_cache(maxsize=1)
def _layer_index_functions() -> frozenset[str]:
    """Functions that read a layer's index from its module name (walk.yaml `runtime.layer_index`)."""
    from ..catalog import catalog

    return frozenset(catalog().typed.walk.runtime.layer_index)


def _plain(value) -> bool:
    """A value a memo may key on: the configuration, or a constant (None, a flag, a number, a string, a
    library symbol, a tuple of those)."""
    if isinstance(value, ConfigRef):
        return True
    if not isinstance(value, Known):
        return False
    stack = [value.value]
    while stack:
        v = stack.pop()
        if type(v) is tuple:
            stack.extend(v)
        elif not (v is None or type(v) in (bool, int, float, str, Symbol)):
            return False
    return True


def _deployment_none(deployment, attr: str) -> Value | None:
    """`vllm_config.<attr>` that the report's deployment says is None (ir/deployment.py `vllm_config`: no
    --enable-lora option exists, so lora_config is None; speculative_config where --speculative-config is not
    given); None where it says nothing or states the configuration."""
    from ..ir.deployment import Deployment

    d = deployment if deployment is not None else Deployment()
    if attr == "speculative_config" and getattr(d, "speculative_config", None):
        return None
    view = d.vllm_config(None)
    return Known(None) if attr in view and view[attr] is None else None


def _declared_globals(fn: cst.FunctionDef) -> frozenset:
    """The names a function's own body (its if-blocks included) declares `global`."""
    out: set = set()

    def visit(body) -> None:
        for stmt in body:
            if type(stmt) is cst.SimpleStatementLine:
                out.update(n.name.value for small in stmt.body if type(small) is cst.Global for n in small.names)
            elif type(stmt) is cst.If:
                visit(stmt.body.body)
                orelse = stmt.orelse
                while orelse is not None:
                    visit(orelse.body.body)
                    orelse = orelse.orelse if type(orelse) is cst.If else None

    if type(fn.body) is cst.IndentedBlock:
        visit(fn.body.body)
    return frozenset(out)


def _global_statements(module, name: str) -> int:
    """How many `global` statements of the module's text name `name` (a statement assigning a module's global
    from several functions leaves its value to their order)."""
    source = getattr(module, "source", None)
    if not isinstance(source, bytes):
        return 0  # not a module's text to read: not known to be its only one
    pattern = re.compile(rb"^[ \t]*global[ \t]+[^\n]*\b" + re.escape(name.encode()) + rb"\b", re.M)
    return len(pattern.findall(source))
