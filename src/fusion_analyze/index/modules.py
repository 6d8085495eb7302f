"""Parse modules on demand (each file at most once per run) and resolve names across files.

ModuleIndex maps a module name to its parsed ModuleInfo, reporting the files it cannot read, and resolves a
name as seen from a module (following imports, aliases and star imports). The pieces it builds on live in
their own modules: chunks.py (splitting a file with `ast`), module_info.py (ModuleInfo, Definition and the
other records) and bindings.py (reading a module's bindings). Every name those define is importable from
here as before."""

from __future__ import annotations

import os
import re
from pathlib import Path

import libcst as cst

from ..sources.trees import SourceTree
from ..ir.conditions import Truth
from ..ir.texts import say
from .facts import FactTable
from .bindings import _add_def, _collect, collect_ast
# split_chunks is looked up here when a file is read (tests replace modules.split_chunks)
from .chunks import Chunk, split_chunks
from .lines import LineTable
from .module_info import Definition, FileError, ImportBinding, ModuleInfo, ModuleRef
from .trusted_parse import parse_module

BINDING_DECIDERS = FactTable("chooser", "a backend -> the decider of import-binding conditions on it")

__all__ = [  # what other modules import from here
    "MAX_FILE_BYTES", "MAX_NESTING", "ModuleIndex", "Definition", "ImportBinding", "ModuleInfo", "ModuleRef",
    "FileError", "split_chunks",
]

MAX_FILE_BYTES = 4 * 1024 * 1024  # a "file" this large is generated data, not model code
# a folder where each process lists the files it reads, one path a line: what benchmarks/bench.py's floor parses
READ_LOG = os.environ.get("FUSION_ANALYZE_READ_LOG")
# CPython refuses more than 200 nested brackets; libcst's native parser crashes (segfault) far deeper,
# so a file nested beyond what Python accepts is reported instead of parsed.
MAX_NESTING = 250
_BRACKETS = re.compile(rb"[()\[\]{}]")
# `obj.attr = value` (or `a.b.attr = value`) at the start of a statement, `obj` not `self`/`cls`: one target
_OUTSIDE_SET = re.compile(rb"^[ \t]*(?!(?:self|cls)\.)([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\.([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=(?!=)", re.M)


def _check_nesting(source: bytes) -> None:
    if source.count(b"(") + source.count(b"[") + source.count(b"{") < MAX_NESTING:
        return
    depth = 0
    for m in _BRACKETS.finditer(source):
        depth += 1 if m.group() in (b"(", b"[", b"{") else -1
        if depth > MAX_NESTING:
            raise RecursionError(f"brackets nested deeper than {MAX_NESTING} levels (Python allows 200)")


