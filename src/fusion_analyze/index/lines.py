"""Start lines of libcst nodes, taken from CPython's `ast` instead of libcst's PositionProvider.

PositionProvider regenerates a whole file's code in Python to learn one line: two to three times the cost of
parsing it. `ast.parse` runs in C at about a tenth of a libcst parse, and its nodes carry their lines. The two
trees are paired: statements by walking both statement trees side by side, calls by source order within a
scope (both trees list the calls of a piece of code in the same order). Whatever cannot be paired falls back
to PositionProvider, so a line is never guessed: over the innermost paired statement that holds the node (a
class's or function's header alone), in the one chunk that holds it, not over the whole chunk (a decorator's
line cost a generation of its whole class's code, for every chunk of the file parsed before it).
"""

from __future__ import annotations

import ast
import warnings
from typing import Callable

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .nodes import children, iter_nodes


class _Mismatch(Exception):
    """The two trees disagree: use PositionProvider for this file."""


# libcst compound statement -> the ast classes it can stand for
_COMPOUND = {
    cst.FunctionDef: (ast.FunctionDef, ast.AsyncFunctionDef),
    cst.ClassDef: (ast.ClassDef,),
    cst.If: (ast.If,),
    cst.For: (ast.For, ast.AsyncFor),
    cst.While: (ast.While,),
    cst.With: (ast.With, ast.AsyncWith),
    cst.Try: (ast.Try,),
    cst.Match: (ast.Match,),
}
if hasattr(cst, "TryStar") and hasattr(ast, "TryStar"):
    _COMPOUND[cst.TryStar] = (ast.TryStar,)


