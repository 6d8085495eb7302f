"""The graph pattern of a pass integration over the ops the compiled graph holds (issue 46): for each matched op,
the kernels and custom ops the walk recorded for it (`torch.ops.vllm.*`, `torch_npu.*`, `torch.ops._C_ascend.*`),
called as the analysed trees call them, with the kernel's scalars.

A `torch.ops.vllm.<name>` op is called with the parameters of the function its registration runs (read through the
index: walk/kernels/registered_ops.CustomOps); a `torch_npu` / `_C_ascend` kernel with the arguments of its call
site (the call at the kernel's file:line, read through the index), constants kept. Each argument binds to a param
of the fused op's interface by its name (`query` is `q`, `key_cache` is `kv_cache[0]`: ROLE_OF) or, for the
kernel's own scalars, to the value the fused kernel assumes (FIXED: full rotary, NeoX halves); a later op reads
an earlier one's outputs by the same names. A matched op whose kernels do not bind gives no pattern (the reference
is traced then, as before, and the note says why)."""

from __future__ import annotations

import ast
import re

import libcst as cst

GRAPH_OPS = ("torch.ops.vllm.", "torch_npu.", "torch.ops._C_ascend.", "torch.ops.npu.")
# the trees' argument names -> the interface's (the fused op's params, by role)
ROLE_OF = {"query": "q", "key": "k", "value": "v", "head_size": "head_dim", "key_cache": "kv_cache[0]",
           "value_cache": "kv_cache[1]", "positions": "positions", "cos_sin_cache": "cos_sin_cache",
           "slot_mapping": "slot_mapping", "slot_indices": "slot_mapping"}
# the kernel's own scalars: what the fused kernel computes (the pattern matches only such calls)
FIXED = {"rotary_dim": "head_dim", "is_neox_style": "True", "is_neox": "True"}
OUTPUTS = {"rope": ["q", "k"]}  # what an op of the kind gives back, by role (the rest give nothing the pattern reads)
# a custom op's parameter naming the layer it runs for (vLLM's unified_kv_cache_update(key, value, layer_name)): the
# pattern holds it as vLLM's own passes do (vllm/compilation/passes/fusion/rope_kvcache_fusion.py): one pattern per
# layer, its name a constant of the pattern, and the replacement takes it and reads the layer's KV cache and slot
# mapping from the forward context
LAYER_PARAMS = ("layer_name",)


def _role(name: str, params: set[str]) -> str | None:
    base = name.split(".")[-1]
    role = ROLE_OF.get(base) or FIXED.get(base) or (base if base in params else None)
    if role is None:
        return None
    root = role.split("[")[0]
    return role if root in params or role in ("True", "False") else None


def _call_at(index, kernel):
    """The call expression of `kernel.name` at its file:line (libcst), through the index; None if not found."""
    module = kernel.file[:-3].replace("/", ".").removesuffix(".__init__")
    info = index.get(module)
    if info is None:
        return None, None
    tail = kernel.name.rsplit(".", 1)[-1].encode()
    found = []

    class V(cst.CSTVisitor):
        def visit_Call(self, node):
            f = node.func
            if type(f) is cst.Attribute and f.attr.value == tail.decode():
                found.append(node)

    for stmt in info.statements_with(tail):
        stmt.visit(V())
    hits = [c for c in found if info.line_of(c) == kernel.line]
    return (hits[0], info) if hits else (None, info)


def _rename(code: str, params: set[str]) -> str | None:
    try:
        tree = ast.parse(code, mode="eval")
    except SyntaxError:
        return None
    bad = []

    class T(ast.NodeTransformer):
        def visit_Name(self, node):
            role = _role(node.id, params)
            if role is None:
                bad.append(node.id)
                return node
            return ast.parse(role, mode="eval").body

    out = T().visit(tree)
    return None if bad else ast.unparse(out)


