"""vLLM's own (CUDA) compile fusion passes, read from the vLLM tree.

The pass manager (vllm/compilation/passes/pass_manager.py, or vllm/compilation/pass_manager.py in older
trees) adds each pass under `if self.pass_config.<flag>:`. A PassConfig field left at None takes its
value from the optimization level's table (O2 is vLLM's default level): a literal, a module constant,
or a function deciding it from the config (e.g. enable_allreduce_rms_fusion: TP > 1 and FlashInfer).
"""

from __future__ import annotations

import re

import libcst as cst

from ..index.facts import FactTable
from ..index.modules import ModuleIndex
from ..index.nodes import find_all, iter_nodes
from ..semantics.for_backend import evaluator
from ..semantics.scope import Scope
from ..semantics.values import Known
from ..ir.conditions import as_text
from ..ir.texts import say
from .ascend_passes import GraphPass, _default_of, _enables, _flag_of, read_pass_module

LEVEL_TABLE_FACTS = FactTable("level_table", "a config module -> its optimisation-level defaults table")

CUDA_MANAGERS = ["vllm.compilation.passes.pass_manager", "vllm.compilation.pass_manager"]
PASS_CONFIGS = ["vllm.config.compilation"]
LEVEL_TABLES = ["vllm.config.vllm"]
DEFAULT_LEVEL = "O2"


# the text of what level_value matches: `X_O2 = {...}` / `X_02 = {...}`, or a `<enum>.O2: {...}` entry
_LEVEL_TEXT = re.compile(rb"(_02|_O2)\s*=[^=]|\.O2\s*:")


def _level_table(index: ModuleIndex, info) -> dict[str, cst.DictElement]:
    """flag -> its `"flag": value` element in the default level's table, read in one visit per module."""
    key = info.name
    if key in LEVEL_TABLE_FACTS.of(index):
        return LEVEL_TABLE_FACTS.of(index)[key]
    table: dict[str, cst.DictElement] = {}

    def in_level(node: cst.CSTNode) -> None:
        for n in find_all(node, cst.DictElement):
            if isinstance(n.key, cst.SimpleString) and isinstance(n.key.evaluated_value, str):
                table.setdefault(n.key.evaluated_value, n)

    def level_value(n) -> cst.CSTNode | None:  # the default level's table, if n holds it
        if isinstance(n, cst.Assign):
            names = [t.target.value for t in n.targets if isinstance(t.target, cst.Name)]
            return n.value if any(name.endswith(("_02", "_O2")) for name in names) else None
        if isinstance(n, cst.DictElement) and isinstance(n.key, cst.Attribute) and n.key.attr.value == DEFAULT_LEVEL:
            return n.value
        return None

    for stmt in info.nodes_with(_LEVEL_TEXT):
        for n in iter_nodes(stmt, lambda n: level_value(n) is not None):
            value = level_value(n)
            if value is not None:
                in_level(value)
    LEVEL_TABLE_FACTS.of(index)[key] = table
    return table


def _level_default(index: ModuleIndex, flag: str) -> tuple[str, str, int, str | None] | None:
    """(value text, file, line, what decides it) of `"flag": value` in the default level's table."""
    for modname in LEVEL_TABLES:
        info = index.get(modname)
        if info is None:
            continue
        element = _level_table(index, info).get(flag)
        if element is None:
            continue
        value = element.value
        text = info.code(value).strip()
        decided = None
        if isinstance(value, cst.Name):
            target = index.resolve_expr(info, value)
            if target is not None and getattr(target, "kind", None) == "function":
                # run on CUDA by the evaluator when its tests decide it (`if not rocm_aiter_ops.is_enabled():
                # return False` is off on CUDA); else it is the condition of the default
                got = evaluator("cuda").infer(cst.Call(func=value, args=[cst.Arg(cst.Name("vllm_config"))]),
                                              Scope(module=info))
                if isinstance(got, Known) and isinstance(got.value, bool):
                    return (say("value_on_cuda", value=got.value, fn=f"{value.value}()",
                                where=f"{target.module.rel}:{target.line}"), info.rel, info.line_of(element), None)
                doc = _docline(target.node)
                at = f"{target.module.rel}:{target.line}"
                decided = (say("decided_by_doc", fn=f"{value.value}()", where=at, doc=doc) if doc
                           else say("decided_by", fn=f"{value.value}()", where=at))
            else:
                m = re.search(rf"^{re.escape(value.value)}\s*(?::[^=]+)?=\s*(True|False)\s*$", info.text(), re.M)
                if m:
                    text = f"{m.group(1)} ({value.value})"
        return text, info.rel, info.line_of(element), decided
    return None


