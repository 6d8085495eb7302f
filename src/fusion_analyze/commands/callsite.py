"""Integrations that take effect where the matched ops run (issue 46): the methods of the call site, and the op
registered as vllm-ascend registers its own.

`split_swaps`: the matched GEMM and activation run in two methods of one class (vllm-ascend's shared experts:
`AscendSharedExperts.part1` calls the gate/up GEMM and returns its result, `apply_activation` takes that result and
returns the activation's): the GEMM's method returns the fused op's result instead, and the activation's method
passes that very tensor through (it is known by identity, kept on the instance until the activation asks for it).

`registration`: how the op is registered in vLLM's namespace, read from the analysed trees through the project's
index: `vllm.utils.torch_utils.direct_register_custom_op` and the dispatch key vllm-ascend's own registrations pass
(vllm_ascend/ops/register_custom_ops.py), with the names the trees' registrations already take."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import libcst as cst

REGISTER_MODULE = "vllm.utils.torch_utils"
REGISTER_FUNC = "direct_register_custom_op"


def _module_of(rel: str) -> str:
    mod = rel[:-3] if rel.endswith(".py") else rel
    mod = mod[: -len("/__init__")] if mod.endswith("/__init__") else mod
    return mod.replace("/", ".")


@dataclass
class Swap:
    """One method a patch integration swaps: the class, the method and the function written in its place."""

    cls: str
    cls_module: str
    method: str
    func: str
    source: str
    source_file: str
    source_line: int
    lines: str  # what is swapped, in words
    opportunity: str
    imports: list = field(default_factory=list)  # (module, name)


def _methods(tree: ast.Module):
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for f in cls.body:
            if isinstance(f, ast.FunctionDef):
                yield cls, f


def _method_at(tree: ast.Module, line: int):
    found = None
    for cls, f in _methods(tree):
        if f.lineno <= line <= (f.end_lineno or f.lineno):
            found = (cls, f)
    return found


def _stmt_at(func, line: int):
    return next((s for s in func.body if s.lineno <= line <= (s.end_lineno or s.lineno)), None)


def _call_of(stmt):
    call = stmt.value if isinstance(stmt, (ast.Assign, ast.Return, ast.Expr)) else None
    return call if isinstance(call, ast.Call) else None


def split_swaps(trees, match, name: str, first_index: int, opp, op_expr: str):
    """The Swaps of a GEMM and its activation run in two methods of one class, or why not (str)."""
    nodes = list(match.ops)
    if set(nodes) != {"gemm", "act"}:
        return "the match is not one GEMM and one activation"
    gemm, act = match.ops["gemm"], match.ops["act"]
    if gemm.file != act.file or trees.source(gemm.file) is None:
        return "the GEMM and the activation run in different files"
    rel = gemm.file
    tree = ast.parse(trees.source(rel) or "")
    g, a = _method_at(tree, gemm.line), _method_at(tree, act.line)
    if g is None or a is None or g[0] is not a[0] or g[1] is a[1]:
        return "the GEMM and the activation do not run in two methods of one class"
    cls, gf, af = g[0], g[1], a[1]
    gs, as_ = _stmt_at(gf, gemm.line), _stmt_at(af, act.line)
    gcall, acall = _call_of(gs), _call_of(as_)
    if gcall is None or acall is None or not gcall.args or len(acall.args) != 1:
        return f"{rel}:{gemm.line} / {act.line} are not one call of the layer each"
    # the GEMM's method returns what the GEMM assigns; the activation's method returns the activation of its param
    target = gs.targets[0] if isinstance(gs, ast.Assign) and len(gs.targets) == 1 else None
    target = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
    last = gf.body[-1]
    if not (isinstance(target, ast.Name) and isinstance(last, ast.Return) and isinstance(last.value, ast.Name)
            and last.value.id == target.id):
        return f"{cls.name}.{gf.name} does not return the GEMM's result"
    params = [x.arg for x in af.args.args]
    if not (isinstance(as_, ast.Return) and isinstance(acall.args[0], ast.Name) and acall.args[0].id in params[1:]):
        return f"{cls.name}.{af.name} does not return the activation of its parameter"
    gparams = [x.arg for x in gf.args.args]
    x = ast.unparse(gcall.args[0])
    if x not in gparams[1:] or gf.args.vararg or gf.args.kwarg or gf.args.kwonlyargs:
        return f"the GEMM's input in {cls.name}.{gf.name} is not its parameter"
    layer = ast.unparse(gcall.func)
    keep = f"_fusion_analyze_{name}"
    i, j = first_index, first_index + 1
    gsrc = "\n".join([
        f"def {gf.name}_with_{name}({', '.join(gparams)}):",
        f"    if not (isinstance({x}, torch.Tensor) and _plain_linear({layer})):",
        f"        return _original_{i}({', '.join(gparams)})",
        f"    out = {op_expr}({x}, {layer}.weight)",
        f"    self.{keep} = out  # {cls.name}.{af.name} passes this tensor through: the activation is done",
        "    return out",
    ])
    p = acall.args[0].id
    asrc = "\n".join([
        f"def {af.name}_with_{name}({', '.join(params)}):",
        f"    if {p} is getattr(self, \"{keep}\", None):",
        f"        self.{keep} = None",
        f"        return {p}",
        f"    return _original_{j}({', '.join(params)})",
    ])
    mod = _module_of(rel)
    return [Swap(cls.name, mod, gf.name, f"{gf.name}_with_{name}", gsrc, rel, gf.lineno,
                 f"the GEMM ({rel}:{gemm.line}) -> one call of the fused op", opp.id, [(mod, cls.name)]),
            Swap(cls.name, mod, af.name, f"{af.name}_with_{name}", asrc, rel, af.lineno,
                 f"the activation ({rel}:{act.line}) -> the fused op's result passed through", opp.id,
                 [(mod, cls.name)])]


def registration(index, names: list[str]) -> dict:
    """How vllm-ascend registers its ops in vLLM's namespace, read through the index: the function (and where it is
    defined), the dispatch key its registrations pass (None where they do not agree or none is found), and which of
    `names` the trees' registrations already take."""
    out = {"module": REGISTER_MODULE, "name": REGISTER_FUNC, "where": None, "dispatch_key": None, "seen_at": None,
           "taken": []}
    if index is None:
        return out
    found = index.lookup(REGISTER_MODULE, REGISTER_FUNC)
    if found is not None and getattr(found, "kind", None) == "function":
        out["where"] = f"{found.module.rel}:{found.line}"
    from ..walk.kernels.backend_kernels import CUSTOM_OPS
    from ..walk.kernels.registered_ops import CustomOps

    ops = CUSTOM_OPS.of(index).setdefault(None, CustomOps(index))
    where = ops.registrations()
    out["taken"] = sorted(n for n in names if n in where)
    keys = {}
    for module in sorted({m for m, _ in where.values() if m.startswith("vllm_ascend.")}):
        info = index.get(module)
        if info is None:
            continue
        for stmt in info.statements_with(b"direct_register_custom_op("):
            for call in _register_calls(stmt):
                key = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "dispatch_key"),
                           None)
                if type(key) is cst.SimpleString:
                    value = key.evaluated_value
                    keys.setdefault(value, f"{info.rel}:{info.line_of(stmt)}")
    if len(keys) == 1:
        (out["dispatch_key"], out["seen_at"]), = keys.items()
    return out


def _register_calls(stmt):
    found = []

    class V(cst.CSTVisitor):
        def visit_Call(self, node):
            if type(node.func) is cst.Name and node.func.value == REGISTER_FUNC:
                found.append(node)

    stmt.visit(V())
    return found
