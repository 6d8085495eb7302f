"""`fusion-analyze MODEL --scaffold DIR`: from an open opportunity to a kernel one can verify.

For each open opportunity whose scenario has a kernel family (templates/kernels/families.yaml), DIR gets
  <op>.py        a Triton kernel at the report's shapes and dtype, its torch.library custom op (a fake
                 implementation; mutates_args where it writes in place) and the pattern's reference;
  test_<op>.py   the kernel against the reference (small shapes on CPU in Triton's interpreter; the
                 configuration's shapes on an accelerator);
  bench_<op>.py  reference and kernel timed per scenario, next to the report's estimate;
  patch_<op>.py  (model-code scenarios) the model's method with the matched statements replaced by the op, or
  pass_<op>.py   (graph-level scenarios) a vllm-ascend BasePattern: pattern = the reference, replacement = the op;
plus conftest.py, test_integration.py, references.py (the scenarios with no kernel: their reference only),
manifest.json and README.md. Every file is a function of the analysis alone: the same inputs write the same
bytes. The analysed trees are read (the integration's source and imports), never imported.
"""

from __future__ import annotations

import ast
import builtins
import json
import keyword
import pprint
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..estimate.cost import ELEMENTWISE, VIEWS  # moe_join: the MoE runner's add of the shared experts' output
from ..errors import UserError
from ..resources import data_dir, load_yaml
from ..estimate.shapes import SMALL, evaluate, shape_dims
from ..render.stubs import _SLOT, bind_names, interface_of, ordered_params, reference_source, stubs_module
from .callsite import Swap, _module_of

NAMESPACE = "fusion_analyze"
_KINDS = {"torch.Tensor": "tensor", "int": "int", "float": "float", "str": "str", "bool": "bool"}


@dataclass
class Family:
    id: str
    title: str
    serves: dict
    integration: dict
    inputs: dict
    tolerance: dict
    examples: list
    interface: dict | None = None  # the fused op's interface where the pattern's does not fit (native_rope)


@lru_cache(maxsize=1)
def load_families() -> dict[str, Family]:
    path = kernels_dir() / "families.yaml"
    data = load_yaml(path.read_text(encoding="utf-8"))
    return {k: Family(k, v["title"], {p: (s or {}) for p, s in v["serves"].items()}, v["integration"],
                      v.get("inputs") or {}, v["tolerance"], v["examples"], v.get("interface")) for k, v in data.items()}


class _Interfaced:
    """A pattern seen through its family's interface (the family's `interface`, where it has one)."""

    def __init__(self, pattern, interface: dict):
        self._pattern = pattern
        self.interface = interface

    def interface_of(self, match=None) -> dict:
        return self.interface  # the family's, whatever the match's form

    def __getattr__(self, name):
        return getattr(self._pattern, name)


def as_family_sees_it(pattern, family: "Family"):
    return _Interfaced(pattern, family.interface) if family.interface else pattern


def kernels_dir() -> Path:
    return data_dir("templates") / "kernels"


def family_of(pattern_id: str, form: str | None = None, match=None) -> tuple[Family | None, str]:
    """The family whose template serves the pattern (and the match's form), else None and why not."""
    for fam in load_families().values():
        spec = fam.serves.get(pattern_id)
        if spec is None:
            continue
        within = (spec.get("when") or {}).get("path")
        if within and not any(f".{within}" in f".{op.path}" for op in getattr(match, "op_list", None) or []):
            continue
        forms = spec.get("forms")
        if forms and form is not None and form not in forms:  # no match (the examples): any form
            return None, f"form {form} has no kernel template (family {fam.id} serves {', '.join(forms)})"
        return fam, ""
    return None, f"no kernel template for scenario {pattern_id}"


# -- Python literals and names ------------------------------------------------------------------------------------
def _lit(value) -> str:
    return pprint.pformat(value, width=110, sort_dicts=True)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_") if part)


def _dims_text(shape: str, dims: dict) -> str:
    parts = []
    for d in shape_dims(shape):
        v = evaluate(d, dims) if dims else None
        parts.append(f"{d}={int(v)}" if v is not None and not d.strip().isdigit() else d)
    return "[" + ", ".join(parts) + "]"


# -- the element-wise family: the reference's expression in Triton ----------------------------------------------
_CALLS = {"torch.sigmoid": "tl.sigmoid({0})", "torch.exp": "tl.exp({0})", "torch.abs": "tl.abs({0})",
          "torch.nn.functional.silu": "(({0}) * tl.sigmoid({0}))", "torch.tanh": "(2.0 * tl.sigmoid(2.0 * ({0})) - 1.0)",
          "torch.nn.functional.relu": "tl.maximum({0}, 0.0)", "torch.sqrt": "tl.sqrt({0})"}
_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


def triton_expression(reference: str, tensors: list[str], scalars: list[str]) -> str | None:
    """`return (x + y) * z` -> '((x_v + y_v) * z_v)'; None when the reference is not one element-wise
    expression over the params (+ - * /, a few activations, numbers)."""
    try:
        body = ast.parse(reference).body
    except SyntaxError:
        return None
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None

    def tr(node) -> str:
        if isinstance(node, ast.Name) and node.id in tensors:
            return f"{node.id}_v"
        if isinstance(node, ast.Name) and node.id in scalars:
            return node.id
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return repr(float(node.value))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return f"({tr(node.left)} {_BINOPS[type(node.op)]} {tr(node.right)})"
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return f"(-{tr(node.operand)})"
        if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
            form = _CALLS.get(ast.unparse(node.func))
            if form:
                return form.format(tr(node.args[0]))
        raise ValueError(ast.unparse(node))

    try:
        return tr(body[0].value)
    except ValueError:
        return None


