"""The out-of-tree registrations the kernels of a layer depend on: vllm-ascend's REGISTERED_ASCEND_OPS (which
vLLM class Ascend replaces by which) and the vLLM custom ops (`torch.ops.vllm.<name>` -> the function it runs),
read statically from the trees."""

from __future__ import annotations

import re

import libcst as cst

from ...index.facts import FactTable
from ...index.modules import Definition, ModuleIndex
from ...semantics.function_bodies import imports_in
from ...semantics.values import Known

ASCEND_UTILS = "vllm_ascend.utils"
REGISTERED_OPS = FactTable("registered_ops", "None -> vllm-ascend's REGISTERED_ASCEND_OPS read statically")


def registered_ops(ctor) -> "RegisteredOps | dict":
    """REGISTERED_ASCEND_OPS (vLLM class name -> the Ascend class that runs in its place), read once per session
    and kept in the walk's replacement index."""
    index = ctor.index
    return ctor.patches.custom_ops(lambda: REGISTERED_OPS.get(
        index, None, lambda: read_registered_ops(index) if "vllm_ascend" in index.trees else {}))


class RegisteredOps:
    """vLLM class name -> its Ascend class, resolved (and its module parsed) only when a model uses it."""

    def __init__(self, index: ModuleIndex, candidates: dict[str, list]):
        self.index = index
        self.candidates = candidates  # name -> [(module, name) or (info, expr)], later entries win
        self._resolved: dict[str, Definition | None] = {}

    def get(self, key: str, default=None):
        if key not in self._resolved:
            found = None
            for where, what in reversed(self.candidates.get(key, [])):
                target = self.index.lookup(where, what) if isinstance(where, str) else self.index.resolve_expr(where, what)
                if isinstance(target, Definition) and target.kind == "class":
                    found = target
                    break
            self._resolved[key] = found
        found = self._resolved[key]
        return found if found is not None else default


def read_registered_ops(index: ModuleIndex) -> RegisteredOps | dict:
    """Read REGISTERED_ASCEND_OPS = {...} (and later item assignments) in vllm_ascend/utils.py."""
    info = index.get(ASCEND_UTILS)
    if info is None:
        return {}
    found: dict[str, list] = {}
    from ...semantics.runtime_defaults import version_calls

    version = version_calls(index)
    for fn in _functions(info.statements_with(b"REGISTERED_ASCEND_OPS")):
        local = imports_in(fn, info)
        for stmt, conditional in _statements(fn.body.body, version=version):
            if conditional:
                continue  # hardware-specific overrides (310P compatibility paths) are not the standard path
            for small in stmt.body if type(stmt) is cst.SimpleStatementLine else []:
                pairs = []
                if type(small) is cst.Assign:
                    for t in small.targets:
                        if _is_name(t.target, "REGISTERED_ASCEND_OPS") and type(small.value) is cst.Dict:
                            pairs += _dict_pairs(small.value)
                        elif type(t.target) is cst.Subscript and _is_name(t.target.value, "REGISTERED_ASCEND_OPS"):
                            key = t.target.slice[0].slice
                            if type(key) is cst.Index and type(key.value) is cst.SimpleString:
                                pairs.append((key.value.evaluated_value, small.value))
                elif type(small) is cst.Expr and type(small.value) is cst.Call:
                    f = small.value.func
                    if type(f) is cst.Attribute and f.attr.value == "update" and _is_name(f.value, "REGISTERED_ASCEND_OPS"):
                        if small.value.args and type(small.value.args[0].value) is cst.Dict:
                            pairs += _dict_pairs(small.value.args[0].value)
                for key, value in pairs:
                    if type(value) is cst.Name and value.value in local:
                        found.setdefault(key, []).append(local[value.value])
                    else:
                        found.setdefault(key, []).append((info, value))
    return RegisteredOps(index, found)


_REGISTER_RE = re.compile(
    r"direct_register_custom_op\(\s*(?:op_name\s*=\s*)?[\"'](\w+)[\"']\s*,\s*(?:op_func\s*=\s*)?([A-Za-z_][\w.]*)"
)


