"""Parse modules on demand (each file at most once per run) and resolve names across files."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from ..sources.trees import SourceTree
from .lines import LineTable

MAX_FILE_BYTES = 4 * 1024 * 1024  # a "file" this large is generated data, not model code
# CPython refuses more than 200 nested brackets; libcst's native parser crashes (segfault) far deeper,
# so a file nested beyond what Python accepts is reported instead of parsed.
MAX_NESTING = 250
_BRACKETS = re.compile(rb"[()\[\]{}]")


def _check_nesting(source: bytes) -> None:
    if source.count(b"(") + source.count(b"[") + source.count(b"{") < MAX_NESTING:
        return
    depth = 0
    for m in _BRACKETS.finditer(source):
        depth += 1 if m.group() in (b"(", b"[", b"{") else -1
        if depth > MAX_NESTING:
            raise RecursionError(f"brackets nested deeper than {MAX_NESTING} levels (Python allows 200)")


@dataclass
class ImportBinding:
    module: str  # absolute module imported from
    name: str | None  # attribute imported from it; None binds the module itself
    line: int
    condition: str | None = None


@dataclass
class Definition:
    """A class, function or module-level assignment, with where it stands."""

    kind: str  # "class" | "function" | "assign"
    name: str
    module: "ModuleInfo"
    node: cst.CSTNode
    condition: str | None = None

    @property
    def line(self) -> int:
        return self.module.line_of(self.node)

    @property
    def qualname(self) -> str:
        return f"{self.module.name}.{self.name}"


@dataclass
class ModuleRef:
    name: str


@dataclass
class ModuleInfo:
    name: str
    path: Path
    rel: str  # path relative to its tree root: vllm/model_executor/models/qwen3.py
    is_package: bool
    tree: cst.Module
    lines: LineTable | None = None
    cache_key: str | None = None
    imports: dict[str, list[ImportBinding]] = field(default_factory=dict)
    defs: dict[str, list[Definition]] = field(default_factory=dict)
    star_imports: list[str] = field(default_factory=list)
    memo: dict = field(default_factory=dict)  # (what, node) -> something read from a node of this module

    def line_of(self, node: cst.CSTNode, scope: cst.CSTNode | None = None) -> int:
        """The node's start line; `scope`, a statement that contains the node, keeps the lookup local."""
        if self.lines is None:
            self.lines = LineTable(self.tree, None)
        return self.lines.line(node, scope)

    def code(self, node: cst.CSTNode) -> str:
        key = ("code", node)
        found = self.memo.get(key)
        if found is None:  # generating code is a tree walk: the same condition is asked for many times
            found = self.memo[key] = self.tree.code_for_node(node)
        return found

    def text(self) -> str:
        """The module's source text."""
        source = self.lines.source if self.lines is not None else None
        return source.decode("utf-8", "replace") if source is not None else self.tree.code

    def classes(self) -> dict[str, Definition]:
        return {n: ds[-1] for n, ds in self.defs.items() if ds and ds[-1].kind == "class"}


@dataclass
class FileError:
    file: str
    reason: str