# -- reading the analysed trees (never importing them) ----------------------------------------------------------
class Trees:
    """The trees the analysis read: `vllm/...` under the vLLM root, `vllm_ascend/...` under the Ascend root."""

    def __init__(self, roots: dict[str, Path], versions: dict[str, str], index=None):
        self.roots = roots
        self.versions = versions
        self.index = index  # the session's ModuleIndex: sources and definitions are read through it
        self._sources: dict[str, str | None] = {}

    def path(self, rel: str) -> Path | None:
        root = self.roots.get(rel.split("/", 1)[0])
        return root / rel if root is not None else None

    def source(self, rel: str) -> str | None:
        if rel not in self._sources and self.index is not None and rel.endswith(".py"):
            info = self.index.get(_module_of(rel))
            self._sources[rel] = info.text() if info is not None and info.rel == rel and info.source is not None else None
        if rel not in self._sources:
            p = self.path(rel)
            try:
                self._sources[rel] = p.read_text(encoding="utf-8") if p is not None and p.is_file() else None
            except (OSError, UnicodeDecodeError):
                self._sources[rel] = None
        return self._sources[rel]

    def module_file(self, module: str) -> str | None:
        base = module.replace(".", "/")
        for rel in (f"{base}.py", f"{base}/__init__.py"):
            if self.source(rel) is not None:
                return rel
        return None

    def where(self, module: str, name: str) -> str | None:
        """`file:line` where `module` defines (or imports) `name`, else None (through the index where there is one:
        the definition an import of `name` from `module` binds, followed through re-exports)."""
        if self.index is not None:
            found = self.index.lookup(module, name)
            if hasattr(found, "module") and hasattr(found, "line"):
                return f"{found.module.rel}:{found.line}"
            if found is not None and self.module_file(f"{module}.{name}") is not None:
                return self.module_file(f"{module}.{name}")
            return None
        rel = self.module_file(module)
        if rel is None:
            return None
        if self.module_file(f"{module}.{name}") is not None:
            return self.module_file(f"{module}.{name}")
        line = _top_level_names(self.source(rel) or "").get(name)
        return f"{rel}:{line}" if line else None

    def find_class(self, name: str, hints: list[str]) -> str | None:
        """The file (relative) that defines `class name`, looked for in `hints` first, then the model folder."""
        rx = re.compile(rf"^class {re.escape(name)}\b", re.M)
        for rel in hints:
            if rx.search(self.source(rel) or ""):
                return rel
        root = self.roots.get("vllm")
        if root is not None:
            for p in sorted((root / "vllm" / "model_executor" / "models").glob("*.py")):
                rel = p.relative_to(root).as_posix()
                if rx.search(self.source(rel) or ""):
                    return rel
        return None


def _top_level_names(source: str) -> dict[str, int]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    names: dict[str, int] = {}

    def visit(stmts):
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.setdefault(s.name, s.lineno)
            elif isinstance(s, (ast.Import, ast.ImportFrom)):
                for a in s.names:
                    names.setdefault((a.asname or a.name).split(".")[0], s.lineno)
            elif isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for t in (s.targets if isinstance(s, ast.Assign) else [s.target]):
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            names.setdefault(n.id, s.lineno)
            elif isinstance(s, (ast.If, ast.Try, ast.With)):
                visit(s.body)
                visit(getattr(s, "orelse", []))
                visit(getattr(s, "finalbody", []))
                for h in getattr(s, "handlers", []):
                    visit(h.body)

    visit(tree.body)
    return names


# -- patch integrations: the model's method with the matched statements replaced --------------------------------
def _enclosing(tree: ast.Module, lines: list[int]):
    """The innermost function holding every line, and the class it is a method of (or None)."""
    best = (None, None)

    def visit(node, cls):
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if child.lineno <= min(lines) and max(lines) <= (child.end_lineno or child.lineno):
                    best = (child, cls)
                    visit(child, None)
            elif isinstance(child, ast.ClassDef):
                visit(child, child)
            elif not isinstance(child, ast.expr):
                visit(child, cls)

    visit(tree, None)
    return best


def _statement_at(func, line: int):
    found = None
    for node in ast.walk(func):
        if isinstance(node, ast.stmt) and node is not func and node.lineno == line:
            if found is None or isinstance(found, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
                found = node
    return found


def _statements_calling(func, attrs: list[str]) -> list | None:
    """The first statement of `func` calling `self.<attr>(...)` (or a helper given `self.<attr>`) for each attr."""
    out = []
    for attr in attrs:
        hit = None
        for node in ast.walk(func):
            if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.If, ast.For, ast.With, ast.Try)):
                call = getattr(node, "value", None)
                if isinstance(call, ast.Call) and (ast.unparse(call.func).endswith(f".{attr}") or any(
                        ast.unparse(a).endswith(f".{attr}") for a in call.args[:1])):
                    if hit is None or node.lineno < hit.lineno:
                        hit = node
        if hit is None:
            return None
        out.append(hit)
    return out


def _call_parts(stmt) -> tuple[str | None, list[str], str] | None:
    call = getattr(stmt, "value", None)
    if not isinstance(call, ast.Call):
        return None
    target = None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = ast.unparse(stmt.targets[0])
        first = stmt.targets[0].elts[0] if isinstance(stmt.targets[0], ast.Tuple) else None
        if first is not None:  # `x, _ = self.down_proj(x)` : the first element is the tensor
            target = ast.unparse(first)
    elif isinstance(stmt, ast.AnnAssign):
        target = ast.unparse(stmt.target)
    elif not isinstance(stmt, (ast.Expr, ast.Return)):
        return None
    return target, [ast.unparse(a) for a in call.args], ast.unparse(call.func)


