"""What a patch of a module attribute reaches, and whether it runs at all.

A vllm-ascend patch that rebinds a module attribute (`_cc1d.causal_conv1d_update = _npu_update`, or the
package's name `fla_ops.chunk_gated_delta_rule = chunk_gated_delta_rule`) changes what code that reads that
attribute after the patch ran gets: a call `mod.f(...)` reads it when it runs; `from mod import f` reads it when
the importing module is imported. The walk (constructor.py `Constructor.runs`) asks, for each attribute read on
the way from a call to the function (index/modules.py `ModuleIndex.traced`), whether a patch of it reaches the
call; these helpers answer the questions that are about the trees, not about values:

- whether a module's module-level `from m import f` ran before a patch module's patches (`read_first`): TRUE
  where that module is surely imported by then, UNKNOWN where it may be, FALSE where it is imported after. What
  is imported by then is derived from the code that imports the patch package (`patch_triggers`): a function of
  the tree that imports it (vllm-ascend's `adapt_patch`, `from vllm_ascend.patch import worker` on one side of
  `if is_global_patch:`), and each call of that function (`adapt_patch()` in `NPUWorker.__init__`), its
  arguments deciding which package it imports. The module a call stands in is imported by then, and so is what
  that module's module-level imports import, transitively (`import_closure`; `if TYPE_CHECKING:` never runs,
  an import under another test or in an `except` may). Where several calls may import the package first, a
  module is surely imported only if each call's closure has it. Also imported: what the patch module's own
  imports import, and what the packages above it import before it (`import a.b.c` runs `a/__init__` first).
  Other modules (a model's, which vLLM imports when it loads the model) are imported after. Where nothing in
  the tree imports the patch package, only the patch module's own imports and its packages' are known first.
- whether an import a `try` body runs before the patch fails (`failing_import`): `from m import n` where `m` is
  a module of the trees that binds no `n` raises ImportError, and the patch after it never runs.
"""

from __future__ import annotations

import ast
import re
from types import SimpleNamespace

from ...index.bindings import _absolute
from ...index.chunks import parse_or_none as _parse
from ...index.facts import FactTable
from ...ir.conditions import Truth

MODULE_IMPORTS = FactTable("module_imports", "a module -> its module-level imports, (module, sure, statement), in order")
IMPORT_CLOSURES = FactTable("import_closures", "a module -> (what importing it surely imports, what it may import)")
PATCH_TRIGGERS = FactTable("patch_triggers", "a tree package -> (package imported, module of the code importing it, "
                                             "sure) for each function of the tree that imports a patch package")
LOADED_FIRST = FactTable("loaded_first", "a patch module -> (modules surely imported when its patches run, those "
                                         "that may be, whether the tree imports its package)")


def read_first(index, patch_module: str, reader: str) -> Truth:
    """Whether the module `reader` is imported (its module-level `from m import f` run) before the patches of
    `patch_module` run: TRUE (it holds the original), FALSE (the patch's value), UNKNOWN (not known)."""
    sure, maybe, _ = loaded_first(index, patch_module)
    if reader in sure:
        return Truth.TRUE
    return Truth.UNKNOWN if reader in maybe else Truth.FALSE


def loaded_first(index, patch_module: str) -> tuple[frozenset, frozenset, bool]:
    """(the modules surely imported when the patches of `patch_module` run, those that may be, whether code of the
    tree is found that imports its package)."""
    return LOADED_FIRST.get(index, patch_module, lambda: _loaded_first(index, patch_module))


def _loaded_first(index, module: str) -> tuple[frozenset, frozenset, bool]:
    sure, maybe = set(), set()
    own_sure, own_maybe = import_closure(index, module, within=True)
    sure |= own_sure
    maybe |= own_maybe
    parts = module.split(".")
    for i in range(1, len(parts)):  # the packages above it, their `__init__` up to the import toward it
        package, child = ".".join(parts[:i]), ".".join(parts[:i + 1])
        sure.add(package)
        imports = module_imports(index, package)
        stop = next((k for name, _s, k in imports if name == child or name.startswith(child + ".")), None)
        for name, surely, k in imports:
            if stop is not None and k >= stop:
                break
            s, m = import_closure(index, name)
            (sure if surely else maybe).update(s)
            maybe |= m
    triggers = [t for t in patch_triggers(index, parts[0]) if module == t[0] or module.startswith(t[0] + ".")]
    if triggers:
        closures = [import_closure(index, where) for _package, where, _sure in triggers]
        sure |= frozenset.intersection(*(c[0] for c in closures))
        for c in closures:
            maybe |= c[1]
    return frozenset(sure), frozenset(maybe | sure), bool(triggers)


