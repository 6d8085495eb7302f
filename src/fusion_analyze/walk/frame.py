"""What the walk carries through one expanded method: its frame (instance, SSA values, bindings), the
markers of arguments that are not tensors, and small readers of call and assignment syntax."""

from __future__ import annotations

from typing import TypeGuard

import libcst as cst

from ..catalog import catalog
from ..index.modules import Definition
from ..index.nodes import find_all
from .construction.constructor import Instance, Scope
from ..semantics.for_backend import evaluator
from ..semantics.values import Bindings

MAX_DEPTH = catalog().typed.walk.limits.expand_depth  # nested expansions (patterns/catalog/walk.yaml)
MAX_OPS = catalog().typed.walk.limits.max_ops


class _Frame:
    """One expanded forward/method: its instance, variables (SSA values) and facts."""

    def __init__(self, inst: Instance, cls: Definition, fn: cst.FunctionDef, module, path: str, facts: Bindings):
        self.inst = inst
        self.cls = cls
        self.fn = fn
        self.module = module
        self.path = path
        self.facts = facts
        self.env: dict[str, list[str]] = {}
        self.loop_vars: dict[str, Instance] = {}
        self.module_names: dict[str, str] = {}  # parameter bound to a submodule -> that submodule's name
        # a local bound to a submodule of the instance (`attn_hc = self.attn_hyper_connection`) -> its name under
        # self (`a.b` for `self.a.b`): a call of it, or of one of its methods, runs that module (calls.py)
        self.aliases: dict[str, str] = {}
        self.partials: dict[str, Definition] = {}  # `f = partial(g, ...)`: f -> g's Definition (f(x) runs g(x))
        self.returns: list[str] = []
        self.entry = None  # the path condition the walk entered this function under (set where its body is walked)
        self.host: set[str] = set()  # names bound to a host package's values (numpy arrays): walk/host.py
        # names whose None-ness here is each decoder layer's own where the layers are walked kind by kind (the
        # loop's carried values, the parameters they are handed to): a test on them is decided
        self.exact: set[str] = set()
        # names that may be None or hold values, which path ran not known (`x = None` then `if t: x = f(h)`, or
        # `x = f(h) if t else None`): passed on, the callee's parameter is neither None nor not None
        self.maybe_none: set[str] = set()
        # names whose None-ness is the call's (the parameters: `residual` is None in the first layer only) or
        # follows from it (assigned from them, or under a test they decided): a test they decide walks both
        # branches (Walker._if); one the other names decide (`ring_start = None`, never reassigned where the
        # values decide the test false) is decided
        self.transient: set[str] = set()
        self.scope = f"{cls.name}.{fn.name.value}"
        # what the evaluator may read here: `self.x` of the instance (forward's own names are tensors)
        self.names = Scope(module=module, owner=inst, instances=self.loop_vars)  # `layer.x`: the loop's layer


class _NoneValue:
    """An argument that is None at the call. `exact`: in this very layer (a value the layer loop carries, the
    first layer's initial None), not where some call of the code has it."""

    exact = False


_NONE = _NoneValue()


class _ExactNone(_NoneValue):
    exact = True


_EXACT_NONE = _ExactNone()


class _Exact(list):
    """An argument's values that are surely not None in this very layer (a value the layer loop carries from
    the second layer on)."""

    exact = True


class _MaybeNone(list):
    """An argument that holds these values or None, which one not known at the call (a name of the caller's
    `maybe_none`): the callee's tests of it (`x if p is not None else None`) stay open."""


class _Literal(list):
    """An argument the call writes as a literal (`mode="decode"`, `True`, `4`): no tensor (an empty list of
    values, wherever the walk reads arguments so), and its value, bound to the parameter for the evaluator
    (walker._assign_param), so that the callee's tests on it are decided."""

    def __init__(self, node):
        super().__init__()
        self.node = node


def literal_argument(expr) -> bool:
    """A literal the evaluator reads without a scope: a string, a number (signed), True / False."""
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Float)):
        return True
    if type(expr) is cst.Name:
        return expr.value in ("True", "False")
    return type(expr) is cst.UnaryOperation and isinstance(expr.operator, cst.Minus) \
        and isinstance(expr.expression, (cst.Integer, cst.Float))


