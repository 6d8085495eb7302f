"""Status of each matched scenario, derived from the trees: the model's layers, the Ascend kernels its
ops run, the Ascend graph passes whose patterns appear in that kernel sequence, and vLLM's CUDA passes."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from ..catalog import catalog, collective_functions, is_dispatcher, kernel_covers, kernel_covers_of, kernel_fuses
from ..catalog.taxonomy import is_cuda_kernel
from ..ir.conditions import split_outside
from ..index.nodes import find_all
from ..match.matcher import Graph, Match, match_pattern
from ..match.patterns import FUSED_KERNEL_FORM, Pattern
from ..ir.ops import Kernel, Op
from ..ir.states import Status
from ..ir.texts import Said, joined, literal, say

if TYPE_CHECKING:  # the passes the session read from the trees: only their data is used here
    from ..passes.ascend_passes import GraphPass


@dataclass
class Opportunity:
    id: str
    scenario: str
    category: str
    status: Status
    conditions: list[str]
    cuda: dict
    evidence: list[dict]
    ops: list[str]
    file: str
    line: int
    scope: str
    pattern: Pattern
    matches: list[Match] = field(default_factory=list)
    note: str | None = None
    when: list[str] = field(default_factory=list)  # undecided tests the row's ops run under (each match's)
    state_if: list[str] = field(default_factory=list)  # undecided tests its state rests on
    on_ascend: bool = True  # the walk is Ascend's (an Ascend tree, the Ascend backend): its statuses speak of Ascend
    layer_kinds: list[int] = field(default_factory=list)  # the kinds of decoder layer its matches hold in (if several)

    @property
    def conditional(self) -> bool:
        """The row exists, or has its state, only if a test the walk could not decide holds."""
        return bool(self.when or self.state_if)

    @property
    def cuda_only(self) -> bool:
        """Fused on CUDA by a vLLM pass but still open on Ascend: the line to read first (never said of a CUDA
        walk, which makes no Ascend claim)."""
        return (self.on_ascend and self.status is Status.OPEN
                and self.cuda.get("status") in ("fused_by_pass", "fused_by_pass_if"))

    def to_json(self) -> dict:
        d = {
            "id": self.id, "scenario": self.scenario, "category": self.category, "status": str(self.status),
            "conditions": list(self.conditions), "cuda": dict(self.cuda), "evidence": list(self.evidence),
            "ops": list(self.ops), "file": self.file, "line": self.line, "scope": self.scope,
            "title": dict(self.pattern.title), "cuda_only": self.cuda_only,
        }
        if self.note:
            d["note"] = self.note
        if self.conditional:
            d["conditional"] = {"when": list(self.when), "state_if": list(self.state_if)}
        if self.layer_kinds:
            d["layer_kinds"] = list(self.layer_kinds)
        return d


def _ev(file: str, line: int | None, what: str) -> dict:
    return {"file": file, "line": line, "what": what}


def _call_sites(ops: list[Op]) -> list[dict]:
    return [_ev(op.file, op.line, f"{op.name} ({op.layer_class or op.kind})") for op in ops]


def _op_conditions(ops: list[Op]) -> list[str]:
    out: list[str] = []
    for op in ops:
        if op.condition and op.condition not in out:
            out.append(op.condition)
        ar = op.attrs.get("all_reduce")
        if ar and f"{op.name}: all-reduce {ar}" not in out:
            out.append(f"{op.name}: all-reduce {ar}")
    return out


def _fill(text: str, m: Match) -> str:
    """The pattern's text with `{node.attrs.key}` filled in from the match (in each language of a `literal`)."""
    def sub(mo):
        node, _, key = mo.group(1).partition(".attrs.")
        op = m.ops.get(node)
        return str(op.attrs.get(key, "?")) if op is not None else mo.group(0)

    def fill(one: str) -> str:
        return re.sub(r"\{(\w+\.attrs\.\w+)\}", sub, one)

    if isinstance(text, Said) and "zh" in text.spec:
        return literal({lang: fill(t) for lang, t in text.spec.items()})
    return fill(text)


def _covering_kernels(ops: list[Op], need: tuple[str, ...], backend: str) -> list[tuple[Op, Kernel, list[str]]]:
    """(op, kernel, the runtime paths it is cited for) of the kernels that fuse the scenario: per runtime path
    (walk/kernels/runtime_paths.py), the kernel that path runs, the first path's first; one kernel without paths when none
    were read. A dispatcher (unified_attention_with_output)
    is cited only when none of the implementation's kernels is known."""
    if len(need) < 2:  # a merge (qkv_merge: three GEMMs as one) is not shown by a kernel doing one GEMM
        return []
    found = [(op, k) for op in ops for k in op.kernels if kernel_fuses(kernel_covers_of(k, op), need)
             and not (backend == "ascend" and (is_cuda_kernel(k.name) or k.unavailable))]  # vLLM's CUDA build is not Ascend's
    if any(not is_dispatcher(k.name) for _op, k in found):
        found = [ok for ok in found if not is_dispatcher(ok[1].name)]
    if not found:
        return []
    out = []
    for path in _path_names(backend):
        on = [(op, k, rest, positive) for op, k in found for name, rest, positive in (k.paths or ()) if name == path]
        if on:  # the default branch of the path: fewest tests that must hold, then fewest tests
            op, k, rest, _p = min(on, key=lambda c: (c[3], (c[2] or "").count(" and ") + bool(c[2])))
            same = [i for i, (_o, seen, _ps) in enumerate(out) if seen is k]
            if same:
                out[same[0]][2].append(path)
            else:
                out.append((op, k, [path]))
    if out:
        return out
    if all(k.paths is not None for _op, k in found):  # each runs on no path of this model (an encoder's kernel)
        return []
    # no path read: an unconditional kernel first, then the default branch: fewest tests that select a value
    # (`scoring_func == "sqrtsoftplus"` is a variant's branch, its `not (...)` the default), then fewest tests
    found.sort(key=lambda ok: (ok[1].condition is not None, _selecting_tests(ok[1]), (ok[1].condition or "").count(" and ")))
    return [(found[0][0], found[0][1], [])]


def _selecting_tests(k) -> int:
    """How many of a kernel's tests must equal one value (`x == "v"`, `x in (...)`, `x is Y`) for it to run,
    read from each test's code (a note with no code selects nothing)."""
    terms = getattr(k.cond, "terms", ()) or ()
    return sum(1 for t in terms if not t.negated and t.expr is not None and _selects(t.expr))


