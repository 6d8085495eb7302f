"""The loop's first decoder layer gets the values the loop starts with (`residual = None` before the loop), the
others what the layer before left: with layer kinds (a configuration giving the layer count), a test on such a
value is decided layer by layer. The first layer is a kind of its own where its ops differ (Qwen2's plain
RMSNorm in layer 0, add + RMSNorm after), and stays in its kind where they do not (mini tree)."""

from __future__ import annotations

import json

import pytest

from fusion_analyze.analysis.pipeline import Options, analyze
from fusion_analyze.match.matcher import Graph

CONFIG = {"model_type": "qwen2", "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4,
          "num_key_value_heads": 2, "intermediate_size": 512, "hidden_act": "silu", "rms_norm_eps": 1e-6,
          "vocab_size": 1000, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}

# a decoder layer that takes the carried residual but never tests it: every layer runs the same ops
PLAIN_MODEL = '''\
from torch import nn

from .qwen2 import Qwen2DecoderLayer, Qwen2ForCausalLM, Qwen2Model
from .utils import maybe_prefix


class PlainDecoderLayer(Qwen2DecoderLayer):
    def forward(self, positions, hidden_states, residual):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(positions=positions, hidden_states=hidden_states)
        hidden_states = hidden_states + residual
        hidden_states = self.mlp(hidden_states)
        return hidden_states, residual


class PlainForCausalLM(Qwen2ForCausalLM):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        self.model = Qwen2Model(vllm_config=vllm_config, prefix=maybe_prefix(prefix, "model"),
                                decoder_layer_type=PlainDecoderLayer)
'''


def _config(tmp_path, arch: str) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"architectures": [arch], **CONFIG}), encoding="utf-8")
    return str(path)


@pytest.fixture
def qwen2(mini, tmp_path):
    return analyze("Qwen2ForCausalLM", str(mini), str(mini), "ascend",
                   options=Options(config=_config(tmp_path, "Qwen2ForCausalLM")), cache=False)


def test_first_layer_is_a_kind_of_its_own_where_its_ops_differ(qwen2):
    kinds = qwen2.report["layer_kinds"]
    assert [k["layers"] for k in kinds] == [[0], [1, 2, 3]]
    assert [k["differs"]["residual"] for k in kinds] == ["the loop's initial value (the first layer)",
                                                         "the previous layer's output"]
    norms = {op.attrs["layer_kind"]: op for op in qwen2.walk.ops if op.name == "input_layernorm"}
    assert sorted(norms) == [0, 1]  # one per kind, each decided: no branch walked as not steady
    assert (norms[0].kind, norms[0].steady, norms[0].condition) == ("rmsnorm", True, None)
    assert (norms[1].kind, norms[1].steady, norms[1].condition) == ("add_rmsnorm", True, None)
    post = [op.kind for op in qwen2.walk.ops if op.name == "post_attention_layernorm"]
    assert post == ["add_rmsnorm", "add_rmsnorm"]
    assert not [u for u in qwen2.report["undecided"] if "residual" in u["test"]]
    # the step counts each kind's layers
    for model in qwen2.steps.values():
        assert model.step.kind_counts == [1, 3]


def test_no_layer_feeds_the_first_one(qwen2):
    """The back edges that feed one layer's output into the next layer's first ops (the layer is walked once)
    do not reach the first layer: nothing runs before it but the prologue."""
    graph = Graph(qwen2.walk.ops)
    first = {op.attrs["layer_kind"]: op for op in qwen2.walk.ops if op.name == "input_layernorm"}
    assert first[0].entry and not first[1].entry
    assert all(op.entry == (op.attrs.get("layer_kind") == 0) for op in qwen2.walk.ops if op.section == "layer")
    fed = {graph.by_id[i].section for i in graph.sources(first[1], ("view",))}
    assert "layer" in fed  # from the second layer on: the layer before
    assert {graph.by_id[i].section for i in graph.sources(first[0], ("view",))} == {"prologue"}


def test_first_layer_stays_in_its_kind_where_its_ops_are_the_same(mini, tmp_path):
    (mini / "vllm/model_executor/models/plain.py").write_text(PLAIN_MODEL, encoding="utf-8")
    registry = mini / "vllm/model_executor/models/registry.py"
    text = registry.read_text(encoding="utf-8")
    registry.write_text(text.replace('    "HybridForCausalLM":', '    "PlainForCausalLM": ("plain", "PlainForCausalLM"),\n'
                                                               '    "HybridForCausalLM":', 1), encoding="utf-8")
    a = analyze("PlainForCausalLM", str(mini), str(mini), "ascend",
                options=Options(config=_config(tmp_path, "PlainForCausalLM")), cache=False)
    assert a.report["layer_kinds"] == []
    layer = [op for op in a.walk.ops if op.section == "layer"]
    assert layer and not [op for op in layer if "layer_kind" in op.attrs or op.entry]
    assert [op.name for op in layer if op.name.endswith("layernorm")] == ["input_layernorm"]
    # the second walk (layers 1-3) was undone: the layer's ops are those of one walk, numbered from the first
    assert not [op.id for op in layer if "#" in op.id]