class _InstanceValue:
    """An argument that is a module (a layer of the loop, `self.act_fn` handed to a helper), not a tensor.
    `name`: the submodule's own name, which its ops keep wherever it is called."""

    def __init__(self, inst, name: str | None = None):
        self.inst = inst
        self.name = name


# Calls on Python containers and tensor metadata: no operator runs.
_CONTAINER_METHODS = {"size", "dim", "numel", "item", "tolist", "get", "items", "keys", "values", "append",
                      "extend", "insert", "pop", "update", "setdefault", "data_ptr", "stride", "is_contiguous",
                      "new_empty", "new_zeros", "element_size", "format", "join", "startswith", "endswith"}
_OP_SYMBOL = {"add": "add", "mul": "mul", "sub": "sub", "div": "div", "matmul": "matmul", "elementwise": "pow"}
_IGNORED_BUILTINS = {"len", "int", "float", "bool", "str", "getattr", "hasattr", "isinstance", "range", "print",
                     "tuple", "list", "dict", "set", "min", "max", "zip", "enumerate", "iter", "next", "type",
                     "IntermediateTensors", "assert", "sorted", "any", "all", "abs", "round", "id", "cast"}


def _flat(args, kwargs) -> list[str]:
    out = []
    for v in list(args) + list(kwargs.values()):
        if isinstance(v, list):
            out += [x for x in v if isinstance(x, str)]
    return out


def _self_attr(expr) -> TypeGuard[cst.Attribute]:
    return type(expr) is cst.Attribute and type(expr.value) is cst.Name and expr.value.value == "self"


def _target_names(t) -> list[str]:
    if type(t) is cst.Name:
        return [t.value]
    if isinstance(t, (cst.Tuple, cst.List)):
        out = []
        for e in t.elements:
            out += _target_names(e.value)
        return out
    if type(t) is cst.Attribute:
        return [t.attr.value]
    return []


def _assigned_names(block) -> set[str]:
    names: set[str] = set()
    for node in find_all(block, cst.AssignTarget):
        names.update(_target_names(node.target))
    return names


def _kwarg(call: cst.Call | None, name: str):
    if call is None:
        return None
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a.value
    return None


def _kwarg_text(call, name, scope) -> str | None:
    """The source text of a constructor keyword, followed through parameters to where it is set
    (bias=qkv_bias -> getattr(config, "attention_bias", False))."""
    expr = _kwarg(call, name)
    if expr is None or scope is None:
        return None
    where = evaluator(None).origin(expr, scope)
    return where[1].module.code(where[0]).strip() if where is not None else None





# op kinds that launch no device kernel (a view of the same storage)
NO_LAUNCH = frozenset({"view", "split", "transpose", "identity"})


def nest_native(ops: list, start: int, under, label: str) -> bool:
    """The ops from `start` on are a layer's forward_native (walk/native.py) or a step's (composites.py):
    marked as nested under `under` (`native_of`, its scope), with how many device kernels they surely launch and
    how many more under tests the walk could not decide (casts included; views and splits launch none). False,
    and the ops dropped, when they launch at most one kernel: the op above says it already (F.embedding)."""
    inner = ops[start:]
    launching = [op for op in inner if op.kind not in NO_LAUNCH]
    if len(launching) <= 1:
        del ops[start:]
        return False
    sure = sum(1 for op in launching if op.steady and not op.attrs.get("other_branch")
               and not op.condition and op.kind != "cast")
    for op in inner:
        op.scope = under.scope  # the layer's vector work, wherever its helpers live
        op.attrs["native_of"] = label
        op.attrs["native_ops"], op.attrs["native_ops_if"] = sure, len(launching) - sure
    under.attrs["native_ops"], under.attrs["native_ops_if"] = sure, len(launching) - sure
    return True


