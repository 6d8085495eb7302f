"""What vllm-ascend changes about a model: registered overrides and monkey patches."""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import libcst as cst

from ..index.bindings import _absolute
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
    """One replacement a vllm-ascend patch module makes: `target = value`, in whatever form it is written
    (`a.b = v`, `A.x, B.y = f, g`, `setattr(T, "m", v)`, `for m in (...): setattr(T, m, getattr(S, m))`, the
    target spelled through a module-level alias `_T = Cls`). Read statically; the walk resolves `value`."""

    target: str  # absolute dotted name that is replaced: vllm.x.y.Class.forward
    file: str
    line: int
    value: str  # what is assigned, as Python (ast.unparse)
    module: str  # the patch module (to resolve `value` in)
    value_name: str | None = None  # `value` when it is a dotted name (new_forward, mod.Class, Other.method)
    # the `if` tests it stands under, outermost first: (test as Python, True for its `else` side); the walk
    # decides them in the patch module (`if get_current_hardware_profile().supports(...)`)
    tests: tuple[tuple[str, bool], ...] = ()
    form: str = "assign"  # assign | tuple | setattr | setattr loop | item
    key: str | None = None  # an item assignment's key: `_CONFIG_REGISTRY["glm5_next"] = Cls` (target: the dict)
    # the imports a `try` body runs before the patch, (absolute module, name or None for `import m`): where one
    # fails (the name is not in its module), the patch never runs (the walk decides it, constructor.py)
    needs: tuple[tuple[str, str | None], ...] = ()
    # the `if` tests under which the patch package's `__init__` imports the patch module, (that `__init__`'s
    # module, test, True for its `else` side): `else: import ...patch_idex_310` runs only on 310P devices
    imported_under: tuple[tuple[str, str, bool], ...] = ()


class Replacements:
    """The index of every replacement vllm-ascend makes in one tree, built once per session (the resolver's
    `replacements`) and asked by the walk at every method and function it looks up:
    - `get(target)`: the patch modules' replacements of a vLLM name (`Cls.forward = ...`, `mod.f = ...`);
    - `item(container, key)`: their item assignments into a vLLM table (`_CONFIG_REGISTRY["glm5_next"] =
      Glm5NextConfig`: the configuration class of a model type, read by config/model_config.py);
    - `model_classes`: `ModelRegistry.register_model` (architecture -> the Ascend model class);
    - `custom_ops(read)`: `CustomOp.register_oot` of REGISTERED_ASCEND_OPS (vLLM class name -> the Ascend
      class), read by walk/kernels/registered_ops.py on first use and kept here."""

    def __init__(self, patches: list[Patch], model_classes: dict[str, Override] | None = None):
        self.by_target: dict[str, list[Patch]] = {}
        self.items: dict[tuple[str, str], list[Patch]] = {}
        for p in patches:
            if p.key is not None:
                self.items.setdefault((p.target, p.key), []).append(p)
            else:
                self.by_target.setdefault(p.target, []).append(p)
        # class qualname -> the modules of the patches of its methods
        self.modules_of_class: dict[str, set[str]] = {}
        for p in patches:
            if p.key is None:
                self.modules_of_class.setdefault(p.target.rpartition(".")[0], set()).add(p.module)
        self.model_classes: dict[str, Override] = model_classes if model_classes is not None else {}
        self._custom_ops = None

    def get(self, target: str) -> list[Patch]:
        """The patches of `target`, in file and line order (the last one assigned runs, where its tests hold)."""
        return self.by_target.get(target, [])

    def item(self, container: str, key: str) -> list[Patch]:
        """The item assignments `container[key] = value` (container: an absolute dotted name), in file and line
        order."""
        return self.items.get((container, key), [])

    def custom_ops(self, read):
        """The out-of-tree custom ops (`CustomOp.register_oot`): `read()` once, then what it gave."""
        if self._custom_ops is None:
            self._custom_ops = read()
        return self._custom_ops

    def __bool__(self) -> bool:
        return bool(self.by_target)


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
    sites = _import_sites(index, patch_dir) if patch_dir.is_dir() else {}
    for path in sorted(patch_dir.rglob("*.py")) if patch_dir.is_dir() else []:
        module = index.module_name_for(path)
        if not module:
            continue
        under = sites.get(module, [])
        # one import, under tests: the patches run where they hold (several imports: not said here)
        imported_under = tuple((init, t, neg) for init, tests in under for t, neg in tests) if len(under) == 1 else ()
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
        aliases = _module_aliases(module_ast)
        where = SimpleNamespace(name=module, is_package=path.name == "__init__.py")
        for node, target_expr, value, tests, form, needs in _assignments(module_ast, b"setattr" in source, where):
            key = None
            if isinstance(target_expr, ast.Subscript):  # _CONFIG_REGISTRY["glm5_next"] = Glm5NextConfig
                key, target_expr = _constant_key(target_expr), target_expr.value
                if key is None:
                    continue
            target = _target_name(index, imports, aliases, target_expr, item=key is not None)
            if target is None or not target.startswith("vllm."):
                continue
            value_name = _value_name(value)
            if key is not None and value_name is not None:  # the value named absolutely: the class it registers
                value_name = _resolved(index, imports, aliases, value) or value_name
            patches.append(Patch(target, rel, node.lineno, ast.unparse(value), module, value_name,
                                 tests, form, key, needs, imported_under))
    return sorted(patches, key=lambda p: (p.target, p.file, p.line))


