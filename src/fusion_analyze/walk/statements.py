"""Statements of a forward in order: assignments bind SSA values, `if` branches follow the evaluator's truth,
layer loops mark the repeated decoder layer; expressions become ops through the call dispatch."""

from __future__ import annotations

import re

from contextlib import contextmanager
from typing import TypeGuard

import libcst as cst

from .frame import MAX_OPS, _EXACT_NONE, _NONE, WalkerState, _Exact, _Frame, _InstanceValue, _Literal, _MaybeNone, literal_argument, _OP_SYMBOL, _assigned_names, _self_attr, _target_names
from ..index.modules import Definition
from ..index.nodes import find_all
from .construction.constructor import Instance
from ..catalog.taxonomy import leaf_for_class_names, operator_kind
from ..semantics.function_bodies import exits_at_end
from ..semantics.values import Known, Bindings
from dataclasses import replace

from ..ir.conditions import Condition, Truth, conjuncts, implied, join
from ..ir.texts import say


# Attributes of a tensor that are not tensors: its shape and what describes it (`x.shape[-1] + 1` is integer
# arithmetic, no device op).
_TENSOR_METADATA = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "itemsize", "layout",
                              "is_contiguous", "names"})


class Statements(WalkerState):
    """Mixin of Walker: the statement walk."""

    def _block(self, frame: _Frame, stmts, cond: Condition | None, steady: bool) -> None:
        stmts = list(stmts)
        for i, stmt in enumerate(stmts):
            if len(self.ops) > MAX_OPS:
                return
            if type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    self._small(frame, small, stmt, cond, steady)
            elif type(stmt) is cst.If:
                self._if(frame, stmt, cond, steady)
                if stmt.orelse is None and exits_at_end(stmt.body.body):
                    value = self.ctor.evaluator.truth(stmt.test, frame.module, frame.facts, frame.names).as_bool()
                    if value is True and not self._by_none_facts(frame, stmt.test):
                        return  # early return: what follows does not run
                    # an undecided guard that raises conditions nothing: a model that runs at all runs what follows
                    if value is None and exits_at_end(stmt.body.body, raises=False):
                        cond = join(cond, self._test(frame, stmt.test).negate())
                    # `if self.x is not None: return` before code that assigns self.x: a lazy init, run once
                    once = self._once_after(frame, stmt, stmts[i + 1:]) if steady and value is not True else None
                    if once is not None:
                        self._run_once(frame, stmts[i + 1:], cond, once)
                        return
            elif type(stmt) is cst.For:
                self._for(frame, stmt, cond, steady)
            elif isinstance(stmt, (cst.With, cst.While)):
                # ops on another device stream (`with npu_stream_switch(s, enabled=...)` that is on): said on
                # each op; a graph pass does not fuse across streams
                stream = self._stream_of(frame, stmt) if type(stmt) is cst.With else None
                if stream is not None:
                    self._streams.append(stream)
                loop = type(stmt) is cst.While  # its body may not run
                self.uncertain_depth += loop
                try:
                    self._block(frame, stmt.body.body, cond, steady)
                finally:
                    self.uncertain_depth -= loop
                    if stream is not None:
                        self._streams.pop()
            elif type(stmt) is cst.Try:
                self.uncertain_depth += 1  # what raises here may be caught (walk/blockers.py)
                try:
                    self._block(frame, stmt.body.body, cond, steady)
                finally:
                    self.uncertain_depth -= 1

    def _stream_of(self, frame: _Frame, stmt: cst.With) -> str | None:
        """`with npu_stream_switch(stream, enabled=...)` / `torch.npu.stream(s)`: the scope's text and line where
        it switches the device stream (its `enabled` not known false), else None."""
        for item in stmt.items:
            call = item.item
            if not isinstance(call, cst.Call) or "stream" not in frame.module.code(call.func).rsplit(".", 1)[-1]:
                continue
            enabled = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "enabled"), None)
            if enabled is not None and self.ctor.evaluator.truth(enabled, frame.module, frame.facts, frame.names) is Truth.FALSE:
                continue
            return f"{' '.join(frame.module.code(call).split())} ({frame.module.rel}:{frame.module.line_of(stmt)})"
        return None

    def _test(self, frame: _Frame, expr: cst.BaseExpression) -> Condition:
        """The condition of a test in a forward; `self.x` (or `not self.x`) where the class's __init__ assigns
        it one local (`self.use_mha = use_mha`) is that local's test, as the construction tests it."""
        if type(expr) is cst.BooleanOperation or type(expr) is cst.UnaryOperation:  # less its decided parts
            value, left = self.ctor.evaluator.simplified(expr, frame.module, frame.facts, frame.names)
            if value is not Truth.UNKNOWN and frame.facts.none:
                # decided by which arguments are None at this call (both branches are walked, _if): the parts
                # the values decide (`ring_start is not None and self._updates_replayssm_trackers` with the
                # attribute True) are still dropped from the condition the other branch keeps
                value, left = self.ctor.evaluator.simplified(expr, frame.module, replace(frame.facts, none=_lasting(frame),
                                                                                         sure=set()), frame.names)
            expr = left if value is Truth.UNKNOWN else expr
        test = Condition.of(expr, frame.module)
        inner = expr
        while isinstance(inner, cst.UnaryOperation) and isinstance(inner.operator, cst.Not):
            inner = inner.expression
        if isinstance(inner, cst.Attribute) and _self_attr(inner) and frame.inst is not None:
            local = self.ctor.assigned_local(frame.inst, inner.attr.value)
            if local is not None:  # the alias names the positive test; the negations still count in its key
                test = Condition((replace(test.terms[0], alias=local),))
        return test

    def _record_reads(self, frame: _Frame, test) -> None:
        """What an undecided test on parameters reads (Walker.test_reads): each conjunct's parameters followed to
        the code the caller bound them to (Evaluator.origin); status/waits.py reads a `self.x` there as it reads
        a test on it."""
        scope = frame.names
        for part in conjuncts(test):
            inner = part
            while type(inner) is cst.UnaryOperation and type(inner.operator) is cst.Not:
                inner = inner.expression
            names = sorted({n.value for n in find_all(inner, cst.Name)} & set(scope.params) - set(scope.locals))
            texts: list[str] = []
            for name in names:
                got = self.ctor.evaluator.origin(cst.Name(name), scope)
                if got is None or got[0] is None or type(got[0]) is cst.Name and got[0].value == name:
                    continue
                expr, where = got
                module = getattr(where, "module", None) or frame.module
                texts.append(" ".join(module.code(expr).split()))
            if texts:
                key = " ".join(frame.module.code(inner).split())
                seen = self.test_reads.setdefault(key, [])
                seen += [t for t in texts if t not in seen]

    def _container_test(self, frame: _Frame, test) -> bool | None:
        """`isinstance(x, tuple)` (list, dict, set; or `not ...`) where `x` holds one value a leaf returned alone
        (Walker.tensor_values: RMSNorm without its residual): a tensor, so false (SFA's indexer takes the
        `(q_c, scale)` pair of the fused preprocess only: after the q_a_layernorm of the native path it runs the
        plain GEMM). None (not decided) for anything else."""
        holds = True
        while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            test, holds = test.expression, not holds
        if not (type(test) is cst.Call and type(test.func) is cst.Name and test.func.value == "isinstance"
                and len(test.args) == 2 and type(test.args[0].value) is cst.Name):
            return None
        wanted = test.args[1].value
        types = [e.value for e in wanted.elements] if type(wanted) is cst.Tuple else [wanted]
        if not all(type(t) is cst.Name and t.value in _CONTAINERS and frame.module.defs.get(t.value) is None
                   for t in types):
            return None
        held = frame.env.get(test.args[0].value.value)
        return (not holds) if held and len(held) == 1 and held[0] in self.tensor_values else None

    def _if(self, frame: _Frame, stmt: cst.If, cond, steady) -> None:
        test = self._test(frame, stmt.test)
        value = evaluated = self.ctor.evaluator.truth(stmt.test, frame.module, frame.facts, frame.names).as_bool()
        if value is None:
            value = self._container_test(frame, stmt.test)
        if value is None:  # the path's own tests may decide it: `if self.use_mha:` under `built when use_mha`
            value = implied(cond, test).as_bool()
        if value is None and test.terms[0].alias is not None and frame.inst is not None:
            # or the construction the walk chose for this instance: the MLA attention it built (`built when
            # not (use_mha)`, the default choice) is the one `if self.use_mha:` must agree with; its ops keep
            # that condition, so it is still said
            called = [c.func.value.attr.value if isinstance(c.func.value, cst.Attribute) else c.func.attr.value
                      for c in find_all(stmt, cst.Call) if isinstance(c.func, cst.Attribute) and _self_attr(
                          c.func.value if isinstance(c.func.value, cst.Attribute) else c.func)]
            for name in dict.fromkeys(called):  # the submodules the branches call, as the walk built them
                built = self.ctor.attr(frame.inst, name)
                if built is not None and built.condition:
                    value = implied(built.condition, test).as_bool()
                    if value is not None:
                        break
        if value is None:  # a decided test is a platform / None / class check: no tensor op runs in it
            self._eval(frame, stmt.test, cond, steady, stmt, quiet=True)
            if frame.names.params:
                self._record_reads(frame, stmt.test)
        # Decided only by which arguments are None at this call (`residual is None` is false from the second
        # layer on, the first layer still takes the other branch): both are walked, the other as not steady.
        # Decided by values (configuration, platform, literals): the other branch does not run at all.
        transient = evaluated is not None and self._by_none_facts(frame, stmt.test)
        # a branch not decided by values (by None-ness alone, or by the walk's own pick): a raise in it is not
        # surely reached (blockers.py)
        picked = transient or (evaluated is None and value is not None)
        self.picked_depth += picked
        try:
            self._if_branches(frame, stmt, cond, steady, test, value, transient)
        finally:
            self.picked_depth -= picked

    def _if_branches(self, frame: _Frame, stmt: cst.If, cond, steady, test, value, transient: bool) -> None:
        body_steady = steady and value is not False
        else_steady = steady and (value is False)
        undecided = value is None and steady and stmt.orelse is not None
        before = {k: list(v) for k, v in frame.env.items()}
        none_before = dict(frame.facts.none)
        maybe_before = set(frame.maybe_none)
        # A decided branch is walked alone: the other one does not run, and a test known to hold is not a
        # condition of what does (the report never prints a decided test).
        first_body = len(self.ops)
        once = self._once_body(frame, stmt) if body_steady and stmt.orelse is None else None
        if once is not None:  # `if self.x is None: self.x = ...`: a lazy init, run once
            self._run_once(frame, stmt.body.body, cond if value is True else join(cond, test), once)
        elif value is not False or transient:
            with self._transient_branch(transient and value is False):
                self._block(frame, stmt.body.body, cond if value is True else join(cond, test), body_steady)
        if undecided:
            self.undecided_tests = number = self.undecided_tests + 1
            for op in self.ops[first_body:]:
                op.branches.append((number, 0))
        env_body, none_body, maybe_body = frame.env, frame.facts.none, frame.maybe_none
        if stmt.orelse is not None and (value is not True or transient):
            frame.env = {k: list(v) for k, v in before.items()}
            frame.facts.none = dict(none_before)
            frame.maybe_none = set(maybe_before)
            neg = cond if value is False else join(cond, test.negate())
            first = len(self.ops)
            with self._transient_branch(transient and value is True):
                if type(stmt.orelse) is cst.If:
                    self._if(frame, stmt.orelse, neg, else_steady)
                else:
                    self._block(frame, stmt.orelse.body.body, neg, else_steady)
            if undecided:  # this branch may be the one that runs: the report lists its ops apart (a module it
                for op in self.ops[first:]:  # calls is walked as steady: walker._expand), and the patterns are
                    op.branches.append((number, 1))  # matched on it in place of the `if` branch (status/derive.py)
                    if not op.steady:
                        op.attrs.setdefault("other_branch", True)
            env_else, none_else, maybe_else = frame.env, frame.facts.none, frame.maybe_none
        else:
            env_else, none_else, maybe_else = before, none_before, maybe_before
        # After the branch, a variable holds the steady branch's value.
        if value is False:
            frame.env, frame.facts.none, frame.maybe_none = env_else, none_else, maybe_else
        elif value is True or stmt.orelse is None:
            merged = dict(env_else)
            merged.update(env_body)
            frame.env = merged
            frame.facts.none = {**none_else, **none_body}
            frame.maybe_none = maybe_body | maybe_else if value is None else maybe_body
            if value is None:
                for k in set(none_else) | set(none_body):
                    if none_else.get(k) != none_body.get(k):
                        frame.facts.none.pop(k, None)
                        if True in (none_else.get(k), none_body.get(k)):  # None on one path, values on the other
                            frame.maybe_none.add(k)
        else:
            frame.env, frame.facts.none, frame.maybe_none = env_body, none_body, maybe_body
        if transient:  # what either branch assigns follows from the call's None-ness
            frame.transient |= _assigned_names(stmt)

    @contextmanager
    def _transient_branch(self, on: bool):
        """While the branch of a test decided only by which arguments are None is walked (the first layer's
        `residual is None`): the modules it calls run there only, so their ops are not steady either
        (walker._expand)."""
        self.transient_depth += on
        try:
            yield
        finally:
            self.transient_depth -= on

    def _run_once(self, frame: _Frame, stmts, cond, guard: str) -> None:
        """Statements a lazy initialisation runs once (walk/host.py): their ops, and those of what they call, are
        not steady, and say the guard."""
        first = len(self.ops)
        self._block(frame, stmts, cond, False)
        for op in self.ops[first:]:
            op.steady = False
            op.attrs.setdefault("once", guard)

    def _by_none_facts(self, frame: _Frame, test) -> bool:
        """A test decided only by which arguments are None at this call, where that is not each layer's own
        (`frame.exact`: where the layers are walked kind by kind, the first layer with the values the loop starts
        with, the others with what a layer leaves): both branches run in some layer."""
        if not frame.facts.none:
            return False
        if frame.exact and all(n.value in frame.exact for n in find_all(test, cst.Name) if n.value in frame.facts.none):
            return False  # (each layer's own: the first layer walked apart)
        facts = Bindings(_lasting(frame), frame.facts.attr_classes)
        return self.ctor.evaluator.truth(test, frame.module, facts, frame.names) is Truth.UNKNOWN

    def _for(self, frame: _Frame, stmt: cst.For, cond, steady) -> None:
        layer_list = self._layer_list(frame, stmt.iter)
        loop_var, body = None, list(stmt.body.body)
        if layer_list is None:
            # for i in range(self.start_layer, self.end_layer): layer = self.layers[i]; ...
            indexed = self._indexed_layer(frame, body, stmt.target)
            if indexed is not None:
                layer_list, loop_var, first = indexed
                if first is not None:
                    body.remove(first)
        if layer_list is not None and layer_list.element is not None:
            element = layer_list.element
            key = element.cls.qualname if element.cls else None
            if key in self._walked_lists:
                # A second loop over layers of the same class (another PP path, Gemma3n's cross-decoder): the
                # layer's op sequence is the one already walked, so it is listed once, with the first count.
                return
            self._walked_lists.add(key)
            target = stmt.target
            names = [target] if type(target) is cst.Name else [e.value for e in target.elements] if type(target) is cst.Tuple else []
            if loop_var is not None:
                frame.loop_vars[loop_var] = element
            elif names and type(names[-1]) is cst.Name:
                frame.loop_vars[names[-1].value] = element
            # Loop-carried variables are not None after the first iteration (the steady state); the first layer
            # gets what the loop starts with (`residual = None` before the loop)
            carried = sorted(name for name in _assigned_names(stmt.body) if frame.facts.none.get(name))
            for name in carried:
                frame.facts.none[name] = False
                frame.transient.add(name)  # None in the first iteration only
            kinds = self._layer_kinds(layer_list)
            self._layer_role(kinds[0]["element"] if kinds else element, f"{frame.path}.layers" if frame.path else "layers")
            if not kinds:
                with self._layer_section(layer_list.repeat):
                    self._block(frame, body, cond, steady)
                return
            # each kind of layer walked once, with its own element (its index bound), from the values the loop
            # starts with; ops of several kinds say which kind they are in (`attrs.layer_kind`). Each layer's
            # None-ness is its own (the first layer's carried values are the loop's initial ones, the others' a
            # layer's output): the first layer is walked apart, and stays a kind of its own where its ops differ
            start = ({k: list(v) for k, v in frame.env.items()}, dict(frame.facts.none), dict(frame.loop_vars))
            plan = list(kinds)
            if carried:
                head = kinds[0]
                plan[0] = {**head, "layers": head["layers"][:1], "entry": carried}
                if len(head["layers"]) > 1:  # the rest of its kind, in the order of the kinds' first layers
                    plan.append({**head, "layers": head["layers"][1:], "element": head["elements"][head["layers"][1]],
                                 "rest": True})
                    plan.sort(key=lambda kd: kd["layers"][0])
            var = loop_var if loop_var is not None else names[-1].value if names and type(names[-1]) is cst.Name else None
            ends: list = []
            starts: list = []
            k = 0
            exact = set(frame.exact)
            try:
                while k < len(plan):
                    kind = plan[k]
                    frame.env, frame.facts.none, frame.loop_vars = ({a: list(b) for a, b in start[0].items()},
                                                                     dict(start[1]), dict(start[2]))
                    for name in kind.get("entry", ()):
                        frame.facts.none[name] = True
                    frame.exact = exact | set(carried)
                    if var is not None:
                        frame.loop_vars[var] = kind["element"]
                    self.layer_kind = k if len(plan) > 1 else None
                    self.kind_undecided = (f"{frame.path}.layers" if frame.path else "layers", kind["undecided"])
                    starts.append((len(self.ops), self._checkpoint()))
                    try:
                        with self._layer_section(layer_list.repeat):
                            self._block(frame, body, cond, steady)
                    finally:
                        self.layer_kind, self.kind_undecided = None, None
                    ends.append((frame.env, frame.facts.none, frame.loop_vars))
                    first_end = starts[1][0] if len(starts) > 1 else len(self.ops)
                    if kind.get("rest") and _same_ops(self.ops[starts[0][0]:first_end], starts[0][1].undecided_tests,
                                                      self.ops[starts[k][0]:], starts[k][1].undecided_tests):
                        # the first layer runs what the others of its kind run: one kind, walked once (the rest is
                        # the last walked: undone)
                        self._rollback(starts[k][1])
                        ends.pop()
                        starts.pop()
                        plan[0] = {**plan[0], "layers": sorted(plan[0]["layers"] + kind["layers"]), "entry": ()}
                        del plan[k]
                        if len(plan) == 1:
                            self._no_layer_kind(starts[0][0])
                        continue
                    k += 1
            finally:
                frame.exact = exact
            if len(plan) > 1:  # after the loop: what the last layer's kind left
                self._mark_carried(ends, _assigned_names(stmt.body))
                last = max(range(len(plan)), key=lambda k: plan[k]["layers"][-1])
                frame.env, frame.facts.none, frame.loop_vars = ends[last]
                self.layer_kinds = [{"layers": kd["layers"], "count": len(kd["layers"]), "of": layer_list.count,
                                     "differs": _differs(kd, plan)} for kd in plan]
                for op in self.ops[starts[0][0]:starts[1][0]] if plan[0].get("entry") else ():
                    op.entry = True  # the loop's first layer: no layer before it feeds it (ir/ops.py loop_carried)
            return
        self._eval(frame, stmt.iter, cond, steady, stmt)
        self.uncertain_depth += 1  # a loop that may run no time
        try:
            self._block(frame, stmt.body.body, cond, steady)
        finally:
            self.uncertain_depth -= 1

    def _mark_carried(self, ends: list, names: set[str]) -> None:
        """Each kind's values of the loop's variables at the end of its layer (`hidden_states, residual =
        layer(...)`), marked on the ops that produce them (Op.carried): any kind's layer feeds the next layer,
        whose kind the matcher does not know, not only the kind walked last."""
        producer = {v: op for op in self.ops if op.section == "layer" for v in op.outputs}
        for env, _none, _loop_vars in ends:
            for name in sorted(names):
                for v in env.get(name, ()):
                    op = producer.get(v)
                    if op is not None:
                        op.carried[v] = name

    def _no_layer_kind(self, first: int) -> None:
        """The layers are of one kind after all: the ops from `first` on carry no kind, nor do their roles."""
        for op in self.ops[first:]:
            op.attrs.pop("layer_kind", None)
        for key in [key for key in self._role_kinds if key[1] == 0]:
            self._role_kinds.pop(key)

    def _layer_kinds(self, layer_list: Instance) -> list[dict] | None:
        """The decoder layers grouped by what their construction decides with each one's index bound (the
        tests on the layer index: `layer_idx >= config.first_k_dense_replace`, `config.layer_types[i]`, ...):
        [{element, layers, differs}] in the order of their first layer; None where the configuration does not
        give the layer count or the list is not built per index (then one layer is walked, its per-layer
        choices listed as alternatives)."""
        n, build = layer_list.count, layer_list.per_layer
        if not n or build is None:
            return None
        sigs = []
        for i in range(n):
            element = build(i)
            if element is None or element.cls is None:
                return None
            sigs.append((element, element.cls.qualname, self.ctor.kind_signature(element)))
        # a value that is every layer's own (`self.layer_idx`, a name built from it) tells layers apart, not
        # kinds: left out
        # (of the layers that hold it: `mlp.experts.layer_name` is each MoE layer's own, the dense ones have none)
        own = set()
        if n > 2:
            for name in {e[0] for _el, _q, sig in sigs for e in sig}:
                held = [e for _el, _q, sig in sigs for e in sig if e[0] == name]
                if len(held) > 2 and len(set(held)) == len(held):
                    own.add(name)
        for name in {e[0] for _el, _q, sig in sigs for e in sig} - own:
            # a module name built from the layer's own prefix ("model.layers.3.self_attn.attn"), however few
            # layers hold it (the two full-attention layers of eight)
            held = [(i, e[2]) for i, (_el, _q, sig) in enumerate(sigs) for e in sig if e[0] == name]
            if len(held) > 1 and all(isinstance(v, str) and re.search(rf"\blayers\.{i}\b", v) for i, v in held):
                own.add(name)
        groups: dict[tuple, dict] = {}
        for i, (element, qualname, sig) in enumerate(sigs):
            key = (qualname, tuple(e for e in sig if e[0] not in own))
            group = groups.setdefault(key, {"element": element, "layers": [], "sig": key, "elements": {}})
            group["layers"].append(i)
            group["elements"][i] = element
        kinds = list(groups.values())
        for kd in kinds:  # what sets the kind apart: the entries whose outcome differs between kinds
            entries = dict((name, (truths, shown)) for name, truths, shown in kd["sig"][1])
            others = [dict((name, (t, sh)) for name, t, sh in o["sig"][1]) for o in kinds if o is not kd]
            differs = {name: shown if shown is not None else "-" for name, (truths, shown) in entries.items()
                       if any(o.get(name) != (truths, shown) for o in others)}
            # what a submodule that differs holds is its own (`mlp` is another class: not `mlp.gate`)
            kd["differs"] = {name: v for name, v in differs.items()
                             if not any(name.startswith(p + ".") for p in differs if p != name)}
            if any(o["sig"][0] != kd["sig"][0] for o in kinds):
                kd["differs"] = {"class": kd["element"].cls.name, **kd["differs"]}
            # the submodules whose choice the kind leaves undecided: each alternative is walked (layers.py)
            kd["undecided"] = frozenset(name for name, truths, _shown in kd["sig"][1] if "UNKNOWN" in truths)
        return kinds

    @contextmanager
    def _layer_section(self, repeat: str | None):
        """Ops inside the decoder-layer loop belong to the `layer` section (repeated `repeat` times); once the
        outermost layer loop ends, what follows is the epilogue. The only place the section changes."""
        previous = self.section
        self.section, self.repeat = "layer", repeat
        try:
            yield
        finally:
            self.section = "epilogue" if previous != "layer" else previous

    def _is_leaf(self, inst: Instance) -> bool:
        """A class the taxonomy lists (attention, norm, linear...): one op, not a forward to walk into."""
        return inst.cls is not None and leaf_for_class_names(self.ctor.base_names(inst.cls)) is not None

    def _list_item(self, frame: _Frame, value) -> Instance | None:
        """The module `self.<list>[k]` stands for, when the list holds leaves (attention, norms)."""
        if not (type(value) is cst.Subscript and _self_attr(value.value)):
            return None
        lst = self.ctor.attr(frame.inst, value.value.attr.value)
        if lst is None or lst.element is None or lst.element.cls is None:
            return None
        return lst.element if self._is_leaf(lst.element) else None

    def _indexed_layer(self, frame: _Frame, body: list, target=None):
        """(layer list, name, statement) for a loop body with a statement `name = self.layers[i]`; (layer list,
        None, None) for one that calls `self.layers[i](...)` with the loop's index."""
        for stmt in body:
            if not type(stmt) is cst.SimpleStatementLine or len(stmt.body) != 1:
                continue
            small = stmt.body[0]
            if not (type(small) is cst.Assign and len(small.targets) == 1
                    and type(small.targets[0].target) is cst.Name and type(small.value) is cst.Subscript):
                continue
            layer_list = self._layer_list(frame, small.value)
            if layer_list is not None and layer_list.element is not None:
                return layer_list, small.targets[0].target.value, stmt
        index = target.value if type(target) is cst.Name else None
        for stmt in body if index else ():
            for call in find_all(stmt, cst.Call):
                sub = call.func
                if (type(sub) is cst.Subscript and _self_attr(sub.value) and len(sub.slice) == 1
                        and type(sub.slice[0].slice) is cst.Index and type(sub.slice[0].slice.value) is cst.Name
                        and sub.slice[0].slice.value.value == index):
                    layer_list = self._layer_list(frame, sub.value)
                    if layer_list is not None and layer_list.element is not None:
                        return layer_list, None, None
        return None

    def _layer_list(self, frame: _Frame, it) -> Instance | None:
        """islice(self.layers, a, b) / self.layers / self.layers[a:b] / enumerate(...) of those."""
        if type(it) is cst.Call and type(it.func) is cst.Name and it.func.value in ("islice", "enumerate", "zip") and it.args:
            return self._layer_list(frame, it.args[0].value)
        if type(it) is cst.Call and type(it.func) is cst.Attribute and it.func.attr.value == "islice" and it.args:
            return self._layer_list(frame, it.args[0].value)
        if type(it) is cst.Subscript:
            return self._layer_list(frame, it.value)
        if _self_attr(it):
            inst = self.ctor.attr(frame.inst, it.attr.value)
            if inst is not None and inst.element is not None:
                return inst
        return None

    def _small(self, frame: _Frame, small, stmt, cond, steady) -> None:
        if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            value = small.value
            if value is None:
                return
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            hint = _target_names(targets[0])
            reads = frame.transient.intersection(n.value for n in find_all(value, cst.Name)) if frame.transient else ()
            for t in targets:  # a name assigned from one whose None-ness is the call's follows it
                for n in _target_names(t) if type(t) is not cst.Attribute else ():
                    (frame.transient.add if reads else frame.transient.discard)(n)
            if type(small) is cst.AugAssign:
                kind = operator_kind(type(small.operator).__name__.replace("Assign", ""))
                left = self._eval(frame, small.target, cond, steady, stmt)
                right = self._eval(frame, value, cond, steady, stmt)
                if kind and left:  # x *= scale is an op too (scalar right side)
                    out = self._op(frame, kind, _OP_SYMBOL.get(kind, kind), None, stmt, left + right, hint, cond, steady,
                                   attrs=self._operands(frame, small.target, value, left, right))
                    self._bind_targets(frame, targets, out)
                return
            if type(value) is cst.Name and value.value == "None":
                for t in targets:
                    for n in _target_names(t):
                        frame.facts.none[n] = True
                        frame.env[n] = []
                        frame.maybe_none.discard(n)
                return
            if len(targets) == 1 and type(targets[0]) is cst.Name and self._partial_of(frame, targets[0].value, value):
                return  # splitter = partial(split_tensor_along_last_dim, ...): a callable, no op yet
            single = targets[0].value if len(targets) == 1 and type(targets[0]) is cst.Name else None
            if single is not None and single in frame.aliases:  # rebound: no longer the module it held
                del frame.aliases[single]
                frame.loop_vars.pop(single, None)
                frame.names.instances.pop(single, None)
                frame.module_names.pop(single, None)
            alias = self._list_item(frame, value)
            if alias is not None and single is not None:
                frame.loop_vars[single] = alias  # attn = self.attn[0]; attn(q, k, v)
                return
            held = self._held_module(frame, value) if single is not None else None
            if held is not None and single is not None:  # attn_hc = self.attn_hyper_connection; attn_hc.mix(h)
                attr, inst = held
                frame.aliases[single] = frame.module_names[single] = attr
                frame.loop_vars[single] = frame.names.instances[single] = inst
                frame.env[single] = []
                frame.facts.none[single] = False
                frame.names.locals.setdefault(single, []).append((value, cond))
                frame.names.version += 1
                return
            result = self._eval(frame, value, cond, steady, stmt, hint=hint)
            self._bind_targets(frame, targets, result)
            host = self._host_expr(frame, value)  # a numpy value: its arithmetic is no device op (walk/host.py)
            for t in targets:
                for n in _target_names(t) if type(t) is not cst.Attribute else ():
                    (frame.host.add if host else frame.host.discard)(n)
            if _may_be_none(value) and self.ctor.evaluator.truth(value.test, frame.module, frame.facts,
                                                                frame.names).as_bool() is None:
                for t in targets:  # `x = f(h) if test else None` with the test undecided: x may be None
                    for n in _target_names(t):
                        frame.facts.none.pop(n, None)
                        frame.maybe_none.add(n)
            if len(targets) == 1 and type(targets[0]) is cst.Name:  # for the evaluator: `cfg = getattr(...)`
                # (under the condition the function was entered under, it is assigned whenever this code runs)
                frame.names.locals.setdefault(targets[0].value, []).append((value, None if cond is frame.entry else cond))
                frame.names.version += 1
        elif type(small) is cst.Expr:
            self._eval(frame, small.value, cond, steady, stmt)
        elif type(small) is cst.Raise:
            self._forward_raise(frame, small, stmt, cond, steady)
        elif type(small) is cst.Return:
            if small.value is not None:
                frame.returns = self._eval(frame, small.value, cond, steady, stmt) if steady or not frame.returns else frame.returns

    def _operands(self, frame: _Frame, left_expr, right_expr, left: list, right: list) -> dict:
        """What a graph pass's pattern compares an arithmetic op on: which side is a scalar, its code and
        value (when the evaluator knows it), and the tensor on the left (operand order of `a + b`)."""
        attrs: dict = {"scalar": not (left and right)}
        if left:
            attrs["lhs"] = left[0]
        if left and right:
            return attrs
        side, expr = ("right", right_expr) if left else ("left", left_expr)
        attrs["scalar_side"], attrs["scalar_code"] = side, " ".join(frame.module.code(expr).split())
        value = self.ctor.evaluator.infer(expr, frame.names)
        if isinstance(value, Known) and type(value.value) in (int, float):
            attrs["scalar_value"] = value.value
        return attrs

    def _held_module(self, frame: _Frame, value) -> tuple[str, Instance] | None:
        """(its name under self, the instance) where `value` is a submodule or object the construction built on the
        instance, `self.a` or `self.a.b`, also through `cast(T, ...)` (`impl = cast(Impl, self.impl)`): a local
        bound to it holds that object. None for anything else (a method, a list of layers, an unknown class)."""
        while (type(value) is cst.Call and len(value.args) == 2 and isinstance(value.func, (cst.Name, cst.Attribute))
               and self.index.dotted(frame.module, value.func) in ("typing.cast", "cast")):
            value = value.args[1].value
        if frame.inst is None or frame.inst.cls is None or type(value) is not cst.Attribute:
            return None
        names, node = [], value
        while type(node) is cst.Attribute:
            names.append(node.attr.value)
            node = node.value
        if not (type(node) is cst.Name and node.value == "self") or len(names) > 2:
            return None
        names.reverse()
        if self.ctor.method(frame.inst.cls, names[0]) is not None:
            return None
        inst = frame.inst
        for name in names:
            inst = self.ctor.attr(inst, name) if inst is not None and inst.cls is not None else None
        if inst is None or inst.cls is None or inst.element is not None:
            return None
        return ".".join(names), inst

    def _partial_of(self, frame: _Frame, name: str, value) -> bool:
        """Record `name = functools.partial(f, ...)` with f a function of the trees; True when it is one."""
        if not (type(value) is cst.Call and isinstance(value.func, (cst.Name, cst.Attribute)) and value.args
                and self.index.dotted(frame.module, value.func) == "functools.partial"):
            return False
        first = value.args[0].value
        target = self.index.resolve_expr(frame.module, first) if isinstance(first, (cst.Name, cst.Attribute)) else None
        if not isinstance(target, Definition) or target.kind != "function":
            return False
        frame.partials[name] = target
        return True

    def _bind_targets(self, frame: _Frame, targets, values: list[str]) -> None:
        """A name bound to tensor values is not None; one bound to anything else (a config value, an unknown
        call's result) may be: the evaluator decides it from the assigned expression, or no one does."""
        for t in targets:
            for n in _target_names(t) if type(t) is not cst.Attribute else ():
                frame.maybe_none.discard(n)
            if type(t) is cst.Name:
                frame.env[t.value] = values[:1] if len(values) == 1 else values
                if values:
                    frame.facts.none[t.value] = False
                else:
                    frame.facts.none.pop(t.value, None)
            elif isinstance(t, (cst.Tuple, cst.List)):
                names = [e.value for e in t.elements]
                for i, n in enumerate(names):
                    if type(n) is cst.Name:
                        if len(values) == len(names):
                            frame.env[n.value] = [values[i]]
                        else:
                            frame.env[n.value] = values[i:i + 1] if i < len(values) else values[-1:]
                        frame.facts.none[n.value] = False

    def _eval(self, frame: _Frame, expr, cond, steady, stmt, hint=None, quiet=False) -> list[str]:
        if expr is None:
            return []
        if type(expr) is cst.Name:
            return list(frame.env.get(expr.value, []))
        if type(expr) is cst.Call:
            return self._call(frame, expr, cond, steady, stmt, hint)
        if isinstance(expr, (cst.Tuple, cst.List)):
            out = []
            for el in expr.elements:
                out += self._eval(frame, el.value, cond, steady, stmt)
            return out
        if type(expr) is cst.BinaryOperation:
            left = self._eval(frame, expr.left, cond, steady, stmt)
            right = self._eval(frame, expr.right, cond, steady, stmt)
            kind = operator_kind(type(expr.operator).__name__)
            if kind and (left or right) and not quiet and not _scalar_arithmetic(frame, expr):
                return self._op(frame, kind, _OP_SYMBOL.get(kind, kind), None, stmt, left + right, hint, cond, steady,
                                attrs=self._operands(frame, expr.left, expr.right, left, right))
            return left + right
        if type(expr) is cst.Subscript:
            return self._eval(frame, expr.value, cond, steady, stmt)
        if type(expr) is cst.IfExp:  # `a(x) if test else None`: each branch's ops run under its side of the test
            value = self.ctor.evaluator.truth(expr.test, frame.module, frame.facts, frame.names).as_bool()
            if value is not None:
                return self._eval(frame, expr.body if value else expr.orelse, cond, steady, stmt, hint, quiet)
            test = self._test(frame, expr.test)
            body = self._eval(frame, expr.body, join(cond, test), steady, stmt, hint, quiet)
            orelse = self._eval(frame, expr.orelse, join(cond, test.negate()), steady, stmt, hint, quiet)
            return body or orelse
        if type(expr) is cst.Attribute:
            if _self_attr(expr) or expr.attr.value in _TENSOR_METADATA or self._host_field(frame, expr):
                # x.shape[-1], x.dtype: integers and descriptors, not tensors; a field its class declares an int
                return []
            return self._eval(frame, expr.value, cond, steady, stmt)
        return []

    def _submodule(self, frame: _Frame, name: str) -> Instance | None:
        """The module `self.<name>` holds, when the walk knows its class and it is a leaf layer."""
        if frame.inst.cls is None or self.ctor.method(frame.inst.cls, name) is not None:
            return None
        sub = self.ctor.attr(frame.inst, name)
        return sub if sub is not None and sub.cls is not None and sub.element is None and self._is_leaf(sub) else None

    def _args(self, frame: _Frame, call: cst.Call, cond, steady, stmt):
        args, kwargs = [], {}
        for a in call.args:
            if a.star:
                continue
            if type(a.value) is cst.Name and a.value.value == "None":
                v = _NONE
            elif type(a.value) is cst.Name and a.value.value in frame.loop_vars:
                v = _InstanceValue(frame.loop_vars[a.value.value], frame.module_names.get(a.value.value))
            elif type(a.value) is cst.Name and frame.facts.none.get(a.value.value):
                v = _EXACT_NONE if a.value.value in frame.exact else _NONE
            elif type(a.value) is cst.Name and a.value.value in frame.maybe_none:
                v = _MaybeNone(frame.env.get(a.value.value, []))
            elif literal_argument(a.value):
                v = _Literal(a.value)  # mode="decode": the callee's tests on it are decided
            elif _may_be_none(a.value) and _is_known_none(self.ctor.evaluator.infer(a.value, frame.names)):
                v = _NONE  # `self._sink_stream if n <= limit else None`, the stream None off CUDA: None either way
            elif _self_attr(a.value) and self._submodule(frame, a.value.attr.value) is not None:
                # a module passed as an argument (maybe_fused_act_quant(self.act_fn, x, ...)): calling the
                # parameter runs that module
                v = _InstanceValue(self._submodule(frame, a.value.attr.value), a.value.attr.value)
            else:
                v = self._eval(frame, a.value, cond, steady, stmt)
                if type(a.value) is cst.Name and a.value.value in frame.exact and frame.facts.none.get(a.value.value) is False:
                    v = _Exact(v)
            if a.keyword is None:
                args.append(v)
            else:
                kwargs[a.keyword.value] = v
        return args, kwargs


