"""A name that may be None or hold a tensor, which one not known where it is passed (`x = None` then an `if` that
no value decides assigns it; `x = f(h) if test else None`): the function it is handed to keeps its tests of it
open, so the ops of `g(x) if x is not None else None` carry that test (the FalconH1 hand check: ssd_combined.py's
second `rearrange` of `initial_states`, emitted unconditionally before)."""

from __future__ import annotations

from fusion_analyze.analysis.pipeline import analyze

MAYBE_MODEL = '''\
import torch
from torch import nn

from .qwen2 import Qwen2DecoderLayer, Qwen2ForCausalLM, Qwen2Model
from .utils import maybe_prefix


def _scan(h, init=None, gate=None, bias=None):
    a = torch.tanh(init) if init is not None else None
    b = torch.sigmoid(gate) if gate is not None else None
    c = torch.exp(bias) if bias is not None else None
    return torch.relu(h)


class MaybeMixer(nn.Module):
    def __init__(self, config, prefix=""):
        super().__init__()

    def forward(self, positions, hidden_states):
        init = None
        if hidden_states.shape[0] > 1:
            init = torch.abs(hidden_states)
        gate = torch.square(hidden_states) if hidden_states.shape[-1] > 8 else None
        bias = torch.neg(hidden_states)
        return _scan(hidden_states, init, gate=gate, bias=bias)


class MaybeDecoderLayer(Qwen2DecoderLayer):
    def __init__(self, config, cache_config=None, quant_config=None, prefix=""):
        super().__init__(config, prefix=prefix)
        self.self_attn = MaybeMixer(config, prefix=f"{prefix}.self_attn")


class MaybeForCausalLM(Qwen2ForCausalLM):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        self.model = Qwen2Model(vllm_config=vllm_config, prefix=maybe_prefix(prefix, "model"),
                                decoder_layer_type=MaybeDecoderLayer)
'''


def test_a_name_that_may_be_none_keeps_the_callees_test_open(mini):
    (mini / "vllm/model_executor/models/maybe.py").write_text(MAYBE_MODEL, encoding="utf-8")
    registry = mini / "vllm/model_executor/models/registry.py"
    text = registry.read_text(encoding="utf-8")
    registry.write_text(text.replace('    "HybridForCausalLM":', '    "MaybeForCausalLM": ("maybe", "MaybeForCausalLM"),\n'
                                                               '    "HybridForCausalLM":', 1), encoding="utf-8")
    a = analyze("MaybeForCausalLM", str(mini), str(mini), "ascend", cache=False)
    ops = {op.name: op for op in a.walk.ops if op.scope == "_scan" or op.file.endswith("maybe.py")}
    # `init`: None, then assigned under a test no value decides
    assert ops["tanh"].condition is not None and "init is not None" in ops["tanh"].condition
    # `gate = f(h) if test else None`
    assert ops["sigmoid"].condition is not None and "gate is not None" in ops["sigmoid"].condition
    # a tensor on every path: the test is decided, nothing is added
    assert ops["exp"].condition == ops["relu"].condition
    assert "bias" not in (ops["exp"].condition or "")