def _import_sites(index: ModuleIndex, patch_dir) -> dict[str, list[tuple[str, tuple[tuple[str, bool], ...]]]]:
    """Patch module -> where the patch packages' `__init__` files import it: (the `__init__`'s module, the `if`
    tests the import stands under)."""
    out: dict[str, list] = {}
    for path in sorted(patch_dir.rglob("__init__.py")):
        init = index.module_name_for(path)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module_ast = ast.parse(path.read_bytes())
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        if not init:
            continue
        where: Any = SimpleNamespace(name=init, is_package=True)

        def body(stmts, tests):
            for s in stmts:
                if isinstance(s, ast.If):
                    test = ast.unparse(s.test)
                    body(s.body, tests + ((test, False),))
                    body(s.orelse, tests + ((test, True),))
                elif isinstance(s, ast.Try):
                    body(s.body + s.orelse, tests)
                elif isinstance(s, (ast.Import, ast.ImportFrom)):
                    for module, name in _imported(s, where):
                        for named in (module, f"{module}.{name}") if name is not None else (module,):
                            out.setdefault(named, []).append((init, tests))

        body(module_ast.body, ())
    return out


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


def _value_name(value) -> str | None:
    """The dotted name a replacement's value stands for: `f`, `mod.f`, `Other.method`, `getattr(Other, "m")`."""
    if (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "getattr"
            and len(value.args) == 2 and isinstance(value.args[1], ast.Constant) and isinstance(value.args[1].value, str)):
        base = _dotted(value.args[0])
        return f"{base}.{value.args[1].value}" if base else None
    return _dotted(value)


def _module_aliases(module_ast: ast.Module) -> dict[str, ast.expr]:
    """Module-level `_T = Cls` / `_T = mod.Cls` bindings (a patch target spelled through an alias); a name bound
    twice is no alias."""
    out: dict[str, ast.expr] = {}
    seen: set[str] = set()

    def body(stmts):
        for s in stmts:
            if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
                name = s.targets[0].id
                if name in seen:
                    out.pop(name, None)
                    continue
                seen.add(name)
                if isinstance(s.value, (ast.Name, ast.Attribute)):
                    out[name] = s.value
            elif isinstance(s, ast.If):
                body(s.body)
                body(s.orelse)
            elif isinstance(s, ast.Try):
                body(s.body)
                for h in s.handlers:
                    body(h.body)

    body(module_ast.body)
    return out


def _constant_key(expr: ast.Subscript) -> str | None:
    """The string key of `x["key"]`, else None."""
    key = expr.slice
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def _target_name(index: ModuleIndex, imports: dict, aliases: dict, expr, item: bool = False) -> str | None:
    # Named through the patch file's own imports, without parsing the vLLM modules they name:
    # the patch files import half of vLLM, and only the spelled target matters here.
    if isinstance(expr, tuple):  # setattr(obj, "name", value)
        obj, attr = expr
        base = _resolved(index, imports, aliases, obj)
        return f"{base}.{attr}" if base else None
    if isinstance(expr, ast.Attribute) or (item and isinstance(expr, ast.Name)):
        return _resolved(index, imports, aliases, expr)
    return None


def _resolved(index: ModuleIndex, imports: dict, aliases: dict, expr, depth: int = 0) -> str | None:
    dotted = _dotted(expr)
    if dotted is None:
        return None
    head, _, rest = dotted.partition(".")
    if head in aliases and head not in imports and depth < 4:  # _GDN_PATCH_TARGET = _GDNBaseCls
        base = _resolved(index, imports, aliases, aliases[head], depth + 1)
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base
    if head in imports:
        binding = index.choose(imports[head])
        head = binding.module if binding.name is None else f"{binding.module}.{binding.name}"
    return f"{head}.{rest}" if rest else head


