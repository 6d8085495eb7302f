"""Parse modules on demand (each file at most once per run) and resolve names across files."""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
import warnings
from dataclasses import dataclass
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


class Definition:
    """A class, function or module-level assignment, with where it stands. The node of a top-level class or
    function is parsed when first asked for (see Chunk)."""

    __slots__ = ("kind", "name", "module", "_node", "condition", "_chunk")

    def __init__(self, kind: str, name: str, module: "ModuleInfo", node: cst.CSTNode | None = None,
                 condition: str | None = None, chunk: "Chunk | None" = None):
        self.kind = kind  # "class" | "function" | "assign"
        self.name = name
        self.module = module
        self._node = node
        self.condition = condition
        self._chunk = chunk

    @property
    def node(self) -> cst.CSTNode:
        if self._node is None:
            self._node = self.module.chunk_tree(self._chunk).body[0]
        return self._node

    def __eq__(self, other) -> bool:
        return isinstance(other, Definition) and (self.kind, self.name, self.condition) == (
            other.kind, other.name, other.condition) and self.module is other.module and self.node is other.node

    __hash__ = None  # type: ignore[assignment]  # as the dataclass it replaces: compared, never hashed

    def __repr__(self) -> str:
        return f"Definition({self.kind} {self.module.name}.{self.name})"

    @property
    def line(self) -> int:
        if self._node is None and self._chunk is not None:
            return self._chunk.def_line  # known from `ast`: no need to parse the class for it
        return self.module.line_of(self.node)

    @property
    def bases(self) -> list[cst.Arg]:
        """A class's bases; read from `ast` while its body is not parsed (walking an MRO reads many classes
        only for their bases)."""
        if self._node is None and self._chunk is not None:
            return self._chunk.bases
        return list(self.node.bases)

    def may_define(self, method: str) -> bool:
        """False when `ast` saw no method of that name in the class (in its body or its if-blocks), so
        looking for it need not parse the class."""
        return self._node is not None or self._chunk is None or method in self._chunk.methods

    @property
    def qualname(self) -> str:
        return f"{self.module.name}.{self.name}"


@dataclass
class ModuleRef:
    name: str


class Chunk:
    """A piece of a file that libcst parses on its own: one top-level class or function (parsed when first
    asked for), or a run of other top-level statements (imports, assignments, if/try blocks; parsed at once,
    because they make the module's name index). A model reads a fraction of the classes of the files it
    touches, and a libcst parse costs about ten times CPython's `ast.parse`, which finds the pieces."""

    __slots__ = ("start", "text", "lazy", "module", "lines", "key", "name", "kind", "def_line", "_bases", "methods", "statements")

    def __init__(self, start: int, text: bytes, lazy: bool):
        self.start = start  # the file line of the chunk's first line
        self.text = text
        self.lazy = lazy
        self.module: cst.Module | None = None
        self.lines: LineTable | None = None  # lines relative to the chunk
        self.key: str | None = None  # its parse-cache key
        self.name = self.kind = ""  # of a lazy chunk's class or function
        self.def_line = 0  # the line of its `class` or `def` keyword
        self._bases: list = []  # the class's bases as `ast` read them
        self.methods: frozenset = frozenset()  # names of the functions in its body and its if-blocks
        self.statements: list | None = None  # its ast statements (file lines), kept to pair lines with

    @property
    def bases(self) -> list[cst.Arg]:
        return [cst.Arg(_cst_expr(b)) for b in self._bases]


