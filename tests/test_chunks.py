"""Chunked parsing (index/modules.py): a file is split with `ast` into top-level classes and functions, parsed by
libcst only when asked for, and runs of other statements, parsed at once. What a reader gets must not depend
on it: the same nodes' code, the same lines, the same names."""

from __future__ import annotations

import ast
import pickle

import libcst as cst

from fusion_analyze.index.chunks import _split_cut, _split_whole
from fusion_analyze.index.modules import ModuleIndex, split_chunks
from fusion_analyze.analysis.pipeline import analyze, render

from .conftest import MINI, tree_index

SOURCE = b'''"""doc"""
import torch
from torch import nn; import os

X = 1


@decorate(1)
class A(nn.Module, Generic[T]):
    """A class."""

    def forward(self, x):
        return torch.relu(x)

    if CONDITION:
        def extra(self):
            pass


def helper(y):
    return y + 1
# a trailing comment
Y = helper(2)
'''


def test_split_groups_statements_and_keeps_lines():
    chunks, fmt = split_chunks(SOURCE)
    assert [(c.start, c.lazy, c.name) for c in chunks] == [
        (1, False, ""), (2, False, ""), (3, False, ""), (5, False, ""), (8, True, "A"), (20, True, "helper"), (23, False, "")]
    assert chunks[4].text.startswith(b"@decorate(1)\nclass A") and chunks[4].def_line == 9
    assert chunks[4].methods == {"forward", "extra"}
    assert fmt.default_indent == "    " and fmt.default_newline == "\n"


def test_split_reads_whole_what_ast_cannot_or_other_encodings():
    for source in (b"def broken(:\n    pass\n", b"# -*- coding: latin-1 -*-\nclass A:\n    x = '\xe9'\n", b"\xef\xbb\xbfclass A:\n    pass\n"):
        chunks, _ = split_chunks(source)
        assert len(chunks) == 1 and not chunks[0].lazy and chunks[0].text == source
    assert split_chunks(b"\n\n")[0] == []
    chunks, fmt = split_chunks(b"class A:\r\n  def f(self):\r\n    return 1\r\n")
    assert fmt.default_indent == "  " and fmt.default_newline == "\r\n" and chunks[0].lazy


def _index(tmp_path, source: bytes) -> ModuleIndex:
    return tree_index(tmp_path, {"m.py": source})


def test_lazy_definitions_parse_on_demand_with_file_lines(tmp_path):
    index = _index(tmp_path, SOURCE)
    info = index.get("vllm.m")
    a = info.defs["A"][-1]
    assert a.line == 9 and [cst.Module([]).code_for_node(b.value) for b in a.bases] == ["nn.Module", "Generic[...]"]
    assert not a.may_define("__init__") and a.may_define("forward")
    assert info.chunks[4].module is None  # line, bases and methods came from ast: nothing parsed yet
    call = a.node.body.body[1].body.body[0].body[0].value  # torch.relu(x)
    assert info.code(call) == "torch.relu(x)" and info.line_of(call) == 13
    assert info.line_of(a.node) == 9 and a.line == 9
    assert info.chunks[5].module is None  # helper is still unparsed
    assert index.lookup("vllm.m", "Y").kind == "assign" and info.line_of(index.lookup("vllm.m", "Y").node) == 23
    assert info.line_of(info.defs["helper"][-1].node) == 20
    assert [type(s).__name__ for s in info.tree.body][-3:] == ["ClassDef", "FunctionDef", "SimpleStatementLine"]


LOCAL = b'''import torch


@decorate(
    1)
# between
@other
class A(nn.Module,
        Base):
    def forward(self, x,
                y):
        z = torch.relu(
            x) + torch.tanh(
                y)
        if (x and
                y):
            return [z,
                    x.shape]
        try:
            pass
        except (ValueError,
                KeyError) as e:
            raise e
        return z


def f(a, *, b=torch.float16):
    return a.b.c
'''


