"""Which class builds `self.x`: read __init__ chains, factories, layer lists and conditional construction."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from ..index.modules import Definition, ModuleIndex
from ..index.nodes import iter_nodes

MAX_DEPTH = 8
_MOE_NAME = re.compile(r"moe|sparse|expert", re.IGNORECASE)
_MLA_NAME = re.compile(r"MLA|LatentAttention")


@dataclass
class Scope:
    """Names visible while evaluating an __init__ or factory body."""

    module: object  # ModuleInfo the code lives in
    params: dict[str, tuple] = field(default_factory=dict)  # name -> (expr, Scope) bound at the call
    defaults: dict[str, cst.BaseExpression] = field(default_factory=dict)
    locals: dict[str, list[tuple]] = field(default_factory=dict)  # name -> [(expr, condition)]
    owner: "Instance | None" = None  # the instance whose __init__ this is (for self.y)


@dataclass
class Instance:
    cls: Definition | None  # None for a value that is not a module (None, a tensor, ...)
    call: cst.Call | None = None
    scope: Scope | None = None  # where `call` was evaluated (to bind the class's __init__ params)
    condition: str | None = None
    alternatives: list["Instance"] = field(default_factory=list)
    element: "Instance | None" = None  # for layer lists
    repeat: str | None = None  # config name that sets the list length
    factory: str | None = None  # qualified name of the factory that returned it
    _attrs: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.cls.name if self.cls else "None"


class Constructor:
    def __init__(self, index: ModuleIndex):
        self.index = index
        # one walk's MROs: a class is asked for its MRO at every attribute, method and call. Kept per walk
        # (not per session) so that each analysis still meets, and reports, the unreadable files on the way.
        self._mros: dict[int, tuple[Definition, list[Definition]]] = {}

    # -- classes -----------------------------------------------------------------------------
    def mro(self, cls: Definition, _seen: set | None = None) -> list[Definition]:
        """Linearised bases (depth-first, left-to-right, duplicates dropped); cycles end."""
        if _seen is None:
            hit = self._mros.get(id(cls))
            if hit is None or hit[0] is not cls:
                hit = self._mros[id(cls)] = (cls, self._mro(cls, set()))
            return list(hit[1])
        return self._mro(cls, _seen)

    def _mro(self, cls: Definition, seen: set) -> list[Definition]:
        if cls.qualname in seen or len(seen) > 40:
            return []
        seen.add(cls.qualname)
        out = [cls]
        for base in cls.bases:
            target = self.index.resolve_expr(cls.module, _strip_subscript(base.value))
            if isinstance(target, Definition) and target.kind == "class":
                for c in self.mro(target, seen):
                    if c.qualname not in {o.qualname for o in out}:
                        out.append(c)
        return out

    def base_names(self, cls: Definition) -> list[str]:
        names = [c.name for c in self.mro(cls)]
        for base in cls.bases:  # bases outside the trees (nn.Module) still count by name
            expr = _strip_subscript(base.value)
            if isinstance(expr, cst.Attribute):
                names.append(expr.attr.value)
            elif isinstance(expr, cst.Name):
                names.append(expr.value)
        return names

    def method(self, cls: Definition, name: str) -> tuple[Definition, cst.FunctionDef] | None:
        for c in self.mro(cls):
            fn = class_method(c, name)
            if fn is not None:
                return c, fn
        return None

    # -- __init__ chains -----------------------------------------------------------------------
    def init_scopes(self, inst: Instance) -> list[tuple[Definition, cst.FunctionDef, Scope]]:
        """(class, __init__, scope) from the most derived class down through super().__init__ calls."""
        out = []
        if inst.cls is None:
            return out
        call, call_scope = inst.call, inst.scope
        mro = self.mro(inst.cls)
        i = 0
        while i < len(mro):
            c = mro[i]
            fn = class_method(c, "__init__")
            if fn is None:
                i += 1
                continue
            scope = Scope(module=c.module, owner=inst)
            bind_params(fn, call, call_scope, scope, skip_self=True)
            out.append((c, fn, scope))
            sup = _super_init_call(fn, c)
            if sup is None:
                break
            call, call_scope = sup, scope
            i += 1
        return out

    def attr(self, inst: Instance, name: str, depth: int = 0) -> Instance | None:
        """The instance assigned to `self.<name>` in the __init__ chain (most derived assignment wins)."""
        if inst.cls is None or depth > MAX_DEPTH:
            return None
        key = ("attr", name)
        if key in inst._attrs:
            return inst._attrs[key]
        inst._attrs[key] = None  # cycle guard
        result = None
        for c, fn, scope in self.init_scopes(inst):
            found = _self_assignments(fn, name, c.module)
            if not found:
                continue
            options: list[Instance] = []
            local_text = {t: c.module.code(v).strip() for t, v, _c, _p in _local_assignments(fn, c.module)}
            for expr, cond, pos in found:
                cond = _explain(cond, local_text)
                self._fill_locals(fn, scope, c.module, before=pos)
                for alt in self.evaluate(expr, scope, depth + 1):
                    alt.condition = _join(cond, alt.condition)
                    options.append(alt)
            result = pick(options)
            break
        if result is None:
            result = self._helper_attr(inst, name, depth)
        if result is None:
            result = self._filled_container(inst, name, depth)
        if result is None:
            result = self._class_attr(inst, name, depth)
        inst._attrs[key] = result
        return result

    def _init_self_calls(self, inst: Instance):
        """(class, __init__, scope, position, call) of each `self.<method>(...)` statement of the __init__ chain."""
        for c, fn, scope in self.init_scopes(inst):
            for pos, call in _self_calls(fn, c.module):
                yield c, fn, scope, pos, call

    def _filled_container(self, inst: Instance, name: str, depth: int) -> Instance | None:
        """`self.x = nn.ModuleList()` then `self.x.append(M(...))` or `self.x[k] = M(...)`: a list of M."""
        for c, fn, scope in self.init_scopes(inst):
            for pos, cond, value in _container_fills(fn, c.module).get(name, ()):
                self._fill_locals(fn, scope, c.module, before=pos)
                element = pick(self.evaluate(value, scope, depth + 1))
                if element is not None and element.cls is not None:
                    element.condition = _join(cond, element.condition)
                    return _layer_list(element, None)
        return None

    def _helper_attr(self, inst: Instance, name: str, depth: int) -> Instance | None:
        """`self.<name>` assigned in a method that __init__ calls: self._init_layers(...), self._build(...)."""
        for c, fn, scope, pos, call in self._init_self_calls(inst):
            found = self.method(inst.cls, call.func.attr.value)  # the most derived override
            if found is None or found[1].name.value == "__init__":
                continue
            owner, helper = found
            assigned = _self_assignments(helper, name, owner.module)
            if not assigned:
                continue
            self._fill_locals(fn, scope, c.module, before=pos)
            hscope = Scope(module=owner.module, owner=inst)
            bind_params(helper, call, scope, hscope, skip_self=True)
            options = []
            for expr, cond, hpos in assigned:
                self._fill_locals(helper, hscope, owner.module, before=hpos)
                for alt in self.evaluate(expr, hscope, depth + 1):
                    alt.condition = _join(cond, alt.condition)
                    options.append(alt)
            if options:
                return pick(options)
        return None

    def external_class(self, inst: Instance, name: str) -> str | None:
        """`self.gate = nn.Linear(...)`: the dotted name of a constructor outside the trees."""
        for c, fn, scope in self.init_scopes(inst):
            for expr, _cond, _pos in _self_assignments(fn, name, c.module):
                if isinstance(expr, cst.Call) and isinstance(expr.func, (cst.Name, cst.Attribute)):
                    dotted = self.index.dotted(c.module, expr.func)
                    if dotted and not dotted.startswith(("vllm.", "vllm_ascend.")):
                        return dotted
            return None
        return None

    def _class_attr(self, inst: Instance, name: str, depth: int) -> Instance | None:
        """`model_cls = DeepseekV2Model` in a class body, read through `self.model_cls`."""
        for c in self.mro(inst.cls):
            body = c.node.body.body if isinstance(c.node.body, cst.IndentedBlock) else []
            for stmt in body:
                if not isinstance(stmt, cst.SimpleStatementLine):
                    continue
                for small in stmt.body:
                    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else (
                        [small.target] if isinstance(small, cst.AnnAssign) and small.value is not None else [])
                    if any(isinstance(t, cst.Name) and t.value == name for t in targets):
                        found = self.evaluate(small.value, Scope(module=c.module, owner=inst), depth + 1)
                        return pick(found)
        return None

    def _fill_locals(self, fn: cst.FunctionDef, scope: Scope, module, before: int) -> None:
        scope.locals = {}
        for expr_target, value, cond, pos in _local_assignments(fn, module):
            if pos < before:
                scope.locals.setdefault(expr_target, []).append((value, cond))

    # -- expressions -----------------------------------------------------------------------------
    def evaluate(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> list[Instance]:
        """Instances an expression builds (several when it is conditional)."""
        if depth > MAX_DEPTH or expr is None:
            return []
        if isinstance(expr, cst.IfExp):
            cond = scope.module.code(expr.test).strip()
            out = []
            for alt in self.evaluate(expr.body, scope, depth + 1):
                alt.condition = _join(cond, alt.condition)
                out.append(alt)
            for alt in self.evaluate(expr.orelse, scope, depth + 1):
                alt.condition = _join(f"not ({cond})", alt.condition)
                out.append(alt)
            return out
        if isinstance(expr, cst.Name) and expr.value == "None":
            return [Instance(None)]
        if isinstance(expr, (cst.Name, cst.Attribute)):
            return [i for i in self._value_of(expr, scope, depth) if i is not None]
        if isinstance(expr, cst.Call):
            return self._call(expr, scope, depth)
        if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or):
            return self.evaluate(expr.left, scope, depth + 1) or self.evaluate(expr.right, scope, depth + 1)
        if isinstance(expr, cst.Subscript):
            if all(isinstance(s.slice, cst.Slice) for s in expr.slice):  # self.layers[a:b] is still the layer list
                base = [i for i in self.evaluate(expr.value, scope, depth + 1) if i.element is not None]
                if base:
                    return base
            base = self._dict_values(expr.value, scope, depth)  # LAYER_TYPES[config.x] -> every value of the dict
            if base:
                return base
        return []

    def _value_of(self, expr, scope: Scope, depth: int) -> list[Instance]:
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            if scope.owner is not None:
                found = self.attr(scope.owner, expr.attr.value, depth + 1)
                return [found] if found is not None else []
            return []
        if isinstance(expr, cst.Name):
            name = expr.value
            if name in scope.locals:
                out = []
                values = scope.locals.pop(name)  # `x = x or Default` reads the parameter x on the right
                try:
                    for value, cond in values:
                        for alt in self.evaluate(value, scope, depth + 1):
                            alt.condition = _join(cond, alt.condition)
                            out.append(alt)
                finally:
                    scope.locals[name] = values
                return out
            if name in scope.params:
                value, where = scope.params[name]
                return self.evaluate(value, where, depth + 1)
            if name in scope.defaults:
                return self.evaluate(scope.defaults[name], Scope(module=scope.module, owner=scope.owner), depth + 1)
        target = self.index.resolve_expr(scope.module, expr)
        if target is None and isinstance(expr, cst.Name):
            local = _function_imports(scope.module).get(expr.value)  # `from ... import X` inside a function
            target = self.index.lookup(*local) if local else None
        if isinstance(target, Definition) and target.kind == "class":
            return [Instance(target)]  # a class object (called later)
        if isinstance(target, Definition) and target.kind == "assign":
            return self.evaluate(target.node, Scope(module=target.module), depth + 1)
        return []

    def _dict_values(self, expr, scope: Scope, depth: int) -> list[Instance]:
        node = None
        if isinstance(expr, cst.Name):
            target = self.index.lookup(scope.module.name, expr.value)
            if isinstance(target, Definition) and target.kind == "assign" and isinstance(target.node, cst.Dict):
                node, where = target.node, Scope(module=target.module)
        if node is None:
            return []
        out = []
        for el in node.elements:
            if isinstance(el, cst.DictElement):
                out += self.evaluate(el.value, where, depth + 1)
        return out

    def _call(self, call: cst.Call, scope: Scope, depth: int) -> list[Instance]:
        func = call.func
        # Layer lists: make_layers(n, lambda prefix: Layer(...)) and nn.ModuleList([Layer(...) for ...]).
        lam = next((a.value for a in call.args if isinstance(a.value, cst.Lambda)), None)
        if lam is None:  # the factory passed by name: a nested def recorded as a lambda in the locals
            lam = next((v for a in call.args if isinstance(a.value, cst.Name)
                        for v, _c in scope.locals.get(a.value.value, []) if isinstance(v, cst.Lambda)), None)
        fname = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if lam is not None and isinstance(lam.body, cst.Call):
            elems = self.evaluate(lam.body, scope, depth + 1)
            first = call.args[0].value if call.args else None
            repeat = scope.module.code(first).strip() if first is not None and first is not lam and not isinstance(first, cst.Name) or (isinstance(first, cst.Name) and first.value not in scope.locals) else None
            chosen = pick(elems)  # a per-layer class choice: the default, the others listed as alternatives
            return [_layer_list(chosen, repeat)] if chosen is not None else []
        if fname == "ModuleList" and call.args:
            arg = call.args[0].value
            if isinstance(arg, cst.ListComp):
                elems = self.evaluate(arg.elt, scope, depth + 1)
                repeat = _range_arg(arg.for_in, scope.module)
                return [_layer_list(e, repeat) for e in elems[:1]] if elems else []
            if isinstance(arg, cst.List) and arg.elements:
                elems = self.evaluate(arg.elements[0].value, scope, depth + 1)
                return [_layer_list(e, str(len(arg.elements))) for e in elems[:1]] if elems else []
        if isinstance(func, cst.Attribute) and func.attr.value in ("tie_weights", "to", "cuda", "npu"):
            return self.evaluate(func.value, scope, depth + 1)
        if (isinstance(func, cst.Attribute) and _is_self(func.value) and scope.owner is not None
                and scope.owner.cls is not None):
            found = self.method(scope.owner.cls, func.attr.value)  # self._init_model(...) builds the backbone
            if found is not None:
                owner_cls, fn = found
                as_def = Definition("function", fn.name.value, owner_cls.module, fn)
                return self._factory(as_def, call, scope, depth, owner=scope.owner, skip_self=True)
        callees = self.evaluate(func, scope, depth + 1) if isinstance(func, (cst.Name, cst.Attribute)) else []
        if callees:
            return [Instance(c.cls, call, scope, c.condition) for c in callees if c.cls is not None]
        target = self.index.resolve_expr(scope.module, func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if isinstance(target, Definition) and target.kind == "function":
            return self._factory(target, call, scope, depth)
        return []

    def _factory(self, fn_def: Definition, call: cst.Call, scope: Scope, depth: int, owner=None,
                 skip_self: bool = False) -> list[Instance]:
        fn = fn_def.node
        inner = Scope(module=fn_def.module, owner=owner)
        bind_params(fn, call, scope, inner, skip_self=skip_self)
        out: list[Instance] = []
        from .conditions import Facts, evaluate

        # Parameters the call leaves at a None default decide some of the factory's branches.
        facts = Facts(none={p: True for p, d in inner.defaults.items()
                            if p not in inner.params and isinstance(d, cst.Name) and d.value == "None"})
        for target, value, cond, _pos in _local_assignments(fn, fn_def.module):
            decided = _decide_text(cond, facts)
            if decided is not False:
                inner.locals.setdefault(target, []).append((value, decided if decided is not True else None))
        for ret, cond in _returns_decided(fn, fn_def.module, facts, evaluate):
            for alt in self.evaluate(ret, inner, depth + 1):
                alt.condition = _join(cond, alt.condition)
                alt.factory = fn_def.qualname
                out.append(alt)
        return _prefer_plain(_dedupe(out))


# -- helpers -------------------------------------------------------------------------------------
def pick(options: list[Instance]) -> Instance | None:
    """Default of conditional constructions: a MoE block where one exists, else the first real module."""
    real = [o for o in options if o.cls is not None and o.cls.name not in ("PPMissingLayer", "Identity")]
    if not real:
        return options[0] if options else None
    # The richest structure is the default (it is what the large checkpoints of a family use); the
    # others stay listed as alternatives with their conditions.
    # (a family name such as BailingMoE... says nothing when every option is an attention class)
    moe = [o for o in real if _MOE_NAME.search(o.cls.name)] if not all("Attention" in o.cls.name for o in real) else []
    mla = [o for o in real if _MLA_NAME.search(o.cls.name)]
    chosen = moe[0] if moe else mla[0] if mla else _prefer_plain(real)[0]
    chosen.alternatives = [o for o in _dedupe(options) if o is not chosen and (o.cls is None or o.cls.qualname != chosen.cls.qualname)]
    return chosen


def _explain(cond: str | None, local_text: dict[str, str]) -> str | None:
    """`is_moe_layer` says little: show what the local flag was computed from."""
    if not cond:
        return cond
    notes = [f"{name} = {' '.join(local_text[name].split())}" for name in re.findall(r"[A-Za-z_]\w*", cond)
             if name in local_text and len(local_text[name]) < 300]
    return f"{cond} [{'; '.join(dict.fromkeys(notes))}]" if notes else cond


def _prefer_plain(options: list[Instance]) -> list[Instance]:
    """A factory's plain product first: the class the taxonomy names (RotaryEmbedding), then the rest."""
    from .taxonomy import taxonomy

    leaves = taxonomy()["classes"]
    plain = [o for o in options if o.cls is not None and o.cls.name in leaves]
    return plain[:1] + [o for o in options if o not in plain[:1]]


