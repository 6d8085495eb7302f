"""The fields a configuration class computes in its `__init__` / `__post_init__` from the others, read statically
(CPython ast, never imported): the class's own statements run over the configuration's values.

vLLM's Qwen3NextConfig (and transformers' Qwen3-Next, Qwen3.5, Gemma-2/3 configs) builds `layer_types` when the
checkpoint gives none: `self.layer_types = ["linear_attention" if bool((i + 1) % interval) else "full_attention"
for i in range(self.num_hidden_layers)]` with `interval = kwargs.get("full_attention_interval", 4)`. Running those
statements over a config.json that states `num_hidden_layers` gives the list. What is not known stays unknown:
a value the configuration does not give (an incomplete preset's missing key), a statement of a kind not read
here (a loop, a call of another method that may set fields), a test that is not decided.
"""

from __future__ import annotations

import ast
import copy
import operator

UNKNOWN = object()  # a value the statements do not decide
_MAX_RANGE = 100_000

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Mod: operator.mod, ast.Div: operator.truediv, ast.Pow: operator.pow}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
           ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_BUILTINS = {"bool": bool, "int": int, "len": len, "str": str, "min": min, "max": max, "abs": abs, "list": list,
             "tuple": tuple, "sorted": sorted, "sum": sum, "enumerate": lambda *a: list(enumerate(*a))}

_TYPES = {"dict": dict, "list": list, "tuple": tuple, "int": int, "float": float, "str": str, "bool": bool}


def unsure(value) -> bool:
    """A dict some of whose values (at any depth) are not decided: a literal `{"rope_type": "default",
    "rope_theta": rope_theta}` whose `rope_theta` a preset may give. Its keys and its known items are read;
    an equality with it, or a search for it, is not decided."""
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return any(v is UNKNOWN or unsure(v) for v in items)


class _Kwargs(dict):
    """`**kwargs` of the configuration's __init__: the keys it does not name as parameters; `complete` says
    whether a key it lacks is absent (a checkpoint's whole config.json) or only not known (a preset's part)."""

    complete = False
    absent: frozenset = frozenset()  # keys it surely lacks, complete or not (an alias the source never stores)


def derive_fields(inits: tuple, declared: set, defaults: dict, values: dict, complete: bool,
                  unknown: frozenset = frozenset(), class_attrs: frozenset = frozenset(),
                  absent: frozenset = frozenset()) -> dict:
    """field -> value after the class's `__init__` / `__post_init__` statements (`inits`, in the order they run)
    over `values` (the configuration's fields; `unknown`: fields it leaves out, never their defaults); a field
    whose value is not decided is left out. `class_attrs`: the names the class (or a base) gives a value in its
    body, which `hasattr(self, name)` finds before any statement runs; `absent`: keys `values` surely lacks even
    where it is not complete."""
    values = copy.deepcopy(values)  # the statements may change what they read (`rope_parameters[...] = ...`)
    state: dict = {}
    surely: set = set()  # the fields a statement that surely ran set (hasattr(self, name) holds)
    for fn in inits:
        params = [a.arg for a in fn.args.args[1:] + fn.args.kwonlyargs]
        if fn.name == "__post_init__":  # a dataclass: the fields are set before it runs
            for name in declared:
                state.setdefault(name, values[name] if name in values else
                                 UNKNOWN if name in unknown else defaults.get(name, UNKNOWN))
                surely.add(name)
        names: dict = {}
        defaults_of = [None] * (len(fn.args.args) - 1 - len(fn.args.defaults)) + list(fn.args.defaults) + list(fn.args.kw_defaults)
        for p, d in zip(params, defaults_of):
            if p in values:
                names[p] = values[p]
            elif p in unknown:
                names[p] = UNKNOWN
            else:
                names[p] = _literal(d) if d is not None else UNKNOWN
        if fn.args.kwarg is not None:
            # what the call passes by no parameter's name: a field left out is passed, its value not known
            kw = _Kwargs({k: v for k, v in values.items() if k not in params and k not in declared})
            kw.update({k: UNKNOWN for k in unknown if k not in params and k not in declared and k not in kw})
            kw.complete, kw.absent = complete, absent
            names[fn.args.kwarg.arg] = kw
        run = _Run(state, names)
        run.surely, run.class_attrs = surely, class_attrs
        try:
            run.block(fn.body)
        except _Stop:
            pass
    return {k: v for k, v in state.items() if v is not UNKNOWN}


