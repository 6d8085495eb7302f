"""Cut a file into chunks with CPython's `ast`, before libcst sees it.

libcst parses each chunk on its own, and a top-level class or function only when first asked for: a libcst
parse costs about ten times `ast.parse`, and a model reads a fraction of the classes of the files it touches.
`ast` itself reads a class or function only when asked for too: the split parses the file with each top-level
definition's body cut out, and most files are read for their module-level names only. This module holds the
chunk model (Chunk), the split (split_chunks), and the `ast` helpers that read a class's bases and a file's
statements without libcst."""

from __future__ import annotations

import ast
import bisect
import io
import re
import tokenize
import warnings

import libcst as cst

from .lines import LineTable


class Chunk:
    """A piece of a file that libcst parses on its own: one top-level class or function (parsed when first
    asked for), or a run of other top-level statements (imports, assignments, if/try blocks; parsed at once,
    because they make the module's name index). A model reads a fraction of the classes of the files it
    touches, and a libcst parse costs about ten times CPython's `ast.parse`, which finds the pieces.

    What `ast` tells of a class or function's body (statements, methods, lone, assigned) is read when first
    asked for, from the chunk's own text (see Chunk._read): most definitions of the files read are never
    looked at, and their name, line and bases come from the split."""

    __slots__ = ("start", "text", "lazy", "module", "lines", "key", "name", "kind", "def_line", "_bases", "_methods",
                 "_statements", "_lone", "_assigned", "_pending", "stored", "tested", "bound")

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
        self._methods: frozenset = frozenset()
        self._statements: list | None = None
        self._lone: dict = {}
        self._assigned: frozenset = frozenset()
        self._pending = False  # True while the body's `ast` attributes are not read yet (Chunk._read)
        # a run of other statements that holds an `if` the name index reads (see tests_names): parsed at once,
        # for its tests' code; any other run is read by `ast` for the name index and parsed when a binding's
        # node is first asked for (bindings.collect_ast)
        self.tested = False
        self.bound: list | None = None  # the libcst nodes of a run's bindings, in bindings.collect_ast's order

    @property
    def bases(self) -> list[cst.Arg]:
        return [cst.Arg(_cst_expr(b)) for b in self._bases]

    @property
    def statements(self) -> list | None:
        """Its ast statements (file lines), kept to pair lines with; None for a file read whole, or a class or
        function `ast` cannot read alone."""
        if self._pending:
            self._read()
        return self._statements

    @statements.setter
    def statements(self, value: list | None) -> None:
        self._statements = value

    @property
    def methods(self) -> frozenset:
        """The names of the functions in a class's body and its if-blocks."""
        if self._pending:
            self._read()
        return self._methods

    @property
    def lone(self) -> dict:
        """A class's methods defined directly in its body: name -> (first line with decorators, last line, ast
        node) of the last definition, which can be parsed alone (see ModuleInfo.method_alone). The nodes are
        those of `statements`, which readers compare them with."""
        if self._pending:
            self._read()
        return self._lone

    @property
    def assigned(self) -> frozenset:
        """The names its class body assigns (`x = ...`, `x: T = ...`)."""
        if self._pending:
            self._read()
        return self._assigned

    def _read(self) -> None:
        """Read the class or function with `ast`, from its own text set at its file lines (the blank lines
        before it cost the parser next to nothing, and no pass over the tree to move its lines): the same
        nodes a parse of the whole file gives it. A text `ast` cannot read has no statements."""
        self._pending = False
        tree = parse_or_none(b"\n" * (self.start - 1) + self.text)
        if tree is not None and len(tree.body) == 1:
            _describe(self, tree.body[0])


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
    `ast` cannot read, or one not in UTF-8, is one chunk, so libcst reads (or reports) it as a whole.

    `ast` reads the file with the body of each top-level class and function cut out (_split_cut), and a body
    only when its chunk is asked about it (Chunk._read): the parse of whole files cost about 0.3 s of a
    model's run, most of the files it reads being read for their module-level names only. Where the cut is
    not sure to give what a parse of the whole file gives, the whole file is parsed (_split_whole). What the
    cut does not see is a syntax error inside the body of a top-level class or function whose header `ast`
    reads: the file is not one chunk then, but that class or function has no `ast` statements (Chunk._read),
    and libcst reports the file when it parses the chunk."""
    found = _split_cut(source)
    return found if found is not None else _split_whole(source)


def _newline(source: bytes) -> str:
    """The file's line end, for libcst to write new code with."""
    return "\r\n" if b"\r\n" in source[: source.find(b"\n") + 1] else "\r" if b"\n" not in source and b"\r" in source else "\n"


