"""Ops under a device-stream switch are said to run there, and a graph pass never fits a match whose ops run on
two streams (issue 34, the pattern matcher's rules): a small tree in vLLM's idioms."""

from __future__ import annotations

from types import SimpleNamespace

from fusion_analyze.match.matcher import Graph, Match
from fusion_analyze.semantics.environment import Environment
from fusion_analyze.status.derive import _matcher_misfit
from fusion_analyze.walk.walker import Walker

from .conftest import tree_index

MODEL = '''
import torch
from torch import nn


def npu_stream_switch(stream, enabled=True):
    return stream


class Block(nn.Module):
    def __init__(self, overlap: bool = False):
        super().__init__()
        self.overlap = overlap

    def forward(self, x, y):
        a = x * 2.0
        with npu_stream_switch(torch.npu.current_stream(), enabled=True):
            b = a + y
        with npu_stream_switch(torch.npu.current_stream(), enabled=self.overlap):
            c = b + y
        return c


class ToyForCausalLM(nn.Module):
    def __init__(self, vllm_config=None, prefix=""):
        super().__init__()
        self.block = Block()

    def forward(self, x, y):
        return self.block(x, y)
'''


def test_ops_in_a_stream_scope_say_so_and_no_pass_fits_across_streams(tmp_path):
    index = tree_index(tmp_path, {"model_executor/models/toy.py": MODEL}, backend="cuda")
    model = index.lookup("vllm.model_executor.models.toy", "ToyForCausalLM")
    ops = Walker(index, [], Environment(index.backend, index)).walk_model(model).ops
    mul = next(op for op in ops if op.kind == "mul")
    adds = [op for op in ops if op.kind == "add"]
    assert len(adds) == 2 and "stream" not in mul.attrs
    assert adds[0].attrs["stream"].startswith("npu_stream_switch(") and "toy.py:" in adds[0].attrs["stream"]
    assert "stream" not in adds[1].attrs  # enabled=self.overlap, False: the default stream
    graph = Graph(ops)
    pattern = SimpleNamespace(outputs=0)
    crossing = Match(pattern=None, form=None, ops={}, op_list=[mul, adds[0]])  # type: ignore[arg-type]
    assert any("different device streams" in r for r in _matcher_misfit(crossing, pattern, graph))
    same = Match(pattern=None, form=None, ops={}, op_list=[mul, adds[1]])  # type: ignore[arg-type]
    assert not _matcher_misfit(same, pattern, graph)