def import_closure(index, module: str, within: bool = False) -> tuple[frozenset, frozenset]:
    """(the modules of the trees importing `module` surely imports, those it may import): itself, the packages
    above each, and what their module-level imports import, transitively. `within`: `module` is imported while
    its packages' `__init__` run (a patch module its package imports): what they import is not followed here."""
    return IMPORT_CLOSURES.get(index, (module, within), lambda: _import_closure(index, module, within))


def _import_closure(index, module: str, within: bool) -> tuple[frozenset, frozenset]:
    parts = module.split(".")
    above = {".".join(parts[:i]) for i in range(1, len(parts))} if within else set()
    out = []
    for sure_only in (True, False):
        seen: set[str] = set()
        todo = [module]
        while todo:
            parts = todo.pop().split(".")
            for i in range(1, len(parts) + 1):
                name = ".".join(parts[:i])
                if name in seen or parts[0] not in index.trees or index.module_path(name) is None:
                    continue
                seen.add(name)
                if name not in above:
                    todo += [m for m, surely, _k in module_imports(index, name) if surely or not sure_only]
        out.append(frozenset(seen))
    return out[0], out[1]


def module_imports(index, module: str) -> list[tuple[str, bool, int]]:
    """A module's module-level imports, read with CPython's parser (a module's imports are needed for hundreds of
    modules: no libcst parse): (the module it imports, or `module.name` where that name is a submodule; whether it
    surely runs; the index of its top-level statement). `if TYPE_CHECKING:` never runs; an import under another
    `if` test or in an `except` handler may."""
    return MODULE_IMPORTS.get(index, module, lambda: _module_imports(index, module))


def _module_imports(index, module: str) -> list[tuple[str, bool, int]]:
    found = index.module_path(module)
    if found is None or found[0].is_dir():
        return []
    path, is_pkg = found
    try:
        source = path.read_bytes()
    except OSError:
        return []
    where = SimpleNamespace(name=module, is_package=is_pkg)
    out: list[tuple[str, bool, int]] = []
    for level, base, names, sure, k in _statements(index, source):
        if level is None:  # `import a.b, c`
            out.extend((name, sure, k) for name in names)
            continue
        base = _absolute(where, level, base)
        out.append((base, sure, k))
        out.extend((f"{base}.{n}", sure, k) for n in names if index.module_path(f"{base}.{n}") is not None)
    return out


_SIDE = "imports-1"  # the parse cache's folder of the import statements read from a file (bump when they change)


def _statements(index, source: bytes) -> list:
    """The module-level import statements of a file, as (level or None for `import`, module, names, whether it
    surely runs, the index of its top-level statement); kept in the parse cache by the file's content (a parse of
    each of the hundreds of modules a worker imports costs seconds)."""
    cache = index.cache
    key = cache.key(source) if cache is not None else None
    if cache is not None:
        got = cache.load_side(_SIDE, key)
        if isinstance(got, list):
            return got
    out = _read_statements(source)
    if cache is not None:
        cache.store_side(_SIDE, key, out)
    return out


_TOP_DEF = re.compile(rb"(?:@|def\s|async\s+def\s|class\s)")
_TRIPLE = re.compile(rb'"""|\'\'\'')


def module_level_text(source: bytes) -> bytes | None:
    """The source with each top-level function or class (its decorators, header and body) cut to one `pass`,
    so CPython's parser reads a module's own statements, one top-level statement for each as before, at a
    fraction of the cost (the bodies are most of a file). A block runs from a line that starts with `@`,
    `def`, `async def` or `class` at the margin to the next line at the margin that is no comment and no
    closing bracket. None where that cut is not sure: a block with an odd count of triple quotes (a string
    that may hold a line at the margin), or text not in UTF-8: parse the whole source then."""
    if b"\r" in source or source.startswith(b"\xef\xbb\xbf"):
        return None
    lines = source.split(b"\n")
    out: list[bytes] = []
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if not _TOP_DEF.match(line):
            out.append(line)
            i += 1
            continue
        header = not line.startswith(b"@")  # decorators first, then the `def` / `class` line
        j = i + 1
        while j < n:
            nxt = lines[j]
            if not nxt or nxt[:1] in b" \t#)]}":
                j += 1
            elif not header and _TOP_DEF.match(nxt):
                header = not nxt.startswith(b"@")
                j += 1
            else:
                break
        if len(_TRIPLE.findall(b"\n".join(lines[i:j]))) % 2:
            return None
        out.append(b"pass")
        i = j
    return b"\n".join(out)


