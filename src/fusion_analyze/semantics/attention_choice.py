"""The attention backend the runtime selects for a layer, decided by running the platform's own selector with
the evaluator, as vllm-ascend's MoE comm method is (runtime_choice.py): vLLM's `get_attn_backend(...)` call in
the layer's `__init__` (`use_mla=True, use_sparse=use_sparse`, read where the layer was built: DeepSeek-V3.2's
`hasattr(config, "index_topk")`) builds the selector's configuration (`AttentionSelectorConfig(...)` in the
tree's `get_attn_backend`, with the deployment's `vllm_config`), and the platform's `get_attn_backend_cls`
(vllm-ascend's `NPUPlatform`, walk.yaml `runtime.platform`) returns the backend's qualified name. Its
`get_impl_cls()` names the implementation the walk reads op by op.

Nothing is guessed: where a test of the selector is not decided (no configuration: whether the model has an
indexer), every backend it may return is an alternative; where the platform has no selector the tool can run
(CUDA's picks by validity and priority across backends), walk.yaml `attention_backend.classes` is the fallback,
and the choice says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from ..index.facts import FactTable
from ..ir.texts import say
from .function_bodies import class_method, tables
from .scope import Scope, bind_params
from .values import ClassRef, Known, OneOf, Unknown, Value, literal


@dataclass(frozen=True)
class BackendChoice:
    """The backend class(es) the selector returns for one layer's `get_attn_backend(...)` call."""

    classes: tuple  # index.Definition: one (decided) or the alternatives the selector's open tests leave
    selector: str | None  # "vllm_ascend/platform.py:247 NPUPlatform.get_attn_backend_cls" where it was run
    inputs: dict = field(default_factory=dict)  # the selector configuration's fields it read, as written
    why: str = ""  # where not decided or not run: what was not known
    # where the model's own construction names the backend instead (`backend_enum.get_class()`: "file:line
    # code"): the layer is handed that class (`attn_backend=`) and runs no selector
    passed: str = ""

    @property
    def decided(self) -> bool:
        return (self.selector is not None or bool(self.passed)) and len(self.classes) == 1

    def value(self) -> Value:
        refs = [Known(Selected(c, self)) for c in self.classes]
        if not refs:
            return Unknown(self.why or "no attention backend class")
        return refs[0] if len(refs) == 1 else OneOf(tuple(refs))

    def to_json(self) -> dict:
        return {"classes": [c.qualname for c in self.classes], "selector": self.selector,
                "inputs": dict(self.inputs), "why": self.why, "passed": self.passed}


class Selected(ClassRef):
    """A backend class the selector returned, with the choice it came from (the report says how it was chosen)."""

    __slots__ = ("choice",)

    def __init__(self, definition, choice: BackendChoice) -> None:
        super().__init__(definition)
        self.choice = choice


def member_class(evaluator, member, method: str, call: cst.Call, scope) -> Value | None:
    """`<Enum>.<member>.get_class()` (walk.yaml `attention_backend.member_class`) of a member of a backend enum
    of the trees: the class at the path its value names, or the one the trees register for it
    (`register_backend(<Enum>.<member>[, class_path])`, as a call or a class decorator; only vLLM's and the
    walked platform's plugin's registrations load). The value carries where the code names it (BackendChoice
    `passed`): a layer handed it runs no selector. Unknown where the registrations disagree or the path names
    no class of the trees; None where `method` is not that method."""
    from ..catalog import catalog

    spec = catalog().typed.walk.runtime.attention_backend
    index = evaluator.env.index
    if spec is None or not spec.member_class or method != spec.member_class or index is None:
        return None
    shown = f"{member.enum.name}.{member.member}"
    found = _registered(index, spec, member.enum, evaluator.env.backend).get(member.member, [])
    paths = list(dict.fromkeys(p for p, _w in found))
    if len(paths) > 1 or None in paths:
        return Unknown(say("attention_member_registered", member=shown,
                           where=", ".join(f"{w} ({p or '?'})" for p, w in found)))
    path = paths[0] if paths else str(member)
    cls = _class(index, path) if path else None
    if cls is None:
        return Unknown(f"{shown}: {path or '-'} is not a class of the trees")
    module = getattr(scope, "module", None)
    at = f"{module.rel}:{module.line_of(call)} {module.code(call).strip()}" if module is not None else shown
    why = say("attention_member_class", member=shown, cls=cls.name,
              how=say("attention_member_override", where=found[0][1]) if found else say("attention_member_value"))
    return Known(Selected(cls, BackendChoice((cls,), None, {}, why, passed=at)))


