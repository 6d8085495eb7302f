"""What the index knows of one parsed module: its definitions and import bindings, and the module itself.

ModuleInfo holds a file's chunks (see chunks.py) and parses them on demand through its ModuleIndex;
Definition stands for a class, function or assignment whose libcst node is parsed only when first asked for.
These are the records that name resolution (modules.py) hands out and the walkers read."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

import libcst as cst

from .facts import FactTable
from .chunks import Chunk, binding_nodes, method_text, skeleton_statements, skeleton_text

SKELETONS = FactTable("skeleton", "class chunk -> that class parsed without the methods its body defines")
METHODS_ALONE = FactTable("method alone", "(chunk, name) -> the chunk of that method parsed alone")
LINE_ALIASES = FactTable("aliases", "a node built from this module's code -> the node whose line it reports")
CODE = FactTable("code", "a node -> its source text")
EXPRESSIONS = FactTable("expressions alone", "(line, column) of an ast expression -> its chunk parsed alone")

if TYPE_CHECKING:
    from ..ir.conditions import Condition


class ChunkParser(Protocol):
    """What a module's information asks of the index that made it (modules.ModuleIndex): to parse one of its
    chunks. Named here, so that this module, below the index, does not import it."""

    def _parse_chunk(self, info: "ModuleInfo", chunk: Chunk) -> None: ...


@dataclass
class ImportBinding:
    module: str  # absolute module imported from
    name: str | None  # attribute imported from it; None binds the module itself
    line: int
    condition: "Condition | None" = None  # ir.conditions.Condition: the if tests around the binding


class Definition:
    """A class, function or module-level assignment, with where it stands. The node of a top-level class or
    function is parsed when first asked for (see Chunk)."""

    __slots__ = ("kind", "name", "module", "_node", "condition", "_chunk", "_at")

    def __init__(self, kind: str, name: str, module: "ModuleInfo", node: cst.CSTNode | None = None,
                 condition: "Condition | None" = None, chunk: "Chunk | None" = None,
                 at: "tuple[Chunk, int, ast.AST] | None" = None):
        self.kind = kind  # "class" | "function" | "assign"
        self.name = name
        self.module = module
        self._node = node
        self.condition = condition
        self._chunk = chunk  # the top-level class or function chunk it is
        # or the run of statements it stands in, which of its bindings it is (collect_ast), and its `ast` node
        self._at = at

    @property
    def node(self) -> cst.CSTNode:
        if self._node is None:
            if self._at is not None:
                self._node = self.module.bound_node(self._at[0], self._at[1], self.kind, self.name)
            else:
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

    @property
    def identity(self):
        """What stands for this definition in memo keys whether or not its node is parsed yet."""
        return self._chunk if self._chunk is not None else self.node

    def method_alone(self, method: str) -> cst.FunctionDef | None:
        """The method, parsed without the rest of its class while the class is not parsed (most classes are
        read for their forward and __init__ only); None when the class is parsed already or the method is not
        one its body defines directly: read it from the class then."""
        if self._node is not None or self._chunk is None:
            return None
        return self.module.method_alone(self._chunk, method)

    @property
    def skeleton(self) -> cst.ClassDef:
        """The class without the methods its body defines directly (its decorators, bases, assignments,
        annotations, if-blocks and nested classes as they stand, at their file lines): the node itself once the
        class is parsed, else that much parsed alone, once. For readers of the body's fields, never of its
        methods."""
        if self._node is not None or self._chunk is None or self.kind != "class":
            return cast(cst.ClassDef, self.node)
        found = self.module.skeleton(self._chunk)
        return found if found is not None else cast(cst.ClassDef, self.node)

    def nodes_with(self, needle: "re.Pattern") -> list[cst.CSTNode]:
        """What of the class holds a match of the needle: the methods its body defines directly, each parsed
        alone, and its skeleton, or else the class node; [] where its text has no match
        (ModuleInfo.chunk_nodes_with)."""
        if self._chunk is None:
            return [self.node] if needle.search(self.module.code(self.node).encode()) else []
        if not needle.search(self._chunk.text):
            return []
        return self.module.chunk_nodes_with(self._chunk, needle)

    def methods_with(self, needle: "re.Pattern") -> list[cst.FunctionDef]:
        """The methods its body defines directly that may hold the needle: those whose text does, each parsed
        alone, or every one of them where the class is read whole (nodes_with; a skeleton defines none)."""
        out: list[cst.FunctionDef] = []
        for part in self.nodes_with(needle):
            if type(part) is cst.FunctionDef:
                out.append(part)
            elif type(part) is cst.ClassDef and type(part.body) is cst.IndentedBlock:
                out += [f for f in part.body.body if type(f) is cst.FunctionDef]
        return out

    @property
    def ast_value(self):
        """An assignment's value (a class's or function's statement) as `ast` read it, where its run of
        statements was read by `ast` (bindings.collect_ast), parsed or not; else None. For readers of a table
        that need one entry of it parsed (expression_alone), or none."""
        return self._at[2] if self._at is not None else None

    @property
    def ast_node(self):
        """Its `ast` statement while its libcst node is not parsed (what `ast` can answer: decorators, a
        signature), else None."""
        if self._node is not None or self._chunk is None or not self._chunk.statements:
            return None
        return self._chunk.statements[0]

    def may_assign(self, name: str) -> bool:
        """False when `ast` saw no `name = ...` in the class's body, so looking for one need not parse it."""
        return self._node is not None or self._chunk is None or name in self._chunk.assigned

    def mentions(self, text: bytes) -> bool:
        """False when the definition's source holds no such text (a search need not parse it)."""
        return self._chunk is None or text in self._chunk.text

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


