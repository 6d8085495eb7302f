"""Cut a file into chunks with CPython's `ast`, before libcst sees it.

libcst parses each chunk on its own, and a top-level class or function only when first asked for: a libcst
parse costs about ten times `ast.parse`, and a model reads a fraction of the classes of the files it touches.
This module holds the chunk model (Chunk), the split (split_chunks), and the `ast` helpers that read a
class's bases and a file's statements without libcst."""

from __future__ import annotations

import ast
import io
import tokenize
import warnings

import libcst as cst

from .lines import LineTable


class Chunk:
    """A piece of a file that libcst parses on its own: one top-level class or function (parsed when first
    asked for), or a run of other top-level statements (imports, assignments, if/try blocks; parsed at once,
    because they make the module's name index). A model reads a fraction of the classes of the files it
    touches, and a libcst parse costs about ten times CPython's `ast.parse`, which finds the pieces."""

    __slots__ = ("start", "text", "lazy", "module", "lines", "key", "name", "kind", "def_line", "_bases", "methods",
                 "statements", "lone", "assigned", "stored", "tested", "bound")

    def __init__(self, start: int, text: bytes, lazy: bool):
        self.start = start  # the file line of the chunk's first line
        self.text = text
        self.lazy = lazy
        self.module: cst.Module | None = None
        self.lines: LineTable | None = None  # lines relative to the chunk
        self.key: str | None = None  # its parse-cache key
        self.stored = True  # False while a tree this run parsed is not in the parse cache
        self.name = self.kind = ""  # of a lazy chunk's class or function
        self.def_line = 0  # the line of its `class` or `def` keyword
        self._bases: list = []  # the class's bases as `ast` read them
        self.methods: frozenset = frozenset()  # names of the functions in its body and its if-blocks
        self.statements: list | None = None  # its ast statements (file lines), kept to pair lines with
        # a class's methods defined directly in its body: name -> (first line with decorators, last line, ast
        # node) of the last definition, which can be parsed alone (see ModuleInfo.method_alone)
        self.lone: dict = {}
        self.assigned: frozenset = frozenset()  # names its class body assigns (`x = ...`, `x: T = ...`)
        # a run of other statements that holds an `if` the name index reads (see tests_names): parsed at once,
        # for its tests' code; any other run is read by `ast` for the name index and parsed when a binding's
        # node is first asked for (bindings.collect_ast)
        self.tested = False
        self.bound: list | None = None  # the libcst nodes of a run's bindings, in bindings.collect_ast's order

    @property
    def bases(self) -> list[cst.Arg]:
        return [cst.Arg(_cst_expr(b)) for b in self._bases]


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
    spans: list[list] = []  # [start, end, lazy, stmt, tested]
    stmts: dict[int, list] = {}  # chunk start -> its ast statements
    indent = None
    for stmt in tree.body:
        start = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", ())])
        lazy = isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        tested = not lazy and tests_names(stmt)
        body = getattr(stmt, "body", None)
        if indent is None and isinstance(body, list) and body and body[0].lineno > stmt.lineno:
            line = lines[body[0].lineno - 1]
            indent = line[: len(line) - len(line.lstrip(b" \t"))].decode()
        if spans and start <= spans[-1][1]:  # `a = 1; b = 2` share a line: one chunk
            spans[-1][1], spans[-1][2] = max(spans[-1][1], stmt.end_lineno), False
            spans[-1][4] = spans[-1][4] or tested
        else:  # each statement its own chunk: a binding asked for parses its statement only
            spans.append([start, stmt.end_lineno, lazy, stmt, tested])
            stmts[start] = []
        stmts[spans[-1][0]].append(stmt)
    chunks = []
    for start, end, lazy, stmt, tested in spans:
        chunk = Chunk(start, b"".join(lines[start - 1:end]), lazy)
        chunk.statements, chunk.tested = stmts[start], tested
        if lazy:
            chunk.name, chunk.kind = stmt.name, "class" if isinstance(stmt, ast.ClassDef) else "function"
            chunk.def_line = stmt.lineno
            chunk._bases = list(getattr(stmt, "bases", ()))
            if isinstance(stmt, ast.ClassDef):
                inner = [x for b in stmt.body for x in ([b] + (b.body if isinstance(b, ast.If) else []))]
                chunk.methods = frozenset(x.name for x in inner if isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef)))
                chunk.lone = {}
                for x in stmt.body:  # the last definition wins; a property's `@x.setter` keeps its getter
                    if isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef)) and not (
                            x.name in chunk.lone and _accessor(x)):
                        chunk.lone[x.name] = (min([x.lineno] + [d.lineno for d in x.decorator_list]), x.end_lineno, x)
                chunk.assigned = frozenset(_assigned_names(inner))
        chunks.append(chunk)
    return chunks, cst.Module(body=[], default_indent=indent or "    ", default_newline=newline)


