"""The rewrites of a forward the Transformers backend's fusers make (GLU, QKV, packed QKV, the attention
interface), done with libcst: a mixin of hf_fusers.LoadTime, which decides when each applies."""

from __future__ import annotations

import libcst as cst

from ...catalog.schema import AttentionFuser, GluFuser, PackedQkvFuser, QkvFuser
from ...index.modules import Definition
from ...index.nodes import find_all
from ...semantics.function_bodies import tables


def _self_call(node) -> tuple[str, list] | None:
    """`self.<name>(args)`: (name, positional argument expressions)."""
    if (type(node) is cst.Call and type(node.func) is cst.Attribute and type(node.func.value) is cst.Name
            and node.func.value.value == "self"):
        return node.func.attr.value, [a.value for a in node.args if a.keyword is None and not a.star]
    return None


def _peel(node):
    while isinstance(node, cst.BaseExpression) and node.lpar:
        node = node.with_changes(lpar=[], rpar=[])
    return node


def _self_attr(name: str) -> cst.Attribute:
    return cst.Attribute(value=cst.Name("self"), attr=cst.Name(name))


class _Replace(cst.CSTTransformer):
    """Replace nodes by identity; every node rebuilt on the way up keeps its original (for its line)."""

    def __init__(self, replacements: dict, inserts: dict | None = None):
        self.replacements = replacements  # id(original) -> new node
        self.inserts = inserts or {}  # id(original statement) -> statements to put before it
        self.origin: dict = {}  # new node -> original node

    def on_leave(self, original, updated):
        new = self.replacements.get(id(original), updated)
        if new is not original and not isinstance(new, (cst.RemovalSentinel, cst.FlattenSentinel)):
            self.origin.setdefault(new, original)
        before = self.inserts.get(id(original))
        if before:
            for s in before:
                self.origin.setdefault(s, original)
            return cst.FlattenSentinel([*before, new])
        return new