def _stored(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _loaded(nodes) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def method_swap(trees: Trees, match, family: Family, name: str, index: int, opp, location_files: list[str],
                op_expr: str | None = None):
    """The Swap of the opportunity's method, or why there is none (a str)."""
    nodes = list(match.ops)
    ops = [match.ops[n] for n in nodes]
    files = sorted({op.file for op in ops})
    attempt: tuple[str, Any, Any, Any, list[Any]] | None = None  # file, module, function, its class, statements
    if len(files) == 1 and trees.source(files[0]) is not None:
        tree = ast.parse(trees.source(files[0]) or "")
        func, cls = _enclosing(tree, [op.line for op in ops])
        if func is not None:
            found = [_statement_at(func, op.line) for op in ops]
            if all(s is not None for s in found):
                attempt = (files[0], tree, func, cls, found)
    why = "no method of the analysed trees calls the matched layers itself"
    scopes = list(dict.fromkeys([opp.scope] + [op.scope for op in ops]))
    for scope in scopes if attempt is None else ():  # a scope's own method, its statements found by the layers
        cls_name, _, meth = scope.partition(".")
        rel = trees.find_class(cls_name, location_files + files)
        if rel is None:
            why = f"class {cls_name} is not in the analysed trees"
            continue
        tree = ast.parse(trees.source(rel) or "")
        cdef = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls_name), None)
        func = next((n for n in (cdef.body if cdef else []) if isinstance(n, ast.FunctionDef) and n.name == meth), None)
        stmts = _statements_calling(func, [op.path.rsplit(".", 1)[-1] for op in ops]) if func is not None else None
        if stmts is not None:
            attempt = (rel, tree, func, cdef, stmts)
            break
    if attempt is None:
        return why
    rel, tree, func, cls, stmts = attempt
    parts = {}
    for node, stmt in zip(nodes, stmts):
        p = _call_parts(stmt)
        if p is None:
            return f"{rel}:{stmt.lineno} is not one call of the layer"
        parts[node] = p
    order = sorted(range(len(stmts)), key=lambda i: stmts[i].lineno)
    last = stmts[order[-1]]
    removed = [stmts[i] for i in order[:-1]]
    why = _dataflow_conflict(func, stmts, removed, last, parts[nodes[stmts.index(removed[0])]][1] if removed else [])
    if why:
        return f"{why} in {func.name} ({rel}:{func.lineno})"
    import jinja2

    env = jinja2.Environment(keep_trailing_newline=False)
    ctx = {"target": {n: p[0] for n, p in parts.items()}, "args": {n: p[1] for n, p in parts.items()},
           "callee": {n: p[2] for n, p in parts.items()}, "op": op_expr or f"torch.ops.{NAMESPACE}.{name}"}
    integ = family.integration
    new_stmt = env.from_string(integ["statement"]).render(**ctx)
    guard = env.from_string(integ.get("guard", "True")).render(**ctx)
    method = func.name if cls is not None else opp.scope.partition(".")[2]
    cls_name = cls.name if cls is not None else opp.scope.partition(".")[0]
    cls_file = rel if cls is not None else trees.find_class(cls_name, location_files + [rel])
    if cls_file is None:
        return f"class {cls_name} is not in the analysed trees"
    fname = f"{method}_with_{name}"
    source = _rewritten(trees.source(rel) or "", func, last, removed, new_stmt, guard, fname, index, cls_name)
    frees = _free_names(source, fname)
    mod = _module_of(rel)
    imports = [(_module_of(cls_file), cls_name)] + [(mod, n) for n in sorted(frees - {cls_name})]
    return Swap(cls_name, _module_of(cls_file), method, fname, source, rel, func.lineno,
                "statements " + ", ".join(str(s.lineno) for s in sorted(stmts, key=lambda s: s.lineno)) + " -> one call",
                opp.id, imports)


def layer_swap(trees: Trees, match, family: Family, name: str, index: int, opp, walk_ops: list,
               op_expr: str | None = None):
    """The Swap of the layer's method (`integration.method`) for the family's `integration.source`: the layer is
    the one whose module path the matched ops run under (the op of the walk at that path, with its class)."""
    import jinja2

    within = next((w for w in ((family.serves.get(opp.pattern.id) or {}).get("when") or {}).values()), None)
    paths = [op.path for op in match.op_list]
    layer_path = None
    for p in paths:
        parts = p.split(".")
        if within in parts:
            layer_path = ".".join(parts[: parts.index(within) + 1])
            break
    layer = next((op for op in walk_ops if op.path == layer_path and op.layer_class), None)
    if layer is None:
        return f"no layer of the walk at {layer_path}"
    cls_file = layer.attrs.get("class_file") if hasattr(layer.attrs, "get") else None
    if not cls_file or trees.source(cls_file) is None:
        return f"the file of {layer.layer_class} is not in the analysed trees"
    integ = family.integration
    fname = f"{integ['method']}_with_{name}"
    source = jinja2.Environment().from_string(integ["source"]).render(
        func=fname, index=index, op=op_expr or f"torch.ops.{NAMESPACE}.{name}").rstrip("\n")
    return Swap(layer.layer_class, _module_of(cls_file), integ["method"], fname, source, cls_file,
                _top_level_names(trees.source(cls_file) or "").get(layer.layer_class, 0),
                f"the {layer_path} layer's {integ['method']} -> one call", opp.id,
                [(_module_of(cls_file), layer.layer_class)])


def _dataflow_conflict(func, stmts: list, removed: list, last, first_args: list[str]) -> str | None:
    """Why removing `removed` and replacing `last` would change what the method computes, else None: a value
    the removed statements assign is read before the replacement assigns it again, or the first op's inputs are
    assigned anew between the removed statement and the replacement (straight-line code of the method's body)."""
    if not removed:
        return None
    live = set().union(*(_stored(s) for s in removed)) - {"_"}
    inputs = _loaded([ast.parse(a, mode="eval") for a in first_args])
    start = min(s.lineno for s in removed)
    for s in sorted(func.body, key=lambda n: n.lineno):
        if (s.end_lineno or s.lineno) < start or s in removed:
            continue
        if s is last:
            live -= _stored(s)
            inputs = set()
            continue
        contains = [m for m in stmts if m is not s and any(n is m for n in ast.walk(s))]
        if contains:
            return "the matched statements sit inside a compound statement"
        if _loaded([s]) & live:
            return f"{', '.join(sorted(_loaded([s]) & live))} of the removed statements is read elsewhere"
        if _stored(s) & inputs:
            return f"{', '.join(sorted(_stored(s) & inputs))}, the GEMM's input, is assigned in between"
        live -= _stored(s)
    return None


