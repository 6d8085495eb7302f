"""The load-time rewrites of vLLM's Transformers modeling backend, done to the Hugging Face classes the walk
meets (patterns/catalog/hf_fusers.yaml).

The backend builds the Hugging Face model, then `recursive_replace` (models/transformers/base.py) swaps its
modules: the fusers of fuser.py `FUSERS` rewrite a module's forward in source (GLU: `act(gate(x)) * up(x)` ->
`act(gate_up(x))`; QKV: three projections -> one merged GEMM split in three; the attention interface -> the
vLLM attention layer) and give it vLLM layers; an RMSNorm found from its dataflow becomes vLLM's; every other
`nn.Linear` becomes the tensor-parallel class the model's tp_plan names. This module does the same with libcst:
`plan()` says what a class becomes, `swap()` answers `self.<name>` for the Constructor, `forward()` gives the
Walker the rewritten forward, whose new nodes report the lines of the code they replace."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from ...catalog import catalog
from ...catalog.schema import AttentionFuser, GluFuser, PackedQkvFuser, QkvFuser, RmsNormFuser
from ...index.modules import Definition
from ...index.nodes import find_all
from .rewrites import Rewrites, _Replace, _callee, _self_call
from ...semantics.function_bodies import class_method, tables
from ...semantics.scope import Scope
from ...semantics.values import ClassRef, Known, literal
from ...ir.conditions import Condition, Truth
from ...ir.texts import say


@dataclass
class Plan:
    fn: cst.FunctionDef | None = None  # the forward as the fusers leave it; None: unchanged
    attrs: dict = field(default_factory=dict)  # self.<name> -> (vLLM class qualname, fuser)
    applied: list = field(default_factory=list)  # (fuser, what it did) for the report
    aliases: dict = field(default_factory=dict)  # node the rewrite built -> the node whose line it reports
    keywords: dict = field(default_factory=dict)  # self.<name> an interface call became -> the keywords it passed


class LoadTime(Rewrites):
    def __init__(self, ctor):
        self.ctor = ctor
        self.index = ctor.index
        self.spec = catalog().typed.hf_fusers
        self._plans: dict = {}
        self._norms: dict = {}
        self._tree_fusers: list | None = None
        self._styles: dict | None = None
        self._tp_plan: dict | None = None
        self.used = False  # a Hugging Face class was met
        self.root: str | None = None  # the backend class the walk starts from (TransformersForCausalLM, ...)
        self.root_instance = None  # its instance, the `self` of the backend's methods (walker.walk_model)
        self.moe_blocks: list = []  # MoE blocks whose experts MoEMixin replaced
        self._memo: dict = {}

    # -- what the tree has -------------------------------------------------------------------------
    def applies(self, cls) -> bool:
        return cls is not None and cls.module.name.split(".")[0] == self.spec.package

    def tree_fusers(self) -> list[str]:
        """The fuser classes `FUSERS` lists, in its order."""
        if self._tree_fusers is None:
            reg = self.spec.registry
            found = self.index.lookup(reg.module, reg.table)
            node = found.node if isinstance(found, Definition) and found.kind == "assign" else None
            self._tree_fusers = [e.value.value for e in node.elements if type(e.value) is cst.Name] \
                if isinstance(node, (cst.Tuple, cst.List)) else []
        return self._tree_fusers

    def where(self, fuser: str) -> str:
        """`GLUFuser (file:line)`: a fuser named with its class's place in the tree."""
        found = self.index.lookup(self.spec.registry.module, fuser)
        return f"{fuser} ({found.module.rel}:{found.line})" if isinstance(found, Definition) else fuser

    def active(self) -> list[str]:
        """The fusers this tree's backend applies: its FUSERS, else what an older backend does without one."""
        return self.tree_fusers() or list(self.spec.without_registry.rewrites)

    def modelled(self, fuser: str) -> bool:
        return fuser in self.spec.fusers and fuser in self.active()

    def not_modelled(self) -> list[str]:
        return [f for f in self.tree_fusers() if f not in self.spec.fusers]

    def _class(self, dotted: str):
        module, _, name = dotted.rpartition(".")
        found = self.index.lookup(module, name)
        return found if isinstance(found, Definition) and found.kind in ("class", "function") else None

    # -- the layer the attention interface runs --------------------------------------------------------
    def _built_by_backend(self, inst, name: str, cls, plan: Plan) -> tuple:
        """(call, scope) that build the vLLM layer an interface call became, as the backend builds it
        (hf_fusers.yaml AttentionFuser `built_in`: `attn_cls(**kwargs)` in Base._create_attention_instances), so
        that its `self.x` are read with its arguments: the keywords the method collects in `kwargs` (`dict(...)`,
        `kwargs.update(...)`, `kwargs["k"] = v`), each under its tests, read with the model instance as `self`
        and the call's name bound to the class built. A test the values decide keeps or drops its keyword; one
        they do not passes `value if test else <the parameter's literal default, or not known>`. A fuser method
        of `keyword_methods` returns None where the module's interface call passes no such keyword. (None, None)
        where the method is not there or not of that form."""
        spec = next((f for f in self.spec.fusers.values() if isinstance(f, AttentionFuser)), None)
        index_attr = spec.layer_index if spec is not None else None
        layer = self.ctor.self_value(inst, index_attr, self.ctor.evaluator) if index_attr else None
        layer = layer if isinstance(layer, Known) and type(layer.value) is int else None
        key = (inst.cls.qualname, name, cls.qualname, layer.value if layer is not None else None)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = (None, None)
        owner, _, method = ((spec.built_in if spec is not None else None) or "").rpartition(".")
        module, _, cls_name = owner.rpartition(".")
        holder = self.index.lookup(module, cls_name) if module else None
        if spec is None or not isinstance(holder, Definition) or holder.kind != "class" or self.root_instance is None:
            return self._memo[key]
        fn = class_method(holder, method)
        if fn is None:
            return self._memo[key]
        table = tables(fn, holder.module)
        calls = [c for c in find_all(fn, cst.Call) if type(c.func) is cst.Name and len(c.args) == 1
                 and c.args[0].star == "**" and type(c.args[0].value) is cst.Name]
        if len(calls) != 1:
            return self._memo[key]
        call = calls[0]
        kwargs, func = call.args[0].value.value, call.func.value
        scope = Scope(module=holder.module, owner=self.root_instance)
        for local, value, cond, _pos in table.local_assignments:
            scope.locals.setdefault(local, []).append((value, cond))
        scope.values[func] = Known(ClassRef(cls))  # `attn_cls`: the class this interface call became
        loop = next((f for f in find_all(fn, cst.For) if any(c is call for c in find_all(f, cst.Call))), None)
        if layer is not None and loop is not None and type(loop.target) is cst.Name:
            scope.values[loop.target.value] = layer  # `for i in ...: self.attention_fusers[i]`: this module's layer
        scope.version += 1
        passed = plan.keywords.get(name, frozenset())
        unset = {m for m, kw in (spec.keyword_methods or {}).items() if kw not in passed}
        entries = _collected(table, kwargs)
        if entries is None:
            return self._memo[key]
        given: dict = {}
        for word, value, cond in entries:
            terms = [_without_methods(t, unset) for t in (cond.terms if cond is not None else ())]
            truth = Truth.TRUE
            for t in terms:
                truth = truth.and_(self.ctor.evaluator.term_truth(t, scope=scope))
            value = _without_methods_expr(value, unset)
            if truth is Truth.TRUE:
                given[word] = (value, scope)
            elif truth is Truth.UNKNOWN:
                test = _conjunction([t for t in terms if t.expr is not None])
                given[word] = (cst.IfExp(test=test, body=value, orelse=self._default_node(cls, word)), scope)
        scope.star_kwargs[kwargs] = given
        self._memo[key] = (call, scope)
        return self._memo[key]

    def _default_node(self, cls, word: str) -> cst.BaseExpression:
        """The literal default of `cls.__init__`'s parameter `word` (what the layer holds where the keyword is
        not passed), else a name nothing binds: not known."""
        from ...semantics.signatures import signature

        for c in self.ctor.mro(cls):
            init = class_method(c, "__init__")
            if init is None:
                continue
            positional, kwonly = signature(init, True)
            for p in positional + kwonly:
                if p.name.value == word and p.default is not None and literal(p.default) is not None:
                    return p.default
            break
        return cst.Name("__not_passed__")

    # -- nn.Linear children ------------------------------------------------------------------------
    def linears(self, inst) -> dict[str, cst.Call]:
        """self.<name> = nn.Linear(...) in the __init__ chain: name -> the call."""
        torch_cls = self.spec.linear.torch_class
        out: dict = {}
        for c, fn, _scope in self.ctor.init_scopes(inst):
            for name, assigned in tables(fn, c.module).self_assignments.items():
                for expr, _cond, _pos in assigned:
                    if (name not in out and type(expr) is cst.Call
                            and self.index.dotted(c.module, expr.func) == torch_cls):
                        out[name] = (expr, c.module)
        return out

    def _styles_table(self) -> dict:
        """style -> vLLM linear class qualname, from the dict in replace_linear_class."""
        if self._styles is None:
            self._styles = {}
            fn = self._class(self.spec.linear.styles_in)
            if fn is not None and fn.kind == "function":
                for d in find_all(fn.node, cst.Dict):
                    for el in d.elements:
                        if (type(el) is cst.DictElement and type(el.key) is cst.SimpleString
                                and type(el.value) is cst.Tuple and el.value.elements):
                            target = self.index.resolve_expr(fn.module, el.value.elements[0].value)
                            if isinstance(target, Definition):
                                self._styles[el.key.evaluated_value] = target.qualname
        return self._styles

    def tp_plan(self) -> dict:
        """The configuration class's `base_model_tp_plan`: module pattern -> style."""
        if self._tp_plan is None:
            self._tp_plan = {}
            cls = getattr(self.ctor.evaluator.config, "cls", None)
            if cls is not None and cls.file.endswith(".py"):
                module = cls.file[:-3].replace("/", ".")  # the file is relative to its tree's root
                found = self.index.lookup(module, cls.name) if module else None
                body = found.node.body.body if isinstance(found, Definition) and found.kind == "class" else []
                for stmt in body:
                    for small in getattr(stmt, "body", []) if type(stmt) is cst.SimpleStatementLine else []:
                        target = small.targets[0].target if type(small) is cst.Assign else getattr(small, "target", None)
                        if (type(target) is cst.Name and target.value == self.spec.linear.tp_plan
                                and type(small.value) is cst.Dict):
                            for el in small.value.elements:
                                if type(el) is cst.DictElement and type(el.key) is cst.SimpleString \
                                        and type(el.value) is cst.SimpleString:
                                    self._tp_plan[el.key.evaluated_value] = el.value.evaluated_value
        return self._tp_plan

    def linear_class(self, name: str, style: str | None = None) -> tuple[str | None, str]:
        """(class qualname, style) of the nn.Linear child `name`: the style given, else the tp_plan's entry
        whose last part is the name (the first, when entries for other paths disagree: see plan_styles),
        else the default."""
        if style is None:
            style = next(iter(self.plan_styles(name)), self.spec.linear.default_style)
        styles = self._styles_table()
        return styles.get(style, styles.get(self.spec.linear.default_style)), style

    def plan_styles(self, name: str) -> list[str]:
        """The distinct styles the tp_plan gives modules named `name` (several: they differ by path, which the
        rewrite does not know here)."""
        return list(dict.fromkeys(s for p, s in self.tp_plan().items() if p.rsplit(".", 1)[-1] == name))

    # -- RMSNorm -----------------------------------------------------------------------------------
    def norm_class(self, inst) -> str | None:
        """The vLLM class an RMSNorm-shaped leaf module becomes, else None."""
        cls = inst.cls
        key = cls.qualname
        if key not in self._norms:
            self._norms[key] = self._norm_of(inst)
        return self._norms[key]

    def _norm_of(self, inst) -> str | None:
        if not self.tree_fusers():  # an older backend: by class name
            old = self.spec.without_registry.rms_norm_by_name
            if not inst.cls.name.endswith(old.suffix):
                return None
            init = self.ctor.method(inst.cls, "__init__")
            zero = init is not None and old.zero_init.rsplit(".", 1)[-1] + "(" in init[0].module.code(init[1])
            return old.zero_centered if zero else old.cls
        spec = self.spec.fusers.get("RMSNormFuser")
        if not isinstance(spec, RmsNormFuser) or not self.modelled("RMSNormFuser"):
            return None
        found = self.ctor.method(inst.cls, "forward")
        if found is None:
            return None
        owner, fn = found
        for c, init, _scope in self.ctor.init_scopes(inst):  # a leaf: no submodule of its own
            for assigned in tables(init, c.module).self_assignments.values():
                for expr, _cond, _pos in assigned:
                    if type(expr) is cst.Call and isinstance(expr.func, (cst.Name, cst.Attribute)) and (
                            not (self.index.dotted(c.module, expr.func) or "").startswith("torch.")
                            or _is_module_call(self.index, c.module, expr)):
                        return None
        fns = [fn] + [m for c in find_all(fn, cst.Call) if (sc := _self_call(c))  # its own methods, as a trace inlines them
                      and (m := (self.ctor.method(inst.cls, sc[0]) or (None, None))[1]) is not None]
        calls = {_callee(c) for f in fns for c in find_all(f, cst.Call)}
        squared = ("pow" in calls or "square" in calls
                   or any(type(b.operator) is cst.Power for f in fns for b in find_all(f, cst.BinaryOperation)))
        if not ("rsqrt" in calls and "mean" in calls and squared):
            return None
        code = "".join(owner.module.code(f) for f in fns)
        zero_centered = any(f"{one} + self.weight" in code or f"self.weight + {one}" in code for one in ("1", "1.0"))
        return spec.zero_centered if zero_centered else spec.cls

    # -- the fusers that rewrite a forward -------------------------------------------------------------
    def plan(self, inst) -> Plan:
        self.used = True
        key = inst.cls.qualname
        if key not in self._plans:
            self._plans[key] = Plan()  # cycle guard
            self._plans[key] = self._plan(inst)
        return self._plans[key]

    def _plan(self, inst) -> Plan:
        found = self.ctor.method(inst.cls, "forward")
        plan = Plan()
        if found is None:
            return plan
        owner, fn = found
        module = owner.module
        linears = self.linears(inst)
        replacements: dict = {}
        inserts: dict = {}
        redefined = False
        for fuser in self.active():
            spec = self.spec.fusers.get(fuser)  # what it rewrites: its `rewrite`, as the class of its entry
            if isinstance(spec, GluFuser) and not redefined and len(linears) >= 2:
                redefined = self._glu(inst, fn, module, linears, spec, plan, replacements)
            elif isinstance(spec, QkvFuser) and not redefined and len(linears) >= 2:
                redefined = self._qkv(fn, module, linears, spec, plan, replacements, inserts)
            elif isinstance(spec, PackedQkvFuser) and not redefined and len(linears) >= 2:
                redefined = self._packed_qkv(fn, module, linears, spec, plan)
            elif isinstance(spec, AttentionFuser):
                self._attention(fn, module, spec, plan, replacements)
        if replacements or inserts:
            t = _Replace(replacements, inserts)
            plan.fn = fn.visit(t)
            module.alias_lines({**plan.aliases, **t.origin})
        return plan

    # -- what the Constructor and the Walker ask -----------------------------------------------------
    def swap(self, inst, name: str, built):
        """What `self.<name>` of a Hugging Face instance is once the backend has replaced its modules."""
        from ..construction.constructor import Instance

        plan = self.plan(inst)
        if name in plan.attrs:
            cls = self._class(plan.attrs[name][0]) if plan.attrs[name][0] else None
            if cls is None:
                return built
            call, scope = self._built_by_backend(inst, name, cls, plan)
            return Instance(cls, call, scope, fused_by=self.where(plan.attrs[name][1]))
        linears = self.linears(inst)
        if name in linears:
            qual, style = self.linear_class(name)
            cls = self._class(qual) if qual else None
            styles = self.plan_styles(name)
            said = (Condition.note(f"tp_plan styles `{name}` {' or '.join(styles)} by path; taken: {style}")
                    if len(styles) > 1 else None)
            return Instance(cls, None, None, said, fused_by=f"tp_plan {style}") if cls is not None else built
        mixin = self.spec.moe_mixin
        if name == mixin.experts_attr and self._moe_block(inst):  # MoEMixin: what FusedMoEFactory(...) builds
            experts = self._factory_experts()
            if experts is not None:
                external = self.block_forward(inst) is None  # the block routes itself (external routing)
                runner = self._class(mixin.external_runner) if external else None
                what = (say("moe_block_external", cls=(runner or experts.cls).name) if external
                        else say("moe_block_internal", cls=experts.cls.name))
                if (inst.cls.name, what) not in self.moe_blocks:
                    self.moe_blocks.append((inst.cls.name, what))
                out = Instance(runner or experts.cls, experts.call, experts.scope, experts.condition,
                               alternatives=list(experts.alternatives), fused_by=self.where_mixin())
                if external:
                    out.skip_parts = tuple(mixin.external_routing_skips)
                return out
            inst.why[name] = say("moe_backend_replaces", by=mixin.by)
            return None
        if built is not None and built.cls is not None and self.applies(built.cls):
            norm = self.norm_class(built)
            cls = self._class(norm) if norm else None
            if cls is not None:
                return Instance(cls, built.call, built.scope, built.condition, fused_by=self.where("RMSNormFuser"))
        return built

    def _moe_block(self, built) -> bool:
        """Under the MoE backend class: a module whose __init__ builds an `experts` child."""
        mixin = self.spec.moe_mixin
        if self.root not in mixin.classes or built.cls is None:
            return False
        return any(mixin.experts_attr in tables(fn, c.module).self_assignments
                   for c, fn, _scope in self.ctor.init_scopes(built))

    def where_mixin(self) -> str:
        mixin = self.spec.moe_mixin
        module, _, name = mixin.by.rpartition(".")
        found = self.index.lookup(module, name)
        return f"{name} ({found.module.rel}:{found.line})" if isinstance(found, Definition) else name

    def _factory_experts(self):
        """The module MoEMixin's `FusedMoEFactory(**kwargs)` call builds (its kwargs are the run's: defaults)."""
        if "moe_experts" not in self._memo:
            from ..construction.default_choice import pick
            from ...semantics.scope import Scope

            mixin = self.spec.moe_mixin
            module, _, cls_name = mixin.by.rpartition(".")
            cls = self.index.lookup(module, cls_name)
            found = self.ctor.method(cls, mixin.method) if isinstance(cls, Definition) else None
            calls = [c for c in find_all(found[1], cst.Call) if _callee(c) == mixin.factory] if found else []
            built = self.ctor.evaluate(calls[0], Scope(module=found[0].module)) if calls else []
            self._memo["moe_experts"] = pick(built) if built else None
        return self._memo["moe_experts"]

    def block_forward(self, inst):
        """(forward, module) MoEBlockFuser gives a MoE block it matches: `_moe_block_forward`; else None."""
        mixin = self.spec.moe_mixin
        if not self._moe_block(inst):
            return None
        found = self.ctor.method(inst.cls, "forward")
        if found is None or any(type(r.value) is cst.Tuple for r in find_all(found[1], cst.Return) if r.value):
            return None  # a block returning a tuple is not rewritten
        children = self._children(inst)
        routers = [n for n in children if n != mixin.experts_attr and self._is_router(inst, n)]
        others = [n for n in children if n not in routers and n != mixin.experts_attr
                  and not n.startswith(mixin.shared)]
        if len(routers) != 1 or others:
            return None
        target = self._class(mixin.block_forward)
        return (target.node, target.module) if target is not None and target.kind == "function" else None

    def _children(self, inst) -> list[str]:
        """`self.<name>` modules the __init__ chain builds (not parameters, buffers or tensors)."""
        out = []
        for c, fn, _scope in self.ctor.init_scopes(inst):
            for name, assigned in tables(fn, c.module).self_assignments.items():
                for expr, _cond, _pos in assigned:
                    if type(expr) is cst.Subscript or (type(expr) is cst.Call and _is_module_call(self.index, c.module, expr)):
                        if name not in out:
                            out.append(name)
        return out

    def _is_router(self, inst, name: str) -> bool:
        """A child holding only `weight` (and a correction bias) whose forward is topk(score(linear(x)))."""
        child = self.ctor.attr(inst, name)
        if child is None or child.cls is None or not self.applies(child.cls):
            return False
        state = set(self.spec.moe_mixin.router_state)
        for c, fn, _scope in self.ctor.init_scopes(child):
            for attr, assigned in tables(fn, c.module).self_assignments.items():
                for expr, _cond, _pos in assigned:
                    is_state = type(expr) is cst.Call and (
                        _is_module_call(self.index, c.module, expr)
                        or (self.index.dotted(c.module, expr.func) or "").endswith(("Parameter", "Buffer")))
                    if is_state and attr not in state:
                        return False
        found = self.ctor.method(child.cls, "forward")
        calls = [_callee(c) for c in find_all(found[1], cst.Call)] if found else []
        return "topk" in calls and "linear" in calls and (("softmax" in calls) != ("sigmoid" in calls))

    def summary(self) -> dict:
        """What the report says of the backend's rewrites: each applied (fuser, class, what it did) and the
        fusers of the tree the catalog does not model."""
        applied = []
        for qualname, plan in self._plans.items():
            for fuser, what in plan.applied:
                applied.append({"fuser": self.where(fuser), "class": qualname.rsplit(".", 1)[-1], "what": what})
        old = self.spec.without_registry
        for qualname, norm in self._norms.items():
            if norm:
                by = self.where("RMSNormFuser") if self.tree_fusers() else say("by_name", suffix=f"*{old.rms_norm_by_name.suffix}")
                applied.append({"fuser": by, "class": qualname.rsplit(".", 1)[-1], "what": f"-> {norm.rsplit('.', 1)[-1]}"})
        for cls_name, what in self.moe_blocks:
            applied.append({"fuser": self.where_mixin(), "class": cls_name, "what": what})
        reg = self.spec.registry
        return {"fusers_from": f"{reg.module}.{reg.table}" if self.tree_fusers() else old.describe,
                "applied": sorted(applied, key=lambda a: (a["class"], a["fuser"])),
                "not_modelled": self.not_modelled()}

    def forward(self, inst, cls):
        """(forward, module) of a Hugging Face instance once the backend rewrote it, else None."""
        if inst is None or inst.cls is None:
            return None
        block = self.block_forward(inst)
        if block is not None:
            return block
        fn = self.plan(inst).fn
        return (fn, self.ctor.method(cls, "forward")[0].module) if fn is not None else None