class ModuleIndex:
    """Module name -> parsed module, for the vllm and vllm_ascend trees of one run."""

    def __init__(self, trees: list[SourceTree], backend: str = "ascend", cache=None, *, decider):
        self.trees = {t.package: t for t in trees if t is not None}
        self.backend = backend
        self.cache = cache  # a ParseCache, or None (--no-cache)
        # (index, backend) -> a function deciding a binding's Condition to a Truth: handed in by the layer that
        # knows values (semantics.binding_decider), so the binder itself knows none
        self._decider = decider
        self.parse_count = 0
        self._modules: dict[str, ModuleInfo | None] = {}
        self.errors: dict[str, FileError] = {}
        self._error_of: dict[str, str] = {}  # module -> rel of its unreadable file
        self.touched: set[str] = set()  # rels of unreadable files asked for since the last reset
        self.facts: dict = {}  # FactTable -> its entries for the session (index/facts.py)
        self._paths: dict[str, tuple[Path, bool] | None] = {}  # module -> module_path's answer
        self._dirs: dict[Path, dict[str, bool]] = {}  # folder -> {entry: is a folder}, listed once (_entries)
        self._unsaved: list[tuple[ModuleInfo, Chunk]] = []  # chunks parsed since the last save_lines
        self._sources: dict[str, list[tuple[Path, bytes]]] = {}  # package -> its files' bytes (sources)
        self._setters: dict[str, dict[str, list[tuple[str, int]]]] = {}  # package -> outside_setters

    # -- files -------------------------------------------------------------------------------
    def tree_for(self, module: str) -> SourceTree | None:
        return self.trees.get(module.split(".", 1)[0])

    def decorated_classes(self, package: str, decorator: str):
        """(module info, class Definition, decorator call) of each class under `package` (a module or a package,
        all its files) decorated by a call whose name ends in `decorator` (`@register_scheme("W8A8", "linear")`,
        `@register_quantization_config(ASCEND_QUANTIZATION_METHOD)`); files that never name it are not parsed."""
        found = self.module_path(package) if package else None
        if found is None:
            return
        root, is_pkg = found
        folder = root.parent if is_pkg else root
        for path in sorted(folder.rglob("*.py")):
            name = self.module_name_for(path)
            info = self.get(name) if name else None
            if info is None or decorator not in info.text():
                continue
            for defs in info.defs.values():
                for d in defs:
                    if d.kind != "class":
                        continue
                    for dec in d.node.decorators:
                        call = dec.decorator
                        if type(call) is cst.Call and _call_name(call) == decorator:
                            yield info, d, call

    def module_path(self, module: str) -> tuple[Path, bool] | None:
        """The file (or package directory) of a module; asked for again and again by name lookups (an
        attribute of a package may be a submodule), so each answer is kept: the trees do not change."""
        try:
            return self._paths[module]
        except KeyError:
            found = self._paths[module] = self._module_path(module)
            return found

    def _module_path(self, module: str) -> tuple[Path, bool] | None:
        tree = self.tree_for(module)
        if tree is None:
            return None
        base = tree.root.joinpath(*module.split("."))
        entries = self._entries(base.parent)
        if entries.get(base.name) is True:
            if self._entries(base).get("__init__.py") is False:
                return base / "__init__.py", True
            return base, True  # namespace package
        if f"{base.name}.py" in entries:  # (a broken or looping link too: it is reported when parsed)
            return base.with_suffix(".py"), False
        return None

    def _entries(self, folder: Path) -> dict[str, bool]:
        """The names in a folder of the trees, each with whether it is a folder, listed once for the session:
        module_path is asked for every name a module imports (`from m import a, b`: is `a` a submodule?), and
        four file tests a name cost more than the walk of what it imports."""
        found = self._dirs.get(folder)
        if found is None:
            found = {}
            try:
                with os.scandir(folder) as it:
                    for e in it:
                        try:
                            found[e.name] = e.is_dir()
                        except OSError:
                            found[e.name] = False
            except OSError:
                pass
            self._dirs[folder] = found
        return found

    def sources(self, package: str) -> list[tuple[Path, bytes]]:
        """Every `.py` file of a tree's package with its bytes, in path order, read once for the session (the
        scans for registrations, patch triggers and attribute setters each read the whole package: text tests
        on bytes cost less than one parse)."""
        try:
            return self._sources[package]
        except KeyError:
            pass
        tree = self.trees.get(package)
        found = []
        for path in sorted(tree.package_dir.rglob("*.py")) if tree is not None else ():
            try:
                found.append((path, path.read_bytes()))
            except OSError:
                continue
        self._sources[package] = found
        return found

    def outside_setters(self, package: str) -> dict[str, list[tuple[str, int]]]:
        """Private attribute name -> (file, line) of each statement of the package that assigns it on an object
        other than `self` (`layer._ascend_kda_state_copy = plan`, kda_state_copy_plan.py): state another object
        sets after the owner's `__init__` (a class's or a module's attribute is a patch: not these). A text scan,
        kept for the session."""
        try:
            return self._setters[package]
        except KeyError:
            pass
        tree = self.trees.get(package)
        out: dict[str, list[tuple[str, int]]] = {}
        for path, data in self.sources(package):
            if b"." not in data:
                continue
            rel = path.relative_to(tree.root).as_posix() if tree is not None else path.name
            for m in _OUTSIDE_SET.finditer(data):
                owner, attr = m.group(1).rsplit(b".", 1)[-1], m.group(2)
                # an object's private state (`layer._x = ...`), not a class's or module's attribute (a patch)
                if attr.startswith(b"_") and not attr.startswith(b"__") and owner[:1].islower():
                    out.setdefault(attr.decode(), []).append((rel, data.count(b"\n", 0, m.start()) + 1))
        self._setters[package] = out
        return out

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
            if READ_LOG:
                with open(os.path.join(READ_LOG, f"{os.getpid()}.txt"), "a", encoding="utf-8") as log:
                    log.write(f"{path}\n")
            _check_nesting(source)
            chunks, fmt = split_chunks(source)
            info = ModuleInfo(module, path, rel, is_pkg, self, source, chunks, fmt)
            for chunk in chunks:  # a run holding no `if` the name index reads is read from `ast` (below)
                if not chunk.lazy and (chunk.tested or chunk.statements is None):
                    info.chunk_tree(chunk)
        except cst.ParserSyntaxError as exc:
            return self._unreadable(module, rel, say("syntax_error", line=str(exc.raw_line), message=exc.message))
        except (SyntaxError, UnicodeDecodeError, RecursionError, ValueError, OSError) as exc:
            return self._unreadable(module, rel, _reason(exc))
        for chunk in chunks:
            if chunk.lazy:
                _add_def(info, chunk.kind, chunk.name, None, None, chunk)
            elif chunk.module is not None:
                _collect(info, chunk.module.body, None)
            else:
                collect_ast(info, chunk)
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
                chunk.module = parse_module(chunk.text)
            except (cst.ParserSyntaxError, SyntaxError, UnicodeDecodeError, RecursionError, ValueError) as exc:
                if not chunk.lazy and (chunk.tested or chunk.statements is None):
                    raise  # the file's name index needs it: the file is unreadable
                # `ast` read this class or function but libcst cannot: report the file, walk on without its body
                reason = (say("syntax_error", line=exc.raw_line + chunk.start - 1, message=exc.message)
                          if isinstance(exc, cst.ParserSyntaxError) else _reason(exc))
                self.errors[info.rel] = FileError(info.rel, reason)
                self.touched.add(info.rel)
                stub = ("" if not chunk.lazy else f"class {chunk.name}:\n    pass\n" if chunk.kind == "class"
                        else f"def {chunk.name}(*args, **kwargs):\n    pass\n")  # a run: its bindings stand in
                chunk.module = cst.parse_module(stub)
                chunk.lines = LineTable(chunk.module, None, {})
                return
            self.parse_count += 1
        # the ast statements asked for when a line first is: a class's body is read by `ast` only then (Chunk._read)
        chunk.lines = LineTable(chunk.module, chunk.text, lines, lambda: chunk.statements, chunk.start - 1)
        chunk.stored = hit is not None
        if hit is None:
            self._unsaved.append((info, chunk))

    def _unreadable(self, module: str, rel: str, reason: str) -> None:
        self.errors[rel] = FileError(rel, reason)
        self._error_of[module] = rel
        self.touched.add(rel)
        return None

    def errors_touched(self) -> list[FileError]:
        """The unreadable files asked for since `touched` was last reset, by path."""
        return [self.errors[r] for r in sorted(self.touched)]

    def save_lines(self) -> None:
        """Store the chunks parsed since the last call, with the lines asked for by then, so the next run
        needs no parse. (Pickling a tree costs about half its parse: once per chunk.)"""
        pending, self._unsaved = self._unsaved, []  # not every chunk of the session again: once per model
        if self.cache is None:
            return
        for info, chunk in pending:
            if self._modules.get(info.name) is info:  # of a module read (not one found unreadable)
                self.save_chunk(chunk)

    def save_chunk(self, chunk: Chunk) -> None:
        """Store one parsed chunk, once, if this run parsed it."""
        if self.cache is not None and chunk.key and not chunk.stored:
            # with the lines asked for by then; more lines later are not worth pickling the tree again (a
            # later run pairs them with `ast` again, a fraction of a parse); another worker's or run's entry
            # for the same text is as good
            self.cache.store(chunk.key, chunk.module, chunk.lines.lines or None, if_missing=True)
            chunk.stored = True

    # -- names -------------------------------------------------------------------------------
    def choose(self, items: list, backend: str | None = None):
        """Of several bindings of one name (if/else imports), take the one for this backend."""
        backend = backend or self.backend
        if len(items) == 1:
            return items[0]
        decide = self._chooser(backend)
        # a binding whose condition holds on this backend first, then one that may hold; the last of equals,
        # as at runtime (`if TYPE_CHECKING or not current_platform.is_rocm():` holds: TYPE_CHECKING is false)
        rank = {Truth.TRUE: 2, Truth.UNKNOWN: 1, Truth.FALSE: 0}
        best = max(range(len(items)), key=lambda i: (rank[decide(items[i].condition)], i))
        return items[best]

    def binding_truth(self, condition) -> Truth:
        """Whether a binding's condition holds on this backend (the decider handed in)."""
        return self._chooser(self.backend)(condition)

    def _chooser(self, backend: str):
        """The backend's decider of binding conditions (semantics.binding_decider), made once per backend."""
        return BINDING_DECIDERS.get(self, backend, lambda: self._decider(self, backend))

    def lookup(self, module: str, name: str, _seen: set | None = None, _hops: list | None = None,
               _reader: str | None = None):
        """Resolve `name` as seen from `module`: a Definition, a ModuleRef, or None. `_hops` (see `traced`) gets
        each module attribute read on the way that led to the answer."""
        seen = _seen if _seen is not None else set()
        if (module, name) in seen or len(seen) > 64:
            return None
        seen.add((module, name))
        if _hops is None:
            return self._lookup(module, name, seen, None)
        mark = len(_hops)
        _hops.append((f"{module}.{name}", _reader))
        found = self._lookup(module, name, seen, _hops)
        if found is None:
            del _hops[mark:]
        return found

    def _lookup(self, module: str, name: str, seen: set, hops: list | None):
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
                    # alias: X = Y, read when the module is imported
                    target = self.resolve_expr(info, item.node, seen, hops, module)
                    if target is not None:
                        return target
                return item
            return self._follow(item, seen, hops, module)
        if info.is_package and self.module_path(f"{module}.{name}"):
            return ModuleRef(f"{module}.{name}")
        for star in info.star_imports:
            found = self.lookup(star, name, seen, hops, module)
            if found is not None:
                return found
        return None

    def _follow(self, binding: ImportBinding, seen: set, hops: list | None = None, reader: str | None = None):
        if binding.name is None:
            return ModuleRef(binding.module)
        found = self.lookup(binding.module, binding.name, seen, hops, reader)
        if found is None and self.module_path(f"{binding.module}.{binding.name}"):
            return ModuleRef(f"{binding.module}.{binding.name}")
        return found

    def resolve_expr(self, info: ModuleInfo, expr: cst.BaseExpression, _seen: set | None = None,
                     _hops: list | None = None, _reader: str | None = None):
        """Resolve a Name or dotted Attribute expression in `info` to a definition or module."""
        seen = _seen if _seen is not None else set()
        if type(expr) is cst.Name:
            return self.lookup(info.name, expr.value, seen, _hops, _reader)
        if type(expr) is cst.Attribute:
            mark = len(_hops) if _hops is not None else 0
            base = self.resolve_expr(info, expr.value, seen, _hops, _reader)
            attr = expr.attr.value
            found = self.lookup(base.name, attr, seen, _hops, _reader) if isinstance(base, ModuleRef) else None
            if found is None and _hops is not None:
                del _hops[mark:]
            return found
        return None

    def traced(self, info: ModuleInfo, expr: cst.BaseExpression, hops: list):
        """`resolve_expr`, with `hops` filled with the module attributes read on the way, nearest first:
        (`module.name`, reader), the reader None where the code reads it when it runs (`f(...)` of the module's
        own global, `mod.f(...)`), else the module whose import bound it then (`from m import f` in the reader,
        `X = Y` there, a star import). A vllm-ascend patch of one of them is what the name holds
        (walk/construction/constructor.py `Constructor.runs`)."""
        return self.resolve_expr(info, expr, None, hops, None)

    def dotted(self, info: ModuleInfo, expr: cst.BaseExpression) -> str | None:
        """The absolute dotted name an expression stands for (torch_npu.npu_swiglu, torch.ops.x.y)."""
        parts: list[str] = []
        node = expr
        while type(node) is cst.Attribute:
            parts.append(node.attr.value)
            node = node.value
        if not type(node) is cst.Name:
            return None
        head = node.value
        if head in info.imports:
            binding = self.choose(info.imports[head])
            head = binding.module if binding.name is None else f"{binding.module}.{binding.name}"
        return ".".join([head] + list(reversed(parts)))


def _reason(exc: Exception) -> str:
    """The exception's name and first line (the parser's own words: shown as code)."""
    text = f"{exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
    return say("parser_said", text=text)


def _call_name(call: cst.Call) -> str:
    """The last name of what a call calls (`a.b.register(...)`: register)."""
    func = call.func
    return func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""