def test_a_line_no_statement_or_call_holds_matches_positionprovider_and_reads_only_its_chunk(tmp_path):
    """Decorators, bases, parameters, names and attributes (what neither `ast` pairing gives) get
    PositionProvider's line over the whole file, though it runs only over their innermost statement with a
    known line (the header alone of a class or function), and only in the chunk that holds them."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    from fusion_analyze.index.nodes import iter_nodes

    info = _index(tmp_path, LOCAL).get("vllm.m")
    whole = MetadataWrapper(cst.parse_module(LOCAL)).resolve(PositionProvider)
    want = {}  # (type, code, nth) -> line, the same nodes found in the tool's chunks
    for node, pos in whole.items():
        if isinstance(node, (cst.Decorator, cst.Name, cst.Attribute, cst.Param, cst.Arg, cst.Tuple, cst.List)):
            key = (type(node).__name__, cst.Module([]).code_for_node(node))
            want.setdefault(key, []).append(pos.start.line)
    f = info.defs["f"][-1].node  # parsed first: the fallback for A's nodes must not read f's chunk
    a = info.defs["A"][-1].node
    got: dict = {}
    for node in iter_nodes(a):
        if isinstance(node, (cst.Decorator, cst.Name, cst.Attribute, cst.Param, cst.Arg, cst.Tuple, cst.List)):
            key = (type(node).__name__, cst.Module([]).code_for_node(node))
            got.setdefault(key, []).append(info.line_of(node))
    assert got["Decorator", "# between\n@other\n"] == [7] and got["Name", "Base"] == [9] and got["Param", "y"] == [11]
    assert got["Attribute", "x.shape"] == [18] and got["Name", "KeyError"] == [22]
    for key, lines in got.items():
        assert lines == [line for line in want[key] if 4 <= line < 26], key
    f_chunk = next(c for c in info.chunks if c.module is not None and c.module.body and c.module.body[0] is f)
    assert not f_chunk.lines._full and not f_chunk.lines.lines.get(f.params.params[0])
    assert info.line_of(f.body.body[0].body[0].value) == 28 and info.line_of(f.params.kwonly_params[0].default) == 27


def test_statements_with_parses_only_matching_chunks(tmp_path):
    info = _index(tmp_path, SOURCE).get("vllm.m")
    assert [type(s).__name__ for s in info.statements_with(b"y + 1")] == ["FunctionDef"]
    assert info.chunks[4].module is None


def _reject(monkeypatch, prefix: bytes) -> None:
    """libcst made to reject the texts that start with `prefix`."""
    real = cst.parse_module

    def picky(text, *args, **kwargs):
        if isinstance(text, bytes) and text.startswith(prefix):
            raise cst.ParserSyntaxError("made up", lines=["x"], raw_line=2, raw_column=0)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(cst, "parse_module", picky)


def test_a_chunk_libcst_rejects_is_reported_and_the_walk_goes_on(tmp_path, monkeypatch):
    index = _index(tmp_path, SOURCE)
    info = index.get("vllm.m")
    _reject(monkeypatch, b"def helper")
    node = info.defs["helper"][-1].node
    assert isinstance(node, cst.FunctionDef) and node.name.value == "helper"
    assert [(e.file, e.reason) for e in index.errors_touched()] == [("vllm/m.py", "syntax error at line 21: made up")]


def test_reports_do_not_depend_on_what_was_parsed_before(tmp_path, monkeypatch):
    """The fixture report is the same when every chunk is parsed up front."""
    monkeypatch.setenv("FUSION_ANALYZE_NO_CACHE", "1")
    lazy = analyze("qwen3", str(MINI), str(MINI), None, cache=False)
    import fusion_analyze.index.modules as modules

    real = modules.split_chunks
    monkeypatch.setattr(modules, "split_chunks", lambda source: ([_eager(c) for c in real(source)[0]], real(source)[1]))
    eager = analyze("qwen3", str(MINI), str(MINI), None, cache=False)
    assert render(lazy, "md") == render(eager, "md") and render(lazy, "json") == render(eager, "json")


def _eager(chunk):
    chunk.lazy = False
    chunk.tested = True  # parsed when the file is read, its names read by libcst
    return chunk


RUNS = b'''import os.path
import numpy as np, a.b
from . import sibling
from ..pkg import (x as y,
                   z)
from star import *
A = B = 1; C: int = 2
D: int
(E, F) = 3, 4
try:
    from fast import kernel
    class Cls:
        pass
except ImportError:
    def kernel(*args):
        pass
    G = None
if TYPE_CHECKING:
    H = 1
else:
    H = 2
I = {"k": lambda: os.getenv("K", "1")}
'''


def _names(info):
    return ({k: [(b.module, b.name, str(b.condition)) for b in v] for k, v in info.imports.items()}, info.star_imports,
            {k: [(d.kind, str(d.condition), info.code(d.node), info.line_of(d.node)) for d in v] for k, v in info.defs.items()})


def test_a_run_is_read_by_ast_and_parsed_only_when_a_binding_is_asked_for(tmp_path, monkeypatch):
    """A run of module-level statements holding no `if` the name index reads gives the same names, conditions,
    nodes and lines from `ast` as from libcst, without being parsed when the file is read; an `if` is parsed
    at once (its tests' code), and asking for one binding parses that statement only."""
    index = tree_index(tmp_path, {"pkg/m.py": RUNS})
    info = index.get("vllm.pkg.m")
    parsed = [c.start for c in info.chunks if c.module is not None]
    assert parsed == [18]  # the `if` only
    i = info.defs["I"][-1]
    assert info.code(i.node).startswith('{"k": lambda') and info.line_of(i.node) == 22
    assert [c.start for c in info.chunks if c.module is not None] == [18, 22]
    import fusion_analyze.index.modules as modules

    real = modules.split_chunks
    monkeypatch.setattr(modules, "split_chunks", lambda source: ([_eager(c) if not c.lazy else c for c in real(source)[0]],
                                                                 real(source)[1]))
    eager = tree_index(tmp_path / "eager", {"pkg/m.py": RUNS}).get("vllm.pkg.m")
    assert all(c.module is not None for c in eager.chunks)
    assert _names(info) == _names(eager)
    assert _names(info)[0]["y"] == [("vllm.pkg", "x", "None")] and _names(info)[1] == ["star"]
    assert [d[:2] for d in _names(info)[2]["kernel"]] == [("function", "except")]
    assert [d[:2] for d in _names(info)[2]["H"]] == [("assign", "TYPE_CHECKING"), ("assign", "not (TYPE_CHECKING)")]


def test_a_run_libcst_rejects_stands_in_unknown_and_is_reported(tmp_path, monkeypatch):
    index = tree_index(tmp_path, {"pkg/m.py": RUNS})
    info = index.get("vllm.pkg.m")
    _reject(monkeypatch, b"I = ")
    assert info.code(info.defs["I"][-1].node) == "__unreadable__"
    assert [(e.file, e.reason) for e in index.errors_touched()] == [("vllm/pkg/m.py", "syntax error at line 23: made up")]


def test_the_names_of_real_files_read_from_ast_are_those_libcst_reads(real_tree, tmp_path, monkeypatch):
    """Over the 0.30 pair's configuration, environment, registry and patch modules (module-level tables, try
    imports, `if` blocks): the same imports, conditions, nodes and lines whether runs are read by `ast` or
    parsed with the file."""
    from fusion_analyze.index.modules import ModuleIndex
    from fusion_analyze.semantics.for_backend import binding_decider
    from fusion_analyze.sources.trees import open_tree
    import fusion_analyze.index.modules as modules

    vroot, aroot = real_tree("vllm==0.30.0"), real_tree("vllm-ascend==0.30.0rc2")
    names = [f"vllm.config.{p.stem}" for p in sorted((vroot / "vllm/config").glob("*.py")) if p.stem != "__init__"]
    names += ["vllm.envs", "vllm.model_executor.models.registry", "vllm.platforms.interface", "vllm.utils.import_utils"]
    names += [f"vllm_ascend.patch.platform.{p.stem}" for p in sorted((aroot / "vllm_ascend/patch/platform").glob("patch_*.py"))]
    names += [f"vllm_ascend.{p.stem}" for p in sorted((aroot / "vllm_ascend").glob("*.py")) if p.stem != "__init__"]

    def index():
        return ModuleIndex([open_tree(str(vroot), "vllm", required=True), open_tree(str(aroot), "vllm_ascend", required=True)],
                           backend="ascend", decider=binding_decider)

    lazy = index()
    got = {n: _names(lazy.get(n)) for n in names if lazy.get(n) is not None}
    real = modules.split_chunks
    monkeypatch.setattr(modules, "split_chunks", lambda source: ([_eager(c) if not c.lazy else c for c in real(source)[0]],
                                                                 real(source)[1]))
    eager = index()
    assert len(got) > 60
    for n, want in got.items():
        assert _names(eager.get(n)) == want, n


def test_the_trusted_parse_gives_libcsts_tree_and_keeps_validation_outside_it():
    """index/trusted_parse.py skips libcst's node validation during the parse of source text only: the tree is
    the one libcst.parse_module gives (node for node), and a node built by hand afterwards is validated
    again, also after a parse that failed."""
    from libcst import CSTValidationError, ParserSyntaxError

    from fusion_analyze.index.trusted_parse import parse_module

    sources = [SOURCE] + [p.read_bytes() for p in sorted(MINI.rglob("*.py"))]
    for source in sources:
        try:
            ast.parse(source)
        except (SyntaxError, ValueError):
            continue  # the fixtures' unreadable files
        assert parse_module(source).deep_equals(cst.parse_module(source))
        assert parse_module(source).code == source.decode()
    try:
        parse_module(b"def f(:\n")
    except ParserSyntaxError:
        pass
    else:
        raise AssertionError("a syntax error must still be raised")
    for build in (lambda: cst.Name("not a name"), lambda: cst.Integer("x")):
        try:
            build()
        except CSTValidationError:
            continue
        raise AssertionError("validation must be on again after the parse")


METHODS = b'''import torch


class B(torch.nn.Module):
    """Doc."""

    scale = 2

    def __init__(self, n):
        super().__init__()
        self.n = n

    @torch.no_grad()
    def forward(self, x):
        y = torch.relu(x)
        return y * self.n

    def forward(self, x):  # the last definition wins, as at runtime
        return torch.tanh(x)

    if FLAG:
        def extra(self):
            return 1

    def update(self):
        self.late = torch.ones(1)
'''


def test_a_method_is_parsed_alone_with_its_file_lines_and_the_class_only_when_its_body_is_read(tmp_path):
    """ModuleInfo.method_alone: the walk reads most classes for their __init__ and forward only, so those are
    parsed without the rest of the class; node for node they are the method as the class holds it, with the
    same file lines, and asked again give the same node, also once the class itself has been parsed."""
    from fusion_analyze.semantics.function_bodies import class_method

    info = _index(tmp_path, METHODS).get("vllm.m")
    b = info.defs["B"][-1]
    fwd = class_method(b, "forward")
    init = class_method(b, "__init__")
    assert info.chunks[1].module is None  # the class itself is not parsed
    assert info.code(fwd.body.body[0].body[0].value) == "torch.tanh(x)" and info.line_of(fwd) == 18
    assert info.line_of(fwd.body.body[0].body[0].value) == 19
    assert info.line_of(init.body.body[1].body[0]) == 11 and info.code(init.body.body[1]).strip() == "self.n = n"
    # `ast` answers what the class body may hold without parsing it
    assert b.may_assign("scale") and not b.may_assign("n") and b.mentions(b"self.late") and not b.mentions(b"self.x")
    assert info.chunks[1].module is None
    # the class parsed: its own forward is the same code at the same lines (the blank lines and comments before
    # the def belong to the class's text only); class_method keeps the first node
    in_class = [s for s in b.node.body.body if type(s) is cst.FunctionDef and s.name.value == "forward"][-1]
    assert in_class.with_changes(leading_lines=()).deep_equals(fwd.with_changes(leading_lines=()))
    assert in_class is not fwd and class_method(b, "forward") is fwd
    assert info.line_of(in_class) == 18 and info.line_of(in_class.body.body[0].body[0].value) == 19
    # a decorated method starts at its decorator; one in an if-block is read from the class
    other = _index(tmp_path / "again", METHODS).get("vllm.m").defs["B"][-1]
    assert other.method_alone("extra") is None and other.method_alone("nope") is None
    first = other.module.method_chunk(other._chunk, "forward")
    assert first.start == 17 and first.text.startswith(b"class _:\n    def forward(self, x):  # the last")
    assert class_method(other, "extra").body.body[0].body[0].value.value == "1"


def test_a_method_libcst_rejects_alone_is_read_from_its_class(tmp_path, monkeypatch):
    from fusion_analyze.semantics.function_bodies import class_method

    info = _index(tmp_path, METHODS).get("vllm.m")
    _reject(monkeypatch, b"class _:")
    fwd = class_method(info.defs["B"][-1], "forward")
    assert info.code(fwd.body.body[0].body[0].value) == "torch.tanh(x)" and info.line_of(fwd) == 18
    errors = info._index.errors_touched()
    assert [(e.file, e.reason) for e in errors] == [("vllm/m.py", "syntax error at line 18: made up")]


def test_a_class_is_read_for_its_fields_without_its_methods_at_its_file_lines(tmp_path):
    """Definition.skeleton: a configuration class is read for its fields (VllmConfig: 135 kB, a few of them
    fields), so those are parsed without the methods the body defines; what it keeps (fields, if-blocks, with
    their file lines) is the class's own, and nothing of it is the class parsed whole."""
    from fusion_analyze.index.nodes import find_all

    info = _index(tmp_path, METHODS).get("vllm.m")
    b = info.defs["B"][-1]
    skeleton = b.skeleton
    assert info.chunks[1].module is None  # the class itself is not parsed
    kept = [type(s).__name__ for s in skeleton.body.body]
    assert kept == ["SimpleStatementLine", "SimpleStatementLine", "If"]  # doc, `scale = 2`, the if-block
    scale = skeleton.body.body[1].body[0]
    assert info.code(scale).strip() == "scale = 2" and info.line_of(scale) == 7
    assert info.line_of(skeleton.body.body[2]) == 21 and b.skeleton is skeleton  # parsed once
    # the parts of a class that hold a text: the methods that do, alone, and the skeleton for the rest
    import re

    parts = b.nodes_with(re.compile(rb"self\.(n|late) ="))
    assert [p.name.value for p in parts] == ["__init__", "update"] and info.chunks[1].module is None
    both = b.nodes_with(re.compile(rb"scale|self\.late"))
    assert [type(p).__name__ for p in both] == ["FunctionDef", "ClassDef"] and both[1] is skeleton
    assert [info.line_of(a) for a in find_all(both[0], cst.Assign)] == [26]
    assert b.nodes_with(re.compile(rb"nowhere")) == [] and info.chunks[1].module is None
    # once the class is parsed, the same nodes as before: readers compare what two calls give
    assert b.node is not None and b.nodes_with(re.compile(rb"self\.(n|late) =")) == parts


def test_a_class_of_methods_only_keeps_a_statement_and_its_decorators():
    from fusion_analyze.index.chunks import skeleton_text

    text = b"@dataclass\nclass C:\n    @staticmethod\n    def f():\n        pass\n    def g(self): pass\n"
    chunk = [c for c in split_chunks(text)[0] if c.kind == "class"][0]
    assert skeleton_text(chunk) == b"@dataclass\nclass C:\n    pass\n\n\n\n"


def test_a_match_in_a_method_another_of_its_name_replaces_reads_the_class_whole(tmp_path):
    """A property's setter is a method of the body that `chunk.lone` does not keep (its getter's name): a text in
    it is read with the class, so no method that holds it is missed (Definition.methods_with)."""
    import re

    source = (b"class P:\n    @property\n    def x(self):\n        return self._x\n\n    @x.setter\n"
              b"    def x(self, v):\n        self._x = v\n\n    def other(self):\n        pass\n")
    p = _index(tmp_path, source).get("vllm.m").defs["P"][-1]
    methods = p.methods_with(re.compile(rb"self\._x ="))
    assert [m.name.value for m in methods] == ["x", "x", "other"]  # the whole class's methods, setter included
    assert [m.name.value for m in p.methods_with(re.compile(rb"return self\._x"))] == ["x"]  # the getter, alone


def test_one_entry_of_a_table_is_parsed_alone_at_its_file_lines(tmp_path):
    """A large module-level table read by `ast` (vLLM's environment variables): one entry's expression parsed
    alone, at its file line, the table itself left unparsed; asked twice, the same node."""
    import ast as _ast

    index = tree_index(tmp_path, {"pkg/m.py": RUNS + b'J = {\n    "a": 1,\n    "b": lambda: (\n        os.getenv("B", "2")),\n}\n'})
    info = index.get("vllm.pkg.m")
    table = info.defs["J"][-1]
    assert isinstance(table.ast_value, _ast.Dict)
    body = table.ast_value.values[1].body
    node = info.expression_alone(body)
    assert info.code(node) == 'os.getenv("B", "2")' and info.line_of(node) == 26
    assert isinstance(node, cst.Call) and info.expression_alone(body) is node
    assert all(c.module is None for c in info.chunks if c.start == 23)  # the table is not parsed


# -- the cut: `ast` reads a file's top-level classes and functions without their bodies ----------------------------

def _equal(a, b) -> bool:
    """The same `ast` nodes, positions included: pickle writes every field and attribute of each node (as
    ast.dump with its attributes would, at a fraction of its cost)."""
    return pickle.dumps(a) == pickle.dumps(b)


def _facts(chunk) -> tuple:
    """What a reader can ask a chunk besides its `ast` statements: its lines, text and kind, and of a class its
    methods, the names it assigns, and each method it keeps alone (its lines, and which of the class body's
    statements it is: the very node, which readers compare with them)."""
    body = chunk.statements[0].body if chunk.lone else []
    lone = {k: (first, last, [i for i, s in enumerate(body) if s is node])
            for k, (first, last, node) in chunk.lone.items()}
    assert all(len(at) == 1 for _f, _l, at in lone.values())
    return (chunk.start, chunk.text, chunk.lazy, chunk.tested, chunk.name, chunk.kind, chunk.def_line,
            chunk.statements is None, sorted(chunk.methods), sorted(chunk.assigned), lone)


def _same(source: bytes) -> bool:
    """The split gives what the parse of the whole file gives: the same chunks, and of each its text, lines and
    names, its `ast` statements and a class's bases (positions included). True where the cut was used, not the
    whole parse."""
    (new, new_fmt), (old, old_fmt) = split_chunks(source), _split_whole(source)
    assert (new_fmt.default_indent, new_fmt.default_newline) == (old_fmt.default_indent, old_fmt.default_newline)
    assert [_facts(c) for c in new] == [_facts(c) for c in old]
    for n, o in zip(new, old):
        assert _equal(n.statements, o.statements) and _equal(n._bases, o._bases)
    return _split_cut(source) is not None


CUT = b'''"""Module doc.
def not_code():
class NotCode:
"""
import os


@decorate(
    1,
)
# between
@other(
  2)
def f(
    x,
    y="(",
) -> int:
    s = """
class InString:
    pass
"""
    return {
        x: y
}
    # a trailing comment, indented

# and one at the margin


class C(
    Base,
    metaclass=Meta,
):
    """Doc."""
    @property
    def p(self):
        return 1

    @p.setter
    def p(self, v):
        pass

    if FLAG:
        def q(self):
            pass
        z = 2
    x: int = 1
    y = x # comment
async def g(): pass
class A: pass
class B(A): x = 1; y = 2
def h(a,
      b): return a
X = 1; Y = 2


if __name__ == "__main__":
    f(1, 2)
'''


def test_the_cut_gives_what_the_whole_parse_gives():
    assert _same(CUT)
    chunks, _ = split_chunks(CUT)
    assert [(c.start, c.lazy, c.name) for c in chunks] == [
        (1, False, ""), (5, False, ""), (8, True, "f"), (30, True, "C"), (49, True, "g"), (50, True, "A"),
        (51, True, "B"), (52, True, "h"), (54, False, ""), (57, False, "")]
    f = chunks[2]
    assert f.text.endswith(b"        x: y\n}\n") and f.def_line == 14 and f._pending  # its body not read yet
    assert f.statements[0].body[1].end_lineno == 24 and not f._pending
    c = chunks[3]
    assert c.def_line == 30 and [ast.unparse(b) for b in c._bases] == ["Base"] and c._pending  # bases from the cut
    assert c.methods == {"p", "q"} and c.assigned == {"z", "x", "y"} and c.lone["p"][:2] == (35, 37)  # the getter
    assert chunks[9].tested and chunks[8].text == b"X = 1; Y = 2\n" and len(chunks[8].statements) == 2


def test_the_cut_reads_the_forms_a_file_may_take():
    sources = [
        b"",
        b"import os\nX = 1\n",  # statements only
        b"class A: pass",  # one line, no line end
        b"class A: pass\n\n\n# end\n",
        b"async def f():\n    await g()\n",
        b"def f():\n    pass\n\n\nif __name__ == \"__main__\":\n    f()\n",
        b"class A:\r\n    def f(self):\r\n        return 1\r\n\r\nX = 2\r\n",  # Windows line ends
        b"class A:\n    @property\n    def f(self):\n        return 1\n",  # the indent from a decorated first statement
        b"class A:\n\t@property\n\tdef f(self):\n\t\treturn 1\n",
        b"X = '''\ndef f():\n    pass\n'''\ndef g():\n    pass\n",  # a def at the margin in a module-level string
        b"def f():\n    x = '''\n    # not a comment'''\n\n# a comment\n",  # a string's last line looks like one
        b"def f():\n    s = \"\\\nx\"\n    return s\n",  # a short string continued to the margin
        b"def f():\n    s = '\"\"\"'\n    t = \"\"\"\nimport os\n\"\"\"\nY = 1\n",  # a triple quote in a short string
        b"def f(): return (\n    1)\nclass K(\n    A): x = 1\n",
        b"@a\n\n# c\n@b\nclass A:\n    pass\n",
        b"x = [\n1, 2,\n]\ndef f():\n    return x\n",
        b"if X:\n    def f():\n        pass\nelse:\n    class A:\n        pass\n",
        b"# -*- coding: utf-8 -*-\ndef f():\n    return '\xc3\xa9'\n",
    ]
    assert all([_same(s) for s in sources])


def test_what_the_cut_is_not_sure_of_is_parsed_whole():
    sources = [
        b"def f():\n    return 1 + \\\n2\n",  # a backslash continues the body to the margin
        b"def f():\n    x = (1,\n2)\n    return x\n",  # a bracket's line at the margin
        b"X = (a\n@ b)\n",  # an operator at the margin
        b"@decorate\nX = 1\n",
        b"def f():\n    pass\n\f\ndef g():\n    pass\n",  # a form feed
        b"class A:\r    pass\r",  # old Mac line ends
        b"def f():\n    return '\xe9'\n",  # not UTF-8
        b"# -*- coding: latin-1 -*-\ndef f():\n    return '\xe9'\n",
        b"\xef\xbb\xbfclass A:\n    pass\n",
        b"def f(:\n    pass\n",  # a header `ast` cannot read: the whole file is one chunk, as before
        b"class BrokenMLP(nn.Module)\n    def forward(self, x):\n        return x\n",
        b"def f():\n    x = 1\nx = \"\"\"\n",
        b"def f(x=\"\"\"\n\"\"\"):\n    pass\n",  # a header's string spans lines
    ]
    for source in sources:
        assert not _same(source), source
    chunks, _ = split_chunks(b"def f(:\n    pass\n")
    assert len(chunks) == 1 and not chunks[0].lazy and chunks[0].statements is None


def test_a_body_ast_cannot_read_is_found_when_asked_for():
    """The one thing the cut does not see: a syntax error inside the body of a top-level class or function
    whose header `ast` reads. The rest of the file is read as before; that class or function has no `ast`
    statements, methods or bases, and libcst reports the file when it is parsed."""
    source = b"import os\n\n\nclass A(Base):\n    def f(self):\n        return (\n\n\ndef g():\n    pass\n"
    chunks, _ = split_chunks(source)
    assert [(c.lazy, c.name) for c in chunks] == [(False, ""), (True, "A"), (True, "g")]
    a = chunks[1]
    assert a.statements is None and a.methods == frozenset() and a.lone == {} and a.def_line == 4
    assert _split_whole(source)[0][0].text == source  # the whole parse: one chunk
    assert [c.statements is not None for c in chunks] == [True, False, True]


def test_the_cut_gives_what_the_whole_parse_gives_over_the_real_trees(real_tree):
    """Every Python file of the 0.30 pair's vllm and vllm_ascend packages: the same chunks, nodes, lines,
    methods and names whether `ast` reads the file whole or cut, and the cut used for nearly every file."""
    import gc

    checked = whole = 0
    gc.disable()  # millions of `ast` nodes, none of them in a cycle
    try:
        for spec, folder in (("vllm==0.30.0", "vllm"), ("vllm-ascend==0.30.0rc2", "vllm_ascend")):
            for path in sorted((real_tree(spec) / folder).rglob("*.py")):
                whole += not _same(path.read_bytes())
                checked += 1
    finally:
        gc.enable()
    assert checked > 3000 and whole < 10, (checked, whole)


def test_a_parsed_class_is_read_by_ast_only_when_a_line_of_it_is_asked_for(tmp_path):
    """libcst parses a class for its nodes; `ast` reads it (Chunk._read) only when a line is first asked for,
    which pairs the two trees: with a parse cache that holds the lines, never."""
    info = _index(tmp_path, SOURCE).get("vllm.m")
    a = info.defs["A"][-1]
    chunk = info.chunks[4]
    call = a.node.body.body[1].body.body[0].body[0].value  # torch.relu(x)
    assert chunk.module is not None and chunk._pending
    assert info.line_of(call) == 13 and not chunk._pending