class CustomOps:
    """torch.ops.vllm.<name> -> the Python function registered for it (text scan, parse on demand)."""

    def __init__(self, index: ModuleIndex):
        self.index = index
        self._where: dict[str, tuple[str, str]] | None = None
        self._all: dict[str, list[tuple[str, str]]] = {}  # every registration of a name (the first is _where's)
        self._resolved: dict[tuple, Definition | None] = {}

    def _scan(self) -> dict[str, tuple[str, str]]:
        where: dict[str, tuple[str, str]] = {}
        for tree in sorted(self.index.trees.values(), key=lambda t: t.package):
            for path in sorted(tree.package_dir.rglob("*.py")):
                try:
                    data = path.read_bytes()
                except OSError:
                    continue
                if b"direct_register_custom_op(" not in data:  # decoding every file costs more than the test
                    continue
                text = data.decode("utf-8", "replace")
                module = self.index.module_name_for(path)
                for m in _REGISTER_RE.finditer(text):
                    where.setdefault(m.group(1), (module, m.group(2)))
                    self._all.setdefault(m.group(1), []).append((module, m.group(2)))
        return where

    def registrations(self) -> dict[str, tuple[str, str]]:
        """torch.ops.vllm.<name> -> (the module registering it, the function's expression), for every name."""
        if self._where is None:
            self._where = self._scan()
        return self._where

    def get(self, name: str, near: str | None = None) -> Definition | None:
        """The function registered as torch.ops.vllm.<name>. `near`: the module that calls it; where several
        modules register the name (a model's per-vendor copies: qwen4_exp/nvidia/ops/hc.py and .../amd/ops/hc.py),
        the one sharing the longest package path with it, the copy the caller's package imports."""
        if self._where is None:
            self._where = self._scan()
        chosen = self._where.get(name)
        found = self._all.get(name, ())
        if near is not None and len(found) > 1:
            chosen = max(found, key=lambda w: (_shared_prefix(w[0], near), -found.index(w)))
        key = (name, chosen)
        if key not in self._resolved:
            target = None
            if chosen is not None:
                module, func = chosen
                info = self.index.get(module)
                if info is not None:
                    import libcst as _cst

                    expr = _cst.parse_expression(func)
                    found = self.index.resolve_expr(info, expr)
                    target = found if isinstance(found, Definition) and found.kind == "function" else None
            self._resolved[key] = target
        return self._resolved[key]


def _shared_prefix(a: str, b: str) -> int:
    """How many leading dotted parts two module names share."""
    n = 0
    for x, y in zip(a.split("."), b.split(".")):
        if x != y:
            break
        n += 1
    return n


def _functions(body: list) -> list[cst.FunctionDef]:
    return [s for s in body if type(s) is cst.FunctionDef]


def _statements(body, conditional=False, version: dict | None = None):
    for stmt in body:
        if type(stmt) is cst.If:
            holds = _version_test(stmt.test, version or {})
            if holds is not None:  # decided by the vLLM tree's version: only the branch that runs
                chosen = stmt.body.body if holds else stmt.orelse.body.body if type(stmt.orelse) is cst.Else else []
                yield from _statements(chosen, conditional, version)
                continue
            yield from _statements(stmt.body.body, True, version)
            if stmt.orelse is not None and not type(stmt.orelse) is cst.If:
                yield from _statements(stmt.orelse.body.body, conditional, version)  # the else of a hardware check is standard
        elif isinstance(stmt, (cst.With, cst.Try)):
            yield from _statements(stmt.body.body, conditional, version)
        else:
            yield stmt, conditional


def _version_test(test, calls: dict) -> bool | None:
    """A test the vLLM version decides (semantics.runtime_defaults.version_calls), else None."""
    if not (type(test) is cst.Call and type(test.func) is cst.Name and test.func.value in calls):
        return None
    value = calls[test.func.value](test, None)
    return value.value if isinstance(value, Known) else None


def _dict_pairs(node: cst.Dict):
    for el in node.elements:
        if type(el) is cst.DictElement and type(el.key) is cst.SimpleString:
            yield el.key.evaluated_value, el.value


def _is_name(node, name: str) -> bool:
    return type(node) is cst.Name and node.value == name