_SELECTING = (cst.Equal, cst.In, cst.NotIn)


def _selects(expr) -> bool:
    """A comparison in the test asks for one value: `==`, `in` / `not in`, or `is` against anything but None."""
    for node in find_all(expr, cst.Comparison):
        for target in node.comparisons:
            op = type(target.operator)
            if op in _SELECTING or (op is cst.Is and not (type(target.comparator) is cst.Name
                                                          and target.comparator.value == "None")):
                return True
    return False


def _path_names(backend: str) -> list[str]:
    spec = catalog().typed.walk.runtime.attention_paths.get(backend)
    return list(spec.paths) if spec is not None else []


def _vllm_triton(k) -> bool:
    """A `@triton.jit` kernel of vLLM's own tree (not vllm-ascend's)."""
    return k.name.startswith("triton:vllm.") and k.file.startswith("vllm/")


def _separate_kernels(ops: list[Op], need: tuple[str, ...]) -> list[str]:
    """Kernel names when the ops' kernels do the scenario only together (no single one covers it)."""
    if any(kernel_fuses(kernel_covers_of(k, op), need) for op in ops for k in op.kernels):
        return []
    kernels = [k for op in ops for k in op.kernels]
    names: list[str] = []
    for part in dict.fromkeys(need):  # per part, the kernels that always run for it, else those that may
        doing = [k for k in kernels if part in kernel_covers_of(k)]
        if not doing:
            return []
        names += [k.name for k in doing if k.condition is None] or [k.name for k in doing]
    return sorted(set(names))


def _one_kernel_does(ops: list[Op], need: tuple[str, ...]) -> bool:
    """One kernel among the ops' does every primitive of the scenario ("shared" excepted: the shared experts'
    own MLP is never one of a fused kernel's primitives in kernels.yaml)."""
    want = tuple(p for p in need if p != "shared")
    return any(kernel_fuses(kernel_covers_of(k, op), want) for op in ops for k in op.kernels)


def _moe_separate(ops: list[Op], around: list[Op], need: tuple[str, ...]) -> list[str]:
    """The kernels a MoE layer's runner runs for a scenario's primitives, when no one kernel does them all:
    the layer's parts and steps (router GEMM, gating, experts, join: walk/composites.py) and its shared experts'
    own ops ("shared"); [] when a part is not known (nothing is claimed then) or one kernel does it all."""
    moe = [op for op in ops if op.kind == "moe"]
    inside = list(ops) + [op for op in around if op not in ops and (
        any(op.path.startswith(x.path + ".") for x in moe)
        or op.attrs.get("role") == "router" and any(op.attrs.get("inside") == x.layer_class for x in moe))]
    kernels = [k for op in inside for k in op.kernels]
    if any(kernel_fuses(kernel_covers_of(k), tuple(p for p in need if p != "shared")) for k in kernels) \
            and "shared" not in need:
        return []
    names: list[str] = []
    for part in dict.fromkeys(need):
        if part == "shared":
            doing = [k for op in inside if op.attrs.get("role") == "shared_expert" for k in op.kernels]
        elif part == "add" and any(op.kind == "moe_join" for op in inside):  # the join of shared and routed
            doing = [k for op in inside if op.kind == "moe_join" for k in op.kernels]
        else:
            doing = [k for k in kernels if part in kernel_covers_of(k)]
        if not doing:
            return []
        names += [k.name for k in doing if k.condition is None] or [k.name for k in doing]
    return sorted(set(names))


def _operators(ops: list[Op]) -> list[str]:
    """Arithmetic ops as a traced pattern names them (`operator.add`)."""
    return [f"operator.{op.kind}" for op in ops if op.kind in ("add", "mul", "sub", "div")]


def _kernel_names(ops: list[Op]) -> list[str]:
    """The matched ops' kernels; a collective op is also the function that runs it (a pass pattern calls
    `tensor_model_parallel_all_reduce`)."""
    names = [k.name for op in ops for k in op.kernels]
    return names + [f for op in ops for f in collective_functions(op.kind)]


def _ascend_pass(m: Match, passes: list[GraphPass], around: list[Op] | None = None):
    """(pass, pattern, why it fails for this model, its undecided guards) of a pass whose pattern fits the
    scenario and whose kernels all occur in the matched ops' kernels: one that registers for this model first."""
    names = _kernel_names(m.op_list) + _operators(m.op_list)
    found = []
    for p in passes:
        for pat in p.applying(m.pattern.covers, m.pattern.optional, names):
            failed, undecided = list(pat.failed), list(pat.undecided)
            for key, values in pat.constants:
                f, u = _constant_check(m, key, values, pat.registered)
                failed += f
                undecided += u
            misfit, u = _width_check(m, pat, p.file)  # registered, but its graph is not the model's
            undecided += u
            misfit2, u = _arith_fit(m, pat, p.file)
            misfit += misfit2
            undecided += u
            found.append((p, pat, failed + misfit, undecided, bool(failed)))
    if not found and around is not None:  # a larger rewrite that takes the scenario in, around the match
        wider = _kernel_names(m.op_list + around) + _operators(m.op_list)
        matched = [_kernel_names([op]) + _operators([op]) for op in m.op_list]
        for p in passes:
            for pat in p.enclosing(m.pattern.covers, wider, matched):
                found.append((p, pat, list(pat.failed), list(pat.undecided)
                              + [say("pass_encloses", pattern=pat.name, prims=sorted(pat.prims - set(m.pattern.covers)))],
                              bool(pat.failed)))
    found.sort(key=lambda f: bool(f[2]))  # stable: the passes' own order among those that register
    return found[0] if found else None


_SPLITTING = ("attention", "mla_attention")  # vLLM compiles piecewise: each attention op splits the graph