class _Stop(Exception):
    """A `return`: the rest of the function does not run."""


_MAX_METHOD_DEPTH = 8


class _Fields(dict):
    """The `self.<field>` a method reads: each read once from the configuration (`read`, a field's value or
    UNKNOWN: a property runs there); what the method assigns is kept; after a call of another method that may
    set fields, none is known."""

    def __init__(self, read):
        super().__init__()
        self.read, self.lost = read, False

    def get(self, key, default=None):
        if key not in self:
            self[key] = UNKNOWN if self.lost else self.read(key)
        return dict.get(self, key, default)


def run_method(fn: ast.FunctionDef, args: tuple, read, call, depth: list):
    """What a method of the configuration class (`def is_kda_layer(self, layer_idx)`, a property with no
    args) returns, its statements run over the configuration's fields (`read(field)`: a value or UNKNOWN;
    `call(method, args)`: another method's result) with `args` bound to its parameters; UNKNOWN where its
    statements do not decide it (an undecided test around a return, a loop, a field not known)."""
    params = [a.arg for a in fn.args.args[1:]]
    if depth[0] >= _MAX_METHOD_DEPTH or len(args) > len(params) or fn.args.vararg or fn.args.kwonlyargs:
        return UNKNOWN
    defaults = [None] * (len(params) - len(fn.args.defaults)) + list(fn.args.defaults)
    names: dict = {}
    for k, p in enumerate(params):
        names[p] = args[k] if k < len(args) else _literal(defaults[k]) if defaults[k] is not None else UNKNOWN
    run = _Run(_Fields(read), names)
    run.function, run.methods = True, call
    depth[0] += 1
    try:
        run.block(fn.body)
    except _Stop:
        return run.returned
    finally:
        depth[0] -= 1
    return None  # it ends without a return


def _literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return UNKNOWN