def _dedupe(items: list[Instance]) -> list[Instance]:
    seen, out = set(), []
    for i in items:
        key = (i.cls.qualname if i.cls else None, i.condition)
        if key not in seen:
            seen.add(key)
            out.append(i)
    return out


def _layer_list(element: Instance, repeat: str | None) -> Instance:
    return Instance(element.cls, None, None, element.condition, element=element, repeat=repeat)


def _range_arg(for_in, module) -> str | None:
    it = for_in.iter
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range" and it.args:
        return module.code(it.args[-1].value if len(it.args) == 1 else it.args[1].value).strip()
    return None


def _strip_subscript(expr):
    return expr.value if isinstance(expr, cst.Subscript) else expr


def _join(a: str | None, b: str | None) -> str | None:
    if a and b:
        return f"{a} and {b}"
    return a or b


def class_method(cls: Definition, name: str) -> cst.FunctionDef | None:
    if not cls.may_define(name):
        return None
    key = ("class_method", cls.node, name)  # asked for at every step up every MRO
    if key not in cls.module.memo:
        cls.module.memo[key] = _class_method(cls, name)
    return cls.module.memo[key]


def _class_method(cls: Definition, name: str) -> cst.FunctionDef | None:
    body = cls.node.body.body if isinstance(cls.node.body, cst.IndentedBlock) else []
    found = None
    for stmt in body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
            found = stmt  # the last definition wins, as at runtime
        elif isinstance(stmt, cst.If):
            for s in stmt.body.body:
                if isinstance(s, cst.FunctionDef) and s.name.value == name and found is None:
                    found = s
    return found