class ModuleInfo:
    def __init__(self, name: str, path: Path, rel: str, is_package: bool, index: "ModuleIndex | None" = None,
                 source: bytes | None = None, chunks: list[Chunk] | None = None, fmt: cst.Module | None = None):
        self.name = name
        self.path = path
        self.rel = rel  # path relative to its tree root: vllm/model_executor/models/qwen3.py
        self.is_package = is_package
        self.source = source
        self.chunks: list[Chunk] = chunks or []
        self._index = index
        self._fmt = fmt or cst.Module(body=[])  # the file's indent and newline, for code_for_node
        self._tree: cst.Module | None = None
        self._parsed: list[Chunk] = []  # chunks parsed so far, in the order they were
        self.line_misses = 0  # line lookups the tables could not answer (a warm cache has none)
        self.imports: dict[str, list[ImportBinding]] = {}
        self.defs: dict[str, list[Definition]] = {}
        self.star_imports: list[str] = []
        self.memo: dict = {}  # (what, node) -> something read from a node of this module

    def chunk_tree(self, chunk: Chunk) -> cst.Module:
        if chunk.module is None:
            self._index._parse_chunk(self, chunk)
            self._parsed.append(chunk)
        return chunk.module

    @property
    def tree(self) -> cst.Module:
        """The whole module (every chunk parsed): for the readers that scan a file end to end."""
        if self._tree is None:
            body = [s for c in self.chunks for s in self.chunk_tree(c).body]
            self._tree = self._fmt.with_changes(body=body)
        return self._tree

    def statements_with(self, needle: "bytes | re.Pattern") -> list[cst.BaseStatement]:
        """The top-level statements, in order, of the chunks whose text holds the needle (bytes or a bytes
        regex): a scan for what only such text can match need not parse the rest of the file."""
        found = needle.search if isinstance(needle, re.Pattern) else (lambda text: needle in text)
        return [s for c in self.chunks if found(c.text) for s in self.chunk_tree(c).body]

    def line_of(self, node: cst.CSTNode, scope: cst.CSTNode | None = None) -> int:
        """The node's start line; `scope`, a statement that contains the node, keeps the lookup local."""
        for c in self._parsed:
            found = c.lines.lines.get(node)
            if found is not None:
                return found + c.start - 1
        self.line_misses += 1
        for step in ("statements", "calls", "positions"):
            if step == "calls" and scope is not None and not any(scope in c.lines._ast_of for c in self._parsed):
                scope = None  # not a statement of this file's tables: pair the calls of every chunk
            for c in self._parsed:
                found = c.lines.find(node, scope, step)
                if found:
                    return found + c.start - 1
        return 0

    def code(self, node: cst.CSTNode) -> str:
        key = ("code", node)
        found = self.memo.get(key)
        if found is None:  # generating code is a tree walk: the same condition is asked for many times
            found = self.memo[key] = self._fmt.code_for_node(node)
        return found

    def text(self) -> str:
        """The module's source text."""
        return self.source.decode("utf-8", "replace") if self.source is not None else ""

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
            return ModuleInfo(module, path, rel, True, self)
        try:
            if path.is_symlink() and not path.exists():
                raise OSError("broken symlink")
            size = os.path.getsize(path)
            if size > MAX_FILE_BYTES:
                raise ValueError(f"file is {size} bytes, over the {MAX_FILE_BYTES} byte limit")
            source = path.read_bytes()
            _check_nesting(source)
            chunks, fmt = split_chunks(source)
            info = ModuleInfo(module, path, rel, is_pkg, self, source, chunks, fmt)
            for chunk in chunks:
                if not chunk.lazy:
                    info.chunk_tree(chunk)
        except cst.ParserSyntaxError as exc:
            return self._unreadable(module, rel, f"syntax error at line {exc.raw_line}: {exc.message}")
        except (SyntaxError, UnicodeDecodeError, RecursionError, ValueError, OSError) as exc:
            return self._unreadable(module, rel, _reason(exc))
        for chunk in chunks:
            if chunk.lazy:
                _add_def(info, chunk.kind, chunk.name, None, None, chunk)
            else:
                _collect(info, chunk.module.body, None)
        return info

    def _parse_chunk(self, info: ModuleInfo, chunk: Chunk) -> None:
        hit = None
        if self.cache is not None:
            chunk.key = self.cache.key(chunk.text)
            hit = self.cache.load(chunk.key)
        if hit is not None:
            chunk.module, lines = hit
        else:
            lines = None
            try:
                chunk.module = cst.parse_module(chunk.text)
            except (cst.ParserSyntaxError, SyntaxError, UnicodeDecodeError, RecursionError, ValueError) as exc:
                if not chunk.lazy:
                    raise  # the file's name index needs it: the file is unreadable
                # `ast` read this class or function but libcst cannot: report the file, walk on without its body
                reason = (f"syntax error at line {exc.raw_line + chunk.start - 1}: {exc.message}"
                          if isinstance(exc, cst.ParserSyntaxError) else _reason(exc))
                self.errors[info.rel] = FileError(info.rel, reason)
                self.touched.add(info.rel)
                stub = f"class {chunk.name}:\n    pass\n" if chunk.kind == "class" else f"def {chunk.name}(*args, **kwargs):\n    pass\n"
                chunk.module = cst.parse_module(stub)
                chunk.lines = LineTable(chunk.module, None, {})
                return
            self.parse_count += 1
        chunk.lines = LineTable(chunk.module, chunk.text, lines, chunk.statements, chunk.start - 1)
        chunk.lines.computed = hit is None  # stored by save_lines, once, with the lines asked for by then

    def _unreadable(self, module: str, rel: str, reason: str) -> None:
        self.errors[rel] = FileError(rel, reason)
        self._error_of[module] = rel
        self.touched.add(rel)
        return None

    def errors_touched(self) -> list[FileError]:
        """The unreadable files asked for since `touched` was last reset, by path."""
        return [self.errors[r] for r in sorted(self.touched)]

    def save_lines(self) -> None:
        """Store the chunks parsed since the last call, and the line tables this run added to, so the next
        run needs neither parse nor lines. (Pickling a tree costs about half its parse: once per chunk.)"""
        if self.cache is None:
            return
        for info in self._modules.values():
            for chunk in info._parsed if info is not None else ():
                if chunk.key and chunk.lines.computed:  # a bare parse need not replace another's entry
                    self.cache.store(chunk.key, chunk.module, chunk.lines.lines, if_missing=not chunk.lines.lines)
                    chunk.lines.computed = False

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


