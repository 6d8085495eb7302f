"""What vllm-ascend changes about a model: registered overrides and monkey patches."""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass
from types import SimpleNamespace

import libcst as cst

from ..index.bindings import _absolute
from ..index.chunks import ast_statements
from ..index.modules import ImportBinding, ModuleIndex
from ..index.nodes import find_all
from ..ir.conditions import Condition, join

ASCEND_MODELS = "vllm_ascend.models"


@dataclass(frozen=True)
class Override:
    architecture: str
    module: str
    class_name: str
    file: str
    line: int  # of the class definition (of the register call when the class is not found)


@dataclass(frozen=True)
class Patch:
    target: str  # absolute dotted name that is replaced: vllm.x.y.Class.forward
    file: str
    line: int
    value: str  # what is assigned, as Python (ast.unparse)
    module: str  # the patch module (to resolve `value` in)
    value_name: str | None = None  # `value` when it is a dotted name (new_forward, mod.Class)


def read_overrides(index: ModuleIndex) -> dict[str, Override]:
    """Architecture -> its register_model call (file and line of the call; `placed` finds the class)."""
    info = index.get(ASCEND_MODELS)
    if info is None:
        return {}
    found: dict[str, Override] = {}
    for call in _calls(info.tree):
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "register_model"):
            continue
        args = [a.value for a in call.args]
        if len(args) < 2:
            continue
        arch, target = _str(args[0]), _str(args[1])
        if arch is None or target is None or ":" not in target:
            continue
        module, cls = target.split(":", 1)
        found.setdefault(arch, Override(arch, module, cls, info.rel, info.line_of(call)))
    return found


def placed(index: ModuleIndex, o: Override) -> Override:
    """The override at its class definition, when the module can be read (parsed only for the model asked)."""
    mod = index.get(o.module)
    if mod is None:
        return o
    d = mod.classes().get(o.class_name)
    if d is None:  # the class is not where the call says: keep pointing at the call
        return o
    return Override(o.architecture, o.module, o.class_name, mod.rel, d.line)


def read_patches(index: ModuleIndex) -> list[Patch]:
    """Assignments and setattr calls in vllm_ascend/patch/ whose target is a vLLM name."""
    tree = index.trees.get("vllm_ascend")
    if tree is None:
        return []
    patch_dir = tree.package_dir / "patch"
    patches: list[Patch] = []
    for path in sorted(patch_dir.rglob("*.py")) if patch_dir.is_dir() else []:
        module = index.module_name_for(path)
        if not module:
            continue
        # CPython's parser is enough to find `a.b = v` and setattr() (about a tenth of a libcst parse);
        # the libcst tree of a patch module is read only when the walk reaches one of its patches.
        try:
            source = path.read_bytes()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module_ast = ast.parse(source)
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            index.get(module)  # let the index report why the file cannot be read
            continue
        rel = tree.rel(path)
        imports = _imports(module_ast, module, path.name == "__init__.py")
        for node, target_expr, value in _assignments(module_ast, b"setattr" in source):
            target = _target_name(index, imports, target_expr)
            if target is None or not target.startswith("vllm."):
                continue
            patches.append(Patch(target, rel, node.lineno, ast.unparse(value), module, _dotted(value)))
    return sorted(patches, key=lambda p: (p.target, p.file, p.line))


def _imports(module_ast: ast.Module, name: str, is_package: bool) -> dict[str, list[ImportBinding]]:
    """The module-level import bindings, as ModuleIndex collects them (inside if/try, with the condition)."""
    out: dict[str, list[ImportBinding]] = {}
    where = SimpleNamespace(name=name, is_package=is_package)

    def body(stmts, cond):
        for s in stmts:
            if isinstance(s, ast.If):
                # the test as code for the evaluator (patch files are scanned with ast; a test is one expression)
                test = Condition.of(cst.parse_expression(ast.unparse(s.test)), None)
                body(s.body, join(cond, test))
                body(s.orelse, join(cond, test.negate()))
            elif isinstance(s, ast.Try):
                body(s.body, cond)
                for h in s.handlers:
                    body(h.body, join(cond, Condition.note("except")))
            elif isinstance(s, ast.Import):
                for alias in s.names:
                    if alias.asname:
                        out.setdefault(alias.asname, []).append(ImportBinding(alias.name, None, 0, cond))
                    else:
                        head = alias.name.split(".")[0]
                        out.setdefault(head, []).append(ImportBinding(head, None, 0, cond))
            elif isinstance(s, ast.ImportFrom):
                absolute = _absolute(where, s.level, s.module)
                for alias in s.names:
                    if alias.name != "*":
                        out.setdefault(alias.asname or alias.name, []).append(ImportBinding(absolute, alias.name, 0, cond))

    body(module_ast.body, None)
    return out


def _dotted(expr) -> str | None:
    """`a.b.c` for a Name or a chain of attributes on a Name, else None."""
    parts = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    return ".".join([expr.id] + parts[::-1])


def _target_name(index: ModuleIndex, imports: dict, expr) -> str | None:
    # Named through the patch file's own imports, without parsing the vLLM modules they name:
    # the patch files import half of vLLM, and only the spelled target matters here.
    if isinstance(expr, tuple):  # setattr(obj, "name", value)
        obj, attr = expr
        base = _resolved(index, imports, obj)
        return f"{base}.{attr}" if base else None
    if isinstance(expr, ast.Attribute):
        return _resolved(index, imports, expr)
    return None


def _resolved(index: ModuleIndex, imports: dict, expr) -> str | None:
    dotted = _dotted(expr)
    if dotted is None:
        return None
    head, _, rest = dotted.partition(".")
    if head in imports:
        binding = index.choose(imports[head])
        head = binding.module if binding.name is None else f"{binding.module}.{binding.name}"
    return f"{head}.{rest}" if rest else head


def _assignments(module_ast: ast.Module, setattr_calls: bool = True):
    """(statement, target expr, value) for `a.b = v` anywhere and `setattr(a, "b", v)` calls; without
    `setattr_calls` (the file never names setattr) only statements are visited."""
    out = []
    for node in ast.walk(module_ast) if setattr_calls else ast_statements(module_ast.body):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Attribute):
                    out.append((node, t, node.value))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
              and len(node.args) == 3 and not node.keywords):
            attr = node.args[1]
            if isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                out.append((node, (node.args[0], attr.value), node.args[2]))
    return out


def _calls(module: cst.Module) -> list[cst.Call]:
    return find_all(module, cst.Call)


def _str(node) -> str | None:
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        v = node.evaluated_value
        return v if isinstance(v, str) else None
    return None