def _is_module_call(index, module, call: cst.Call) -> bool:
    """A constructor call of a module: a class (capitalised) other than a tensor or parameter factory."""
    dotted = index.dotted(module, call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
    last = (dotted or "").rsplit(".", 1)[-1]
    return bool(last[:1].isupper()) and last not in ("Parameter", "Buffer")


def _collected(table, name: str) -> list | None:
    """(keyword, value, condition) of each entry a function puts in its local dict `name`: `name = dict(k=v)`,
    `name.update(k=v)`, `name["k"] = v`; None where the dict is built otherwise (spread, or assigned twice)."""
    out: list = []
    made = 0
    for stmt, cond in table.statements:
        if type(stmt) is not cst.SimpleStatementLine:
            continue
        for small in stmt.body:
            if type(small) is cst.Assign and len(small.targets) == 1:
                target, value = small.targets[0].target, small.value
                if type(target) is cst.Name and target.value == name:
                    if not (type(value) is cst.Call and type(value.func) is cst.Name and value.func.value == "dict"):
                        return None
                    made += 1
                    out += _keywords(value, cond)
                elif type(target) is cst.Subscript and type(target.value) is cst.Name and target.value.value == name:
                    key = literal(target.slice[0].slice.value) if len(target.slice) == 1 \
                        and type(target.slice[0].slice) is cst.Index else None
                    if key is None or not isinstance(key.value, str):
                        return None
                    out.append((key.value, value, cond))
            elif type(small) is cst.Expr and type(small.value) is cst.Call:
                f = small.value.func
                if type(f) is cst.Attribute and type(f.value) is cst.Name and f.value.value == name:
                    if f.attr.value != "update":
                        return None
                    out += _keywords(small.value, cond)
    if made != 1 or any(word is None for word, _v, _c in out):
        return None
    return out


def _keywords(call: cst.Call, cond) -> list:
    return [(a.keyword.value if a.keyword is not None else None, a.value, cond) for a in call.args]


class _NoneForCalls(cst.CSTTransformer):
    """`x.<m>(...)` of the given method names -> `None`."""

    def __init__(self, methods: set):
        self.methods = methods

    def leave_Call(self, original, updated):
        if type(original.func) is cst.Attribute and original.func.attr.value in self.methods:
            return cst.Name("None")
        return updated


def _without_methods_expr(expr, methods: set):
    return expr.visit(_NoneForCalls(methods)) if methods else expr


def _without_methods(term, methods: set):
    from dataclasses import replace

    if not methods or term.expr is None:
        return term
    expr = _without_methods_expr(term.expr, methods)
    return term if expr is term.expr else replace(term, expr=expr)


def _conjunction(terms: list) -> cst.BaseExpression:
    """One expression for the terms of a condition (`a and not (b)`)."""
    def grouped(e):
        return e.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]) \
            if isinstance(e, (cst.BooleanOperation, cst.IfExp, cst.NamedExpr)) and not e.lpar else e

    exprs = [cst.UnaryOperation(cst.Not(), grouped(t.expr)) if t.negated else grouped(t.expr) for t in terms]
    out = exprs[0]
    for e in exprs[1:]:
        out = cst.BooleanOperation(left=out, operator=cst.And(), right=e)
    return out