def _between(m: Match, graph: Graph) -> list[Op] | None:
    """The ops that run from the match's first op to its last, in execution order; for a match across the
    layer loop (the last layer op's add read by the next layer's first norm) from the producer to the layer's
    end and from its start to the consumer. None where an op is not on the graph."""
    if not all(op.id in graph.pos for op in m.op_list):
        return None
    pos = sorted(graph.pos[op.id] for op in m.op_list)
    ids = {op.id for op in m.op_list}
    wrapped = [op for op in m.op_list if any(graph.pos[src] > graph.pos[op.id]
                                             for src in graph.sources(op, ("view", "cast")) & ids)]
    if not wrapped:
        return graph.ops[pos[0]:pos[-1] + 1]
    consumer = graph.pos[wrapped[0].id]
    producer = max(graph.pos[src] for src in graph.sources(wrapped[0], ("view", "cast")) & ids)
    layer = [i for i, op in enumerate(graph.ops) if op.section == "layer"]
    if not layer:
        return graph.ops[pos[0]:pos[-1] + 1]
    return graph.ops[producer:layer[-1] + 1] + graph.ops[layer[0]:consumer + 1]


def _matcher_misfit(m: Match, pat, graph: Graph) -> list[str]:
    """Why torch's Inductor pattern matcher, which every vllm-ascend pass registers through
    (`pm.register_replacement`), does not replace this match although the pass's pattern fits it: an
    intermediate value (the pattern returns one value, so every other is one) has users outside the match,
    or a splitting op (attention) runs between the matched ops, so they are in two piecewise graphs."""
    ops = sorted((op for op in m.op_list if op.id in graph.pos), key=lambda op: graph.pos[op.id])
    hidden = next((op for op in m.op_list if op.attrs.get("opaque")), None)
    if hidden is not None:  # inside a custom op that runs the whole layer: the compiled graph holds only that op
        return [say("misfit_opaque", name=hidden.name, where=f"{hidden.file}:{hidden.line}", op=hidden.attrs.get("opaque"))]
    span = _between(m, graph)
    if len(ops) < 2 or span is None:
        return []
    out = []
    split = [op for op in span if op.kind in _SPLITTING]
    if split:
        out.append(say("misfit_split", name=split[0].name, kind=split[0].kind, where=f"{split[0].file}:{split[0].line}"))
    streams = {op.attrs.get("stream") for op in ops}
    if len(streams) > 1:  # a pattern is matched in one stream's graph: ops on two streams are not one match
        on = sorted(s or say("default_stream") for s in streams)
        out.append(say("misfit_streams", streams=joined(on, "; ")))
    if getattr(pat, "outputs", 0) == 1:
        ids = {op.id for op in ops}
        for op in ops[:-1]:
            users = [o for o in graph.ops if o.id not in ids and op.id in graph.sources(o, ("view", "cast"))]
            if users:
                u = users[0]
                out.append(say("misfit_users", name=op.name, where=f"{op.file}:{op.line}", user=u.name,
                               user_where=f"{u.file}:{u.line}"))
                break
    return out


def _constant_check(m: Match, key: str, values: tuple, where: str | None) -> tuple[list[str], list[str]]:
    """A pattern traced with `eps` in (1e-6, 1e-5) matches only ops whose own value is one of them."""
    ops = [op for op in m.op_list if key in op.attrs.get("values", {})]
    wrong = [op for op in ops if op.attrs.get("values", {})[key] not in values]
    at = f" ({where})" if where else ""
    if wrong:
        op = wrong[0]
        return [say("constant_other", key=key, values=_listed(values), at=at, name=op.name,
                    value=repr(op.attrs.get('values', {})[key]))], []
    if not ops:  # no op of the match knows its own value
        return [], [say("constant_unknown", key=key, values=_listed(values), at=at)]
    return [], []


def _width_check(m: Match, pat, file: str) -> tuple[list[str], list[str]]:
    """A pattern that normalises per head (`npu_rms_norm(q.view(..., self.head_dim))`) does not match a norm over
    the whole projection (weight [num_heads * head_dim]): each norm's width against the rotary head size."""
    if not pat.norm_over or "head_dim" not in pat.norm_over:
        return [], []
    heads = {op.attrs.get("values", {})["head_size"] for op in m.op_list if op.kind == "rope" and "head_size" in op.attrs.get("values", {})}
    norms = [op for op in m.op_list if op.kind == "rmsnorm"]
    at = say("norm_over", over=pat.norm_over, where=f"{file}:{pat.line}")
    if len(heads) == 1:
        head = next(iter(heads))
        wide = [op for op in norms if op.attrs.get("values", {}).get("hidden_size") not in (None, head)]
        if wide:
            return [say("norm_wide", at=at, name=wide[0].name, width=wide[0].attrs.get('values', {})['hidden_size'],
                        head=head)], []
        if all("hidden_size" in op.attrs.get("values", {}) for op in norms):
            return [], []
    # not known as numbers: compared as the code they are built from (symbolic widths). A norm over
    # `self.total_num_heads * self.head_dim` with RoPE over `self.head_dim` normalises every head's values at
    # once whatever the configuration; over `self.head_dim` itself it is per head
    head_codes = {op.attrs.get("values", {}).get("head_size_code") for op in m.op_list if op.kind == "rope"} - {None}
    if len(head_codes) == 1 and norms and all("hidden_size_code" in op.attrs.get("values", {}) for op in norms):
        head = next(iter(head_codes))
        widths = [(op, str(op.attrs.get("values", {}).get("hidden_size_code"))) for op in norms]
        for op, width in widths:
            factors = split_outside(width, " * ")
            if len(factors) > 1 and head in factors:
                return [say("norm_wide_always", at=at, name=op.name, width=' * '.join(factors), head=head)], []
        if all(width == head for _op, width in widths):
            return [], []
    return [], [say("norm_per_head", pattern=pat.name, over=pat.norm_over, where=f"{file}:{pat.line}")]


def _arith_fit(m: Match, pat, file: str) -> tuple[list[str], list[str]]:
    """An arithmetic pattern (`tmp = x * self.scale; out = tmp + y`) fits when the matched ops hold its graph
    as written: each later node reads the earlier one's output directly (no op in between) on the side the
    pattern writes it (the pattern matcher does not swap `a + b`), and a constant operand is the model's
    scalar on the same side. The constant's value is a condition: it is fixed when the pass registers."""
    nodes = pat.arith
    if not nodes:
        return [], []
    reasons: list[str] = []
    for start in [op for op in m.op_list if op.kind == nodes[0][1]]:
        bound, why = {nodes[0][0]: start}, _node_misfit(nodes[0], start, {})
        for node in nodes[1:] if why is None else ():
            candidates = [op for op in m.op_list if op.kind == node[1] and
                          any(x[0] == "tmp" and bound[x[1]].outputs and bound[x[1]].outputs[0] in op.inputs for x in node[2:])]
            if not candidates:
                why = say("arith_not_direct", kind=node[1], first=nodes[0][1])
                break
            whys = [_node_misfit(node, op, bound) for op in candidates]
            if None not in whys:
                why = whys[0]
                break
            bound[node[0]] = candidates[whys.index(None)]
        if why is None:
            consts = [(x[1], op) for node in nodes for op in [bound[node[0]]] for x in node[2:] if x[0] == "const"]
            why, undecided = _constants_fit(consts, pat, file)
            if why is None:
                return [], undecided
        reasons.append(why)
    return [say("arith_misfit", pattern=pat.name, where=f"{file}:{pat.line}", expr=_pattern_text(nodes),
                why=reasons[0] if reasons else say("arith_none", kind=nodes[0][1]))], []