def _rewritten(text: str, func, last, removed, new_stmt: str, guard: str, fname: str, index: int, cls: str) -> str:
    lines = text.splitlines()
    start, end = func.lineno, func.end_lineno or func.lineno
    edits: dict[int, tuple[int, list[str]]] = {}
    for s in removed:
        edits[s.lineno] = (s.end_lineno or s.lineno, [])
    pad = " " * last.col_offset
    edits[last.lineno] = (last.end_lineno or last.lineno, [pad + ln for ln in new_stmt.splitlines()])
    body0 = func.body[0]
    if isinstance(body0, ast.Expr) and isinstance(getattr(body0, "value", None), ast.Constant) and len(func.body) > 1:
        body0 = func.body[1]  # after the docstring
    bpad = " " * body0.col_offset
    call = _call_of(func)
    guard_lines = [f"{bpad}if not ({guard}):", f"{bpad}    return _original_{index}({call})"]
    out: list[str] = []
    i = start
    while i <= end:
        if i == body0.lineno:
            out += guard_lines
        if i in edits:
            stop, repl = edits[i]
            out += repl
            i = stop + 1
            continue
        out.append(lines[i - 1])
        i += 1
    indent = len(out[0]) - len(out[0].lstrip())
    out = [ln[indent:] if ln[:indent].strip() == "" else ln for ln in out]
    out[0] = re.sub(r"def\s+\w+\s*\(", f"def {fname}(", out[0], count=1)
    src = "\n".join(out)
    return re.sub(r"\bsuper\(\)", f"super({cls}, self)", src)


def _call_of(func) -> str:
    a = func.args
    parts = [x.arg for x in a.posonlyargs + a.args]
    if a.vararg:
        parts.append(f"*{a.vararg.arg}")
    parts += [f"{x.arg}={x.arg}" for x in a.kwonlyargs]
    if a.kwarg:
        parts.append(f"**{a.kwarg.arg}")
    return ", ".join(parts)


def _free_names(source: str, fname: str) -> set[str]:
    tree = ast.parse(source)
    func = tree.body[0]
    assert isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef))
    a = func.args
    params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [v for v in (a.vararg, a.kwarg) if v]}
    stored = _stored(func)
    local_defs = {n.name for n in ast.walk(func) if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n is not func}
    known = set(dir(builtins)) | {"torch", "_op", "_plain_linear", fname} | {f"_original_{i}" for i in range(64)}
    return _loaded([func]) - params - stored - local_defs - known


# -- one kernel's context ------------------------------------------------------------------------------------------
def _params(pattern, match, family: Family, dims: dict) -> tuple[list[dict], dict[str, str], dict[str, str]]:
    itf = interface_of(pattern, match)
    names = bind_names(itf, match)
    params, roles = [], {}
    for p in ordered_params(itf):
        raw = p["name"]
        slot = _SLOT.fullmatch(raw)
        role = slot.group(4) if slot else raw
        bound = names.get(raw, role) if slot else raw
        kind = _KINDS.get(p["type"], "other")
        entry = {"name": bound, "role": role, "kind": kind, "ann": p["type"], "shape": p.get("shape"),
                 "dtype": p.get("dtype"), "default": p.get("default"), "example": p.get("example"), "note": p.get("note")}
        entry["shape_text"] = _dims_text(p["shape"], dims) if p.get("shape") else ""
        init = family.inputs.get(role) or ("positions" if role == "positions" else "slots" if "slot" in role else "normal")
        entry["init"] = init
        params.append(entry)
        roles[role] = bound
    return params, roles, names


def _spec_params(params: list[dict]) -> list[dict]:
    out = []
    for p in params:
        d = {"name": p["name"], "kind": p["kind"]}
        if p["kind"] == "tensor":
            d.update(shape=p["shape"], init=p["init"])
            if p["dtype"]:
                d["dtype"] = p["dtype"]
        elif p["example"] is not None:
            d["example"] = p["example"]
        else:
            d["value"] = ast.literal_eval(p["default"]) if p["default"] is not None else None
        out.append(d)
    return out


def _scalar_values(params: list[dict], dims: dict, match) -> dict:
    """The non-tensor params at the configuration's values (a norm's eps from the matched op when it has one)."""
    eps = None
    for op in getattr(match, "op_list", None) or []:
        v = (op.attrs.get("values") or {}).get("eps") if hasattr(op.attrs, "get") else None
        if isinstance(v, (int, float)):
            eps = float(v)
            break
    out = {}
    for p in params:
        if p["kind"] in ("tensor", "other"):
            continue
        if p["role"] == "eps" and eps is not None:
            out[p["name"]] = eps
        elif p["example"] is not None:
            try:
                out[p["name"]] = eval(p["example"], {"__builtins__": {}}, dict(dims))  # noqa: S307 - catalog text
            except Exception:  # a dimension the configuration lacks
                out[p["name"]] = None
        elif p["default"] is not None:
            out[p["name"]] = ast.literal_eval(p["default"])
    return out


def _config_shapes_known(params: list[dict], returns: list[dict], dims: dict) -> bool:
    for shape in [p["shape"] for p in params if p["shape"]] + [r["shape"] for r in returns]:
        for d in shape_dims(shape):
            v = evaluate(d, dims)
            if v is None or v <= 0:
                return False
    return True


@dataclass
class Kernel:
    name: str
    family: Family
    pattern: Any  # match.patterns.Pattern, or the family's view of it (_Interfaced)
    variant: dict
    opps: list = field(default_factory=list)  # (Opportunity, its JSON row)


def _variant(family: Family, pattern_id: str) -> dict:
    base = {"combine": False, "quant": False, "split": False, "single": False, "act": None}
    base.update(family.serves[pattern_id].get("variant") or {})
    return base


def _roles(family: Family, pattern_id: str, roles: dict) -> dict:
    out = dict(roles)
    for t_role, i_role in (family.serves[pattern_id].get("roles") or {}).items():
        if i_role in roles:
            out[t_role] = roles[i_role]
    return out


# -- the whole folder ------------------------------------------------------------------------------------------------
@dataclass
class Scaffold:
    out_dir: Path
    kernels: list = field(default_factory=list)  # manifest rows
    reference_only: list = field(default_factory=list)
    files: list = field(default_factory=list)


@dataclass
class Source:
    """What a scaffold is written from: the analysis (or, for the family examples, the patterns alone)."""

    model: str
    report: dict
    trees: Trees
    opportunities: list  # status.derive.Opportunity (or _Example): id, scenario, status, pattern, matches, ...
    rejected: dict = field(default_factory=dict)  # opportunity id -> why the estimate rejects it
    integrate: bool = True
    ops: list = field(default_factory=list)  # the walk's ops (the layer a `layer` integration swaps a method of)
    terms: dict = field(default_factory=dict)  # opportunity id -> scenario -> the estimate's ops (_cost_terms)


