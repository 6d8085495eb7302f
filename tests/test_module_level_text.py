"""rebinding.module_level_text: a module's imports are read for hundreds of modules (which modules a patch
module's import runs first), so each top-level function and class is cut to one `pass` before CPython parses
the rest. The imports read from the cut text must be those read from the whole file, or the cut is not used."""

from __future__ import annotations

import ast

from fusion_analyze.walk.construction import rebinding as R

TRICKY = b'''"""Module doc.
def not_code():
class NotCode:
"""
import os
from a import (
    b,
)


@decorate(
    1,
)
@other
def f(
    x,
):
    import inside_function
    return """
        no line of it at the margin
    """


class C(
    Base,
):
    import inside_class
# a comment at the margin
    x = 1

if TYPE_CHECKING:
    import typing_only
try:
    import maybe
except ImportError:
    def fallback():
        pass
async def g(): pass
X = 1; import after
'''


def _imports(tree) -> list:
    out = []
    for k, s in enumerate(tree.body):
        for n in ast.walk(s):
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                out.append((k, ast.dump(n)))
    return out


def test_the_cut_keeps_each_top_level_statement_and_every_module_level_import():
    cut = R.module_level_text(TRICKY)
    assert cut is not None
    whole, short = ast.parse(TRICKY), ast.parse(cut)
    assert len(short.body) == len(whole.body)  # the top-level statement indexes stay
    kept = [(k, d) for k, d in _imports(whole) if "inside_" not in d]
    assert _imports(short) == kept and any("typing_only" in d for _k, d in kept)
    assert b"inside_function" not in cut and b"inside_class" not in cut and b"def fallback" in cut
    assert R._read_statements(TRICKY) == R._read_statements(cut)


def test_a_block_whose_string_may_reach_the_margin_is_not_cut():
    odd = b'def f():\n    return """\nimport not_an_import\n"""\nimport real\n'
    assert R.module_level_text(odd) is None  # the whole file is parsed then
    assert [s[2] for s in R._read_statements(odd)] == [("real",)]


def test_the_imports_of_the_real_trees_read_from_the_cut_are_the_whole_files(real_tree):
    """Every Python file of the 0.30 pair's modelling and Ascend packages: the cut gives the same imports, or
    is not used (None)."""
    checked = 0
    for spec, folder in (("vllm==0.30.0", "vllm/model_executor"), ("vllm-ascend==0.30.0rc2", "vllm_ascend")):
        for path in sorted((real_tree(spec) / folder).rglob("*.py")):
            source = path.read_bytes()
            whole = R._parse(source)
            cut = R.module_level_text(source)
            short = R._parse(cut) if cut is not None else None
            if whole is None or short is None:
                continue
            assert len(short.body) == len(whole.body), path
            assert [d for _k, d in _imports(short)] == [d for k, d in _imports(whole)
                                                        if not isinstance(whole.body[k], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))], path
            checked += 1
    assert checked > 1000