def _constants_fit(consts: list, pat, file: str) -> tuple[str | None, list[str]]:
    """A constant of the pattern (`self.scale`) is the value the pass registered it with for this model
    (`scale=routed_scaling_factor`): the model's scalar must be that value, or the traced graph differs."""
    values = {kw: v for kw, v in pat.keyword_values}
    codes = {kw: code for kw, code, _m, _c in pat.keywords}
    undecided = []
    for code, op in consts:
        kw = code.removeprefix("self.")
        mine, theirs = op.attrs.get("scalar_value"), values.get(kw)
        scalar = op.attrs.get('scalar_code') or say("its_scalar")
        said = joined([scalar, f" = {mine!r}"], "") if mine is not None else scalar
        traced = f"{code} = {codes.get(kw, kw)}{' = ' + repr(theirs) if theirs is not None else ''}"
        if mine is not None and theirs is not None:
            if mine != theirs:
                return say("constant_traced", traced=traced, where=pat.registered or file, name=op.name,
                           at=f"{op.file}:{op.line}", said=said), []
            continue
        undecided.append(say("constant_scales", name=op.name, at=f"{op.file}:{op.line}", said=said, pattern=pat.name,
                             traced=traced, where=pat.registered or file))
    return None, undecided


def _node_misfit(node, op: Op, bound: dict) -> str | None:
    """Why one model op is not this pattern node (operand order, a scalar where the pattern has a tensor)."""
    _out, kind, left, right = node
    at = {"name": op.name, "at": f"{op.file}:{op.line}"}
    for side, x in (("left", left), ("right", right)):
        scalar_here = op.attrs.get("scalar_side") == side
        if x[0] == "const" and not scalar_here:
            return say("node_no_scalar", **at, side=say(f"side_{side}"), want=x[1])
        if x[0] != "const" and scalar_here:
            return say("node_scalar", **at, scalar=op.attrs.get('scalar_code'), side=say(f"side_{side}"))
        if x[0] == "tmp":
            first = op.attrs.get("lhs") == bound[x[1]].outputs[0]
            if first != (side == "left"):
                return say("node_operand_side", **at, kind=bound[x[1]].kind,
                           got=say(f"side_{'right' if first is False else 'left'}"), side=say(f"side_{side}"))
    return None


def _pattern_text(nodes) -> str:
    text = {}
    for out, kind, left, right in nodes:
        sym = {"add": "+", "mul": "*", "sub": "-", "div": "/"}[kind]
        text[out] = f"{text.get(left[1], left[1])} {sym} {text.get(right[1], right[1])}"
    return f"`{text[nodes[-1][0]]}`"


def _listed(values: tuple) -> str:
    return "(" + ", ".join(repr(v) for v in values) + ")"