@dataclass
class _Example:
    """A stand-in opportunity of a pattern with no match (the families' examples): names fall back."""

    id: str
    scenario: str
    pattern: object
    status: str = "open"
    file: str = "-"
    line: int = 0
    scope: str = "-"
    matches: list = field(default_factory=list)
    family: Family | None = None


def write_scaffold(a, out_dir: str) -> Scaffold:
    """Write DIR for the analysis `a` (analysis.pipeline.Analysis); returns what was written."""
    report = a.report
    sources = report.get("sources") or {}
    roots = {"vllm": Path(a.session.vllm.root)}
    if a.session.ascend is not None:
        roots["vllm_ascend"] = Path(a.session.ascend.root)
    trees = Trees(roots, {"vllm": (sources.get("vllm") or {}).get("version") or "unknown",
                          "vllm_ascend": (sources.get("vllm_ascend") or {}).get("version") or "none"}, a.session.index)
    rejected = {o.id: b.rejected for o in a.opportunities if (b := a.benefits.get(o.id)) is not None and b.rejected}
    return write(Source(a.location.architecture, report, trees, list(a.opportunities), rejected,
                        ops=list(a.walk.ops), terms=_cost_terms(a)), out_dir)


def _cost_terms(a) -> dict:
    """Opportunity id -> scenario -> what its first match's estimate is made of (estimate/cost.py fused_terms),
    each op with the kernels the deployment runs for it (the report's `kernels` of the op, on that path)."""
    from ..estimate.cost import fused_terms, native_span

    rows = {op["id"]: op for op in a.report.get("ops") or []}
    out: dict = {}
    for o in a.opportunities:
        if o.status != "open" or not o.matches:
            continue
        m = o.matches[0]
        takes = (o.pattern.estimate or {}).get("takes") or {}
        parts = {m.ops[n].id: part for n, part in takes.items() if n in m.ops}
        for scen, model in sorted((a.steps or {}).items()):
            terms = fused_terms(model, native_span(model, m.op_list), parts)
            if terms is None:
                continue
            native = {op.id for op in model.ops if op.attrs.get("native_of")}
            for t in terms:
                t["kernels"] = _deployed_kernels(rows.get(t["op"]) or {}, scen, t["part"])
                if not t["kernels"] and t["op"] in native:  # a layer's forward_native: PyTorch's own op
                    t["kernels"] = [f"PyTorch {(rows.get(t['op']) or {}).get('name') or t['kind']}"]
            out.setdefault(o.id, {})[scen] = {"mode": model.mode, "launch": model.launch, "num_tokens": int(model.n),
                                              "ops": terms}
    return out


_PART_COVERS = {"kv_write": "kvcache"}  # an op's part (estimate `takes`) -> what its kernel covers (kernels.yaml)


def _deployed_kernels(row: dict, scenario: str, part: str | None) -> list[str]:
    """The kernels the report lists for the op on the scenario's path: those whose path conditions name the
    scenario, else the unconditional ones, else all; of a part, those that cover it (catalog kernels.yaml)."""
    ks = list(row.get("kernels") or [])
    if part is not None:
        covers = _PART_COVERS.get(part, part)
        pats = [re.compile(e["match"]) for e in _kernel_catalog() if covers in (e.get("covers") or [])]
        ks = [k for k in ks if any(p.search(k["name"]) for p in pats)]
    on = [k for k in ks if scenario in (k.get("paths") or {})]
    plain = [k for k in ks if k.get("condition") is None]
    return list(dict.fromkeys(k["name"] for k in (on or plain or ks)))


@lru_cache(maxsize=1)
def _kernel_catalog() -> list:
    data = load_yaml((data_dir("patterns") / "catalog" / "kernels.yaml").read_text(encoding="utf-8"))
    return [e for v in (data.values() if isinstance(data, dict) else [data]) if isinstance(v, list) for e in v
            if isinstance(e, dict) and "match" in e]


def write_examples(out_dir: str, patterns, ids: list[str] | None = None) -> Scaffold:
    """One kernel per pattern a family serves (or those of `ids`), at the small dimensions of the families'
    examples, without a configuration or an integration: what tests/test_scaffold.py runs for every family."""
    by_id = {p.id: p for p in patterns}
    opps = [_Example(f"{pid}@{fam.id}", pid, by_id[pid], family=fam) for fam in load_families().values()
            for pid in fam.serves if pid in by_id and (ids is None or pid in ids)]
    return write(Source("examples", {}, Trees({}, {"vllm": "none", "vllm_ascend": "none"}), opps, integrate=False),
                 out_dir)


def _saves_nothing(row: dict) -> bool:
    """The report's estimate of the opportunity is 0 µs at every scenario it costs (the fused kernel would take
    the place of as many launches and bytes as it removes: a join that already runs as one kernel)."""
    numbers = ((row.get("benefit") or {}).get("numbers") or {}).values()
    layers: list[dict] = [n["per_layer"] for n in numbers if isinstance(n, dict) and isinstance(n.get("per_layer"), dict)]
    return bool(layers) and all(not layer.get("time_us") and layer.get("before_us") for layer in layers)