def _assignments(module_ast: ast.Module, setattr_calls: bool = True, where=None):
    """(statement, target expr, value, tests, form, needs) for `a.b = v` (also in tuples: `a.x, b.y = f, g`) and
    `setattr(a, "b", v)` calls, the latter also in a loop over constant names
    (`for m in ("x", "y"): setattr(T, m, getattr(S, m))`); `tests` are the `if` tests each stands under,
    `needs` the imports the `try` bodies around it run before it (`where`: the module, for relative imports).
    Without `setattr_calls` (the file never names setattr) only assignment statements are read."""
    out: list = []
    needs: list = []  # the imports of the enclosing try bodies met so far, in order

    def pairs(target, value):
        if isinstance(target, ast.Attribute):
            yield target, value, "assign"
        elif isinstance(target, ast.Subscript) and isinstance(target.value, (ast.Name, ast.Attribute)):
            yield target, value, "item"
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
            if values is not None and len(values) == len(target.elts) and not any(
                    isinstance(e, ast.Starred) for e in target.elts):
                for t, v in zip(target.elts, values):
                    if isinstance(t, ast.Attribute):
                        yield t, v, "tuple"

    def setattrs(node, loop: dict):
        for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
            if not (isinstance(call.func, ast.Name) and call.func.id == "setattr" and len(call.args) == 3
                    and not call.keywords):
                continue
            attr = call.args[1]
            if isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                yield call, attr.value, call.args[2], "setattr"
            elif isinstance(attr, ast.Name) and attr.id in loop:
                for name in loop[attr.id]:  # the loop's names, the value's getattr(S, m) read with each
                    value = call.args[2]
                    if (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "getattr"
                            and len(value.args) == 2 and isinstance(value.args[1], ast.Name)
                            and value.args[1].id == attr.id):
                        value = ast.Call(value.func, [value.args[0], ast.Constant(name)], [])
                    yield call, name, value, "setattr loop"

    def body(stmts, tests, loop, trying=False):
        for s in stmts:
            if isinstance(s, ast.Assign):
                for t in s.targets:
                    for target, value, form in pairs(t, s.value):
                        out.append((s, target, value, tests, form, tuple(needs)))
                if setattr_calls:
                    for call, name, value, form in setattrs(s.value, loop):
                        out.append((call, (call.args[0], name), value, tests, form, tuple(needs)))
            elif isinstance(s, (ast.Import, ast.ImportFrom)):
                if trying and where is not None:
                    needs.extend(_imported(s, where))
            elif isinstance(s, ast.If):
                test, mark = ast.unparse(s.test), len(needs)
                body(s.body, tests + ((test, False),), loop, trying)
                del needs[mark:]  # an import under a test may not run
                body(s.orelse, tests + ((test, True),), loop, trying)
                del needs[mark:]
            elif isinstance(s, (ast.For, ast.AsyncFor)):
                names = _constant_names(s.iter)
                inner = {**loop, s.target.id: names} if names and isinstance(s.target, ast.Name) else loop
                body(s.body, tests, inner, trying)
                body(s.orelse, tests, loop, trying)
            elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                # a patch applied inside a function the module runs (or the platform calls); a class body's own
                # attributes are no patch
                if not isinstance(s, ast.ClassDef):
                    mark = len(needs)
                    body(s.body, tests, loop)
                    del needs[mark:]
            elif isinstance(s, (ast.With, ast.AsyncWith, ast.While)):
                body(s.body, tests, loop, trying)
                body(getattr(s, "orelse", []), tests, loop, trying)
            elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
                mark = len(needs)
                body(s.body, tests, loop, True)
                body(s.orelse, tests, loop, True)  # runs where the body did not fail
                del needs[mark:]  # the handlers run where the body failed; what follows the try, either way
                for h in s.handlers:
                    body(h.body, tests, loop, trying)
                    del needs[mark:]
                body(s.finalbody, tests, loop, trying)
            elif setattr_calls and isinstance(s, ast.Expr):
                for call, name, value, form in setattrs(s, loop):
                    out.append((call, (call.args[0], name), value, tests, form, tuple(needs)))

    body(module_ast.body, (), {})
    return out


def _imported(s, where) -> list[tuple[str, str | None]]:
    """(absolute module, name) for each name an import statement binds (`import a.b`: (a.b, None))."""
    if isinstance(s, ast.Import):
        return [(alias.name, None) for alias in s.names]
    module = _absolute(where, s.level, s.module)
    return [(module, alias.name) for alias in s.names if alias.name != "*"]


def _constant_names(expr) -> tuple[str, ...] | None:
    """The strings of a literal tuple / list / set of string constants."""
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)) and expr.elts and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in expr.elts):
        return tuple(e.value for e in expr.elts)  # type: ignore[union-attr]
    return None


def _calls(module: cst.Module) -> list[cst.Call]:
    return find_all(module, cst.Call)


def _str(node) -> str | None:
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        v = node.evaluated_value
        return v if isinstance(v, str) else None
    return None