# what an op's attributes say of one walk rather than of the op (its kind's number, a value's name)
_WALK_OWN = frozenset({"layer_kind", "lhs"})


def _same_ops(a: list, tests_a: int, b: list, tests_b: int) -> bool:
    """Two walks of a layer that run the same ops, kernels and conditions (their ids and values aside; the
    undecided tests each numbered from the count before its walk, `tests_a` / `tests_b`)."""
    return len(a) == len(b) and all(_op_key(x, tests_a) == _op_key(y, tests_b) for x, y in zip(a, b))


def _op_key(op, tests: int) -> tuple:
    attrs = tuple(sorted((k, repr(v)) for k, v in op.attrs.items() if k not in _WALK_OWN))
    kernels = tuple((k.name, k.file, k.line, k.condition) for k in op.kernels)
    return (op.kind, op.name, op.layer_class, op.file, op.line, op.scope, op.path, op.steady, op.condition,
            tuple((n - tests, side) for n, side in op.branches), kernels, attrs)


def _differs(kind: dict, plan: list[dict]) -> dict:
    """What sets a kind of layer apart (Statements._layer_kinds `differs`); the first layer walked apart and the
    rest of its kind: the loop's carried values it gets (`residual`: None / a layer's output)."""
    entry = plan[0].get("entry") if any(kd.get("rest") for kd in plan) else None
    if not entry or kind["sig"] != plan[0]["sig"]:
        return kind["differs"]
    shown = say("loop_initial") if kind is plan[0] else say("loop_carried")
    return {**kind["differs"], **{name: shown for name in entry}}