def write(src: Source, out_dir: str) -> Scaffold:
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UserError(f"--scaffold {out_dir}: exists and is not a folder; give a folder for the generated kernels")
    report = src.report
    rows = {o["id"]: o for o in report.get("opportunities", [])}
    est = report.get("estimate") or {}
    dims = {k: v for k, v in (est.get("shapes") or {}).items() if isinstance(v, (int, float))}
    scenarios = {k: {"num_tokens": v["num_tokens"], "mode": v.get("mode")} for k, v in (est.get("scenarios") or {}).items()
                 if isinstance(v, dict) and "num_tokens" in v} if dims else {}
    result = Scaffold(out)
    kernels: dict[tuple, Kernel] = {}
    leftovers = []
    for o in src.opportunities:
        if o.status != "open":
            continue
        if o.id in src.rejected:
            result.reference_only.append({"id": o.id, "scenario": o.scenario, "reason": f"rejected: {src.rejected[o.id]}"})
            continue
        match = o.matches[0] if o.matches else None
        form = getattr(getattr(match, "form", None), "id", None)
        if (o.pattern.estimate or {}).get("needs_tp"):
            fam, why = None, "communication fusion: its reference only, no kernel"
        elif getattr(o, "family", None) is not None:
            fam, why = o.family, ""
        else:
            fam, why = family_of(o.pattern.id, form, match)
        if fam is not None and fam.id == "elementwise" and match is not None \
                and (other := sorted({op.kind for op in match.op_list} - ELEMENTWISE - VIEWS - {"moe_join"})):
            # the kernel computes the reference's expression: a match that also holds other ops (an unpermute the
            # estimate counts) is not what it replaces
            fam, why = None, f"no kernel: the match also holds {', '.join(other)}, which the element-wise kernel does not compute"
        if fam is not None and fam.id == "elementwise":
            params, _roles_, _ = _params(o.pattern, match, fam, dims)
            if triton_expression(_reference_body(o.pattern, match), [p["name"] for p in params if p["kind"] == "tensor"],
                                 [p["name"] for p in params if p["kind"] in ("float", "int")]) is None:
                fam, why = None, "the reference is not one element-wise expression"
        if fam is not None and _saves_nothing(rows.get(o.id) or {}):
            fam, why = None, "no kernel: the estimate saves nothing at any scenario (before = after)"
        if fam is None:
            result.reference_only.append({"id": o.id, "scenario": o.scenario, "reason": why})
            leftovers.append((o.pattern, match))
            continue
        variant = _variant(fam, o.pattern.id)
        seen = as_family_sees_it(o.pattern, fam)
        key = (fam.id, seen.interface["name"], tuple(sorted(variant.items(), key=lambda kv: kv[0])))
        if key not in kernels:
            base = seen.interface["name"]
            taken = {k.name for k in kernels.values()}
            name = base if base not in taken else next(f"{base}_{i}" for i in range(2, 99) if f"{base}_{i}" not in taken)
            kernels[key] = Kernel(name, fam, seen, variant)
        kernels[key].opps.append((o, rows.get(o.id, {})))
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    location_files = sorted({v.get("file") for v in (report.get("locations") or {}).values() if v.get("file")})
    for k in kernels.values():
        files.update(_kernel_files(src, k, dims, scenarios, location_files, result))
    if leftovers:
        files["references.py"] = stubs_module(leftovers, src.model)
    env = _env()
    ctx = _folder_context(src)
    files["conftest.py"] = env.get_template("_conftest.py.j2").render(c=ctx)
    integ = sorted(r["files"]["integration"][:-3] for r in result.kernels if r["files"].get("integration"))
    if integ:
        files["test_integration.py"] = env.get_template("_test_integration.py.j2").render(c=dict(ctx, modules=_lit(integ)))
    files["manifest.json"] = json.dumps(_manifest(src, result), indent=2, sort_keys=True) + "\n"
    files["README.md"] = env.get_template("_readme.md.j2").render(c=dict(ctx, kernels=result.kernels,
                                                                          reference_only=result.reference_only))
    for rel, text in sorted(files.items()):
        (out / rel).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        result.files.append(rel)
    return result


def _reference_body(pattern, match) -> str:
    from ..render.stubs import _sub

    itf = interface_of(pattern, match)
    return _sub(itf.get("reference") or "", bind_names(itf, match))


@lru_cache(maxsize=1)
def _env():
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(kernels_dir())), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)


def _folder_context(src: Source) -> dict:
    from .. import __version__

    trees = src.trees
    return {"tool": f"fusion-analyze {__version__}", "model": src.model,
            "trees": f"vllm {trees.versions['vllm']}, vllm-ascend {trees.versions['vllm_ascend']}",
            "config_source": (src.report.get("estimate") or {}).get("shapes_source") or "none (symbolic shapes)"}