class WalkerState:
    """What every mixin of the Walker (walker.py) reads of the walk's state and calls of its core, declared
    for the type checker only: at run time the mixins get them from Walker itself."""

    from typing import TYPE_CHECKING

    if TYPE_CHECKING:
        from ..index.modules import ModuleIndex
        from ..ir.ops import Op
        from .construction.constructor import Constructor
        from .kernels.backend_kernels import Backends
        from ..semantics.environment import Environment
        from ..semantics.quantization import Quantization
        from ..semantics.attention_choice import Chosen

        index: ModuleIndex
        env: Environment
        quant: Quantization | None
        alternatives: list[dict]
        ctor: Constructor
        backends: Backends
        cuda_backends: Backends
        ops: list[Op]
        _streams: list[str]
        _replacing: list
        _stack: list[str]
        layer_kind: int | None
        layer_kinds: list[dict]
        kind_undecided: tuple | None
        tensor_values: set[str]
        _moe_holders: dict

        def _checkpoint(self): ...

        def _rollback(self, saved) -> None: ...
        _role_kinds: dict
        _role_paths: dict
        transient_depth: int
        section: str
        test_reads: dict[str, list[str]]

        def _value(self, name: str) -> str: ...

        def _op(self, frame, kind, name, layer_class, stmt, inputs, hint, cond, steady, attrs=None,
                path=None) -> list[str]: ...

        def _expand(self, inst, method: str, args: list, kwargs: dict, path: str, facts, cond=None) -> list[str]: ...

        def _bind(self, frame: "_Frame", args: list, kwargs: dict) -> None: ...

        def _block(self, frame: "_Frame", stmts, cond, steady: bool) -> None: ...

        def _own_input_casts(self, sub, impl, args, kwargs, path: str, facts, cond, steady) -> dict[str, str]: ...

        def _unknown(self, path, module, node, reason) -> None: ...

        def _module_at(self, rel: str): ...

        def _forward_of(self, cls, method: str, inst=None) -> tuple | None: ...

        def _role_for_submodule(self, frame, name, sub, kind=None) -> None: ...

        def _native_ops(self, sub, impl, name, args, kwargs, path, cond, out) -> list[str]: ...

        def _attr_path(self, sub, dotted: str): ...

        def _attention_backend(self, sub, impl, kind: str) -> "Chosen | None": ...

        def _attention_layer(self, sub, holder: str, attr: str | None): ...

        def _composite_parts(self, frame, sub, kind: str, path: str, inputs, cond, steady, only=None) -> None: ...

        def _attr_facts(self, inst) -> dict: ...

        def _flush_shared(self) -> None: ...

        locations: dict

        def _chosen(self, path: str, sub, cond): ...

        def _op_id(self, base: str) -> str: ...

        # walk/host.py
        def _host_call(self, frame, call) -> bool: ...

        def _host_expr(self, frame, expr) -> bool: ...

        def _host_field(self, frame, expr) -> bool: ...

        def _typed_params(self, frame) -> None: ...

        def _once_after(self, frame, stmt, rest) -> str | None: ...

        def _once_body(self, frame, stmt) -> str | None: ...

        def _role(self, role: str, inst, method: str = "forward") -> None: ...

        # walk/blockers.py
        uncertain_depth: int
        picked_depth: int
        surely_built: list[bool]

        def _forward_raise(self, frame, small, stmt, cond, steady: bool) -> None: ...

        def _construction_raises(self, inst, path: str) -> None: ...

        # walk/walker.py
        patch_modules: dict
        _walked_lists: set

        def _unknown_op(self, frame, stmt, name, inputs, hint, cond, steady, reason) -> list[str]: ...

        # walk/statements.py
        def _is_leaf(self, inst) -> bool: ...

        def _eval(self, frame: "_Frame", expr, cond, steady, stmt, hint=None, quiet=False) -> list[str]: ...

        def _args(self, frame: "_Frame", call, cond, steady, stmt) -> tuple[list, dict]: ...

        # walk/calls.py
        def _call(self, frame: "_Frame", call, cond, steady, stmt, hint) -> list[str]: ...

        # walk/layers.py
        def _module_call(self, frame, sub, name, call, args, kwargs, cond, steady, stmt, hint) -> list[str]: ...

        # walk/composites.py
        def _op_in_method(self, frame, kind, name, cls_name, module, fn, inputs, hint, cond, steady, attrs,
                          path) -> Op: ...

        # walk/roles.py
        def _layer_role(self, element, path: str = "layers") -> None: ...