def _reason(exc: Exception) -> str:
    return f"{exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")


def _cst_expr(node: ast.expr) -> cst.BaseExpression:
    """The libcst form of a base-class expression, as far as names resolve: dotted names and subscripts of
    them (Generic[T]; the index is not kept); anything else resolves to nothing."""
    if isinstance(node, ast.Subscript):
        return cst.Subscript(_cst_expr(node.value), [cst.SubscriptElement(cst.Index(cst.Ellipsis()))])
    if isinstance(node, ast.Name):
        return cst.Name(node.id)
    if isinstance(node, ast.Attribute):
        value = _cst_expr(node.value)
        if isinstance(value, (cst.Name, cst.Attribute)):
            return cst.Attribute(value, cst.Name(node.attr))
    return cst.Ellipsis()


def split_chunks(source: bytes) -> tuple[list[Chunk], cst.Module]:
    """The file's chunks (see Chunk), found with `ast`, and a module with its indent and newline. A file
    `ast` cannot read, or one not in UTF-8, is one chunk, so libcst reads (or reports) it as a whole."""
    newline = "\r\n" if b"\r\n" in source[: source.find(b"\n") + 1] else "\r" if b"\n" not in source and b"\r" in source else "\n"
    whole = ([Chunk(1, source, False)] if source.strip() else []), cst.Module(body=[], default_newline=newline)
    try:
        if tokenize.detect_encoding(io.BytesIO(source).readline)[0] != "utf-8":
            return whole  # a BOM or another encoding's cookie belongs to the file's first lines only
        with warnings.catch_warnings():  # invalid escapes etc. are the file's business, not ours
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return whole
    lines = source.splitlines(keepends=True)
    spans: list[list] = []  # [start, end, lazy, stmt]
    stmts: dict[int, list] = {}  # chunk start -> its ast statements
    indent = None
    for stmt in tree.body:
        start = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", ())])
        lazy = isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        body = getattr(stmt, "body", None)
        if indent is None and isinstance(body, list) and body and body[0].lineno > stmt.lineno:
            line = lines[body[0].lineno - 1]
            indent = line[: len(line) - len(line.lstrip(b" \t"))].decode()
        if spans and start <= spans[-1][1]:  # `a = 1; b = 2` share a line: one chunk
            spans[-1][1], spans[-1][2] = max(spans[-1][1], stmt.end_lineno), False
        elif not lazy and spans and not spans[-1][2]:
            spans[-1][1] = stmt.end_lineno
        else:
            spans.append([start, stmt.end_lineno, lazy, stmt])
            stmts[start] = []
        stmts[spans[-1][0]].append(stmt)
    chunks = []
    for start, end, lazy, stmt in spans:
        chunk = Chunk(start, b"".join(lines[start - 1:end]), lazy)
        chunk.statements = stmts[start]
        if lazy:
            chunk.name, chunk.kind = stmt.name, "class" if isinstance(stmt, ast.ClassDef) else "function"
            chunk.def_line = stmt.lineno
            chunk._bases = list(getattr(stmt, "bases", ()))
            if isinstance(stmt, ast.ClassDef):
                inner = [x for b in stmt.body for x in ([b] + (b.body if isinstance(b, ast.If) else []))]
                chunk.methods = frozenset(x.name for x in inner if isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef)))
        chunks.append(chunk)
    return chunks, cst.Module(body=[], default_indent=indent or "    ", default_newline=newline)