def parse_or_none(source: bytes) -> ast.Module | None:
    """`ast.parse`, or None where it fails; invalid escapes etc. are the file's business, not ours."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _split_whole(source: bytes) -> tuple[list[Chunk], cst.Module]:
    """split_chunks from `ast`'s parse of the whole file: what stands in where _split_cut is not sure, and
    what the tests hold it to."""
    newline = _newline(source)
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
            _describe(chunk, stmt)
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
                if isinstance(small, cst.Assign):
                    out += [small.value for t in small.targets if type(t.target) is cst.Name]
                elif isinstance(small, cst.AnnAssign) and small.value is not None and type(small.target) is cst.Name:
                    out.append(small.value)
    return out


def _describe(chunk: Chunk, stmt: ast.stmt) -> None:
    """Set on a class or function's chunk what `ast` tells of its body: its statement, and of a class the names
    of its methods (those of its if-blocks too), the last definition of each method of its body, and the names
    its body assigns."""
    chunk._statements = [stmt]
    if isinstance(stmt, ast.ClassDef):
        inner = [x for b in stmt.body for x in ([b] + (b.body if isinstance(b, ast.If) else []))]
        chunk._methods = frozenset(x.name for x in inner if isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef)))
        chunk._lone = {}
        for x in stmt.body:  # the last definition wins; a property's `@x.setter` keeps its getter
            if isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef)) and not (x.name in chunk._lone and _accessor(x)):
                chunk._lone[x.name] = (min([x.lineno] + [d.lineno for d in x.decorator_list]), x.end_lineno, x)
        chunk._assigned = frozenset(_assigned_names(inner))


# -- the cut: the file with its top-level classes and functions' bodies left out --------------------------------

# a line of code at the margin (a closing bracket continues one), found by the line end before it
_MARGIN = re.compile(rb"\n(?=[^\s#)\]}])")
_TOP_DEF = re.compile(rb"@|def\s|async\s+def\s|class\s")
_DEF_LINE = re.compile(rb"\n(?=@|def\s|async\s+def\s|class\s)")
_CONTINUED = (b"\\\n", b"\\\r\n")  # a line continued by a backslash
# a string that spans lines (its prefix left out), after the comments, the strings of one line and the other code
# before it, read as the tokenizer reads them; any other character where the text is no valid Python
_SHORT = (rb'"""(?:[^"\\\n]++|\\[^\n]|"(?!""))*+"""' rb"|'''(?:[^'\\\n]++|\\[^\n]|'(?!''))*+'''"
          rb'|"(?!"")(?:[^"\\\n]++|\\[^\n])*+"' rb"|'(?!'')(?:[^'\\\n]++|\\[^\n])*+'")
_LONG = (rb'"""(?:[^"\\]++|\\[\s\S]|"(?!""))*+"""' rb"|'''(?:[^'\\]++|\\[\s\S]|'(?!''))*+'''"
         rb'|"(?:[^"\\\n]++|\\[\s\S])*+"' rb"|'(?:[^'\\\n]++|\\[\s\S])*+'")
_LONG_STRING = re.compile(rb"(?:[^'\"#]++|#[^\n]*+|" + _SHORT + rb")*+(?:(" + _LONG + rb")|[\s\S]|\Z)")
_MASK = re.compile(rb"#[^\n]*+|" + _LONG)  # a comment or a string, for _header_end


class _Block:
    """A top-level class or function in the source, by offsets: its first line (its first decorator's), its
    `def` or `class` line, the line after it (the next line of code at the margin, or the file's end), the end
    of its last line of code (where its chunk's text ends), and what the cut keeps of it: the text up to
    `keep`, then `filler` (a `pass` at its body's first statement, or nothing where the body is on the
    header's line), then only the line ends up to `stop`."""

    __slots__ = ("start", "head", "stop", "close", "keep", "filler", "lines")

    def __init__(self, start: int, head: int, stop: int, close: int, keep: int, filler: bytes):
        self.start, self.head, self.stop, self.close, self.keep, self.filler = start, head, stop, close, keep, filler
        self.lines = (0, 0, 0)  # the file lines of start, head and the last line of code (_set_lines)


def _split_cut(source: bytes) -> tuple[list[Chunk], cst.Module] | None:
    """split_chunks from `ast`'s parse of the cut: the file with each top-level class and function reduced to
    its decorators, its header and a `pass` for its body, each line where it was. The headers are parsed, so
    one `ast` cannot read makes the cut fail as the whole file would. None where the cut is not sure to give
    what _split_whole gives: text it does not read (_plain), a block the margin scan cannot bound (_blocks),
    a cut `ast` cannot read, or top-level classes and functions in it that are not the blocks found."""
    blocks = _blocks(source) if _plain(source) else None
    if blocks is None:
        return None
    pieces, at = [], 0
    for b in blocks:
        pieces += [source[at:b.keep], b.filler, b"\n" * source.count(b"\n", b.keep, b.stop)]
        at = b.stop
    pieces.append(source[at:])
    tree = parse_or_none(b"".join(pieces))
    return _cut_chunks(source, tree.body, blocks) if tree is not None else None


def _plain(source: bytes) -> bool:
    """Whether the margin scan reads the text as the tokenizer does: in UTF-8 (what `ast` reads of the blocks'
    bodies only when asked for must be readable), lines ending in `\\n` or `\\r\\n`, and no form feed (it
    moves its line to the margin), vertical tab or null byte."""
    if b"\0" in source or b"\f" in source or b"\v" in source or source.startswith(b"\xef\xbb\xbf") or (
            b"\r" in source and source.count(b"\r") != source.count(b"\r\n")):
        return False
    try:
        source.decode()
        return tokenize.detect_encoding(io.BytesIO(source).readline)[0] == "utf-8"
    except (SyntaxError, UnicodeDecodeError):
        return False


def _blocks(source: bytes) -> list[_Block] | None:
    """The top-level classes and functions, found at the margin: a block runs from a line that starts with
    `@`, `def`, `async def` or `class` (its decorators, then its `def` or `class` line) to the next line of
    code at the margin; a line inside a string that spans lines is none. None where a block is not sure: a
    decorator followed by no decorator and no `def`, a backslash continuing a line into its first line or
    past its last, or a header or body _block cannot read."""
    strings = _long_strings(source)
    blocks: list[_Block] = []
    start = 0 if _TOP_DEF.match(source) else _next_def(source, 0)
    while start < len(source):
        if _inside(strings, start):
            start = _next_def(source, start)
            continue
        head = start
        while source[head] == 64:  # `@`: decorators up to the `def` or `class` line
            head = _next_margin(source, head, strings)
            if head == len(source) or not _TOP_DEF.match(source, head):
                return None
        stop = _next_margin(source, head, strings)
        if source.endswith(_CONTINUED, 0, start) or source.endswith(_CONTINUED, 0, stop):
            return None
        block = _block(source, start, head, stop, strings)
        if block is None:
            return None
        blocks.append(block)
        start = _next_def(source, stop - 1)
    return blocks


def _next_def(source: bytes, at: int) -> int:
    """The offset of the next line after the line end at or after `at` that starts with `@`, `def`, `async def`
    or `class`, or the file's end."""
    found = _DEF_LINE.search(source, at)
    return found.end() if found is not None else len(source)


def _next_margin(source: bytes, at: int, strings: tuple[list, list]) -> int:
    """The offset of the next line after the line end at or after `at` that starts at the margin with code (no
    blank line, comment or closing bracket, and no line inside a string that spans lines), or the file's end."""
    while (found := _MARGIN.search(source, at)) is not None:
        if not _inside(strings, found.end()):
            return found.end()
        at = found.end()
    return len(source)


def _block(source: bytes, start: int, head: int, stop: int, strings: tuple[list, list]) -> _Block | None:
    """The block from `start` to `stop` whose `def` or `class` line is at `head`: where its header ends, where
    the first statement of a body below it starts, and where its last line of code ends. None where a body
    below the header has no statement, or more code follows a body on the header's line."""
    found = _header_end(source, head, stop)
    if found is None:
        return None
    after, below = found
    if not below:  # `class A: pass`: the cut keeps it whole
        return _Block(start, head, stop, after, after, b"") if _close(source, after, stop, strings) == after else None
    body = _first_code_line(source, after, stop)
    if body is None:
        return None
    end = source.find(b"\n", body, stop)
    line = source[body:end if end >= 0 else stop]
    indent = line[: len(line) - len(line.lstrip(b" \t"))]
    return _Block(start, head, stop, _close(source, body, stop, strings), body, indent + b"pass")


def _header_end(source: bytes, head: int, stop: int) -> tuple[int, bool] | None:
    """The offset after the last line of the header that starts at `head` (the line that closes its
    brackets), and whether it ends with `:` (its body below) rather than with a statement. None where a string
    in it spans lines or a line ends with a backslash outside brackets."""
    depth, at = 0, head
    while at < stop:
        end = source.find(b"\n", at, stop)
        end = stop if end < 0 else end + 1
        code = _MASK.sub(_mask, source[at:end])
        if b'"' in code or b"'" in code:
            return None
        depth += code.count(b"(") + code.count(b"[") + code.count(b"{")
        depth -= code.count(b")") + code.count(b"]") + code.count(b"}")
        if depth < 0:
            return None
        if depth == 0:
            code = code.rstrip()
            return None if code.endswith(b"\\") else (end, code.endswith(b":"))
        at = end
    return None


def _mask(match: re.Match) -> bytes:
    """For _header_end's count of brackets: a comment left out, a string as one character."""
    return b"" if match.group().startswith(b"#") else b"0"


def _first_code_line(source: bytes, at: int, stop: int) -> int | None:
    """The offset of the first line from `at` on, before `stop`, that is neither blank nor a comment."""
    while at < stop:
        end = source.find(b"\n", at, stop)
        end = stop if end < 0 else end + 1
        line = source[at:end].strip()
        if line and not line.startswith(b"#"):
            return at
        at = end
    return None


def _close(source: bytes, low: int, stop: int, strings: tuple[list, list]) -> int:
    """The offset after the last line before `stop`, from `low` on, that is neither blank nor a comment (a line
    inside a string is no comment), or `low`: where the line of `ast`'s end line of the block's statement
    ends."""
    end = stop
    while end > low:
        begin = source.rfind(b"\n", 0, end - 1) + 1
        line = source[begin:end].strip()
        if line and not (line.startswith(b"#") and not _inside(strings, begin)):
            return end
        end = begin
    return end


def _long_strings(source: bytes) -> tuple[list, list]:
    """The starts and the ends of the strings that span lines, read as the tokenizer reads them, from the
    file's start on: what looks like code inside one is none."""
    starts, ends = [], []
    for m in _LONG_STRING.finditer(source):
        if m.start(1) >= 0:
            starts.append(m.start(1))
            ends.append(m.end(1))
    return starts, ends


def _inside(strings: tuple[list, list], at: int) -> bool:
    """Whether the line that starts at `at` starts inside a string that spans lines."""
    k = bisect.bisect_left(strings[0], at) - 1
    return k >= 0 and at < strings[1][k]


def _cut_chunks(source: bytes, body: list, blocks: list[_Block]) -> tuple[list[Chunk], cst.Module] | None:
    """The chunks _split_whole gives, from the cut's statements: the class or function of each block is a lazy
    chunk with its name, lines and bases from the cut (its body read when asked for), and any other statement
    is as `ast` read it in the cut, which holds it as it stands. None where the cut's top-level classes and
    functions are not the blocks, each at its first line, or another statement reaches into a block."""
    lines = source.splitlines(keepends=True)
    _set_lines(source, blocks)
    spans: list[list] = []  # [start, end, lazy, statements, tested, block]
    k = 0
    for stmt in body:
        start = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", ())])
        lazy = isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        block = blocks[k] if k < len(blocks) else None
        if lazy:
            if block is None or (start, stmt.lineno, stmt.col_offset) != (block.lines[0], block.lines[1], 0):
                return None
            end, k = block.lines[2], k + 1
        elif block is not None and stmt.end_lineno >= block.lines[0]:
            return None
        else:
            end = stmt.end_lineno
        if spans and start <= spans[-1][1]:  # `a = 1; b = 2` share a line: one chunk
            if lazy or spans[-1][2]:
                return None
            spans[-1][1], spans[-1][4] = max(spans[-1][1], end), spans[-1][4] or tests_names(stmt)
            spans[-1][3].append(stmt)
        else:
            spans.append([start, end, lazy, [stmt], not lazy and tests_names(stmt), block if lazy else None])
    if k != len(blocks):
        return None
    chunks = [_cut_chunk(source, lines, *span) for span in spans]
    indent = None
    for span, chunk in zip(spans, chunks):
        indent = _indent(lines, span[3], chunk)
        if indent is not None:
            break
    return chunks, cst.Module(body=[], default_indent=indent or "    ", default_newline=_newline(source))


def _set_lines(source: bytes, blocks: list[_Block]) -> None:
    """Set on each block the file lines of its first line, of its `def` or `class` line and of its last line of
    code."""
    line, at = 1, 0
    for b in blocks:
        found = []
        for offset in (b.start, b.head, b.close - 1):
            line += source.count(b"\n", at, offset)
            at = offset
            found.append(line)
        b.lines = tuple(found)


def _cut_chunk(source: bytes, lines: list[bytes], start: int, end: int, lazy: bool, stmts: list, tested: bool,
               block: _Block | None) -> Chunk:
    """One chunk of _cut_chunks: a run of statements as `ast` read them, or a class or function whose body is
    read when asked for."""
    if block is None:
        chunk = Chunk(start, b"".join(lines[start - 1:end]), False)
        chunk.statements, chunk.tested = stmts, tested
        return chunk
    stmt = stmts[0]
    chunk = Chunk(start, source[block.start:block.close], True)
    chunk.name, chunk.kind = stmt.name, "class" if isinstance(stmt, ast.ClassDef) else "function"
    chunk.def_line = stmt.lineno
    chunk._bases = list(getattr(stmt, "bases", ()))
    chunk._pending = True
    return chunk


def _indent(lines: list[bytes], stmts: list, chunk: Chunk) -> str | None:
    """The indent of the first body below its header among a chunk's statements, as _split_whole reads it.
    The cut holds a class or function's `pass` at the line of its first statement, which `ast` gives the line
    of its `def` where it is decorated: that line is read from the class or function itself."""
    for stmt in stmts:
        body = getattr(stmt, "body", None)
        if isinstance(body, list) and body and body[0].lineno > stmt.lineno:
            line = lines[body[0].lineno - 1]
            if chunk.lazy and line.lstrip().startswith(b"@") and chunk.statements:
                line = lines[chunk.statements[0].body[0].lineno - 1]
            return line[: len(line) - len(line.lstrip(b" \t"))].decode()
    return None


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