class Rewrites:
    """Mixin of LoadTime: each method finds one fuser's pattern in a forward, records the vLLM layers it builds
    (`plan.attrs`) and the nodes it replaces."""

    def _glu(self, inst, fn, module, linears, spec: GluFuser, plan, replacements) -> bool:
        for mul in find_all(fn, cst.BinaryOperation):
            if not type(mul.operator) is cst.Multiply:
                continue
            sides = [_peel(mul.left), _peel(mul.right)]
            for a, b in (sides, sides[::-1]):
                outer, inner = _self_call(a), _self_call(b)
                if outer is None or inner is None or outer[0] in linears or len(outer[1]) != 1:
                    continue
                gate = _self_call(_peel(outer[1][0]))
                if gate is None or gate[0] not in linears or inner[0] not in linears or len(gate[1]) != 1 \
                        or len(inner[1]) != 1 or module.code(gate[1][0]) != module.code(inner[1][0]):
                    continue
                if _out_text(*linears[gate[0]]) != _out_text(*linears[inner[0]]):
                    continue  # an ...AndMul kernel splits its input in half: gate and up must match
                act = self._and_mul(inst, outer[0], spec)
                if act is None:
                    continue
                merged = spec.merged.name
                gate_call = _peel(outer[1][0])
                new_gate = gate_call.with_changes(func=_self_attr(merged))
                replacements[id(mul)] = a.with_changes(args=[cst.Arg(new_gate)], lpar=mul.lpar, rpar=mul.rpar)
                plan.aliases[new_gate] = gate_call
                plan.attrs[merged] = (spec.merged.cls, "GLUFuser")
                plan.attrs[outer[0]] = (act, "GLUFuser")
                for call in find_all(fn, cst.Call):  # the linear reading the product: rowwise
                    down = _self_call(call)
                    if down and down[0] in linears and len(down[1]) == 1 and _peel(down[1][0]) is mul:
                        cls, _ = self.linear_class(down[0], spec.down_style)
                        plan.attrs[down[0]] = (cls, "GLUFuser")
                plan.applied.append(("GLUFuser", f"{outer[0]}({gate[0]}(x)) * {inner[0]}(x) -> "
                                                 f"{outer[0]}({merged}(x))"))
                return True
        return False

    def _and_mul(self, inst, act_attr: str, spec: GluFuser) -> str | None:
        """The ...AndMul class for the activation `self.<act_attr>` (`ACT2FN[config.hidden_act]`)."""
        from ...semantics.values import Known

        acts = spec.activations
        table = self.index.lookup(acts.module, acts.table)
        if not (isinstance(table, Definition) and type(table.node) is cst.Dict):
            return None
        by_key = {el.key.evaluated_value: table.module.code(_first(el.value)).strip()
                  for el in table.node.elements if type(el) is cst.DictElement and type(el.key) is cst.SimpleString}
        key = None
        for c, init, scope in self.ctor.init_scopes(inst):
            for expr, _cond, _pos in tables(init, c.module).self_assignments.get(act_attr, ()):
                if type(expr) is cst.Subscript and type(expr.value) is cst.Name \
                        and expr.value.value == acts.instantiated and len(expr.slice) == 1:
                    self.ctor._fill_locals(init, scope, c.module, before=10 ** 9)
                    value = self.ctor.evaluator.infer(expr.slice[0].slice.value, scope)
                    key = value.value if isinstance(value, Known) and isinstance(value.value, str) else None
            if key is not None:
                break
        if key not in by_key:
            return None
        mul = spec.and_mul
        registry = self.index.lookup(mul.module, mul.table)
        node = registry.node if isinstance(registry, Definition) else None
        if type(node) is cst.Call and node.args:
            node = node.args[0].value  # LazyDict({...})
        if not type(node) is cst.Dict:
            return None
        entries = {el.key.evaluated_value: el.value for el in node.elements
                   if type(el) is cst.DictElement and type(el.key) is cst.SimpleString}
        for name in (k for k, v in by_key.items() if v == by_key[key]):  # every name of the same class, in order
            value = entries.get(name)
            if value is not None:
                body = value.body if type(value) is cst.Lambda else value
                target = self.index.resolve_expr(registry.module, body.func if type(body) is cst.Call else body)
                if isinstance(target, Definition):
                    return target.qualname
        return None

    def _qkv(self, fn, module, linears, spec: QkvFuser, plan, replacements, inserts) -> bool:
        params = {p.name.value for p in fn.params.params}
        by_input: dict = {}
        for call in find_all(fn, cst.Call):
            found = _self_call(call)
            if found and found[0] in linears and len(found[1]) == 1 and not [a for a in call.args if a.keyword] \
                    and type(found[1][0]) is cst.Name and found[1][0].value in params:
                by_input.setdefault(found[1][0].value, []).append((found[0], call))
        triples = [v for v in by_input.values() if len(v) == 3 and len({n for n, _ in v}) == 3]
        if len(triples) != 1:
            return False
        names = [n for n, _ in triples[0]]
        others = [n for n in linears if n not in names]
        uses = {n for c in find_all(fn, cst.Call) if (sc := _self_call(c)) and (n := sc[0]) in others
                for a in sc[1] if type(a) is cst.Name and a.value == triples[0][0][1].args[0].value.value}
        if uses:
            return False  # another linear reads the same input: the three need not be q, k and v
        outs = [_out_text(*linears[n]) for n in names]
        ins = {_in_text(*linears[n]) for n in names}
        if len(ins) != 1 or len(set(outs)) == 3:
            return False
        order = names
        if len(set(outs)) == 2:
            q = next(n for n, o in zip(names, outs) if outs.count(o) == 1)
            order = [q] + [n for n in names if n != q]
        merged = spec.merged.name
        calls = dict(triples[0])
        body = list(fn.body.body)
        first = min(i for i, s in enumerate(body) for c in calls.values() if _contains(s, c))
        temps = [f"_vllm_merged_{i}" for i in range(3)]
        arg = calls[order[0]].args[0].value
        gemm = cst.Call(func=_self_attr(merged), args=[cst.Arg(arg)])
        split = cst.Call(func=cst.Attribute(value=gemm, attr=cst.Name("split")),
                         args=[cst.Arg(cst.Name("output_sizes")), cst.Arg(cst.UnaryOperation(cst.Minus(), cst.Integer("1")))])
        assign = cst.Assign(targets=[cst.AssignTarget(cst.Tuple([cst.Element(cst.Name(t)) for t in temps],
                                                                lpar=[], rpar=[]))], value=split)
        stmt = cst.SimpleStatementLine([assign])
        plan.aliases.update({gemm: calls[order[0]], split: calls[order[0]], assign: calls[order[0]]})
        inserts[id(body[first])] = [stmt]
        for name, temp in zip(order, temps):
            replacements[id(calls[name])] = cst.Name(temp)
        plan.attrs[merged] = (spec.merged.cls, "QKVFuser")
        q_out = _out_text(*linears[order[0]])
        for n in others:  # the projection back to the hidden size: rowwise
            if _in_text(*linears[n]) == q_out:
                plan.attrs[n] = (self.linear_class(n, spec.out_style)[0], "QKVFuser")
        plan.applied.append(("QKVFuser", f"{', '.join(order)} -> {merged}(x).split(...)"))
        return True

    def _packed_qkv(self, fn, module, linears, spec: PackedQkvFuser, plan) -> bool:
        """`self.c_attn(x).split((q, kv, kv), ...)`: the packed projection becomes a QKVParallelLinear."""
        for call in find_all(fn, cst.Call):
            func = call.func
            if not (type(func) is cst.Attribute and func.attr.value == "split" and call.args
                    and isinstance(call.args[0].value, (cst.Tuple, cst.List)) and len(call.args[0].value.elements) == 3):
                continue
            sizes = [module.code(e.value).strip() for e in call.args[0].value.elements]
            if sizes[1] != sizes[2]:
                continue
            packed = [sc[0] for c in find_all(func.value, cst.Call) if (sc := _self_call(c)) and sc[0] in linears]
            if len(packed) != 1:
                continue
            plan.attrs[packed[0]] = (spec.cls, "PackedQKVFuser")
            for n in linears:  # the projection back from the q width: rowwise
                if n != packed[0] and _in_text(*linears[n]) == sizes[0]:
                    plan.attrs[n] = (self.linear_class(n, spec.out_style)[0], "PackedQKVFuser")
            plan.applied.append(("PackedQKVFuser", f"{packed[0]}(x).split(({', '.join(sizes)})) -> QKVParallelLinear"))
            return True
        return False

    def _attention(self, fn, module, spec: AttentionFuser, plan, replacements) -> None:
        iface = spec.interface
        names: set = set()
        lookups = []
        for small in find_all(fn, (cst.Assign, cst.AnnAssign)):
            value = _peel(small.value) if small.value is not None else None
            head = value.func if type(value) is cst.Call else value
            if isinstance(head, (cst.Attribute, cst.Subscript)) and type(head.value) is cst.Name \
                    and head.value.value == iface:
                targets = [t.target for t in small.targets] if type(small) is cst.Assign else [small.target]
                names.update(t.value for t in targets if type(t) is cst.Name)
                lookups.append(small)
        calls = [c for c in find_all(fn, cst.Call) if type(c.func) is cst.Name and c.func.value in names]
        if len(calls) != 1 or len([a for a in calls[0].args if a.keyword is None]) < 4:
            return
        call = calls[0]
        attr = spec.attr
        replacements[id(call)] = call.with_changes(func=_self_attr(attr), args=[
            a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in call.args[1:4]])
        for small in lookups:
            replacements[id(small)] = cst.Expr(cst.Name("None"))  # the lookup itself computes nothing
        plan.attrs[attr] = (spec.cls, "AttentionFuser")
        plan.keywords[attr] = frozenset(a.keyword.value for a in call.args if a.keyword is not None)
        plan.applied.append(("AttentionFuser", f"{call.func.value}(self, q, k, v, ...) -> self.{attr}(q, k, v)"))


def _first(value):
    return value.elements[0].value if type(value) is cst.Tuple and value.elements else value


def _callee(call: cst.Call) -> str:
    f = call.func
    return f.attr.value if type(f) is cst.Attribute else f.value if type(f) is cst.Name else ""


def _arg_text(call: cst.Call, module, position: int, keyword: str) -> str | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == keyword:
            return module.code(a.value).strip()
    positional = [a for a in call.args if a.keyword is None]
    return module.code(positional[position].value).strip() if len(positional) > position else None


def _in_text(call, module):
    return _arg_text(call, module, 0, "in_features")


def _out_text(call, module):
    return _arg_text(call, module, 1, "out_features")


def _contains(stmt, node) -> bool:
    return any(n is node for n in find_all(stmt, type(node)))