def _collect(info: ModuleInfo, body, condition: str | None) -> None:
    """Top-level bindings, looking inside if/try blocks (with their condition), not into functions."""
    for stmt in body:
        if isinstance(stmt, cst.ClassDef):
            _add_def(info, "class", stmt.name.value, stmt, condition)
        elif isinstance(stmt, cst.FunctionDef):
            _add_def(info, "function", stmt.name.value, stmt, condition)
        elif isinstance(stmt, cst.If):
            cond = info.code(stmt.test).strip()
            _collect(info, stmt.body.body, _join(condition, cond))
            orelse = stmt.orelse
            neg = f"not ({cond})"
            while orelse is not None:
                if isinstance(orelse, cst.If):
                    c2 = info.code(orelse.test).strip()
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


def _add_def(info: ModuleInfo, kind: str, name: str, node: cst.CSTNode | None, condition: str | None,
             chunk: Chunk | None = None) -> None:
    info.defs.setdefault(name, []).append(Definition(kind, name, info, node, condition, chunk))


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


def all_import_from_bindings(info: ModuleInfo) -> list[tuple[str, tuple[str, str]]]:
    """import_from_bindings over the whole file, read with `ast`: scanning a file's functions for their
    imports should not make libcst parse every one of them."""
    if info.source is None or not re.search(rb"(^|\n)[ \t]*from[ \t]", info.source):
        return []
    if any(c.statements is None for c in info.chunks):  # a file read whole: libcst can say
        return import_from_bindings(info, info.tree)
    found = (n for n in ast_statements([s for c in info.chunks for s in c.statements]) if isinstance(n, ast.ImportFrom))
    nodes = sorted(found, key=lambda n: (n.lineno, n.col_offset))
    return [(alias.asname or alias.name, (_absolute(info, n.level, n.module), alias.name))
            for n in nodes for alias in n.names if alias.name != "*"]


def ast_statements(stmts: list):
    """Every `ast` statement among stmts and in their blocks, without visiting expressions: ast.walk visits
    every node, and costs more than the parse when only statements are wanted."""
    for s in stmts:
        yield s
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            sub = getattr(s, name, None)
            if isinstance(sub, list) and sub:
                yield from ast_statements(sub)


def _absolute(info: ModuleInfo, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    parts = info.name.split(".")
    if not info.is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([module] if module else []))