def bind_params(fn: cst.FunctionDef, call: cst.Call | None, call_scope: Scope | None, scope: Scope, skip_self: bool) -> None:
    params = list(fn.params.posonly_params) + list(fn.params.params)
    if skip_self and params and params[0].name.value in ("self", "cls"):
        params = params[1:]
    kwonly = list(fn.params.kwonly_params)
    for p in params + kwonly:
        if p.default is not None:
            scope.defaults[p.name.value] = p.default
    if call is None or call_scope is None:
        return
    pos = [a for a in call.args if a.keyword is None and not a.star]
    for p, a in zip(params, pos):
        scope.params[p.name.value] = (a.value, call_scope)
    names = {p.name.value for p in params + kwonly}
    for a in call.args:
        if a.keyword is not None and a.keyword.value in names:
            scope.params[a.keyword.value] = (a.value, call_scope)


def _super_init_call(fn: cst.FunctionDef, cls: Definition) -> cst.Call | None:
    key = ("super_init", fn)
    memo = cls.module.memo
    if key not in memo:
        memo[key] = _find_super_init_call(fn)
    return memo[key]


def _find_super_init_call(fn: cst.FunctionDef) -> cst.Call | None:
    for node in iter_nodes(fn, lambda n: isinstance(n, cst.FunctionDef)):  # not into nested functions
        if not isinstance(node, cst.Call):
            continue
        f = node.func
        if isinstance(f, cst.Attribute) and f.attr.value == "__init__":
            v = f.value
            if isinstance(v, cst.Call) and isinstance(v.func, cst.Name) and v.func.value == "super":
                return node
            if isinstance(v, (cst.Name, cst.Attribute)) and node.args and _is_self(node.args[0].value):
                return node.with_changes(args=node.args[1:])
    return None