def _kernel_files(src: Source, k: Kernel, dims: dict, scenarios: dict, location_files: list[str],
                  result: Scaffold) -> dict[str, str]:
    report, trees = src.report, src.trees
    o0, row0 = k.opps[0]
    match0 = o0.matches[0] if o0.matches else None
    params, roles, _ = _params(k.pattern, match0, k.family, dims)
    itf = k.pattern.interface
    returns = [{"name": r["name"], "shape": r["shape"], "dtype": r.get("dtype"),
                "shape_text": _dims_text(r["shape"], dims)} for r in itf["returns"]]
    first = min(scenarios.values(), key=lambda v: v["num_tokens"])["num_tokens"] if scenarios else 1
    known = bool(dims) and _config_shapes_known(params, returns, dict(dims, num_tokens=first))
    spec = k.family.serves[k.pattern.id]
    mutates = [roles.get(m, m) for m in spec.get("mutates") or []]
    # a param written in place and returned as `<role>_out` (the residual): the interface returns it
    returned = {roles.get(m, m): f"{m}_out" for m in spec.get("mutates") or []
                if f"{m}_out" in {r["name"] for r in returns}}
    estimate = row0.get("benefit", {}).get("numbers") or None
    device = (report.get("estimate") or {}).get("device") or {}
    sig = ", ".join(f"{p['name']}: {p['ann']}" + (f" = {p['default']}" if p["default"] is not None else "") for p in params)
    ctx = dict(_folder_context(src))
    ctx.update({
        "name": k.name, "ns": NAMESPACE, "module": k.name, "family": k.family.id, "pattern_id": k.pattern.id,
        "title": k.pattern.title["en"],
        "opportunities": [{"id": o.id, "file": o.file, "line": o.line,
                           "form": getattr(getattr(o.matches[0], "form", None), "id", None) if o.matches else None}
                          for o, _ in k.opps],
        "params": params, "returns": returns, "p": _roles(k.family, k.pattern.id, roles), "variant": k.variant,
        "mutates": mutates, "mutates_tuple": "".join(f'"{m}", ' for m in mutates).rstrip(" "),
        "sig": sig, "op_sig": sig, "args": ", ".join(p["name"] for p in params),
        "dtype": _model_dtype(report), "estimate_device": device.get("id") or "unknown",
        "reference": reference_source(k.pattern, match0, name=k.name).rstrip("\n"),
        "tensors": [p["name"] for p in params if p["kind"] == "tensor"],
        "scalars": [p["name"] for p in params if p["kind"] in ("float", "int")],
    })
    if k.family.id == "elementwise":
        ctx["expr"] = triton_expression(_reference_body(k.pattern, match0), ctx["tensors"], ctx["scalars"])
        ts, ss = ctx["tensors"], ctx["scalars"]
        ctx["ew"] = {"kernel_params": ", ".join([f"{t}_ptr" for t in ts] + ["out_ptr"] + ss + ["n_elements"]),
                     "launch_args": ", ".join([f"{t}_c" for t in ts] + ["out"] + ss + ["n"]),
                     "names": ", ".join(ts + ss)}
    # what the estimate of the first opportunity is made of, per scenario: the bench recomputes it on any profile
    ctx["deployment"] = src.terms.get(o0.id) or {}
    ctx["lit"] = {
        "params": _lit(_spec_params(params)), "returns": _lit([{kk: r[kk] for kk in ("name", "shape", "dtype") if r[kk]}
                                                              for r in returns]),
        "mutates": _lit(tuple(mutates)), "returned": _lit(returned), "dims": _lit(dict(dims, num_tokens=first) if known else dict(SMALL)),
        "scenarios": _lit(scenarios if known else {}),
        "estimate": _lit({"device": device.get("id"), **estimate} if estimate else None),
        "deployment": _lit(ctx["deployment"] if known else {}),
        "examples": _lit(list(k.family.examples)), "small": _lit(dict(SMALL)),
        "tolerance": _lit({d: list(v) for d, v in k.family.tolerance.items()}),
    }
    env = _env()
    files = {f"{k.name}.py": env.get_template(f"{k.family.id}.py.j2").render(c=ctx),
             f"test_{k.name}.py": env.get_template("_test.py.j2").render(c=ctx),
             f"bench_{k.name}.py": env.get_template("_bench.py.j2").render(c=ctx)}
    integ, notes = _integration(k, params, dims, trees, location_files, src.ops) if src.integrate else (None, [])
    if integ is not None:
        ctx["integration"] = integ
        kind = integ["kind"]
        files[f"{kind}_{k.name}.py"] = env.get_template(f"_{kind}.py.j2").render(c=ctx)
    result.kernels.append({
        "name": k.name, "family": k.family.id, "scenario": k.pattern.id,
        "opportunities": [o.id for o, _ in k.opps],
        "files": {"op": f"{k.name}.py", "test": f"test_{k.name}.py", "bench": f"bench_{k.name}.py",
                  **({"integration": f"{integ['kind']}_{k.name}.py"} if integ else {})},
        "integration": {"kind": integ["kind"], "flag": integ["flag"], "imports": integ["imports"],
                        "register": integ["register"],
                        "patches": [{"class": s["cls"], "method": s["method"], "where": f"{s['source_file']}:{s['source_line']}"}
                                    for s in integ.get("swaps", [])],
                        "graph_ops": [[{kk: st[kk] for kk in ("node", "kernel", "where")} for st in g["steps"]]
                                      for g in integ.get("graph", [])]} if integ else None,
        "integration_notes": notes, "mutates": mutates, "config_shapes": known,
        "estimate": {s: (v.get("per_layer") or {}).get("time_us") for s, v in (estimate or {}).items()} or None,
    })
    return files


def _model_dtype(report: dict) -> str:
    n = (report.get("estimate") or {}).get("dtype_bytes")
    stated = None
    cfg = report.get("configuration") or {}
    for key in ("torch_dtype", "dtype"):
        if isinstance(cfg.get(key), str):
            stated = cfg[key]
    return stated if stated in ("bfloat16", "float16", "float32") else ("float32" if n == 4 else "bfloat16")