def status_of(m: Match, backend: str, ascend_passes: list[GraphPass],
              around: list[Op] | None = None, graph: Graph | None = None) -> tuple[Status, list[str], list[dict], str | None, list[str]]:
    """(state, conditions, evidence, note, the undecided tests the state rests on: a fusing kernel that runs
    only when its code's test holds, a graph pass's guard the walk could not decide)."""
    ops = m.op_list
    need = m.pattern.covers
    conds = _op_conditions(ops)
    sites = _call_sites(ops)
    if m.inactive:
        return Status.INACTIVE, [_fill(m.form.when or "", m)] + conds, sites, None, []
    if backend == "ascend":
        hits = _covering_kernels(ops, need, backend)
        if hits:
            c, ev, ifs = list(conds), [], []
            # where more than one kernel that fuses it is reached (the paged-attention kernel on one branch, the
            # fused-infer one on the other), the state does not rest on the tests that pick between them
            fusing = {(k.name, k.file, k.line) for op in ops for k in op.kernels
                      if kernel_fuses(kernel_covers_of(k, op), need) and not is_cuda_kernel(k.name) and not k.unavailable}
            alone = len(fusing) == 1
            for op, k, paths in hits:
                where = op.attrs.get("ascend_class") or op.layer_class or op.scope
                if _vllm_triton(k):  # the attention implementation the model's backend names runs it
                    where = (op.attrs.get("attention_backend") or {}).get("impl") or where
                rests = dict((name, r) for name, r, _p in k.paths or ())
                for path in paths or [None]:
                    rest = rests.get(path) if path else k.condition
                    runs = say("kernel_runs_when", kernel=k.name, cond=rest)
                    c += [joined([f"{path}: ", runs], "") if path else runs] if rest else []
                    ifs += [f"{path + ': ' if path else ''}{rest}"] if rest and alone else []
                said = (say("ev_kernel_in_paths" if len(paths) > 1 else "ev_kernel_in_path", kernel=k.name, where=where,
                            paths=paths) if paths else say("ev_kernel_in", kernel=k.name, where=where))
                ev.append(_ev(k.file, k.line, say("ev_vllm_triton", said=said) if _vllm_triton(k) else said))
            # no vllm-ascend kernel: a vLLM Triton kernel the model's own backend launches (TritonAttentionDiffKVImpl)
            note = say("note_vllm_triton") if all(_vllm_triton(k) for _op, k, _p in hits) else None
            return Status.FUSED_BY_ASCEND_KERNEL, c, ev + sites, note, ifs
        hit_pass = _ascend_pass(m, ascend_passes, around)
        if hit_pass is not None:
            p, pat, failed, undecided, unregistered = hit_pass
            if failed:
                if unregistered:  # a guard of the pass, or a constant the pattern is traced with
                    note = say("pass_unregistered", name=p.name, pattern=pat.name, why=failed)
                else:  # registered, but the graph it traces is not the model's
                    note = say("pass_other_graph", name=p.name, pattern=pat.name, why=failed)
                return Status.OPEN, conds + p.conditions(), [p.evidence(pat)] + sites, note, []
            misfit = _matcher_misfit(m, pat, graph) if graph is not None else []
            if misfit:  # the pass is registered for this graph, but Inductor's matcher will not replace the match
                note = say("pass_matcher_misfit", name=p.name, why=misfit)
                return Status.OPEN, conds + p.conditions(), [p.evidence(pat)] + sites, note, []
            if p.default_on() is False:  # under a deployment that compiles nothing, no flag would turn it on
                note = (say("pass_not_compiled", name=p.name, why=p.not_compiled) if p.not_compiled else
                        say("pass_off", name=p.name, flag=p.flag, default=p.default))
                return Status.OPEN, conds + p.conditions() + undecided, [p.evidence(pat)] + sites, note, []
            ifs = [u for u in undecided if not u.startswith("as part of ")]
            return Status.FUSED_BY_ASCEND_GRAPH_PASS, conds + p.conditions() + undecided, [p.evidence(pat)] + sites, None, ifs
    if m.form.fused_in_model and backend == "ascend" and any(op.kind == "moe" for op in ops):
        # handing the gate or the shared experts to the MoE layer is placement, not fusion: fused only where one
        # kernel is known to do it all
        separate = _moe_separate(ops, around or [], need)
        if separate or not _one_kernel_does(ops + list(around or []), need):
            note = (say("moe_handed_separate", form=m.form.fused_in_model, kernels=separate) if separate
                    else say("moe_handed_unknown", form=m.form.fused_in_model))
            return Status.OPEN, conds, sites, note, []
    if m.form.fused_in_model:
        native = [op for op in ops if op.attrs.get("native") and op.kind == m.form.nodes[0].kinds[0]] if backend == "ascend" else []
        if native:
            note = say("fused_layer_native", form=m.form.fused_in_model, cls=native[0].layer_class,
                       native=native[0].attrs.get('native'))
            return Status.OPEN, conds, [_ev(native[0].attrs.get("class_file") or native[0].file, native[0].attrs.get("class_line"), f"class {native[0].layer_class}")] + sites, note, []
        separate = _separate_kernels(ops, need) if backend == "ascend" else []
        if separate:
            note = say("fused_layer_separate", form=m.form.fused_in_model, kernels=separate)
            return Status.OPEN, conds, sites, note, []
        ev = []
        for op in [m.ops[n.name] for n in m.form.nodes if n.name in m.ops] + ops:  # the form's own layer first
            if cls_file := op.attrs.get("class_file"):
                by = op.attrs.get("fused_by")
                said = (say("ev_class_fused_by", cls=op.layer_class, form=m.form.fused_in_model, fuser=by)
                        if by and "Fuser" in by else say("ev_class_fused", cls=op.layer_class, form=m.form.fused_in_model))
                ev.append(_ev(cls_file, op.attrs.get("class_line"), said))
                break
        return Status.FUSED_IN_MODEL, conds, ev + sites, None, []
    separate = _separate_kernels(ops, need) if backend == "ascend" else []
    if backend == "ascend" and not separate and any(op.kind == "moe" for op in ops):
        separate = _moe_separate(ops, around or [], need)  # what the MoE layer's runner runs for it
    note = say("separate_kernels", kernels=separate) if separate else None
    return Status.OPEN, conds, sites + _kernel_sites(ops, separate, sites), note, []


def _kernel_sites(ops: list[Op], names: list[str], cited: list[dict]) -> list[dict]:
    """Where an attention layer's backend implementation launches the separate kernels a row names (its call
    site says nothing of them: TritonAttentionDiffKVImpl's KV-cache write,
    vllm/v1/attention/ops/triton_reshape_and_cache_flash.py), after the ops' call sites; a site cited once."""
    out, seen = [], {(e["file"], e["line"]) for e in cited}
    for op in ops:
        impl = (op.attrs.get("attention_backend") or {}).get("impl")
        for k in op.kernels if impl else ():
            if k.name in names and not is_dispatcher(k.name) and (k.file, k.line) not in seen:
                seen.add((k.file, k.line))
                out.append(_ev(k.file, k.line, say("ev_kernel_in", kernel=k.name, where=impl)))
    return out


def cuda_status(m: Match, cuda_passes: list[GraphPass], backend: str | None = None, inductor: dict | None = None,
                graph: Graph | None = None) -> dict:
    """The CUDA column: what vLLM runs for the matched ops on CUDA at its default configuration. `inductor`:
    where that configuration compiles with Inductor and turns CustomOps off (passes/cuda_passes.py)."""
    if m.form.fused_in_model and not m.inactive:
        if any(op.kind == "moe" for op in m.op_list) and m.pattern.category == "moe":
            # the gate or the shared experts handed to the MoE layer: vLLM's runner still runs the router GEMM,
            # the top-k kernel, the experts and the shared MLP as kernels of their own (placement, not fusion)
            return {"status": "open", "note": say("cuda_moe_handed", form=m.form.fused_in_model)}
        return {"status": "fused_in_model"}
    inductor = _by_inductor(m, graph, inductor) if inductor is not None and not m.inactive else None
    if inductor is not None:
        return inductor
    cuda = [op.attrs.get("cuda_kernels") if op.attrs.get("native_of") else None for op in m.op_list]
    if cuda and all(cuda) and not m.inactive:  # ops of a layer's native forward on Ascend: one kernel on CUDA
        first = next(op for op in m.op_list if op.attrs.get("cuda_kernels"))
        return {"status": "fused_by_kernel", "kernels": sorted({k for ks in cuda for k in ks or ()}),
                "runs": first.attrs.get("cuda_runs")}
    fusing = _cuda_fusing(m, backend)
    if fusing is not None and not m.inactive:
        return fusing
    # MLA-only passes (their ops name unified_mla_*) fit only a match that has an MLA attention op
    optional = m.pattern.optional + (("mla",) if any(op.kind == "mla_attention" for op in m.op_list) else ())
    # a pattern that also does an optional primitive (QkNormRopeKvCache's rms_norm) applies only where the
    # model does it next to the match (a q/k norm before the RoPE); without a graph, any
    fitting = [(p, pat) for p in cuda_passes for pat in p.fitting(m.pattern.covers, optional)]
    if graph is not None and any(pat.prims & set(m.pattern.optional) for _p, pat in fitting):
        near = m.op_list + graph.neighbours(m.op_list)
        done = {op.kind for op in near} | {p for op in near for k in op.kernels for p in kernel_covers_of(k, op)}
        done |= set(m.pattern.covers)
        fitting = [(p, pat) for p, pat in fitting if (pat.prims & set(m.pattern.optional)) <= done]
    fitting.sort(key=lambda f: f[0].default_on() is False)  # a pass that is on (or may be) first
    for p, pat in fitting:
        on = p.default_on()
        return {"status": {True: "fused_by_pass", None: "fused_by_pass_if", False: "pass_off_by_default"}[on],
                "pass": p.name, "flag": p.flag, "default": p.default,
                "conditions": p.conditions(), "evidence": p.evidence(pat)}
    if not m.inactive and backend == "ascend" and any(
            (op.attrs.get("part") or op.attrs.get("step")) and not op.attrs.get("cuda_kernels") for op in m.op_list):
        # a composite layer's part or step walked on Ascend whose CUDA counterpart was not read: not a claim
        return {"status": "unknown", "note": say("cuda_part_not_read")}
    if not m.inactive and backend == "ascend" and all(
            op.file.startswith("vllm_ascend/") and op.attrs.get("role") != "shared_expert" for op in m.op_list):
        # vllm-ascend's own code (its MLA implementation, its model classes): CUDA runs other code for it
        return {"status": "unknown", "note": say("cuda_ascend_own_code")}
    return {"status": "inactive" if m.inactive else "open"}


