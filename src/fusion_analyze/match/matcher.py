"""Match pattern forms on the op sequence's dataflow (producer -> consumer and shared-input edges)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..catalog import kernel_covers, kernel_fuses
from ..ir.conditions import contradicts
from ..ir.ops import Op, loop_carried
from .patterns import Form, Node, Pattern

MAX_MATCHES = 200  # per form; a model has tens of layers' worth of ops at most once


@dataclass
class Match:
    pattern: Pattern
    form: Form
    ops: dict[str, Op]  # node name -> op
    inactive: bool = False
    op_list: list[Op] = field(default_factory=list)  # the matched ops in sequence order


class Graph:
    """The steady-path ops with their producers, so that views between two ops can be looked through.

    The decoder layer is walked once; its loop-carried values (what the layer reads from the prologue,
    what the epilogue reads from the layer) get back edges so that one layer's output feeds the next
    layer's first ops (e.g. the MoE output into the next input norm).
    """

    def __init__(self, ops: list[Op], view: list[Op] | None = None):
        """`view`: the ops to match on instead of the steady ones (another branch of an undecided test)."""
        self.ops = view if view is not None else [op for op in ops if op.steady]
        self.pos = {op.id: i for i, op in enumerate(self.ops)}
        self.producer: dict[str, Op] = {}
        for op in self.ops:
            for v in op.outputs:
                self.producer[v] = op
        self.back: dict[str, list[str]] = loop_carried(self.ops)
        self._walked: dict[tuple, frozenset[str]] = {}  # every form and every status asks again
        self._readers_of: dict[tuple, dict[str, set[str]]] = {}  # skip -> op id -> the ops reading it
        self.by_id: dict[str, Op] = {op.id: op for op in self.ops}
        self._of_kind: dict[str, list[tuple[int, Op]]] = {}  # kind -> its ops in order: a form node names kinds
        for i, op in enumerate(self.ops):
            self._of_kind.setdefault(op.kind, []).append((i, op))

    def of_kinds(self, kinds) -> list[Op]:
        """The ops of any of these kinds, in sequence order."""
        return [op for _i, op in sorted(item for k in set(kinds) for item in self._of_kind.get(k, ()))]

    def _walk(self, op: Op, skip: tuple[str, ...], want_roots: bool) -> frozenset[str]:
        key = (op.id, skip, want_roots)
        got = self._walked.get(key)
        if got is None:
            got = self._walked[key] = frozenset(self._walk_from(op, skip, want_roots))
        return got

    def _walk_from(self, op: Op, skip: tuple[str, ...], want_roots: bool, keep_skipped: bool = False) -> set[str]:
        out: set[str] = set()
        here = self.pos[op.id]
        stack = [(v, False) for v in op.inputs]
        seen: set[str] = set()
        while stack:
            v, carried = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if not carried and not op.entry:  # (the loop's first layer: no layer before it)
                stack.extend((w, True) for w in self.back.get(v, ()))
            p = self.producer.get(v)
            if p is None or p.id == op.id or (not carried and self.pos[p.id] >= here):
                if want_roots and p is None:
                    out.add(v)
                continue
            if p.kind in skip:
                stack.extend((w, carried) for w in p.inputs)
                if keep_skipped:
                    out.add(p.id)
            else:
                out.add(p.id)
        return out

    def upstream(self, op: Op, skip: tuple[str, ...]) -> frozenset[str]:
        """Ids of the ops producing `op`'s inputs, looked through ops of the `skip` kinds, those included."""
        key = (op.id, skip, "upstream")
        got = self._walked.get(key)
        if got is None:
            got = self._walked[key] = frozenset(self._walk_from(op, skip, want_roots=False, keep_skipped=True))
        return got

    def sources(self, op: Op, skip: tuple[str, ...]) -> frozenset[str]:
        """Ids of the first non-skipped ops producing `op`'s inputs (views looked through)."""
        return self._walk(op, skip, want_roots=False)

    def neighbours(self, ops: list[Op], skip: tuple[str, ...] = ("view", "cast")) -> list[Op]:
        """The ops one dataflow step around `ops` (views looked through): what produces their inputs and what
        reads their outputs, in sequence order."""
        ids = {op.id for op in ops}
        near = {i for op in ops if op.id in self.pos for i in self.sources(op, skip)}
        readers = self._readers(skip)
        for i in ids:
            near |= readers.get(i, set())
        near -= ids
        return [op for op in self.ops if op.id in near]

    def _readers(self, skip: tuple[str, ...]) -> dict[str, set[str]]:
        """op id -> the ids of the ops that read it (views looked through), built once per graph and skip."""
        got = self._readers_of.get(skip)
        if got is None:
            got = self._readers_of[skip] = {}
            for other in self.ops:
                for src in self.sources(other, skip):
                    got.setdefault(src, set()).add(other.id)
        return got

    def roots(self, op: Op, skip: tuple[str, ...]) -> frozenset[str]:
        """The values `op` reads, named by their first non-skipped producer (or themselves)."""
        return self._walk(op, skip, want_roots=True)