def _read_statements(source: bytes) -> list:
    cut = module_level_text(source)
    tree = _parse(cut) if cut is not None else None
    if tree is None:
        tree = _parse(source)
    if tree is None:
        return []  # an unreadable file imports nothing known (the walk reports the file where it reads it)
    out: list = []

    def body(stmts, sure: bool, k: int | None = None) -> None:
        for i, s in enumerate(stmts):
            at = i if k is None else k
            if isinstance(s, ast.If):
                if _type_checking(s.test):
                    body(s.orelse, sure, at)
                else:
                    body(s.body, False, at)
                    body(s.orelse, False, at)
            elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
                body(s.body + s.orelse + s.finalbody, sure, at)
                for h in s.handlers:
                    body(h.body, False, at)
            elif isinstance(s, (ast.With, ast.AsyncWith)):
                body(s.body, sure, at)
            elif isinstance(s, ast.Import):
                out.append((None, None, tuple(a.name for a in s.names), sure, at))
            elif isinstance(s, ast.ImportFrom):
                out.append((s.level, s.module, tuple(a.name for a in s.names if a.name != "*"), sure, at))

    body(tree.body, True)
    return out


def _type_checking(test) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported_modules(index, s, where) -> list[str]:
    """The modules an import statement imports: `import a.b` -> a.b; `from m import n` -> m, and m.n where n is a
    submodule of the trees."""
    if isinstance(s, ast.Import):
        return [alias.name for alias in s.names]
    base = _absolute(where, s.level, s.module)
    out = [base]
    for alias in s.names:
        if alias.name != "*" and index.module_path(f"{base}.{alias.name}") is not None:
            out.append(f"{base}.{alias.name}")
    return out


# ----- the code that imports a patch package ---------------------------------------------------------------------

_PATCH_IMPORT = re.compile(rb"(?:from\s+[\w.]*\bpatch\b[\w.]*\s+import|import\s+[\w.]*\bpatch\b)")


def patch_triggers(index, package: str) -> list[tuple[str, str, bool]]:
    """(package imported, module of the call that imports it, whether it surely does) for each call, in the tree
    of `package`, of a function of that tree whose body imports a module of its `patch` folder (vllm-ascend's
    `adapt_patch`), the function's `if` tests around the import decided with the call's constant arguments and
    the function's defaults (`adapt_patch()`: `is_global_patch` False, the `else` side's
    `from vllm_ascend.patch import worker`). A test they do not decide may hold (not sure)."""
    return PATCH_TRIGGERS.get(index, package, lambda: _patch_triggers(index, package))