def _memo(what: str):
    """Cache a function of (fn node, module) on the module: __init__ bodies are read once per name asked."""
    def wrap(read):
        def cached(fn, module):
            key = (what, fn)
            found = module.memo.get(key)
            if found is None:
                found = module.memo[key] = read(fn, module)
            return found
        cached.__doc__ = read.__doc__
        return cached
    return wrap


def _small_statements(fn: cst.FunctionDef, module):
    """(position, condition, small statement) through the blocks of a function body, as _walk_stmts counts."""
    for pos, (stmt, cond) in enumerate(_walk_stmts(fn.body.body, module)):
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                yield pos, cond, small


@_memo("self_calls")
def _self_calls(fn: cst.FunctionDef, module) -> list:
    """(position, call) of each `self.<method>(...)` expression statement, through the blocks of fn."""
    out = []
    for pos, _cond, small in _small_statements(fn, module):
        call = small.value if isinstance(small, cst.Expr) else None
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and _is_self(call.func.value):
            out.append((pos, call))
    return out


@_memo("container_fills")
def _container_fills(fn: cst.FunctionDef, module) -> dict:
    """name -> [(position, condition, value)] of `self.<name>.append(value)` and `self.<name>[k] = value`."""
    out: dict = {}
    for pos, cond, small in _small_statements(fn, module):
        target = value = None
        if (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and small.value.args
                and isinstance(small.value.func, cst.Attribute) and small.value.func.attr.value == "append"):
            target, value = small.value.func.value, small.value.args[0].value
        elif isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Subscript):
            target, value = small.targets[0].target.value, small.value
        if isinstance(target, cst.Attribute) and _is_self(target.value):
            out.setdefault(target.attr.value, []).append((pos, cond, value))
    return out