# CustomOp layers whose native forward (what runs under vLLM's default compilation on CUDA) is element-wise
# work with at most a row reduction, which Inductor fuses with its element-wise neighbours
_INDUCTOR_LAYERS = frozenset({"rmsnorm", "layernorm", "add_rmsnorm", "silu_mul", "gelu_mul", "gelu", "silu"})


def _pointwise(op: Op) -> bool:
    """Code Inductor generates under vLLM's default compilation: a CustomOp's forward_native op, a norm or
    activation CustomOp layer (custom ops off: its native forward), or a plain PyTorch call of the model (no
    layer, no device kernel named); not a GEMM, attention or collective."""
    if op.attrs.get("native_of") or (op.attrs.get("custom_op") and op.kind in _INDUCTOR_LAYERS):
        return True
    return _plain(op)


def _plain(op: Op) -> bool:
    """A plain PyTorch call of the model: no layer, no device kernel named, not a GEMM, attention or collective."""
    return not op.kernels and not op.layer_class and op.kind not in ("matmul", "bmm", "attention", "allreduce")


def _by_inductor(m: Match, graph: Graph | None, inductor: dict) -> dict | None:
    """Under vLLM's default compilation on CUDA (Inductor, custom ops off) the match is plain PyTorch
    element-wise work in one piecewise graph: a CustomOp layer's forward_native (which runs instead of its
    forward_cuda) or element-wise torch calls of the model, with no attention op between them. Inductor fuses
    such chains into generated kernels. None where the match is anything else."""
    ops = m.op_list
    native = all(op.attrs.get("native_of") for op in ops)
    plain = m.pattern.category in ("vector", "norm", "activation") and all(_pointwise(op) for op in ops) \
        and any(not op.layer_class for op in ops)  # a chain the model writes around (or with) such layers
    if not ops or not (native or plain):
        return None
    span = _between(m, graph) if graph is not None else None
    if span is None:
        return None
    if any(not _pointwise(op) for op in span):
        # attention splits the piecewise graph; a GEMM, a collective or a kernel call is not generated code:
        # Inductor fuses the element-wise ops on either side of it, not the chain across it
        return None
    cuda = sorted({k for op in ops for k in op.attrs.get("cuda_kernels") or ()})
    out = {"status": "fused_by_inductor", "evidence": _ev(inductor["file"], inductor["line"], say("ev_inductor"))}
    if cuda:  # the CustomOp's own kernel runs only where custom_ops enables it (`+<name>`)
        out["kernels_if_enabled"] = cuda
        out["runs_if_enabled"] = next(op.attrs.get("cuda_runs") for op in ops if op.attrs.get("cuda_kernels"))
    return out


def _cuda_fusing(m: Match, backend: str | None) -> dict | None:
    """The CUDA column from what vLLM launches there for the matched ops: a kernel of a composite part
    (the router's `topk_softmax`) or, on a report walked on CUDA, of the ops themselves, that does every
    primitive of the scenario; its test, if it runs under one, among the conditions. None where none does."""
    need = m.pattern.covers
    if len(need) < 2:
        return None
    for op in m.op_list:
        names = op.attrs.get("cuda_kernels") or ()
        tests = op.attrs.get("cuda_kernel_conditions") or {}
        fusing = [k for k in names if kernel_fuses(kernel_covers(k), need)]
        if fusing:  # each that fuses it, an unconditional one first, then by the fewest tests; with its test
            fusing.sort(key=lambda n: (n in tests, (tests.get(n) or "").count(" and "), n))
            out = {"status": "fused_by_kernel", "kernels": fusing, "runs": op.attrs.get("cuda_runs")}
            if any(tests.get(k) for k in fusing):
                out["conditions"] = [say("kernel_runs_when", kernel=k, cond=tests[k]) for k in fusing if tests.get(k)]
            return out
    hits = _covering_kernels(m.op_list, need, "cuda") if backend == "cuda" else []
    if hits:
        op, k, _paths = hits[0]
        out = {"status": "fused_by_kernel", "kernels": [k.name], "runs": f"{op.layer_class or op.scope}"}
        if k.condition:
            out["conditions"] = [say("kernel_runs_when", kernel=k.name, cond=k.condition)]
        return out
    return None


def _subsumed(m: Match, by: dict[str, list[frozenset]]) -> bool:
    ids = frozenset(o.id for o in m.op_list)
    return any(ids <= other for q in m.pattern.subsumed_by for other in by.get(q, ()))


MAX_OTHER_BRANCHES = 8  # undecided tests whose `else` side is matched too, per model