class ModuleIndex:
    """Module name -> parsed module, for the vllm and vllm_ascend trees of one run."""

    def __init__(self, trees: list[SourceTree], backend: str = "ascend", cache=None):
        self.trees = {t.package: t for t in trees if t is not None}
        self.backend = backend
        self.cache = cache  # a ParseCache, or None (--no-cache)
        self.parse_count = 0
        self._modules: dict[str, ModuleInfo | None] = {}
        self.errors: dict[str, FileError] = {}
        self._error_of: dict[str, str] = {}  # module -> rel of its unreadable file
        self.touched: set[str] = set()  # rels of unreadable files asked for since the last reset
        self.memo: dict = {}  # (what, module) -> a table read from that module in one visit

    # -- files -------------------------------------------------------------------------------
    def tree_for(self, module: str) -> SourceTree | None:
        return self.trees.get(module.split(".", 1)[0])

    def module_path(self, module: str) -> tuple[Path, bool] | None:
        tree = self.tree_for(module)
        if tree is None:
            return None
        base = tree.root.joinpath(*module.split("."))
        if (base / "__init__.py").is_file():
            return base / "__init__.py", True
        py = base.with_suffix(".py")
        if py.is_file() or py.is_symlink():  # a broken or looping link is reported when parsed
            return py, False
        if base.is_dir():  # namespace package
            return base, True
        return None

    def module_name_for(self, path: Path) -> str | None:
        for tree in self.trees.values():
            try:
                rel = path.resolve().relative_to(tree.root)
            except ValueError:
                continue
            parts = list(rel.with_suffix("").parts)
            if parts and parts[-1] == "__init__":
                parts.pop()
            return ".".join(parts)
        return None

    def get(self, module: str) -> ModuleInfo | None:
        if module in self._modules:
            found = self._modules[module]
            if found is None and module in self._error_of:
                self.touched.add(self._error_of[module])
            return found
        self._modules[module] = None  # guards import cycles while parsing
        found = self.module_path(module)
        info = None
        if found is not None:
            path, is_pkg = found
            info = self._parse(module, path, is_pkg)
        self._modules[module] = info
        return info

    def parsed_files(self) -> list[str]:
        return sorted(m.rel for m in self._modules.values() if m is not None)

    def _parse(self, module: str, path: Path, is_pkg: bool) -> ModuleInfo | None:
        tree = self.tree_for(module)
        rel = tree.rel(path) if path.is_file() or path.is_symlink() else tree.rel(path) + "/"
        if path.is_dir():
            return ModuleInfo(module, path, rel, True, cst.Module(body=[]))
        try:
            if path.is_symlink() and not path.exists():
                raise OSError("broken symlink")
            size = os.path.getsize(path)
            if size > MAX_FILE_BYTES:
                raise ValueError(f"file is {size} bytes, over the {MAX_FILE_BYTES} byte limit")
            source = path.read_bytes()
            key = hit = None
            if self.cache is not None:
                key = self.cache.key(source)
                hit = self.cache.load(key)
            if hit is not None:
                mod, lines = hit
            else:
                _check_nesting(source)
                mod = cst.parse_module(source)
                lines = None
                self.parse_count += 1
                if self.cache is not None:
                    self.cache.store(key, mod)
        except cst.ParserSyntaxError as exc:
            return self._unreadable(module, rel, f"syntax error at line {exc.raw_line}: {exc.message}")
        except (SyntaxError, UnicodeDecodeError, RecursionError, ValueError, OSError) as exc:
            return self._unreadable(module, rel, f"{exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": "))
        info = ModuleInfo(module, path, rel, is_pkg, mod, LineTable(mod, source, lines), key)
        _collect(info, mod.body, None)
        return info

    def _unreadable(self, module: str, rel: str, reason: str) -> None:
        self.errors[rel] = FileError(rel, reason)
        self._error_of[module] = rel
        self.touched.add(rel)
        return None

    def errors_touched(self) -> list[FileError]:
        """The unreadable files asked for since `touched` was last reset, by path."""
        return [self.errors[r] for r in sorted(self.touched)]

    def save_lines(self) -> None:
        """Write back the line tables this run added to, so the next run needs neither parse nor lines."""
        if self.cache is None:
            return
        for info in self._modules.values():
            if info is not None and info.cache_key and info.lines is not None and info.lines.computed:
                self.cache.store(info.cache_key, info.tree, info.lines.lines)
                info.lines.computed = False

    # -- names -------------------------------------------------------------------------------
    def choose(self, items: list, backend: str | None = None):
        """Of several bindings of one name (if/else imports), take the one for this backend."""
        backend = backend or self.backend
        if len(items) == 1:
            return items[0]
        def score(item) -> int:
            cond = (item.condition or "").replace(" ", "")
            # `if TYPE_CHECKING or not current_platform.is_rocm():` runs its body when the rest holds
            cond = cond.replace("TYPE_CHECKINGor", "")
            while cond.startswith("not(not") and cond.endswith(")"):
                cond = cond[len("not(not"):-1].strip("()")
            negated = cond.startswith("not")
            if "TYPE_CHECKING" in cond:
                return 0 if negated else -2
            if "is_cuda" in cond:  # is_cuda(), is_cuda_alike()
                return 2 if (not negated) == (backend == "cuda") else -1
            if "is_rocm" in cond:  # neither backend this tool walks is ROCm
                return 1 if negated else -1
            return 0
        best = max(range(len(items)), key=lambda i: (score(items[i]), i))
        return items[best]

    def lookup(self, module: str, name: str, _seen: set | None = None):
        """Resolve `name` as seen from `module`: a Definition, a ModuleRef, or None."""
        seen = _seen if _seen is not None else set()
        if (module, name) in seen or len(seen) > 64:
            return None
        seen.add((module, name))
        info = self.get(module)
        if info is None:
            return ModuleRef(f"{module}.{name}") if self.module_path(f"{module}.{name}") else None
        candidates: list = []
        if name in info.defs:
            candidates += info.defs[name]
        if name in info.imports:
            candidates += info.imports[name]
        if candidates:
            item = self.choose(candidates)
            if isinstance(item, Definition):
                if item.kind == "assign" and isinstance(item.node, (cst.Name, cst.Attribute)):
                    target = self.resolve_expr(info, item.node, seen)  # alias: X = Y
                    if target is not None:
                        return target
                return item
            return self._follow(item, seen)
        if info.is_package and self.module_path(f"{module}.{name}"):
            return ModuleRef(f"{module}.{name}")
        for star in info.star_imports:
            found = self.lookup(star, name, seen)
            if found is not None:
                return found
        return None

    def _follow(self, binding: ImportBinding, seen: set):
        if binding.name is None:
            return ModuleRef(binding.module)
        found = self.lookup(binding.module, binding.name, seen)
        if found is None and self.module_path(f"{binding.module}.{binding.name}"):
            return ModuleRef(f"{binding.module}.{binding.name}")
        return found

    def resolve_expr(self, info: ModuleInfo, expr: cst.BaseExpression, _seen: set | None = None):
        """Resolve a Name or dotted Attribute expression in `info` to a definition or module."""
        seen = _seen if _seen is not None else set()
        if isinstance(expr, cst.Name):
            return self.lookup(info.name, expr.value, seen)
        if isinstance(expr, cst.Attribute):
            base = self.resolve_expr(info, expr.value, seen)
            attr = expr.attr.value
            if isinstance(base, ModuleRef):
                return self.lookup(base.name, attr, seen)
            return None
        return None

    def dotted(self, info: ModuleInfo, expr: cst.BaseExpression) -> str | None:
        """The absolute dotted name an expression stands for (torch_npu.npu_swiglu, torch.ops.x.y)."""
        parts: list[str] = []
        node = expr
        while isinstance(node, cst.Attribute):
            parts.append(node.attr.value)
            node = node.value
        if not isinstance(node, cst.Name):
            return None
        head = node.value
        if head in info.imports:
            binding = self.choose(info.imports[head])
            head = binding.module if binding.name is None else f"{binding.module}.{binding.name}"
        return ".".join([head] + list(reversed(parts)))


def _cond_text(mod: cst.Module, test: cst.BaseExpression) -> str:
    return mod.code_for_node(test).strip()


def _collect(info: ModuleInfo, body, condition: str | None) -> None:
    """Top-level bindings, looking inside if/try blocks (with their condition), not into functions."""
    for stmt in body:
        if isinstance(stmt, cst.ClassDef):
            _add_def(info, "class", stmt.name.value, stmt, condition)
        elif isinstance(stmt, cst.FunctionDef):
            _add_def(info, "function", stmt.name.value, stmt, condition)
        elif isinstance(stmt, cst.If):
            cond = _cond_text(info.tree, stmt.test)
            _collect(info, stmt.body.body, _join(condition, cond))
            orelse = stmt.orelse
            neg = f"not ({cond})"
            while orelse is not None:
                if isinstance(orelse, cst.If):
                    c2 = _cond_text(info.tree, orelse.test)
                    _collect(info, orelse.body.body, _join(condition, f"{neg} and {c2}"))
                    neg = f"{neg} and not ({c2})"
                    orelse = orelse.orelse
                else:
                    _collect(info, orelse.body.body, _join(condition, neg))
                    orelse = None
        elif isinstance(stmt, cst.Try):
            _collect(info, stmt.body.body, condition)
            for handler in stmt.handlers:
                _collect(info, handler.body.body, _join(condition, "except"))
        elif isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                _collect_small(info, small, stmt, condition)


def _join(a: str | None, b: str) -> str:
    return b if not a else f"{a} and {b}"


def _add_def(info: ModuleInfo, kind: str, name: str, node: cst.CSTNode, condition: str | None) -> None:
    info.defs.setdefault(name, []).append(Definition(kind, name, info, node, condition))


def _dotted_name(node) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted_name(node.value)}.{node.attr.value}"
    return ""