class _Run:
    function = False  # running a method for its result (run_method): a return ends it with its value
    methods = None  # run_method: another method of the class, called on `self`
    returned = UNKNOWN
    class_attrs: frozenset = frozenset()  # what the class body gives a value (hasattr holds from the start)
    open_fields = False  # the base was handed fields whose names are not all known (a preset's kwargs)

    def __init__(self, state: dict, names: dict):
        self.state, self.names = state, names
        self.surely: set = set()  # fields a statement that surely ran set
        self.absent: frozenset | None = None  # with open_fields: the names none of those fields can be

    def _undecided_return(self, stmt) -> None:
        """In a method run for its result, a statement not run in order (an undecided test, a loop) that
        holds a return: what the method returns is not decided."""
        if self.function and any(isinstance(n, (ast.Return, ast.Raise)) for n in ast.walk(stmt)):
            self.returned = UNKNOWN
            raise _Stop

    # -- statements ---------------------------------------------------------------------------------------
    def block(self, body: list) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, stmt) -> None:
        if isinstance(stmt, ast.Assign):
            value = self.expr(stmt.value)
            for t in stmt.targets:
                self.assign(t, value)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self.assign(stmt.target, self.expr(stmt.value))
        elif isinstance(stmt, ast.If):
            test = self.truth(stmt.test)
            if test is True:
                self.block(stmt.body)
            elif test is False:
                self.block(stmt.orelse)
            else:  # both may run: what they set is not decided
                self._undecided_return(stmt)
                for s in stmt.body + stmt.orelse:
                    self.forget(s)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            self.call_statement(stmt.value)
        elif isinstance(stmt, ast.Return):
            if self.function:
                self.returned = self.expr(stmt.value) if stmt.value is not None else None
            raise _Stop
        elif isinstance(stmt, ast.Raise) and self.function:
            self.returned = UNKNOWN  # the method raises: no value
            raise _Stop
        elif isinstance(stmt, (ast.Pass, ast.Expr, ast.Raise, ast.Assert)):
            return
        else:  # a loop, a with, a try, a nested def, an augmented assignment: what it sets is not decided
            self._undecided_return(stmt)
            self.forget(stmt)

    def assign(self, target, value) -> None:
        if isinstance(target, ast.Name):
            self.names[target.id] = value
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
            self.state[target.attr] = value
            self.surely.add(target.attr)
        else:
            for node in ast.walk(target):
                self.forget_target(node)

    def forget(self, stmt) -> None:
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    for n in ast.walk(t):
                        self.forget_target(n)
            elif isinstance(node, (ast.For, ast.comprehension)):
                for n in ast.walk(node.target):
                    self.forget_target(n)
            elif isinstance(node, ast.Call):
                self.forget_call(node)

    def forget_target(self, node) -> None:
        if isinstance(node, ast.Name):
            self.names[node.id] = UNKNOWN
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            self.state[node.attr] = UNKNOWN

    def forget_call(self, call: ast.Call) -> None:
        """A call that may change what it is handed (`kwargs.setdefault(...)`, `cfg.update(...)`)."""
        func = call.func
        mutators = ("setdefault", "update", "pop", "append", "extend", "clear", "insert", "remove")
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.names:
            if func.attr in mutators:
                self.names[func.value.id] = UNKNOWN
        elif isinstance(func, ast.Attribute) and func.attr in mutators and isinstance(func.value, ast.Attribute) \
                and isinstance(func.value.value, ast.Name) and func.value.value.id == "self":
            self.forget_target(func.value)  # `self.layer_types.append(...)` in a loop: not the [] it started as

    def call_statement(self, call: ast.Call) -> None:
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            base = self.names.get(func.value.id, UNKNOWN) if func.value.id != "self" else None
            if isinstance(base, dict) and func.attr in ("setdefault", "pop") and call.args and not call.keywords:
                self.expr(call)  # kwargs.setdefault("partial_rotary_factor", 0.25): read through expr
                return
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Name) \
                and func.value.func.id == "super":
            if func.attr in ("__init__", "__post_init__"):
                self.base_init(call)
            return
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" \
                and func.attr.startswith("validate"):
            return  # self.validate_layer_type(): checks, sets nothing
        self.forget_call(call)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            for name in list(self.state):  # another method of the class may set any field
                self.state[name] = UNKNOWN
            if isinstance(self.state, _Fields):
                self.state.lost = True

    def base_init(self, call: ast.Call) -> None:
        """`super().__init__(pad_token_id=..., **kwargs)`: transformers' configuration base sets every field it
        is handed as an attribute (PreTrainedConfig: `setattr(self, key, value)` for the keys it does not
        declare); a field this class assigns afterwards replaces it."""
        for kw in call.keywords:
            if kw.arg is not None:
                self.set_field(kw.arg, self.expr(kw.value))
                continue
            handed = self.expr(kw.value)
            if not isinstance(handed, dict):
                self.open_fields, self.absent = True, frozenset()
                continue
            for key, value in handed.items():
                if isinstance(key, str):
                    self.set_field(key, value)
            if isinstance(handed, _Kwargs) and not handed.complete:
                self.open_fields = True
                self.absent = handed.absent if self.absent is None else self.absent & handed.absent
        if any(isinstance(a, ast.Starred) for a in call.args):
            self.open_fields, self.absent = True, frozenset()

    def set_field(self, name: str, value) -> None:
        if not isinstance(self.state, _Fields):
            self.state[name] = value
            self.surely.add(name)

    def has_field(self, name: str):
        """`hasattr(self, name)`: True where a statement that ran set it or the class body gives it a value;
        False where nothing may have set it; None where a statement not decided may have."""
        if name in self.surely or name in self.class_attrs:
            return True
        if name in self.state or isinstance(self.state, _Fields):
            return None
        if self.open_fields and name not in (self.absent or frozenset()):
            return None
        return False

    # -- expressions --------------------------------------------------------------------------------------
    def truth(self, node):
        value = self.expr(node)
        if value is UNKNOWN:
            return None
        try:
            return bool(value)
        except Exception:  # noqa: BLE001 - a value without a truth
            return None

    def expr(self, node):
        try:
            return self._expr(node)
        except (TypeError, ValueError, KeyError, IndexError, ZeroDivisionError, AttributeError, OverflowError):
            return UNKNOWN

    def _expr(self, node):
        t = type(node)
        if t is ast.Constant:
            return node.value
        if t is ast.Name:
            if node.id in self.names:
                return self.names[node.id]
            return {"None": None, "True": True, "False": False}.get(node.id, UNKNOWN)
        if t is ast.Attribute:
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                return self.state.get(node.attr, UNKNOWN)
            return UNKNOWN
        if t in (ast.List, ast.Tuple):
            items = [self._expr(e) for e in node.elts]
            return UNKNOWN if any(i is UNKNOWN for i in items) or any(isinstance(e, ast.Starred) for e in node.elts) \
                else (items if t is ast.List else tuple(items))
        if t is ast.Dict:
            if any(k is None for k in node.keys):
                return UNKNOWN
            keys, vals = [self._expr(k) for k in node.keys], [self._expr(v) for v in node.values]
            # (known keys with values not all known: a dict whose known items are read, see unsure)
            return UNKNOWN if any(x is UNKNOWN for x in keys) else dict(zip(keys, vals))
        if t is ast.BinOp and type(node.op) in _BINOPS:
            a, b = self._expr(node.left), self._expr(node.right)
            return UNKNOWN if a is UNKNOWN or b is UNKNOWN else _BINOPS[type(node.op)](a, b)
        if t is ast.UnaryOp:
            a = self._expr(node.operand)
            if a is UNKNOWN:
                return UNKNOWN
            return (not a) if isinstance(node.op, ast.Not) else -a if isinstance(node.op, ast.USub) else \
                +a if isinstance(node.op, ast.UAdd) else UNKNOWN
        if t is ast.BoolOp:
            last = UNKNOWN
            for v in node.values:
                last = self._expr(v)
                if last is UNKNOWN:
                    return UNKNOWN
                if isinstance(node.op, ast.And) and not last or isinstance(node.op, ast.Or) and last:
                    return last
            return last
        if t is ast.Compare:
            left = self._expr(node.left)
            for op, right_node in zip(node.ops, node.comparators):
                right = self._expr(right_node)
                if left is UNKNOWN or right is UNKNOWN or type(op) not in _CMPOPS:
                    return UNKNOWN
                if unsure(left) or (unsure(right) and type(op) not in (ast.In, ast.NotIn)):
                    return UNKNOWN  # (a key of a dict whose values are not all known is still found in it)
                if not _CMPOPS[type(op)](left, right):
                    return False
                left = right
            return True
        if t is ast.NamedExpr and isinstance(node.target, ast.Name):  # `(last := self.layer_types[-1])`
            value = self._expr(node.value)
            self.names[node.target.id] = value
            return value
        if t is ast.IfExp:
            test = self.truth(node.test)
            return UNKNOWN if test is None else self._expr(node.body if test else node.orelse)
        if t is ast.Subscript:
            base, item = self._expr(node.value), self._expr(node.slice)
            return UNKNOWN if base is UNKNOWN or item is UNKNOWN else base[item]
        if t is ast.ListComp and len(node.generators) == 1:
            return self._comprehension(node)
        if t is ast.Call:
            return self._call(node)
        return UNKNOWN

    def _comprehension(self, node: ast.ListComp):
        gen = node.generators[0]
        target = gen.target  # a name, or names unpacked from each item (`for index, type in enumerate(...)`)
        names = [target.id] if isinstance(target, ast.Name) else [e.id if isinstance(e, ast.Name) else None
                                                                   for e in target.elts] \
            if isinstance(target, ast.Tuple) else None
        if gen.is_async or not names or None in names:
            return UNKNOWN
        seq = self._expr(gen.iter)
        if seq is UNKNOWN or not isinstance(seq, (list, tuple, range)) or len(seq) > _MAX_RANGE:
            return UNKNOWN
        saved = {name: self.names.get(name, UNKNOWN) for name in names}
        out = []
        try:
            for item in seq:
                if isinstance(target, ast.Name):
                    self.names[names[0]] = item
                elif isinstance(item, (tuple, list)) and len(item) == len(names):
                    self.names.update(zip(names, item))
                else:
                    return UNKNOWN
                keep = [self.truth(c) for c in gen.ifs]
                if any(k is None for k in keep):
                    return UNKNOWN
                if all(keep):
                    value = self._expr(node.elt)
                    if value is UNKNOWN:
                        return UNKNOWN
                    out.append(value)
        finally:
            self.names.update(saved)
        return out

    def _call(self, node: ast.Call):
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return UNKNOWN
        if node.keywords:
            return UNKNOWN
        if isinstance(node.func, ast.Name) and node.func.id == "hasattr" and "hasattr" not in self.names \
                and len(node.args) == 2 and isinstance(node.args[0], ast.Name) and node.args[0].id == "self" \
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            got = self.has_field(node.args[1].value)
            return UNKNOWN if got is None else got
        if isinstance(node.func, ast.Name) and node.func.id == "isinstance" and len(node.args) == 2 \
                and "isinstance" not in self.names:
            kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            types: list[type] = []
            for k in kinds:
                t = _TYPES.get(k.id) if isinstance(k, ast.Name) and k.id not in self.names else None
                if t is None:
                    return UNKNOWN  # a class of the trees, a name rebound: not read here
                types.append(t)
            value = self._expr(node.args[0])
            return UNKNOWN if value is UNKNOWN else isinstance(value, tuple(types))
        args = [self._expr(a) for a in node.args]
        dict_call = isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop", "setdefault")
        if any(a is UNKNOWN for a in (args[:1] if dict_call else args)):
            return UNKNOWN  # (a dict's default may be unknown where the key is given)
        func = node.func
        if isinstance(func, ast.Name):
            if func.id == "range":
                return range(*args) if all(type(a) is int for a in args) else UNKNOWN
            if func.id in _BUILTINS and func.id not in self.names:
                if func.id == "str" and any(unsure(a) for a in args):
                    return UNKNOWN
                return _BUILTINS[func.id](*args)
            return UNKNOWN
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" \
                and self.methods is not None:
            return self.methods(func.attr, tuple(args))  # another method of the class: `self.is_kda_layer(i)`
        if isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name) and func.value.id == "self"):
            base = self._expr(func.value)
            if isinstance(base, dict) and func.attr in ("get", "pop", "setdefault") and 1 <= len(args) <= 2:
                key, default = args[0], args[1] if len(args) > 1 else None
                if key in base:
                    value = base[key]
                elif isinstance(base, _Kwargs) and not base.complete:
                    return UNKNOWN  # a preset that holds only some fields: the key may be given
                else:
                    value = default
                if func.attr == "pop":
                    base.pop(key, None)
                elif func.attr == "setdefault" and value is not UNKNOWN:
                    base.setdefault(key, value)
                return value
            if isinstance(base, str) and func.attr in ("lower", "upper", "strip") and not args:
                return getattr(base, func.attr)()
        return UNKNOWN