def _docline(fn: cst.FunctionDef) -> str | None:
    body = fn.body.body
    if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr):
        v = body[0].body[0].value
        if isinstance(v, cst.SimpleString):
            return " ".join(str(v.evaluated_value).split())
    return None


def read_cuda_passes(index: ModuleIndex) -> list[GraphPass]:
    out: list[GraphPass] = []
    seen: set[str] = set()
    for manager in CUDA_MANAGERS:
        for cls_name, (cond, file, line, modname) in sorted(_enables(index, manager, "cuda").items()):
            for p in read_pass_module(index, modname, "cuda", whole_class=True, only={cls_name}):
                if p.name != cls_name or p.name in seen:
                    continue
                seen.add(p.name)
                p.enable, p.enable_file, p.enable_line = as_text(cond), file, line
                p.flag = _flag_of(cond)
                if p.flag is None:
                    continue  # not switched by a PassConfig flag (a backend-specific canonicalisation)
                field = _default_of(index, PASS_CONFIGS, p.flag)
                if field:
                    p.default, p.default_file, p.default_line = field
                if p.default in (None, "None", "Field(default=None)") or field is None:
                    level = _level_default(index, p.flag)
                    if level is not None:
                        text, lfile, lline, decided = level
                        p.default, p.default_file, p.default_line = say("at_level", value=text, level=DEFAULT_LEVEL), lfile, lline
                        if decided:
                            p.guards.insert(0, say("on_only_when", decided=decided))
                out.append(p)
        if out:
            break
    return out


INDUCTOR_FACTS = FactTable("inductor_default", "None -> where vLLM's default compilation turns custom ops off")
_NONE_TEXT = re.compile(rb"custom_ops\.append\(\s*[\"']none[\"']\s*\)")


def inductor_default(index: ModuleIndex) -> dict | None:
    """Where vLLM's configuration, left at its defaults on CUDA (optimisation level O2: compilation mode
    VLLM_COMPILE, Inductor backend), turns CustomOps off (`custom_ops.append("none")` under a test naming
    "inductor"): every CustomOp layer then runs its forward_native and Inductor compiles the model's plain
    PyTorch ops, fusing element-wise chains within each piecewise graph. {file, line} of that call; None
    where the tree has no such default (the CUDA column then reads kernels and passes only)."""
    return INDUCTOR_FACTS.get(index, None, lambda: _inductor_default(index))


def _inductor_default(index: ModuleIndex) -> dict | None:
    from ..semantics.values import literal

    for name in LEVEL_TABLES:
        info = index.get(name)
        if info is None:
            continue
        for stmt in info.nodes_with(_NONE_TEXT):
            for test_if in find_all(stmt, cst.If):
                if '"inductor"' not in info.code(test_if.test):
                    continue
                for call in find_all(test_if.body, cst.Call):
                    func = call.func
                    if (type(func) is cst.Attribute and func.attr.value == "append" and len(call.args) == 1
                            and type(func.value) is cst.Attribute and func.value.attr.value == "custom_ops"
                            and literal(call.args[0].value) == Known("none")):
                        return {"file": info.rel, "line": info.line_of(call)}
    return None