def _function_imports(module) -> dict[str, tuple[str, str]]:
    """Names bound by `from m import X` anywhere in the module (the first binding of a name wins): module-level
    names were tried before this, so what is left are imports inside functions."""
    key = ("function_imports", None)
    found = module.memo.get(key)
    if found is None:
        from ..index.modules import all_import_from_bindings

        found = {}
        for bound, where in all_import_from_bindings(module):
            found.setdefault(bound, where)
        module.memo[key] = found
    return found


def _is_self(expr) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "self"


def _walk_stmts(body, module, cond=None):
    """Yield (stmt, condition) through if/else/try/with/for blocks of a function body."""
    for stmt in body:
        yield stmt, cond
        if isinstance(stmt, cst.If):
            test = module.code(stmt.test).strip()
            yield from _walk_stmts(stmt.body.body, module, _join(cond, test))
            orelse, neg = stmt.orelse, f"not ({test})"
            while orelse is not None:
                if isinstance(orelse, cst.If):
                    t2 = module.code(orelse.test).strip()
                    yield from _walk_stmts(orelse.body.body, module, _join(cond, f"{neg} and {t2}"))
                    neg = f"{neg} and not ({t2})"
                    orelse = orelse.orelse
                else:
                    yield from _walk_stmts(orelse.body.body, module, _join(cond, neg))
                    orelse = None
        elif isinstance(stmt, (cst.With, cst.For, cst.While)):
            yield from _walk_stmts(stmt.body.body, module, cond)
        elif isinstance(stmt, cst.Try):
            yield from _walk_stmts(stmt.body.body, module, cond)