def binding_nodes(body) -> list[cst.CSTNode]:
    """The nodes _collect gives definitions under `body` (a class's or function's node; an assignment's
    value, once per name it assigns), in its order: bindings.collect_ast's definitions are their n-th."""
    out: list[cst.CSTNode] = []
    for stmt in body:
        if type(stmt) is cst.ClassDef or type(stmt) is cst.FunctionDef:
            out.append(stmt)
        elif type(stmt) is cst.Try:
            out += binding_nodes(stmt.body.body)
            for handler in stmt.handlers:
                out += binding_nodes(handler.body.body)
        elif type(stmt) is cst.SimpleStatementLine:
            for small in stmt.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None:
                    targets = [t.target for t in small.targets] if type(small) is cst.Assign else [small.target]
                    out += [small.value for t in targets if type(t) is cst.Name]
    return out


def tests_names(stmt) -> bool:
    """The top-level statement holds an `if` whose test the module's name index records: bindings._collect reads
    into if-blocks, and into the body and handlers of a `try`."""
    if isinstance(stmt, ast.If):
        return True
    return isinstance(stmt, ast.Try) and (any(tests_names(s) for s in stmt.body)
                                          or any(tests_names(s) for h in stmt.handlers for s in h.body))


def _accessor(fn) -> bool:
    """`@name.setter` / `@name.deleter` on `def name`."""
    return any(isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter") and isinstance(d.value, ast.Name)
               and d.value.id == fn.name for d in fn.decorator_list)


def _assigned_names(stmts: list):
    for x in stmts:
        if isinstance(x, ast.Assign):
            yield from (t.id for t in x.targets if isinstance(t, ast.Name))
        elif isinstance(x, ast.AnnAssign) and isinstance(x.target, ast.Name):
            yield x.target.id


def method_text(chunk: Chunk, name: str) -> tuple[bytes, int, ast.ClassDef] | None:
    """A method of a class chunk as a text libcst can parse alone (`class _:` and the method's lines, as they
    stand, decorators included), the file line of that `class _:` line (one before the method's first), and
    the ast statement standing for that text; None when the method is not one the class defines directly."""
    found = chunk.lone.get(name)
    if found is None:
        return None
    first, last, node = found
    lines = chunk.text.splitlines(keepends=True)[first - chunk.start:last - chunk.start + 1]
    head = first - 1
    wrapper = ast.ClassDef(name="_", bases=[], keywords=[], body=[node], decorator_list=[], lineno=head,
                           col_offset=0, end_lineno=last, end_col_offset=0)
    return b"class _:\n" + b"".join(lines), head, wrapper


def skeleton_text(chunk: Chunk) -> bytes | None:
    """A class chunk's text with the methods its body defines directly left out, each of their lines kept
    empty so the lines stay the file's: what a reader of the class body's assignments, annotations and
    decorators parses (a configuration class is mostly methods: VllmConfig's 135 kB hold a few kB of fields).
    None for a chunk that is no class."""
    stmt = chunk.statements[0] if chunk.kind == "class" and chunk.statements else None
    if not isinstance(stmt, ast.ClassDef):
        return None
    lines = chunk.text.splitlines(keepends=True)
    methods = [x for x in stmt.body if isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not methods:
        return chunk.text
    for x in methods:
        first = min([x.lineno] + [d.lineno for d in x.decorator_list])
        if first <= stmt.lineno:
            return chunk.text  # a method on the header's line: parse the class
        for i in range(first - chunk.start, (x.end_lineno or x.lineno) - chunk.start + 1):
            lines[i] = b"\n"
    if len(methods) == len(stmt.body):  # a body of methods only keeps one statement
        at = min([methods[0].lineno] + [d.lineno for d in methods[0].decorator_list]) - chunk.start
        line = chunk.text.splitlines(keepends=True)[at]
        lines[at] = line[: len(line) - len(line.lstrip(b" \t"))] + b"pass\n"
    return b"".join(lines)


def skeleton_statements(text: bytes, start: int) -> list | None:
    """The `ast` statements of a skeleton (skeleton_text) at file lines, to pair its lines with; None where
    `ast` cannot read it (its lines then come from libcst's positions)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    ast.increment_lineno(tree, start - 1)
    return tree.body


def ast_statements(stmts: list):
    """Every `ast` statement among stmts and in their blocks, without visiting expressions: ast.walk visits
    every node, and costs more than the parse when only statements are wanted."""
    for s in stmts:
        yield s
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            sub = getattr(s, name, None)
            if isinstance(sub, list) and sub:
                yield from ast_statements(sub)
