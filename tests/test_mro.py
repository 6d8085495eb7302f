"""The MRO is Python's C3 linearisation: in a diamond the walk runs the method Python would run."""

from __future__ import annotations

from fusion_analyze.walk.construction.constructor import Constructor
from fusion_analyze.semantics.environment import Environment
from fusion_analyze.semantics.mro import c3_linearization
from fusion_analyze.walk.walker import Walker

from .conftest import tree_index

DIAMOND = '''
import torch
from torch import nn


class A(nn.Module):
    def forward(self, x):
        return torch.tanh(x)


class B(A):
    pass


class C(A):
    def forward(self, x):
        return torch.relu(x)


class D(B, C):
    pass
'''


def test_diamond_mro_is_c3_and_the_walk_runs_cs_forward(tmp_path):
    index = tree_index(tmp_path, {"diamond.py": DIAMOND})
    d = index.lookup("vllm.diamond", "D")
    assert [c.name for c in Constructor(index, Environment(index.backend, index)).mro(d)] == ["D", "B", "C", "A"]  # depth-first said D, B, A, C
    ops = Walker(index, []).walk_model(d).ops
    assert [op.name for op in ops] == ["relu"]
    assert ops[0].line == DIAMOND.splitlines().index("        return torch.relu(x)") + 1


class _K:
    def __init__(self, name, *bases):
        self.qualname, self.bases = name, list(bases)


def test_c3_matches_python_and_falls_back_on_inconsistent_or_cyclic_bases():
    o = _K("O")
    a, b, c, d, e = _K("A", o), _K("B", o), _K("C", o), _K("D", o), _K("E", o)
    k1, k2, k3 = _K("K1", a, b, c), _K("K2", d, b, e), _K("K3", d, a)
    z = _K("Z", k1, k2, k3)
    names = [x.qualname for x in c3_linearization(z, lambda k: k.bases)]
    assert names == ["Z", "K1", "K2", "K3", "D", "A", "B", "C", "E", "O"]  # the textbook example, as Python gives it

    x, y = _K("X", o), _K("Y", o)
    bad = _K("Bad", _K("XY", x, y), _K("YX", y, x))  # Python raises TypeError: no consistent order
    assert [k.qualname for k in c3_linearization(bad, lambda k: k.bases)] == ["Bad", "XY", "X", "O", "Y", "YX"]
    loop = _K("L")
    loop.bases = [_K("M", loop)]
    assert [k.qualname for k in c3_linearization(loop, lambda k: k.bases)] == ["L", "M"]