@_memo("assignments")
def _assignments(fn: cst.FunctionDef, module):
    """(target expr, value, condition, statement position) of every assignment in a function body;
    tuple targets yield each element (a, b, self.layers = make_layers(...))."""
    out = []
    for pos, (stmt, cond) in enumerate(_walk_stmts(fn.body.body, module)):
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                targets = [small.target]
            else:
                continue
            for t in targets:
                for el in ([e.value for e in t.elements] if isinstance(t, (cst.Tuple, cst.List)) else [t]):
                    out.append((el, small.value, cond, pos))
    return out


def _self_assignments(fn: cst.FunctionDef, name: str, module) -> list[tuple]:
    return list(_self_assignment_table(fn, module).get(name, ()))


@_memo("self_assignments")
def _self_assignment_table(fn: cst.FunctionDef, module) -> dict:
    """name -> [(value, condition, position)] of each `self.<name> = value` in fn (asked for name by name)."""
    out: dict = {}
    for t, v, c, p in _assignments(fn, module):
        if isinstance(t, cst.Attribute) and _is_self(t.value):
            out.setdefault(t.attr.value, []).append((v, c, p))
    return out


@_memo("local_assignments")
def _local_assignments(fn: cst.FunctionDef, module):
    # Only plain `x = ...` locals: a tuple-unpacked local is a runtime value, not a constructor.
    out, nested = [], []
    for pos, (stmt, cond) in enumerate(_walk_stmts(fn.body.body, module)):
        if isinstance(stmt, cst.FunctionDef):
            # a nested layer factory: make_layers(n, get_layer) with `def get_layer(prefix): return Layer(...)`
            rets = _returns(stmt, module)
            if rets and isinstance(rets[0][0], cst.Call):
                out.append((stmt.name.value, cst.Lambda(params=cst.Parameters(), body=rets[0][0]), cond, pos))
            # its own locals (`layer_class = A if is_attn else B; return layer_class(...)`) resolve that call
            nested += [(t, v, _join(cond, c), pos) for t, v, c, _p in _local_assignments(stmt, module)]
            continue
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign):
                    out += [(t.target.value, small.value, cond, pos) for t in small.targets if isinstance(t.target, cst.Name)]
                elif isinstance(small, cst.AnnAssign) and small.value is not None and isinstance(small.target, cst.Name):
                    out.append((small.target.value, small.value, cond, pos))
    outer = {t for t, *_ in out}
    return out + [n for n in nested if n[0] not in outer]