def _is_known_none(value) -> bool:
    return isinstance(value, Known) and value.value is None


def _may_be_none(value) -> TypeGuard[cst.IfExp]:
    """An `a if test else b` one of whose branches is None."""
    return type(value) is cst.IfExp and any(type(b) is cst.Name and b.value == "None"
                                                for b in (value.body, value.orelse))


_CONTAINERS = frozenset(("tuple", "list", "dict", "set"))  # builtin types no tensor is an instance of
_SCALAR_RETURNS = frozenset(("int", "float", "bool", "str", "tuple", "list"))


def _scalar_arithmetic(frame: _Frame, expr: cst.BinaryOperation) -> bool:
    """`+` / `-` that is no tensor op, told by the code's structure: an operand that is a tuple or list literal
    (`attn_params + (None, None)` extends a tuple), or any arithmetic of a method its code declares to return a
    Python scalar or sequence (`def _get_num_prefill_kv_tokens(...) -> int`: token counts)."""
    if isinstance(expr.left, (cst.Tuple, cst.List)) or isinstance(expr.right, (cst.Tuple, cst.List)):
        return True
    returns = frame.fn.returns
    ann = returns.annotation if returns is not None else None
    return type(ann) is cst.Name and ann.value in _SCALAR_RETURNS


def _lasting(frame: _Frame) -> dict:
    """The None-ness facts that hold whatever the call passed (not of Frame.transient names)."""
    return {k: v for k, v in frame.facts.none.items() if k not in frame.transient}