def _attr_ok(op: Op, want: dict, negate: bool) -> bool:
    for key, val in want.items():
        have = op.attrs.get(key)
        if val == "*":
            ok = have is not None
        elif isinstance(val, list):
            ok = str(have) in {str(v) for v in val}
        else:
            ok = str(have) == str(val) if have is not None else False
        if ok == negate:
            return False
    return True


def _node_ok(op: Op, node: Node) -> bool:
    if op.kind not in node.kinds:
        return False
    if node.attrs and not _attr_ok(op, node.attrs, False):
        return False
    if node.not_attrs and not _attr_ok(op, node.not_attrs, True):
        return False
    if node.op_name and not re.search(node.op_name, op.name):
        return False
    if node.kernel and not any(re.search(node.kernel, k.name) for k in op.kernels):
        return False
    if node.covers and not any(kernel_fuses(kernel_covers(k.name), node.covers) for k in op.kernels):
        return False
    return True


def exclusive(a: Op, b: Op) -> bool:
    """Two ops that cannot run on one path: one on the `if` side of a test the walk could not decide and the
    other on its `else` side (the same statement: Op.branches), or one standing under a test the other stands
    under negated (`x` and `not (x)`, of the same code: ir.conditions.contradicts)."""
    sides = {n: side > 0 for n, side in a.branches}
    if any(n in sides and sides[n] != (side > 0) for n, side in b.branches):
        return True
    return contradicts(a.cond, b.cond)  # type: ignore[arg-type]


def match_form(graph: Graph, pattern: Pattern, form: Form, inactive: bool = False) -> list[Match]:
    cands = [[op for op in graph.of_kinds(n.kinds) if _node_ok(op, n)] for n in form.nodes]
    if any(not c for c in cands):
        return []
    results: list[Match] = []
    seen: set[frozenset] = set()

    def sources(op):
        return graph.sources(op, form.skip)

    def roots(op):
        return graph.roots(op, form.skip)

    def fits(node: Node, op: Op, chosen: dict[str, Op]) -> bool:
        if any(o.id == op.id for o in chosen.values()):
            return False
        if any(exclusive(op, o) for o in chosen.values()):
            return False  # ops that cannot run together on one path are no fusion
        for src in node.sources:
            if chosen[src].id not in (graph.upstream(op, form.skip + node.through) if node.through else sources(op)):
                return False
        if node.same_input is not None:
            other = chosen[node.same_input]
            if not (roots(op) & roots(other)):
                return False
        return True

    def go(i: int, chosen: dict[str, Op]) -> None:
        if len(results) >= MAX_MATCHES:
            return
        if i == len(form.nodes):
            key = frozenset(o.id for o in chosen.values())
            if key not in seen:
                seen.add(key)
                ordered = sorted(chosen.values(), key=lambda o: graph.pos[o.id])
                results.append(Match(pattern, form, dict(chosen), inactive, ordered))
            return
        node = form.nodes[i]
        for op in cands[i]:
            if fits(node, op, chosen):
                chosen[node.name] = op
                go(i + 1, chosen)
                del chosen[node.name]

    go(0, {})
    return results


def match_pattern(graph: Graph, pattern: Pattern) -> list[Match]:
    """All matches of a pattern's forms; an op set matched by a fused form is not matched again."""
    out: list[Match] = []
    taken: list[frozenset] = []
    for form in pattern.forms:
        for m in match_form(graph, pattern, form):
            ids = frozenset(o.id for o in m.ops.values())
            if any(ids & t for t in taken):
                continue
            out.append(m)
        taken.extend(frozenset(o.id for o in m.ops.values()) for m in out)
    for form in pattern.inactive:
        for m in match_form(graph, pattern, form, inactive=True):
            ids = frozenset(o.id for o in m.ops.values())
            if any(ids & t for t in taken):
                continue
            out.append(m)
    return out