def derive(ops: list[Op], patterns: list[Pattern], backend: str, ascend_passes: list[GraphPass],
           cuda_passes: list[GraphPass], inductor: dict | None = None) -> list[Opportunity]:
    """The opportunities of the steady sequence; then, for each test the walk could not decide, those of the
    sequence with its `else` side in place of its `if` side that involve an op of that side (the `if` side
    may not be the one that runs: HunYuan V3's attention without the HPC kernel)."""
    out = _derive(ops, Graph(ops), patterns, backend, ascend_passes, cuda_passes, inductor)
    known = {(o.scenario, o.scope) for o in out}
    alternates: dict = {}  # (scenario, scope) -> the row of another branch's view
    used = {o.id for o in out}
    tests = sorted({n for op in ops for n, side in op.branches  # a side with an op it alone holds back
                    if side == 1 and all(other == 0 for m, other in op.branches if m != n)})
    matchable = {k for p in patterns for f in (*p.forms, *p.inactive) for node in f.nodes for k in node.kinds}
    # a test whose side holds back no op a pattern has a node for takes none of the budget (it is skipped below)
    tests = [n for n in tests if any((n, 1) in op.branches and op.kind in matchable for op in ops)]
    for n in _within_budget(ops, tests):
        view = [op for op in ops if (op.steady and (n, 0) not in op.branches)
                or ((n, 1) in op.branches and all(side == 0 for m, side in op.branches if m != n))]
        held = {op.id for op in view if (n, 1) in op.branches}
        if not any(op.kind in matchable for op in view if op.id in held):
            continue  # no pattern has a node its held ops could be: no opportunity can involve them
        for o in _derive(ops, Graph(ops, view), patterns, backend, ascend_passes, cuda_passes, inductor):
            if not held & set(o.ops):
                continue
            first = alternates.get((o.scenario, o.scope))
            if first is not None and set(o.layer_kinds) - set(first.layer_kinds):
                # the same branch of the same code in another kind of decoder layer (each kind is walked on its
                # own, its tests numbered apart): one row, in the kinds of both, its matches in each
                first.layer_kinds = sorted(set(first.layer_kinds) | set(o.layer_kinds))
                first.matches += o.matches
                first.ops += [i for i in o.ops if i not in first.ops]
            if (o.scenario, o.scope) in known:
                continue
            known.add((o.scenario, o.scope))
            alternates[(o.scenario, o.scope)] = o
            k = 1
            while (oid := o.id.split("#")[0] + (f"#{k}" if k > 1 else "")) in used:
                k += 1
            o.id = oid
            used.add(oid)
            out.append(o)
    return out


def _within_budget(ops: list[Op], tests: list[int]) -> list[int]:
    """The first MAX_OTHER_BRANCHES tests, counted by where they are: the same test of another kind of decoder
    layer (each kind is walked on its own, its tests numbered apart; the same ops held back) takes no more."""
    held: dict[int, set] = {}
    for op in ops:
        for n, side in op.branches:
            if side == 1:
                held.setdefault(n, set()).add((op.file, op.line, op.kind))
    out, places = [], []
    for n in tests:
        place = frozenset(held.get(n, ()))
        if place not in places:
            if len(places) >= MAX_OTHER_BRANCHES:
                continue
            places.append(place)
        out.append(n)
    return out


def _native_note(m: Match, note: str | None) -> str | None:
    """An open scenario all of whose ops are a layer's forward_native on Ascend (walk/layers.py `_native_ops`):
    said first, with how many separate kernels they are and, where a registered Ascend kernel computes the same
    math, which one."""
    layers = {op.attrs.get("native_of") for op in m.op_list}
    if None in layers or not layers:
        return note
    same = next((op.attrs.get("same_math") for op in m.op_list if op.attrs.get("same_math")), None)
    total = max(int(op.attrs.get("native_ops") or 0) for op in m.op_list)
    more = max(int(op.attrs.get("native_ops_if") or 0) for op in m.op_list)
    said = say("native_note_more" if more else "native_note", layers=sorted(str(x) for x in layers), total=total,
               more=more, n=len(m.op_list))
    return joined([said] + [x for x in (same, note) if x], "; ")


def _closest_kernel_scenario(matches: dict[str, list]) -> dict[str, list]:
    """A call of one fused kernel (the implicit `fused_kernel` form) is the scenario it does exactly, where one
    does (kernels.yaml `covers` within the pattern's covers, optional and neutral primitives): MLA's
    npu_kv_rmsnorm_rope_cache (rmsnorm, rope, kvcache) is the kv norm + RoPE + cache write, not a q/k norm
    + RoPE nor RoPE + cache write alone. A kernel no scenario fits exactly keeps every scenario it covers."""
    from ..catalog import fuses

    exact: dict[str, set] = {}
    for pid, ms in matches.items():
        for m in ms:
            if m.form.id == FUSED_KERNEL_FORM and any(
                    fuses(kernel_covers_of(k, m.op_list[0]), m.pattern.covers, m.pattern.optional) for k in m.op_list[0].kernels):
                exact.setdefault(m.op_list[0].id, set()).add(pid)
    if not exact:
        return matches
    return {pid: [m for m in ms if not (m.form.id == FUSED_KERNEL_FORM and m.op_list[0].id in exact
                                        and pid not in exact[m.op_list[0].id])]
            for pid, ms in matches.items()}