def _patch_triggers(index, package: str) -> list[tuple[str, str, bool]]:
    tree = index.trees.get(package)
    if tree is None or not (tree.package_dir / "patch").is_dir():
        return []
    patch_root = f"{package}.patch"
    files = []  # (module, is a package, source, its parse once asked for)
    for path in sorted(tree.package_dir.rglob("*.py")):
        if path.is_relative_to(tree.package_dir / "patch"):
            continue  # a patch module importing another is no entry point
        name = index.module_name_for(path)
        try:
            source = path.read_bytes()
        except OSError:
            continue
        if name:
            files.append([name, path.name == "__init__.py", source, None])

    def parsed(f):
        if f[3] is None:
            f[3] = _parse(f[2]) or ast.Module(body=[], type_ignores=[])
        return f[3]

    out: set[tuple[str, str, bool]] = set()
    for f in files:
        if not _PATCH_IMPORT.search(f[2]):
            continue
        home, module_ast = f[0], parsed(f)
        where = SimpleNamespace(name=home, is_package=f[1])
        top = {id(fn) for fn in _top_functions(module_ast.body)}
        for fn in (n for n in ast.walk(module_ast) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            found = _package_imports(index, fn.body, where, patch_root, ())
            if not found:
                continue
            if id(fn) not in top:  # a method (or a nested function): its module is imported when it runs
                for imported, tests in found:
                    truth = _tests_truth(tests, {})
                    if truth is not Truth.FALSE:
                        out.add((imported, home, truth is Truth.TRUE))
                continue
            word = fn.name.encode()
            for g in files:  # each call of a module-level function: the module it stands in, its arguments
                if word not in g[2]:
                    continue
                for call in (n for n in ast.walk(parsed(g)) if isinstance(n, ast.Call)):
                    if not _calls(call, fn.name, home, g[0], parsed(g), g[1]):
                        continue
                    values = _bound(fn, call)
                    for imported, tests in found:
                        truth = _tests_truth(tests, values)
                        if truth is not Truth.FALSE:
                            out.add((imported, g[0], truth is Truth.TRUE))
    return sorted(out)


def _top_functions(stmts) -> list:
    """The module-level functions (also under module-level if/try blocks)."""
    out = []
    for s in stmts:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append(s)
        elif isinstance(s, ast.If):
            out += _top_functions(s.body) + _top_functions(s.orelse)
        elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            out += _top_functions(s.body + s.orelse + s.finalbody)
            for h in s.handlers:
                out += _top_functions(h.body)
    return out


def _package_imports(index, stmts, where, root: str, tests: tuple) -> list:
    """(the module under `root` an import in these statements imports, the `if` tests it stands under as (test,
    True for its `else` side)), through if/try/with blocks (not nested functions)."""
    out = []
    for s in stmts:
        if isinstance(s, ast.If):
            out += _package_imports(index, s.body, where, root, tests + ((s.test, False),))
            out += _package_imports(index, s.orelse, where, root, tests + ((s.test, True),))
        elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            out += _package_imports(index, s.body + s.orelse + s.finalbody, where, root, tests)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            out += _package_imports(index, s.body, where, root, tests)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            names = _imported_modules(index, s, where)
            deepest = [n for n in names if not any(o.startswith(n + ".") for o in names)]
            out += [(n, tests) for n in deepest if n == root or n.startswith(root + ".")]
    return out


def _calls(call: ast.Call, fn: str, home: str, module: str, module_ast, is_pkg: bool) -> bool:
    """Whether `call` calls the function `fn` of module `home`: `fn(...)` in `home` or where an import binds `fn`
    from `home`, `m.fn(...)` where an import binds `m` to `home`."""
    func = call.func
    where = SimpleNamespace(name=module, is_package=is_pkg)
    if isinstance(func, ast.Name) and func.id == fn:
        if module == home:
            return True
        return any(isinstance(s, ast.ImportFrom) and _absolute(where, s.level, s.module) == home
                   and any((a.asname or a.name) == fn and a.name == fn for a in s.names) for s in ast.walk(module_ast))
    if isinstance(func, ast.Attribute) and func.attr == fn and isinstance(func.value, ast.Name):
        base = func.value.id
        for s in ast.walk(module_ast):
            if isinstance(s, ast.Import) and any(a.asname == base and a.name == home for a in s.names):
                return True
            if isinstance(s, ast.ImportFrom) and any(
                    (a.asname or a.name) == base and f"{_absolute(where, s.level, s.module)}.{a.name}" == home
                    for a in s.names):
                return True
    return False


_UNSET = object()


def _bound(fn, call: ast.Call) -> dict:
    """The function's parameters the call binds to a constant (or leaves at a constant default)."""
    args = fn.args
    positional = [a.arg for a in args.posonlyargs + args.args]
    values: dict = {}
    defaults = args.defaults
    for a, d in zip(positional[len(positional) - len(defaults):], defaults):
        values[a] = d.value if isinstance(d, ast.Constant) else _UNSET
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        values[a.arg] = d.value if isinstance(d, ast.Constant) else _UNSET
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return {}  # `*args` / `**kwargs`: what is bound is not known
    for a, v in zip(positional, call.args):
        values[a] = v.value if isinstance(v, ast.Constant) else _UNSET
    for k in call.keywords:
        values[k.arg] = k.value.value if isinstance(k.value, ast.Constant) else _UNSET
    return {k: v for k, v in values.items() if v is not _UNSET}


def _tests_truth(tests, values: dict) -> Truth:
    out = Truth.TRUE
    for test, negated in tests:
        got = _value(test, values)
        t = Truth.UNKNOWN if got is _UNSET else Truth.of(bool(got))
        out = out.and_(t.negate() if negated else t)
    return out


def _value(node, values: dict):
    """A test of the parameters and constants; _UNSET where it reads anything else."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return values.get(node.id, _UNSET)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        got = _value(node.operand, values)
        return _UNSET if got is _UNSET else not got
    if isinstance(node, ast.BoolOp):
        got = [_value(v, values) for v in node.values]
        if _UNSET in got:
            return _UNSET
        return all(got) if isinstance(node.op, ast.And) else any(got)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
        left, right = _value(node.left, values), _value(node.comparators[0], values)
        if _UNSET in (left, right):
            return _UNSET
        same = left == right if isinstance(node.ops[0], (ast.Eq, ast.NotEq)) else left is right
        return same if isinstance(node.ops[0], (ast.Eq, ast.Is)) else not same
    return _UNSET


def failing_import(index, needs) -> str | None:
    """The first of a try body's imports (Patch.needs) that fails in the trees, as code: `from m import n` where
    `m` is a readable module of the trees that binds no `n` (no definition, no import, no submodule, and no star
    import or module `__getattr__` that might). None where each may succeed (a module outside the trees, or
    one the tree does not hold, is not decided)."""
    for module, name in needs:
        if name is None or module.split(".")[0] not in index.trees:
            continue
        info = index.get(module)
        if info is None:
            continue
        if name in info.defs or name in info.imports or info.star_imports or "__getattr__" in info.defs:
            continue
        if info.is_package and index.module_path(f"{module}.{name}"):
            continue
        return f"from {module} import {name}"
    return None