def _registered(index, spec, enum, backend: str | None) -> dict:
    """member name -> [(the class path registered for it, or None where not read, "file:line")] of the
    registrations of `enum`'s members in the enum's own package and the walked platform's plugin package."""
    from ..catalog import catalog

    platform_q = (catalog().typed.walk.runtime.platform or {}).get(backend or "") or ""
    packages = tuple(sorted({enum.module.name.split(".")[0], *([platform_q.split(".")[0]] if platform_q else [])}))
    return _REGISTERED.get(index, (enum.qualname, spec.register, packages),
                           lambda: _scan_registered(index, spec, enum, packages))


def _scan_registered(index, spec, enum, packages: tuple) -> dict:
    from ..index.nodes import find_all
    from .signatures import bind_arguments, call_arguments

    out: dict = {}
    needle = f"{spec.register}(".encode()
    for package in packages:
        tree = index.trees.get(package)
        for path in sorted(tree.package_dir.rglob("*.py")) if tree is not None else ():
            try:
                if needle not in path.read_bytes():  # (reading every file costs less than parsing one)
                    continue
            except OSError:
                continue
            name = index.module_name_for(path)
            info = index.get(name) if name else None
            if info is None:
                continue
            for stmt in info.nodes_with(needle):
                decorated = {id(d.decorator): stmt for d in getattr(stmt, "decorators", ())
                             if type(stmt) is cst.ClassDef}
                for call in find_all(stmt, cst.Call):
                    target = index.resolve_expr(info, call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
                    fn = getattr(target, "node", None) if getattr(target, "kind", None) == "function" else None
                    if not isinstance(fn, cst.FunctionDef) or fn.name.value != spec.register:
                        continue
                    args, keywords = call_arguments(call)
                    bound = dict(bind_arguments(fn, args, keywords, skip_self=False))
                    params = [p.name.value for p in fn.params.params]
                    member = bound.get(params[0]) if params else None
                    if not isinstance(member, cst.Attribute):
                        continue
                    owner = index.resolve_expr(info, member.value)
                    if getattr(owner, "kind", None) != "class" or getattr(owner, "qualname", None) != enum.qualname:
                        continue
                    given = bound.get(spec.register_path or "")
                    value = literal(given) if given is not None else None
                    if value is not None and isinstance(value.value, str):
                        registered = value.value
                    elif given is None and id(call) in decorated:  # the decorated class itself
                        registered = f"{info.name}.{decorated[id(call)].name.value}"
                    else:
                        registered = None
                    out.setdefault(member.attr.value, []).append((registered, f"{info.rel}:{info.line_of(call)}"))
    return out


_REGISTERED = FactTable("attention_registered", "(enum, register function, packages) -> {member: [(class path, "
                                                "file:line)]} of the trees' registrations of its members")


def select_backend(env, evaluator, call: cst.Call, scope, spec) -> BackendChoice | None:
    """The platform selector run for the `get_attn_backend(...)` call `call` (read in `scope`); None where the
    tree has no selector this tool runs (the caller falls back to walk.yaml's table)."""
    from ..catalog import catalog

    index = env.index
    platform_q = (catalog().typed.walk.runtime.platform or {}).get(env.backend or "")
    if index is None or not platform_q or not spec.selector:
        return None
    mod, _, name = platform_q.rpartition(".")
    platform = index.lookup(mod, name)
    if getattr(platform, "kind", None) != "class":
        return None
    method = _method(evaluator, platform, spec.selector)
    if method is None:
        return None
    owner, fn = method
    module = getattr(scope, "module", None)
    entry = index.resolve_expr(module, call.func) if module is not None else None
    config, backend, heads = _selector_config(env, evaluator, entry, call, scope, spec)
    # the selector sees only these values (and the platform): a layer list's every layer asks it the same
    key = ("select_backend", id(platform), id(fn), repr(config), repr(backend), repr(heads))
    memo = getattr(evaluator, "decided_calls", None)
    kept = memo.get(key) if memo is not None else None
    if kept is not None and kept[0] is fn and kept[1] is platform and getattr(evaluator.attrs, "reads", None) is None:
        return kept[2]
    choice = _run_selector(evaluator, index, platform, owner, fn, spec, config, backend, heads)
    if memo is not None:
        memo[key] = (fn, platform, choice)
    return choice


def _run_selector(evaluator, index, platform, owner, fn, spec, config, backend, heads) -> BackendChoice:
    """The platform's selector method run on the selector configuration's fields, the backend asked for
    and the head count."""
    inner = Scope(module=owner.module, values={"cls": Known(ClassRef(platform)), "selected_backend": backend,
                                                "attn_selector_config": Known(config), "num_heads": heads})
    for p in fn.params.params:
        if p.name.value not in inner.values and p.default is not None:
            inner.defaults[p.name.value] = p.default
    table = tables(fn, owner.module)
    for local, value, cond, _pos in table.local_assignments:
        inner.locals.setdefault(local, []).append((value, cond))
    from .values import Bindings

    returns = table.returns_decided(Bindings(), evaluator, inner)
    where = f"{owner.module.rel}:{owner.module.line_of(fn)} {owner.name}.{spec.selector}"
    read = {k: repr(v) if not isinstance(v, Unknown) else "?" for k, v in config.items()
            if k in _names_read(fn, owner, evaluator)}
    classes, open_ = [], []
    # the return that runs when no test before it holds first (the general path), then the earlier returns
    # under tests not decided (a device family, a training mode): the first is what the walk reads
    before, final = _general_first(returns)
    for expr, cond in final + before:
        got = evaluator.infer(expr, inner)
        names = [got.value] if isinstance(got, Known) else _table_entries(evaluator, expr, inner)
        if not names or not all(isinstance(n, str) for n in names):
            open_.append(getattr(got, "why", "") or owner.module.code(expr).strip())
        for qualname in names:
            cls = _class(index, qualname) if isinstance(qualname, str) else None
            if cls is not None and cls not in classes:
                classes.append(cls)
            elif cls is None and isinstance(qualname, str):
                open_.append(f"{qualname} is not a class of the trees")
        if not isinstance(got, Known):
            open_.append(say("attention_key_open", expr=owner.module.code(expr).strip(),
                             fields=", ".join(k for k, v in read.items() if v == "?") or "-"))
        if cond is not None:
            open_.append(str(cond))
    why = "; ".join(dict.fromkeys(open_)) if len(classes) != 1 or open_ else ""
    return BackendChoice(tuple(classes), where, read, why)


def impl_of(evaluator, backend) -> tuple:
    """(the implementation class a backend names, the others it may name, what is not decided): what its
    `get_impl_cls()` returns, run with the evaluator (`get_current_vllm_config()` the deployment's,
    `get_ascend_config()` its defaults). A return under a test that is not decided (AscendSFABackend's
    sparse KV offload, set by a factory at start-up) is one of the others; the first is the return that runs
    when no such test holds (`resolve_sfa_impl(...)`: AscendSFAImpl without context parallelism)."""
    found = _method(evaluator, backend, "get_impl_cls")
    if found is None:
        return None, (), ""
    owner, fn = found
    from ..catalog import catalog

    spec = catalog().typed.walk.runtime.attention_backend
    config = Known(_vllm_config(evaluator.env, spec)) if spec is not None else Unknown("no vllm_config")
    runs = type(evaluator)(evaluator.env, evaluator.attrs, calls={"get_current_vllm_config": lambda _c, _s: config})
    scope = Scope(module=owner.module, values={"cls": Known(ClassRef(backend))})
    got = _returned_classes(runs, owner.module, fn, scope, 0)
    classes = [c for c, _w in got if c is not None]
    why = "; ".join(dict.fromkeys(w for _c, w in got if w))
    return (classes[0] if classes else None), tuple(classes[1:]), why


def _returned_classes(runs, module, fn, scope, depth: int) -> list:
    """[(class or None, why it may not run)] of what `fn` returns: the return that runs where no test before
    it holds, then those under tests not decided. A name or a function imported inside the function is
    followed (`from ... import resolve_sfa_impl`); a function called is run the same way, its arguments bound."""
    from .function_bodies import function_imports
    from .values import Bindings

    table = tables(fn, module)
    for local, value, cond, _pos in table.local_assignments:
        scope.locals.setdefault(local, []).append((value, cond))
    before, final = _general_first(table.returns_decided(Bindings(), runs, scope))
    out: list = []
    index = module._index
    for expr, cond in final + before:
        why = str(cond) if cond is not None else ""
        got = runs.infer(expr, scope)
        if isinstance(got, Known) and isinstance(got.value, ClassRef):
            out.append((got.value.definition, why))
            continue
        head = expr.func if type(expr) is cst.Call else expr
        where = function_imports(module).get(head.value) if type(head) is cst.Name else None
        target = index.lookup(*where) if where else index.resolve_expr(module, head)
        if getattr(target, "kind", None) == "class" and head is expr:
            out.append((target, why))
        elif getattr(target, "kind", None) == "function" and type(expr) is cst.Call and depth < 3:
            inner = Scope(module=target.module)
            bind_params(target.node, expr, scope, inner, skip_self=False)
            out += [(c, " and ".join(x for x in (why, w) if x)) for c, w in
                    _returned_classes(runs, target.module, target.node, inner, depth + 1)]
        else:
            out.append((None, getattr(got, "why", "") or module.code(expr).strip()))
    return out


def _general_first(returns: list) -> tuple[list, list]:
    """(the returns under tests not decided, [the general one]): the first that surely runs, else the last (the
    fall-through when no earlier test holds: `if offload: return A` then `return B`), cut after it."""
    for n, (expr, cond) in enumerate(returns):
        if cond is None:
            return returns[:n], [(expr, None)]
    return (returns[:-1], returns[-1:]) if returns else ([], [])


def _table_entries(evaluator, expr, scope) -> list:
    """`table[key]` / `table.get(key, default)` of a known dict whose key tuple is known only in part
    (`backend_map[(use_mla, use_sparse, use_compress)]` with use_sparse open): the values of the entries whose
    keys agree with the known items (and the default), in the table's order; [] where that is not so."""
    default = None
    if type(expr) is cst.Subscript and len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index:
        table, key = expr.value, expr.slice[0].slice.value
    elif (type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value == "get"
          and 1 <= len(expr.args) <= 2):
        table, key = expr.func.value, expr.args[0].value
        default = expr.args[1].value if len(expr.args) == 2 else None
    else:
        return []
    got = evaluator.infer(table, scope)
    parts = _key_parts(evaluator, key, scope, 0)
    if not (isinstance(got, Known) and isinstance(got.value, dict)) or parts is None:
        return []
    out = [v for k, v in got.value.items() if isinstance(k, tuple) and len(k) == len(parts)
           and all(not isinstance(p, Known) or p.value == item for p, item in zip(parts, k))]
    if default is not None:
        d = evaluator.infer(default, scope)
        out += [d.value] if isinstance(d, Known) else []
    return out


def _key_parts(evaluator, expr, scope, depth: int) -> list | None:
    """The items of a key tuple as Values (`(*key, use_compress)` spread), following a local assigned once."""
    if depth > 4:
        return None
    if type(expr) is cst.Name and len(scope.locals.get(expr.value, ())) == 1 and not scope.locals[expr.value][0][1]:
        return _key_parts(evaluator, scope.locals[expr.value][0][0], scope, depth + 1)
    if type(expr) is not cst.Tuple:
        return None
    out: list = []
    for e in expr.elements:
        if type(e) is cst.StarredElement:
            inner = _key_parts(evaluator, e.value, scope, depth + 1)
            if inner is None:
                return None
            out += inner
        else:
            out.append(evaluator.infer(e.value, scope))
    return out


def _selector_config(env, evaluator, entry, call, scope, spec) -> tuple[dict, Value, Value]:
    """(the selector configuration's fields, the selected backend, num_heads) as the tree's `get_attn_backend`
    builds them for `call`: its `<spec.config>(...)` call's keywords read with the call's arguments bound to
    its parameters and `vllm_config` the deployment's; a field it does not set is the class's default."""
    index = env.index
    fields: dict = {}
    fn = entry.node if getattr(entry, "kind", None) == "function" else None
    if fn is None:
        return fields, Unknown("no get_attn_backend in the trees"), Unknown("num_heads")
    inner = Scope(module=entry.module)
    bind_params(fn, call, scope, inner, skip_self=False)
    for local, value, cond, _pos in tables(fn, entry.module).local_assignments:
        inner.locals.setdefault(local, []).append((value, cond))
    inner.values["vllm_config"] = Known(_vllm_config(env, spec))
    built = None
    for node in _calls(fn):
        target = index.resolve_expr(entry.module, node.func)
        if getattr(target, "kind", None) == "class" and target.name == spec.config:
            built = (node, target)
            break
    if built is not None:
        node, cls = built
        from .runtime_defaults import _declared

        for c in [cls]:
            for name, default in _declared(c).items():
                if default is not None:
                    fields[name] = _raw(evaluator.infer(default, Scope(module=c.module)))
        for arg in node.args:
            if arg.keyword is not None:
                fields[arg.keyword.value] = _raw(evaluator.infer(arg.value, inner))
    backend = evaluator.infer(cst.Name("backend"), inner) if "backend" in inner.locals else Known(None)
    heads = evaluator.infer(cst.Name("num_heads"), inner)
    return fields, backend, heads


def _vllm_config(env, spec) -> dict:
    """The deployment's `vllm_config` (ir/deployment.py); the parts of it the deployment does not state that
    the selector's configuration reads (the attention and cache configuration) are their classes' declared
    defaults (walk.yaml `attention_backend.vllm_config`: attribute -> class)."""
    from ..ir.deployment import Deployment
    from .values import Defaults

    d = env.deployment if env.deployment is not None else Deployment()
    out = dict(d.vllm_config(None))
    for key, qualname in (spec.vllm_config or {}).items():
        mod, _, name = str(qualname).rpartition(".")
        cls = env.index.lookup(mod, name)
        if key not in out and getattr(cls, "kind", None) == "class":
            out[key] = Defaults(cls, {})
    return out


def _raw(value: Value):
    return value.value if isinstance(value, Known) else value if isinstance(value, Unknown) else Unknown("open")


def _calls(fn):
    """The calls of `get_attn_backend`, found once (every attention layer's selector reads them)."""
    from ..index.nodes import find_all

    kept = _CALLS.get(id(fn))
    if kept is None or kept[0] is not fn:
        kept = _CALLS[id(fn)] = (fn, find_all(fn, cst.Call))
    return kept[1]


_CALLS: dict = {}  # id(function) -> (the function, its calls): the trees do not change


def _names_read(fn, owner, evaluator) -> set[str]:
    """The selector configuration's fields the selector (and what it calls) reads: `attn_selector_config.x`."""
    text = owner.module.code(fn)
    import re

    return set(re.findall(r"attn_selector_config\.(\w+)", text)) | set(
        re.findall(r"getattr\(attn_selector_config,\s*\"(\w+)\"", text))


def _method(evaluator, cls, name):
    """(class of the MRO that defines it, its FunctionDef) of `cls.name`."""
    mro = evaluator.attrs.mro(cls) if evaluator.attrs is not None else [cls]
    for c in mro:
        fn = class_method(c, name)
        if fn is not None:
            return c, fn
    return None


def _class(index, qualname: str):
    mod, _, name = qualname.rpartition(".")
    got = index.lookup(mod, name)
    return got if getattr(got, "kind", None) == "class" else None


@dataclass(frozen=True)
class Chosen:
    """What an attention layer runs: the backend selected and its implementation; `others`: the (backend,
    implementation) pairs the selector may return instead where its tests are not decided."""

    backend: Any  # index.Definition
    impl: Any  # index.Definition of get_impl_cls(); None where it names no class of the trees
    choice: BackendChoice
    others: tuple = ()
    impl_why: str = ""  # the tests of get_impl_cls() not decided, where it may name another class
    open: str = ""  # where the layer may hold another backend, not decided (an option of its value not known)

    def to_attrs(self) -> dict:
        """The op's `attention_backend` (the report's JSON; markdown names it in the deployment line)."""
        from ..ir.texts import joined, say

        c = self.choice
        fn = c.selector.split(" ", 1)[-1] + "()" if c.selector else None
        impl = self.impl.name if self.impl is not None else "?"
        if c.passed:
            why = say("attention_passed", at=c.passed, cls=self.backend.name, why=c.why or "-", impl=impl)
        elif c.selector is None:
            why = c.why
        elif c.decided:
            why = say("attention_selected", fn=fn, cls=self.backend.name, impl=impl,
                      inputs=", ".join(f"{k}={v}" for k, v in sorted(c.inputs.items())) or "-")
        else:
            why = say("attention_not_decided", fn=fn, why=c.why or "-",
                      classes=", ".join(b.name for b, _i in ((self.backend, self.impl), *self.others)))
        if self.open:
            why = joined([why, self.open], "; ")
        out = {"backend": self.backend.qualname, "impl": impl, "impl_file": self.impl.module.rel if self.impl is not None
               else None, "selector": c.selector, "decided": c.decided and not self.open, "why": why}
        if c.passed:
            out["passed_by"] = c.passed
        if self.open:
            out["open"] = True
        if self.others:
            out["alternatives"] = [{"backend": b.qualname, "impl": i.name if i is not None else None}
                                   for b, i in self.others]
        return out


def chosen_of(evaluator, value: Value, attr: str = "attn_backend") -> Chosen | None:
    """The Chosen of a layer's `self.attn_backend` value (one Selected class, or a OneOf of them: the first
    is what the walk reads, the others are listed; an option not known makes the choice open, said); None
    where it holds no selected class. A plain class the construction hands the layer (not through
    `member_class`) is taken as passed there."""
    options = [value] if isinstance(value, Known) else list(getattr(value, "options", ()))
    picked = [o.value if isinstance(o.value, Selected) else
              Selected(o.value.definition, BackendChoice((o.value.definition,), None, {}, "", passed=attr))
              for o in options if isinstance(o, Known) and isinstance(o.value, ClassRef)]
    if not picked:
        return None
    open_ = [str(getattr(o, "reason", "") or o) for o in options
             if not (isinstance(o, Known) and isinstance(o.value, ClassRef))]
    pairs = [(s.definition, impl_of(evaluator, s.definition)) for s in picked]
    (backend, (impl, others, why)), rest = pairs[0], pairs[1:]
    # the backends the selector may return instead, then the implementations this backend may name instead
    alts = tuple((b, i[0]) for b, i in rest) + tuple((backend, o) for o in others)
    opened = say("attention_value_partly_open", attr=f"self.{attr}", why="; ".join(dict.fromkeys(open_))) if open_ else ""
    return Chosen(backend, impl, picked[0].choice, alts, why, opened)
