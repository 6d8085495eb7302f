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

import libcst as cst

GRAPH_OPS = ("torch.ops.vllm.", "torch_npu.", "torch.ops._C_ascend.", "torch.ops.npu.")
# the trees' argument names -> the interface's (the fused op's params, by role)
ROLE_OF = {"query": "q", "key": "k", "value": "v", "head_size": "head_dim", "key_cache": "kv_cache[0]",
           "value_cache": "kv_cache[1]", "positions": "positions", "cos_sin_cache": "cos_sin_cache",
           "slot_mapping": "slot_mapping", "slot_indices": "slot_mapping"}
# the kernel's own scalars: what the fused kernel computes (the pattern matches only such calls)
FIXED = {"rotary_dim": "head_dim", "is_neox_style": "True", "is_neox": "True"}
OUTPUTS = {"rope": ["q", "k"]}  # what an op of the kind gives back, by role (the rest give nothing the pattern reads)


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


def kernel_call(index, custom_ops, kernel, params: set[str]) -> tuple[str | None, str]:
    """`name(args)` of one recorded kernel with its arguments bound to the interface's params, or None and why."""
    if kernel.name.startswith("torch.ops.vllm."):
        func = custom_ops.get(kernel.name.rsplit(".", 1)[-1]) if custom_ops is not None else None
        node = func.node if func is not None else None
        if func is None or node is None or type(node) is not cst.FunctionDef:
            return None, f"the function registered for {kernel.name} is not in the analysed trees"
        args = []
        for p in node.params.params:
            if p.default is not None:
                break
            role = _role(p.name.value, params)
            if role is None:
                return None, f"{kernel.name}'s parameter {p.name.value} has no param of the interface"
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


def graph_patterns(index, custom_ops, match, params: set[str]) -> tuple[list[dict], list[str]]:
    """The patterns (one per combination of the matched ops' bound kernels, at most 4) and notes."""
    notes: list[str] = []
    steps: list[list[dict]] = []
    for node, op in match.ops.items():
        alts = []
        for k in op.kernels:
            if not k.name.startswith(GRAPH_OPS) or k.paths == ():
                continue
            text, why = kernel_call(index, custom_ops, k, params)
            if text is None:
                notes.append(f"{node} ({op.path}): {why}")
                continue
            outs = OUTPUTS.get(op.kind)
            alts.append({"node": node, "kernel": k.name, "where": f"{k.file}:{k.line}", "why": why,
                         "statement": (f"{', '.join(outs)} = {text}" if outs else text)})
            if len(alts) == 2:
                break
        if not alts:
            notes.append(f"{node} ({op.path}): no kernel of the walk binds to the interface: the reference is traced")
            return [], notes
        steps.append(alts)
    combos: list[list[dict]] = [[]]
    for alts in steps:
        combos = [c + [a] for c in combos for a in alts][:4]
    return [{"steps": c} for c in combos], notes