def _scalar(name: str, params: set[str], values: dict) -> tuple[str | None, str | None]:
    """A kernel's own scalar (`is_neox_style`, `rotary_dim`) in the pattern: the interface's param, else the value
    the walk recorded for the layer (its configuration's) as a constant, checked against what the fused kernel
    computes (FIXED); (None, why) where neither decides it."""
    role = _role(name, params)
    fixed = FIXED.get(name)
    got = values.get(name) if isinstance(values, dict) else None
    recorded = repr(got) if isinstance(got, (bool, int, float, str)) else None
    if fixed is not None and recorded is not None and fixed in ("True", "False") and recorded != fixed:
        return None, f"the layer's {name} is {recorded}, the fused kernel computes {name} = {fixed}"
    if role is not None and role not in ("True", "False"):
        return role, None
    if recorded is not None:
        return recorded, None
    return role, None if role is not None else f"{name} has no param of the interface and no recorded value"


def kernel_call(index, custom_ops, kernel, params: set[str], values: dict | None = None) -> tuple[str | None, str]:
    """`name(args)` of one recorded kernel with its arguments bound to the interface's params (a kernel's own
    scalars to the layer's recorded values: `values`, the op's attrs.values), or None and why."""
    if kernel.name.startswith("torch.ops.vllm."):
        func = custom_ops.get(kernel.name.rsplit(".", 1)[-1]) if custom_ops is not None else None
        node = func.node if func is not None else None
        if func is None or node is None or type(node) is not cst.FunctionDef:
            return None, f"the function registered for {kernel.name} is not in the analysed trees"
        args = []
        for p in node.params.params:
            if p.default is not None:
                break
            if p.name.value in LAYER_PARAMS:
                args.append(p.name.value)
                continue
            role, why = _scalar(p.name.value, params, values or {})
            if role is None:
                return None, f"{kernel.name}'s parameter {p.name.value}: {why}"
            args.append(role)
        where = f"{func.module.rel}:{func.line}"
        return f"{kernel.name}({', '.join(args)})", f"registered for {where}"
    call, info = _call_at(index, kernel)
    if call is None or info is None:
        return None, f"no call of {kernel.name} at {kernel.file}:{kernel.line}"
    args = []
    for a in call.args:
        if a.star:
            return None, f"{kernel.file}:{kernel.line} passes *{info.code(a.value)}"
        text = info.code(a.value)
        value = _rename(text, params)
        if value is None:
            return None, f"{kernel.file}:{kernel.line}: {text} has no param of the interface"
        args.append(f"{a.keyword.value}={value}" if a.keyword is not None else value)
    return f"{kernel.name}({', '.join(args)})", f"called at {kernel.file}:{kernel.line}"


def layer_context(custom_ops, kernel_name: str) -> dict | None:
    """How a custom op that takes the layer's name reaches the layer's KV cache and slot mapping, read from its
    registered function (vLLM's unified_kv_cache_update: `layer_name = _resolve_layer_name(layer_name)`, then
    `_, attn_layer, kv_cache, layer_slot_mapping = get_attention_context(layer_name)`): the module to import
    from, the names called on the layer name in order, the fetching statement as written, and which of its
    targets are the cache and the slot mapping; None where the function does not read them so."""
    func = custom_ops.get(kernel_name.rsplit(".", 1)[-1]) if custom_ops is not None else None
    node = func.node if func is not None else None
    if func is None or node is None or type(node) is not cst.FunctionDef:
        return None
    calls, fetch = [], None
    for stmt in node.body.body:
        small = stmt.body[0] if type(stmt) is cst.SimpleStatementLine and len(stmt.body) == 1 else None
        if type(small) is not cst.Assign or len(small.targets) != 1 or type(small.value) is not cst.Call:
            continue
        call = small.value
        if type(call.func) is not cst.Name or len(call.args) != 1 or not (
                type(call.args[0].value) is cst.Name and call.args[0].value.value in LAYER_PARAMS):
            continue
        calls.append(call.func.value)
        target = small.targets[0].target
        if type(target) is cst.Tuple:
            names = [e.value.value if type(e.value) is cst.Name else "_" for e in target.elements]
            kv = next((n for n in names if n == "kv_cache"), None)
            slots = next((n for n in names if n.endswith("slot_mapping")), None)
            if kv is not None and slots is not None:
                fetch = {"statement": func.module.code(small).strip(), "kv_cache": kv, "slot_mapping": slots}
                break
    if fetch is None:
        return None
    return {"module": func.module.name, "names": calls, **fetch, "where": f"{func.module.rel}:{func.line}"}