@_memo("returns")
def _returns(fn: cst.FunctionDef, module):
    out = []
    for stmt, cond in _walk_stmts(fn.body.body, module):
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Return) and small.value is not None:
                    out.append((small.value, cond))
    return out


def _decide_text(cond: str | None, facts) -> str | bool | None:
    """Drop conjuncts `p is None` / `p is not None` that the facts decide; False if one is false."""
    if not cond:
        return None
    kept = []
    for part in cond.split(" and "):
        m = re.fullmatch(r"\(?(not \()?(\w+) is (not )?None\)?\)?", part.strip())
        if m and m.group(2) in facts.none:
            value = facts.none[m.group(2)]
            if m.group(3):
                value = not value
            if m.group(1):
                value = not value
            if not value:
                return False
            continue
        kept.append(part)
    return " and ".join(kept) if kept else True


def _returns_decided(fn, module, facts, evaluate):
    """Return statements with their path condition; branches the facts decide are dropped or implied."""
    out = []

    def visit(body, cond):
        for stmt in body:
            if isinstance(stmt, cst.If):
                value = evaluate(stmt.test, module, facts)
                test = module.code(stmt.test).strip()
                if value is not False:
                    visit(stmt.body.body, cond if value else _join(cond, test))
                if stmt.orelse is not None and value is not True:
                    neg = cond if value is False else _join(cond, f"not ({test})")
                    visit([stmt.orelse] if isinstance(stmt.orelse, cst.If) else stmt.orelse.body.body, neg)
            elif isinstance(stmt, (cst.With, cst.For, cst.While, cst.Try)):
                visit(stmt.body.body, cond)
            elif isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Return) and small.value is not None:
                        out.append((small.value, cond))

    visit(fn.body.body, None)
    return out