class LineTable:
    def __init__(self, tree: cst.Module, source: bytes | None, lines: dict | None = None,
                 statements: list | Callable[[], list | None] | None = None, offset: int = 0):
        self.tree = tree
        self.source = source
        # the ast statements of `source`, if already parsed, or what gives them when first needed (None: parse it) ...
        self._statements = statements
        self._offset = offset  # ... with their lines `offset` more than the source's own
        self.lines: dict = lines if lines is not None else {}
        self._ast_of: dict = {}  # libcst statement -> its ast node
        self._paired = False
        self._full = False
        self._scopes: set = set()
        self._parents: dict | None = None  # node -> its parent, built at the first fallback

    def find(self, node: cst.CSTNode, scope: cst.CSTNode | None, step: str) -> int | None:
        """The node's line if this table has it after `step`: "statements" pairs the statement trees,
        "calls" the calls and dict entries (of `scope` when this table holds it), "positions" falls back
        to PositionProvider. A disagreement between the trees goes straight to the fallback."""
        found = self.lines.get(node)
        if found is not None or self._full:
            return found
        try:
            if step == "statements":
                self._pair_statements()
            elif step == "calls":
                if not isinstance(node, (cst.Call, cst.DictElement)):
                    return None
                self._pair_statements()
                if scope is not None and scope not in self._ast_of:
                    return None  # the node is in the chunk that holds its scope
                self._pair_calls(scope)
            else:
                self._pair_statements()
                if not self._local(node):
                    return None  # not a node of this chunk
        except (_Mismatch, SyntaxError, ValueError, RecursionError, MemoryError):
            self._positions()
        return self.lines.get(node)

    # -- statements ------------------------------------------------------------------------------
    def _pair_statements(self) -> None:
        if self._paired:
            return
        statements = self._statements() if callable(self._statements) else self._statements
        if statements is not None:
            module = ast.Module(body=statements, type_ignores=[])
        elif self.source is None:
            raise _Mismatch("no source")
        else:
            with warnings.catch_warnings():  # invalid escapes etc. are the file's business, not ours
                warnings.simplefilter("ignore")
                module = ast.parse(self.source)
        self._ast_of[self.tree] = module
        self._body(self.tree.body, module.body)
        self._paired = True

    def _record(self, node, a) -> None:
        self._ast_of[node] = a
        self.lines[node] = a.lineno - self._offset

    def _body(self, stmts, nodes: list) -> None:
        i = 0
        for s in stmts:
            if type(s) is cst.SimpleStatementLine:
                for small in s.body:
                    if i >= len(nodes):
                        raise _Mismatch("statement count")
                    self._record(small, nodes[i])
                    i += 1
                self.lines[s] = self.lines[s.body[0]]
                self._ast_of[s] = self._ast_of[s.body[0]]
                continue
            if i >= len(nodes) or not isinstance(nodes[i], _COMPOUND.get(type(s), ())):
                raise _Mismatch(f"{type(s).__name__} vs {type(nodes[i]).__name__ if i < len(nodes) else 'end'}")
            self._compound(s, nodes[i])
            i += 1
        if i != len(nodes):
            raise _Mismatch("statement count")

    def _suite(self, suite, nodes: list) -> None:
        if type(suite) is cst.SimpleStatementSuite:  # `if x: pass` on one line
            if len(suite.body) != len(nodes):
                raise _Mismatch("suite")
            for small, a in zip(suite.body, nodes):
                self._record(small, a)
        else:
            self._body(suite.body, nodes)

    def _compound(self, s, a) -> None:
        self._record(s, a)
        if type(s) is cst.Match:
            if len(s.cases) != len(a.cases):
                raise _Mismatch("match cases")
            for case, ac in zip(s.cases, a.cases):
                self.lines[case] = ac.pattern.lineno - self._offset
                self._suite(case.body, ac.body)
            return
        self._suite(s.body, a.body)
        if isinstance(s, (cst.Try,) + ((cst.TryStar,) if hasattr(cst, "TryStar") else ())):
            if len(s.handlers) != len(a.handlers):
                raise _Mismatch("handlers")
            for h, ah in zip(s.handlers, a.handlers):
                self._record(h, ah)
                self._suite(h.body, ah.body)
            self._else(s.orelse, a.orelse)
            if s.finalbody is not None:
                self._suite(s.finalbody.body, a.finalbody)
            elif a.finalbody:
                raise _Mismatch("finally")
            return
        orelse = getattr(s, "orelse", None)
        if type(s) is cst.If and type(orelse) is cst.If:  # elif: one ast If in orelse
            if len(a.orelse) != 1 or not isinstance(a.orelse[0], ast.If):
                raise _Mismatch("elif")
            self._compound(orelse, a.orelse[0])
        elif isinstance(s, (cst.If, cst.For, cst.While)):
            self._else(orelse, a.orelse)

    def _else(self, orelse, nodes: list) -> None:
        if orelse is None:
            if nodes:
                raise _Mismatch("else")
            return
        self._suite(orelse.body, nodes)

    # -- calls -----------------------------------------------------------------------------------
    def _pair_calls(self, scope) -> None:
        """Pair the calls and dict entries of `scope` (a statement; the whole module when None) by source order."""
        scope = scope if scope is not None else self.tree
        if scope in self._scopes:
            return
        self._scopes.add(scope)
        ours_calls, ours_entries = _cst_calls(scope)
        theirs_calls, theirs_keys = _ast_calls(self._ast_of[scope])
        if len(ours_calls) != len(theirs_calls) or len(ours_entries) != len(theirs_keys):
            raise _Mismatch("call count")
        for c, ac in zip(ours_calls, theirs_calls):
            self.lines.setdefault(c, ac.lineno - self._offset)
        for e, key in zip(ours_entries, theirs_keys):  # a `key: value` entry starts at its key
            self.lines.setdefault(e, key.lineno - self._offset)

    # -- fallback --------------------------------------------------------------------------------
    def _local(self, node: cst.CSTNode) -> bool:
        """The lines of the node and the nodes around it from PositionProvider over its innermost statement
        whose line is known (paired), not the whole chunk: a line's distance from that statement's line is
        the same wherever the statement's code is generated. Of a class or function header (decorators,
        bases, parameters: what comes before the body), over the header alone. False: not in this chunk."""
        parents = self._parents
        if parents is None:
            parents = self._parents = {}
            stack: list[cst.CSTNode] = [self.tree]
            while stack:
                parent = stack.pop()
                for kid in children(parent):
                    parents[kid] = parent
                    stack.append(kid)
        if node not in parents:
            return False
        child, anc = node, parents[node]
        while anc is not None and not (isinstance(anc, cst.BaseStatement) and anc in self.lines):
            child, anc = anc, parents.get(anc)
        if anc is None:
            self._positions()
            return True
        top = anc
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef)) and child is not anc.body:  # the body comes last
            top = anc.with_changes(body=cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Pass()])]))
        module = self.tree.with_changes(header=(), body=(top,), footer=())
        positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        shift = self.lines[anc] - positions[top].start.line
        lines = self.lines
        for n, pos in positions.items():
            if n in parents and n not in lines:
                lines[n] = pos.start.line + shift
        return True

    def _positions(self) -> None:
        self._full = True
        positions = MetadataWrapper(self.tree, unsafe_skip_copy=True).resolve(PositionProvider)
        for node, pos in positions.items():
            self.lines[node] = pos.start.line


def _cst_calls(scope: cst.CSTNode) -> tuple[list[cst.Call], list[cst.DictElement]]:
    """Calls and `key: value` dict entries in pre-order (source order; an outer call before the calls it
    contains), f-strings left out."""
    calls, entries = [], []
    for node in iter_nodes(scope, lambda n: type(n) is cst.FormattedString):
        if type(node) is cst.Call:
            calls.append(node)
        elif type(node) is cst.DictElement:
            entries.append(node)
    return calls, entries


def _ast_calls(node: ast.AST) -> tuple[list[ast.Call], list[ast.expr]]:
    calls, keys = [], []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.JoinedStr):  # positions inside f-strings are unreliable before 3.12
            continue
        if isinstance(n, ast.Call):
            calls.append(n)
        elif isinstance(n, ast.Dict):
            keys += [k for k in n.keys if k is not None]  # None: a **spread, not a key: value entry
        stack.extend(ast.iter_child_nodes(n))
    def order(c):
        return (c.lineno, c.col_offset, -(c.end_lineno or 0), -(c.end_col_offset or 0))
    calls.sort(key=order)
    keys.sort(key=order)
    return calls, keys