def graph_patterns(index, custom_ops, match, params: set[str]) -> tuple[list[dict], list[str]]:
    """The patterns (one per combination of the matched ops' bound kernels, at most 4) and notes. Where an op's
    kernels hold `torch.ops.vllm.*` custom ops, those are what the compiled graph holds for it (torch.compile
    does not trace into a custom op): its other kernels run inside them and are no node of the graph. A step
    that takes the layer's name (LAYER_PARAMS) makes the pattern one per layer (`layer_name`), and the value
    it returns (the KV-cache update's dependency token) is an output of the pattern."""
    notes: list[str] = []
    steps: list[list[dict]] = []
    for node, op in match.ops.items():
        alts = []
        found = [k for k in op.kernels if k.name.startswith(GRAPH_OPS) and k.paths != ()]
        custom = [k for k in found if k.name.startswith("torch.ops.vllm.")]
        values = (op.attrs or {}).get("values") or {}
        for k in custom or found:
            text, why = kernel_call(index, custom_ops, k, params, values)
            if text is None:
                notes.append(f"{node} ({op.path}): {why}")
                continue
            layer = any(re.search(rf"\b{p}\b", text) for p in LAYER_PARAMS)
            outs = OUTPUTS.get(op.kind) or ([f"{node}_dep"] if layer else None)
            context = layer_context(custom_ops, k.name) if layer else None
            if layer and context is None:
                notes.append(f"{node} ({op.path}): {k.name} takes the layer's name, but its function does not read"
                             " the layer's KV cache and slot mapping from the forward context as the replacement must")
                continue
            alts.append({"node": node, "kernel": k.name, "where": f"{k.file}:{k.line}", "why": why,
                         "condition": k.condition, "layer": layer, "outputs": list(outs or ()), "context": context,
                         "statement": (f"{', '.join(outs)} = {text}" if outs else text)})
            if len(alts) == 2:
                break
        if not alts:
            inside = sorted({k.name for k in found if k not in custom}) if custom else []
            if inside:
                notes.append(f"{node} ({op.path}): {', '.join(inside)} run inside {', '.join(sorted({k.name for k in custom}))},"
                             " which the compiled graph holds as one node each: no pattern reaches them")
            notes.append(f"{node} ({op.path}): no kernel of the walk binds to the interface: the reference is traced")
            return [], notes
        steps.append(alts)
    combos: list[list[dict]] = [[]]
    for alts in steps:
        combos = [c + [a] for c in combos for a in alts][:4]
    out = []
    for c in combos:
        layer = any(st["layer"] for st in c)
        # what the pattern gives back: every value a step makes that the graph reads after it (the rotated q and
        # k, the KV-cache update's token); without a layer step, the interface's returns (as before)
        outputs = list(dict.fromkeys(o for st in reversed(c) for o in st["outputs"])) if layer else []
        for st in c:
            if st["condition"]:
                notes.append(f"{st['node']}: {st['kernel']} runs where {st['condition']}: the pattern matches only there")
        context = next((st["context"] for st in c if st["context"] is not None), None)
        # the layer op's results (its token, the rotated q and k) in the order the pattern gives them back
        back = {"q": "out[1]", "k": "out[2]", **{o: "out[0]" for st in c if st["layer"] for o in st["outputs"]}}
        if layer and any(o not in back for o in outputs):
            notes.append(f"the pattern gives back {', '.join(o for o in outputs if o not in back)}, which the layer op does not")
            continue
        used = sorted({w for st in c for w in re.findall(r"\b\w+\b", st["statement"])} & params)
        out.append({"replacement": [back[o] for o in outputs] if layer else [], "tensors": used,"steps": c, "layer": layer, "outputs": outputs, "context": context,
                    "before": [st["statement"] for st in c if not st["layer"]]})
    return out, list(dict.fromkeys(notes))