class ModuleInfo:
    def __init__(self, name: str, path: Path, rel: str, is_package: bool, index: "ChunkParser | None" = None,
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
        self.facts: dict = {}  # FactTable -> its entries for this module (index/facts.py)

    def chunk_tree(self, chunk: Chunk) -> cst.Module:
        if chunk.module is None:
            self._index._parse_chunk(self, chunk)
            self._parsed.append(chunk)
        return chunk.module

    def bound_node(self, chunk: Chunk, n: int, kind: str, name: str) -> cst.CSTNode:
        """The n-th binding's node of a run of statements (bindings.collect_ast), the run parsed now. Where libcst
        cannot read a run `ast` read (the file's error is recorded), a stand-in that resolves to nothing."""
        if chunk.bound is None:
            chunk.bound = binding_nodes(self.chunk_tree(chunk).body)
        if n < len(chunk.bound):
            return chunk.bound[n]
        stub = (f"class {name}:\n    pass\n" if kind == "class" else f"def {name}(*args, **kwargs):\n    pass\n"
                if kind == "function" else f"{name} = __unreadable__\n")
        found = cst.parse_module(stub).body[0]
        return found.body[0].value if kind == "assign" else found  # type: ignore[union-attr]

    def expression_alone(self, node: ast.expr) -> cst.BaseExpression:
        """An expression `ast` read in this file, parsed alone (once) at its file lines: one entry of a large
        module-level table (vLLM's environment variables) without the table, one field's default of a large
        configuration class without the class. In parentheses only where it spans lines outside brackets (its
        source had them around it)."""
        table = EXPRESSIONS.of(self)
        key = (node.lineno, node.col_offset)
        found = table.get(key)
        if found is None:
            lines = (self.source or b"").splitlines(keepends=True)[node.lineno - 1:node.end_lineno]
            lines[-1] = lines[-1][:node.end_col_offset]
            lines[0] = lines[0][node.col_offset:]
            segment = b"".join(lines)
            text = b"_ = " + segment + b"\n"  # in parentheses only where its lines make no statement alone
            statements = skeleton_statements(text, node.lineno)
            if statements is None:
                text = b"_ = (" + segment + b")\n"
                statements = skeleton_statements(text, node.lineno)
            found = table[key] = Chunk(node.lineno, text, True)
            found.kind, found.name = "function", "_"
            found.statements = statements
            self.chunk_tree(found)
        stmt = found.module.body[0] if found.module is not None and found.module.body else None
        small = stmt.body[0] if type(stmt) is cst.SimpleStatementLine and stmt.body else None
        return small.value if type(small) is cst.Assign else cst.Name("__unreadable__")

    def method_alone(self, chunk: Chunk, name: str) -> cst.FunctionDef | None:
        """A method of a class chunk parsed alone, once (see chunks.method_text); its lines are file lines."""
        sub = self.method_chunk(chunk, name)
        node = sub.module.body[0].body.body[0] if sub is not None else None
        return node if type(node) is cst.FunctionDef else None  # libcst rejected it: read it with its class

    def skeleton(self, chunk: Chunk) -> cst.ClassDef | None:
        """A class chunk parsed without its methods (see chunks.skeleton_text), once; None where that text is
        the class's own (parse the class then)."""
        found = SKELETONS.of(self).get(chunk)
        if found is None:
            text = skeleton_text(chunk)
            if text is None or text == chunk.text:
                return None
            found = SKELETONS.of(self)[chunk] = Chunk(chunk.start, text, True)
            found.kind, found.name = "class", chunk.name
            found.statements = skeleton_statements(text, chunk.start)
            self.chunk_tree(found)
        node = found.module.body[0] if found.module is not None and found.module.body else None
        return node if type(node) is cst.ClassDef else None

    def method_chunk(self, chunk: Chunk, name: str) -> Chunk | None:
        """The parsed chunk of method_alone (the batch's prefetch stores it in the parse cache)."""
        key = (chunk, name)
        found = METHODS_ALONE.of(self).get(key)
        if found is None:
            alone = method_text(chunk, name)
            if alone is None:
                return None
            text, head, statement = alone
            found = METHODS_ALONE.of(self)[key] = Chunk(head, text, True)
            found.statements, found.kind, found.name = [statement], "class", "_"
            self.chunk_tree(found)
        return found

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

    def nodes_with(self, needle: "bytes | re.Pattern") -> list[cst.CSTNode]:
        """As statements_with, but a class gives only its parts that hold a match (chunk_nodes_with): a setter of
        VllmConfig need not parse its 135 kB."""
        if not isinstance(needle, re.Pattern):
            needle = re.compile(re.escape(needle))
        return [n for c in self.chunks if needle.search(c.text) for n in self.chunk_nodes_with(c, needle)]

    def chunk_nodes_with(self, c: Chunk, needle: "re.Pattern") -> list[cst.CSTNode]:
        """nodes_with for one chunk that holds the needle. A class gives the methods its body defines directly
        that hold a match, each parsed alone, and its skeleton (ModuleInfo.skeleton) where a match lies
        elsewhere in it; any other chunk gives its top-level statements. The same nodes whether or not the
        class is parsed by then: readers compare what two calls give."""
        top = c.statements[0] if c.statements else None
        if c.kind == "class" and c.lone and isinstance(top, ast.ClassDef):
            names: list[str] = []
            rest = False
            spans = [(min([x.lineno] + [d.lineno for d in x.decorator_list]), x.end_lineno or x.lineno, x)
                     for x in top.body if isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef))]
            for m in needle.finditer(c.text):
                line = c.start + c.text.count(b"\n", 0, m.start())
                held = next((x for first, last, x in spans if first <= line <= last), None)
                if held is None:
                    rest = True
                elif c.lone.get(held.name, (0, 0, None))[2] is held:
                    names.append(held.name)
                else:  # a method another of its name replaces (a property's setter): read with its class
                    return list(self.chunk_tree(c).body)
            methods = [self.method_alone(c, n) for n in dict.fromkeys(names)]
            skeleton = self.skeleton(c) if rest else None
            if all(m is not None for m in methods) and (skeleton is not None or not rest):
                parts: list[cst.CSTNode] = [m for m in methods if m is not None]
                return parts + ([skeleton] if skeleton is not None else [])
        return list(self.chunk_tree(c).body)

    def alias_lines(self, origin: dict) -> None:
        """Nodes built from this module's code (a rewritten forward) report the lines of the nodes they replace."""
        LINE_ALIASES.of(self).update(origin)

    def line_of(self, node: cst.CSTNode, scope: cst.CSTNode | None = None) -> int:
        """The node's start line; `scope`, a statement that contains the node, keeps the lookup local."""
        aliases = self.facts.get(LINE_ALIASES)
        while aliases and node in aliases:
            node = aliases[node]
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
        table = self.facts.get(CODE)
        if table is None:
            table = CODE.of(self)
        found = table.get(node)
        if found is None:  # generating code is a tree walk: the same condition is asked for many times
            found = table[node] = self._fmt.code_for_node(node)
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