def _collect_small(info: ModuleInfo, small, line_node, condition: str | None) -> None:
    line = 0  # import lines are not reported; skip the position pass
    if isinstance(small, cst.Import):
        for alias in small.names:
            full = _dotted_name(alias.name)
            if alias.asname is not None:
                bound = alias.asname.name.value
                info.imports.setdefault(bound, []).append(ImportBinding(full, None, line, condition))
            else:
                head = full.split(".")[0]
                info.imports.setdefault(head, []).append(ImportBinding(head, None, line, condition))
    elif isinstance(small, cst.ImportFrom):
        level = len(small.relative)
        mod = _dotted_name(small.module) if small.module is not None else None
        absolute = _absolute(info, level, mod)
        if isinstance(small.names, cst.ImportStar):
            info.star_imports.append(absolute)
            return
        for alias in small.names:
            name = _dotted_name(alias.name)
            bound = alias.asname.name.value if alias.asname is not None else name
            info.imports.setdefault(bound, []).append(ImportBinding(absolute, name, line, condition))
    elif isinstance(small, (cst.Assign, cst.AnnAssign)):
        targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
        value = small.value
        if value is None:
            return
        for target in targets:
            if isinstance(target, cst.Name):
                info.defs.setdefault(target.value, []).append(
                    Definition("assign", target.value, info, value, condition)
                )


def import_from_bindings(info: ModuleInfo, root: cst.CSTNode) -> list[tuple[str, tuple[str, str]]]:
    """(bound name, (absolute module, name)) of every `from m import X` under root, in source order; for the
    imports inside functions, which the module-level index leaves out."""
    from .nodes import find_all

    out = []
    for node in find_all(root, cst.ImportFrom):
        if isinstance(node.names, cst.ImportStar):
            continue
        mod = _absolute(info, len(node.relative), _dotted_name(node.module) if node.module else None)
        for alias in node.names:
            name = _dotted_name(alias.name)
            out.append((alias.asname.name.value if alias.asname else name, (mod, name)))
    return out


def _absolute(info: ModuleInfo, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    parts = info.name.split(".")
    if not info.is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([module] if module else []))