def _derive(ops: list[Op], graph: Graph, patterns: list[Pattern], backend: str, ascend_passes: list[GraphPass],
            cuda_passes: list[GraphPass], inductor: dict | None = None) -> list[Opportunity]:
    matches = _closest_kernel_scenario({p.id: match_pattern(graph, p) for p in patterns})
    opsets = {pid: [frozenset(o.id for o in m.op_list) for m in ms] for pid, ms in matches.items()}
    groups: dict[tuple, list] = {}
    for p in patterns:
        # a match across the layer boundary (the last layer's all-reduce into the final norm) after the others:
        # it joins the row of the same scenario and status whose matches share one of its ops
        for m in sorted(matches[p.id], key=_crosses_sections):
            if _subsumed(m, opsets) or _foreign_kernel_call(m, backend) or _apart(m, graph):
                continue
            anchor = m.ops[m.form.anchor_node]
            around = graph.neighbours(m.op_list)
            moes = [x.path + "." for x in m.op_list if x.kind == "moe"]
            if moes:  # a MoE layer's parts, steps, router GEMM and shared experts: what its runner runs
                around += [op for op in graph.ops if op.path.startswith(tuple(moes)) and op not in around]
            status, conds, ev, note, ifs = status_of(m, backend, ascend_passes, around, graph)
            if status is Status.OPEN and backend == "ascend":
                note = _native_note(m, note)
            fails = _rests_on_unavailable(m.op_list)
            if fails is not None:  # the path it is on fails on the backend: said first, in the row and its conditions
                conds = [fails] + conds
                note = joined([fails, note], " | ") if note else fails
            # a row is one state on both columns: matches that vLLM runs differently on CUDA are rows apart
            cuda = cuda_status(m, cuda_passes, backend, inductor, graph)
            key = (p.id, anchor.scope, status, cuda["status"])
            if _crosses_sections(m):
                ids = {o.id for o in m.op_list}
                key = next((k for k, items in groups.items() if k[0] == p.id and k[2:] == key[2:]
                            and any(ids & {o.id for o in it[0].op_list} for it in items)), key)
            groups.setdefault(key, []).append((m, conds, ev, note, ifs, cuda))
    out: list[Opportunity] = []
    used: dict[str, int] = {}
    order = sorted(groups, key=lambda k: (k[0], k[1], min(graph.pos[g[0].op_list[0].id] for g in groups[k])))
    for key in order:
        pid, scope, status, _cuda = key
        items = groups[key]
        base = f"{pid}@{scope}"
        used[base] = used.get(base, 0) + 1
        oid = base if used[base] == 1 else f"{base}#{used[base]}"
        first = items[0][0].op_list[0]
        conds = list(dict.fromkeys(c for it in items for c in it[1]))
        evidence = _dedupe(e for it in items for e in it[2])
        op_ids = list(dict.fromkeys(o.id for it in items for o in it[0].op_list))
        pat = items[0][0].pattern
        # the row rests on undecided tests where each of its matches runs only under one (its ops' path), or
        # where its state does (a fusing kernel's own test, a pass guard): said in the table, ranked after
        when = [] if status is Status.INACTIVE or any(not _op_conditions(it[0].op_list) for it in items) \
            else list(dict.fromkeys(c for it in items for c in _op_conditions(it[0].op_list)))
        state_if = list(dict.fromkeys(c for it in items for c in it[4]))
        out.append(Opportunity(oid, pid, pat.category, status, conds, items[0][5],
                               evidence, op_ids, first.file, first.line, scope, pat,
                               [it[0] for it in items], joined(list(dict.fromkeys(it[3] for it in items if it[3])), " | ") or None,
                               when, state_if, on_ascend=backend == "ascend",
                               layer_kinds=_layer_kinds(it[0] for it in items)))
    return out


def _rests_on_unavailable(ops: list[Op]):
    """The sentence of a match whose ops call, on every path through them, a kernel the backend's install does
    not have (attrs.unavailable: vLLM's `_C` on Ascend): what fails and why; None otherwise."""
    gone = [(op, name) for op in ops for name in op.attrs.get("unavailable", ())]
    if not gone:
        return None
    why = next(k.unavailable for op, name in gone for k in op.kernels if k.name == name and k.unavailable)
    return say("rests_on_unavailable", kernels=sorted({n for _o, n in gone}),
               ops=list(dict.fromkeys(f"{op.file.rsplit('/', 1)[-1]}:{op.line}" for op, _n in gone)), why=why)


def _layer_kinds(matches) -> list[int]:
    """The kinds of decoder layer a row holds in: each match's, the kind every one of its ops is walked in (ops
    of two kinds are in no one layer: each kind is walked on its own), over its matches."""
    out: set[int] = set()
    for m in matches:
        kinds = {o.attrs["layer_kind"] for o in m.op_list if "layer_kind" in o.attrs}
        if len(kinds) == 1:
            out |= kinds
    return sorted(out)


def _apart(m: Match, graph: Graph) -> bool:
    """A vector chain whose later op also reads what a GEMM, attention or another layer computes from the
    earlier op's output (the MLP's output into the second residual add, the MLP reading the first): the later
    op waits on that work, so the two cannot be one kernel and it is no chain at all. (Where that input does
    not depend on the earlier op, `x * s + y` can still run as one kernel where y is ready.)"""
    if m.pattern.category != "vector" or not all(op.id in graph.pos for op in m.op_list):
        return False
    ops = sorted(m.op_list, key=lambda op: graph.pos[op.id])
    ids = {op.id for op in ops}
    by_id = graph.by_id
    for a, b in zip(ops, ops[1:]):
        stack, seen = list(graph.sources(b, ("view", "cast")) - ids), set()
        while stack:  # what b also reads, through plain element-wise ops, back to where a ran
            src = stack.pop()
            other = by_id.get(src)
            if src in seen or other is None or not graph.pos[a.id] < graph.pos[src] < graph.pos[b.id]:
                continue
            seen.add(src)
            if not _plain(other) and _depends_on(graph, other, a, by_id):
                return True
            stack += list(graph.sources(other, ("view", "cast")) - ids)
    return False


def _depends_on(graph: Graph, op: Op, earlier: Op, by_id: dict) -> bool:
    """`op` reads, through any ops run since `earlier`, what `earlier` wrote."""
    stack, seen, start = [op.id], set(), graph.pos[earlier.id]
    while stack:
        cur = stack.pop()
        if cur == earlier.id:
            return True
        if cur in seen or cur not in graph.pos or graph.pos[cur] < start:
            continue
        seen.add(cur)
        node = by_id.get(cur)
        if node is not None:
            stack += list(graph.sources(node, ("view", "cast")))
    return False


def _foreign_kernel_call(m: Match, backend: str) -> bool:
    """A kernel that vLLM's own code calls directly (torch.ops._C.silu_and_mul in fused_experts, a quant kernel
    in MiniCPM's MoE) is a CUDA kernel: on Ascend that code is not what runs, so a match on it claims nothing
    there, fused or open (the Ascend code's own kernel calls do)."""
    return backend == "ascend" and any(op.kind == "kernel" and not op.file.startswith("vllm_ascend/")
                                       for op in m.op_list)


def _crosses_sections(m: Match) -> bool:
    return len({o.section for o in m.op_list}) > 1


def _dedupe(evs) -> list[dict]:
    seen, out = set(), []
    for e in evs:
        k = (e["file"], e["line"], e["what"])
        if k not in seen:
            seen.add(k)
            out.append(e)
    return out
