"""What of a decoder layer's construction depends on its layer index, read from the code (never run).

A layer list hands each layer its index: vLLM's `make_layers` a `prefix` ("model.layers.3": the index *carried*
in a module name), a comprehension `[Layer(config, i) for i in range(n)]` the index itself. Along an __init__
chain each name is classified:

- `carrier`: the module name with the index in it, handed on (`f"{prefix}.mlp"`, `prefix=prefix` to a class or
  a function): it decides nothing by itself; a submodule built with it may read the index from it;
- `decoded`: a value computed from the index (`extract_layer_index(prefix)`, `int(prefix.split(".")[-1])`, the
  comprehension's `i`, `config.layer_types[layer_idx]`, `layer_idx >= config.first_k_dense_replace`): what it
  decides may differ between layers.

Only `self.<name>` assignments whose value or test is decoded are evaluated per layer; a submodule built from
carried or decoded arguments is followed (to a bounded depth), once per class, to see whether it decodes.
Not followed: a method of the instance that reads `self.layer_idx` (`self.m()` is read by its arguments only), a
function other than the decoders that reads the index from a name it is handed.
"""

from __future__ import annotations

import libcst as cst

from ...index.nodes import children, iter_nodes

CARRIER, DECODED = "carrier", "decoded"


def _join(a: str | None, b: str | None) -> str | None:
    return DECODED if DECODED in (a, b) else CARRIER if CARRIER in (a, b) else None


class Taint:
    """Classifies expressions of one function: `env` its params and locals, `selfenv` the `self.<name>` of its
    instance, `decoders` the functions that read an index from a module name (walk.yaml `runtime.layer_index`)."""

    def __init__(self, env: dict, selfenv: dict, decoders: frozenset):
        self.env, self.selfenv, self.decoders = env, selfenv, decoders

    def of(self, node) -> str | None:
        t = type(node)
        if t is cst.Name:
            return self.env.get(node.value)
        if t is cst.Attribute:
            if type(node.value) is cst.Name and node.value.value == "self":
                return self.selfenv.get(node.attr.value)
            base = self.of(node.value)
            if base == CARRIER and type(node.value) is cst.Attribute:
                return None  # self.experts.moe_config: a submodule's field (the submodule says what it decodes)
            return DECODED if base else None  # prefix.x, layer_idx.x
        if t is cst.Call:
            func = node.func
            args = None
            for a in node.args:
                args = _join(args, self.of(a.value))
            if type(func) is cst.Name and func.value in self.decoders:
                return DECODED if args else None
            if type(func) is cst.Attribute and not (type(func.value) is cst.Name and func.value.value == "self") \
                    and self.of(func.value):
                return DECODED  # prefix.split("."), layer_types[i].startswith(...)
            return args  # a class or function handed the name: carried on (a class built with it is followed)
        if t is cst.FormattedString:
            out = None
            for part in node.parts:
                if type(part) is cst.FormattedStringExpression:
                    out = _join(out, self.of(part.expression))
            return out
        if t is cst.BinaryOperation and type(node.operator) is cst.Add:
            return _join(self.of(node.left), self.of(node.right))  # "model." + prefix: still a module name
        if t in (cst.SimpleString, cst.Integer, cst.Float):
            return None
        if t is cst.IfExp:
            test = self.of(node.test)
            return DECODED if test else _join(self.of(node.body), self.of(node.orelse))
        if t in (cst.Comparison, cst.UnaryOperation, cst.BooleanOperation):
            # a test of a value handed on (`if self.fused_enabled`, the result of a function given the name) is
            # not followed: only a decoded value decides
            return DECODED if any(self.of(c) == DECODED for c in children(node)) else None
        if t in (cst.Subscript, cst.BinaryOperation):
            out = None
            for child in children(node):
                out = _join(out, self.of(child))
            return DECODED if out else None
        if t in (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp, cst.Lambda):
            return DECODED if self._any(node) else None
        out = None
        for child in children(node):
            out = _join(out, self.of(child))
        return out

    def _any(self, node) -> bool:
        """Whether a name of the index's appears anywhere in it (a comprehension's own names aside)."""
        if type(node) is cst.Name:
            return node.value in self.env
        if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "self":
            return node.attr.value in self.selfenv
        return any(self._any(c) for c in children(node))

    def condition(self, cond) -> str | None:
        """A Condition (ir.conditions) of an assignment: decoded where one of its tests reads the index."""
        if cond is None:
            return None
        for term in cond.terms:  # (a test of a name handed on, `if resolve(cfg, prefix=prefix)`, decodes nothing)
            if term.expr is not None and self.of(term.expr) == DECODED:
                return DECODED
        return None


def contains(root, node) -> bool:
    """Whether `node` is `root` or inside it (by identity; punctuation and whitespace are not looked into)."""
    return any(n is node for n in iter_nodes(root))