def _integration(k: Kernel, params: list[dict], dims: dict, trees: Trees, location_files: list[str], walk_ops: list):
    from .callsite import REGISTER_FUNC, REGISTER_MODULE, registration, split_swaps

    kind = k.family.integration["kind"]
    flag = f"FUSION_ANALYZE_{k.name.upper()}"
    notes: list[str] = []
    reg = registration(trees.index, [k.name])
    vname = k.name if k.name not in reg["taken"] else f"{NAMESPACE}_{k.name}"
    op_expr = f"torch.ops.vllm.{vname}"
    register = {"op_name": vname, "dispatch_key": reg["dispatch_key"], "seen_at": reg["seen_at"], "where": reg["where"]}
    wanted_reg = [(REGISTER_MODULE, REGISTER_FUNC)]
    if kind in ("patch", "layer"):
        swaps, seen = [], set()
        for o, _row in k.opps:
            found = []
            if not o.matches:
                found.append("no match")
            elif kind == "layer":
                found.append(layer_swap(trees, o.matches[0], k.family, k.name, len(swaps), o, walk_ops, op_expr))
            else:
                # each match of the opportunity (a MoE model's dense layers' MLP and its MoE layers' shared experts
                # are two matches of one opportunity): where the matched ops run (vllm-ascend's call site), then
                # the model's own method of the same layers
                for match in o.matches:
                    at = split_swaps(trees, match, k.name, len(swaps) + len(found), o, op_expr)
                    found += at if isinstance(at, list) else []
                    found.append(method_swap(trees, match, k.family, k.name, len(swaps) + len(found), o,
                                             location_files, op_expr))
            for sw in found:
                if isinstance(sw, str):
                    if not any(not isinstance(s, str) for s in found):
                        notes.append(f"{o.id}: no patch ({sw})")
                    continue
                if (sw.cls_module, sw.cls, sw.method) in seen:
                    continue
                seen.add((sw.cls_module, sw.cls, sw.method))
                if sw.source_file != o.file and kind == "patch":
                    notes.append(f"{o.id}: the matched ops run at {o.file}:{o.line}; the patch also swaps {sw.cls}.{sw.method}"
                                 f" ({sw.source_file}:{sw.source_line}), which calls the same layers")
                sw.source = re.sub(r"\b_original_\d+\b", f"_original_{len(swaps)}", sw.source)  # its place here
                swaps.append(sw)
        if not swaps:
            return None, notes
        plain = any("_plain_linear(" in sw.source for sw in swaps)
        wanted = [("vllm.model_executor.layers.linear", "UnquantizedLinearMethod")] if plain else []
        for sw in swaps:
            wanted += sw.imports
        imports, lines = _checked_imports(wanted + wanted_reg, trees)
        return {"kind": "patch", "flag": flag, "imports": imports, "import_lines": lines, "notes": notes, "plain": plain,
                "register": register,
                "swaps": [{"cls": s.cls, "method": s.method, "func": s.func, "source": s.source,
                           "source_file": s.source_file, "source_line": s.source_line, "lines": s.lines,
                           "opportunity": s.opportunity} for s in swaps]}, notes
    wanted = [("vllm.compilation.passes.vllm_inductor_pass", "VllmInductorPass"), ("vllm.config", "VllmConfig"),
              ("vllm_ascend.compilation.graph_fusion_pass_manager", "GraphFusionPassManager"),
              ("vllm_ascend.compilation.passes.base_pattern", "BasePattern")]
    tensors = [p["name"] for p in params if p["kind"] == "tensor"]
    match0 = k.opps[0][0].matches[0] if k.opps[0][0].matches else None
    scalars = _scalar_values(params, dims, match0)
    graph, gnotes = _graph_patterns(trees, match0, params)
    notes += gnotes
    layered = _layer_imports(graph, match0)
    used = {t for g in graph if g.get("layer") for t in g["tensors"]}
    layer_tensors = [t for t in tensors if t in used]
    imports, lines = _checked_imports(wanted + layered + wanted_reg, trees)
    returned = [r["name"][:-len("_out")] if r["name"].endswith("_out") else r["name"] for r in k.pattern.interface["returns"]]
    return {"kind": "pass", "flag": flag, "imports": imports, "import_lines": lines, "camel": _camel(k.name),
            "register": register, "graph": graph, "graph_returns": ", ".join(returned), "notes": notes,
            "torch_npu": any(s["kernel"].startswith("torch_npu.") for g in graph for s in g["steps"]),
            "scalar_names": [p["name"] for p in params if p["kind"] in ("int", "float", "bool", "str")],
            "scalars": _lit(scalars), "tensors": _lit(tuple(tensors)), "tensors_sig": ", ".join(tensors),
            "tensors_kw": ", ".join(f"{t}={t}" for t in tensors),
            "layered": bool(layered), "layer_class": layered[0][1] if layered else None,
            "layer_tensors": _lit(tuple(layer_tensors)), "layer_sig": ", ".join(layer_tensors),
            "layer_kw": ", ".join(f"{t}={t}" for t in layer_tensors),
            # the layer op's signature with its types (direct_register_custom_op infers the schema from them)
            "layer_typed": ", ".join([f"{t}: torch.Tensor" for t in layer_tensors]
                                     + [f"{p['name']}: {p['kind']}" for p in params if p["kind"] in ("int", "float", "bool", "str")]
                                     + ["layer_name: LayerNameType"]),
            "context": next((g["context"] for g in graph if g.get("context")), None),
            }, notes


def _layer_imports(graph: list[dict], match) -> list[tuple[str, str]]:
    """What a pattern over a custom op that takes the layer's name needs (as vLLM's rope_kvcache_fusion.py
    imports it): the attention layer class the walk matched (one pattern per layer of it), vLLM's config reader
    of those layers, the layer-name encoding of the registration module, and the names the custom op's own
    function calls on the layer name (read from the trees: graph_pattern.layer_context)."""
    ctx = next((g["context"] for g in graph if g.get("context")), None)
    if ctx is None or match is None:
        return []
    from .callsite import REGISTER_MODULE

    node = next(st["node"] for g in graph for st in g["steps"] if st["layer"])
    op = match.ops[node]
    cls_file = (op.attrs or {}).get("class_file") or ""
    if not op.layer_class or not cls_file.endswith(".py"):
        return []
    module = cls_file[:-3].replace("/", ".").removesuffix(".__init__")
    return ([(module, op.layer_class), ("vllm.config", "get_layers_from_vllm_config"),
             (REGISTER_MODULE, "_encode_layer_name"), (REGISTER_MODULE, "LayerNameType")] + [(ctx["module"], n) for n in ctx["names"]])


def _graph_patterns(trees: Trees, match, params: list[dict]) -> tuple[list[dict], list[str]]:
    """The pass's patterns over the ops the walk recorded for the match (commands/graph_pattern.py)."""
    if match is None or trees.index is None:
        return [], []
    from ..walk.kernels.backend_kernels import CUSTOM_OPS
    from ..walk.kernels.registered_ops import CustomOps
    from .graph_pattern import graph_patterns

    ops = CUSTOM_OPS.of(trees.index).setdefault(None, CustomOps(trees.index))
    return graph_patterns(trees.index, ops, match, {p["name"] for p in params})


def _checked_imports(wanted: list[tuple[str, str]], trees: Trees) -> tuple[list[dict], list[str]]:
    """Each (module, name) with where the analysed trees define it; the import lines (grouped by module)."""
    seen, rows = set(), []
    by_module: dict[str, list[str]] = {}
    for module, name in wanted:
        if (module, name) in seen or not name.isidentifier() or keyword.iskeyword(name):
            continue
        seen.add((module, name))
        where = trees.where(module, name)
        rows.append({"module": module, "name": name, "where": where or "MISSING from the analysed trees"})
        by_module.setdefault(module, []).append(name)
    lines = []
    for module in sorted(by_module):
        missing = [n for n in by_module[module] if trees.where(module, n) is None]
        suffix = f"  # not found in the analysed trees: {', '.join(missing)}" if missing else ""
        lines.append(f"from {module} import {', '.join(sorted(by_module[module]))}{suffix}")
    return rows, lines


def _manifest(src: Source, result: Scaffold) -> dict:
    from .. import __version__

    trees = src.trees
    return {"tool": {"name": "fusion-analyze", "version": __version__}, "model": src.model,
            "configuration": (src.report.get("estimate") or {}).get("shapes_source"),
            "sources": {"vllm": trees.versions["vllm"], "vllm_ascend": trees.versions["vllm_ascend"]},
            "namespace": NAMESPACE, "kernels": result.kernels, "reference_only": result.reference_only}
