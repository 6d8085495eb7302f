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


def _model(mini, module: str, arch: str, source: str) -> None:
    """A model file in the mini tree's copy, registered."""
    (mini / f"vllm/model_executor/models/{module}.py").write_text(source, encoding="utf-8")
    registry = mini / "vllm/model_executor/models/registry.py"
    text = registry.read_text(encoding="utf-8")
    registry.write_text(text.replace('    "HybridForCausalLM":', f'    "{arch}": ("{module}", "{arch}"),\n'
                                                               '    "HybridForCausalLM":', 1), encoding="utf-8")


def test_a_name_that_may_be_none_keeps_the_callees_test_open(mini):
    _model(mini, "maybe", "MaybeForCausalLM", MAYBE_MODEL)
    a = analyze("MaybeForCausalLM", str(mini), str(mini), "ascend", cache=False)
    ops = {op.name: op for op in a.walk.ops if op.scope == "_scan" or op.file.endswith("maybe.py")}
    # `init`: None, then assigned under a test no value decides
    assert ops["tanh"].condition is not None and "init is not None" in ops["tanh"].condition
    # `gate = f(h) if test else None`
    assert ops["sigmoid"].condition is not None and "gate is not None" in ops["sigmoid"].condition
    # a tensor on every path: the test is decided, nothing is added
    assert ops["exp"].condition == ops["relu"].condition
    assert "bias" not in (ops["exp"].condition or "")


# -- vLLM's defaults of its configuration objects: the literals start-up code may assign them ------------------------

VLLM_CONFIG = '''

from pydantic import Field

from vllm.config.cache import CacheConfig


class VllmConfig:
    cache_config: CacheConfig = Field(default_factory=CacheConfig)
'''

CACHE_CONFIG = '''\
class CacheConfig:
    mode: str = "none"
    use_ring: bool = False
'''

SETTERS = '''\
class ModeModelConfig:
    @classmethod
    def verify_and_update_config(cls, vllm_config):
        cache_config = vllm_config.cache_config
        if cache_config.enable_prefix_caching:
            if cache_config.mode == "none":
                cache_config.mode = "align"  # the default with prefix caching
        else:
            cache_config.mode = "none"
'''

MODE_MODEL = '''\
import torch
from torch import nn

from .qwen2 import Qwen2ForCausalLM


class ModeMixer(nn.Module):
    def __init__(self, cache_config):
        super().__init__()
        self.cache_config = cache_config
        self.use_ring = cache_config.use_ring if cache_config is not None else False

    def forward(self, hidden_states):
        is_all = self.cache_config.mode == "all"
        ring = None
        if self.use_ring:
            ring = torch.abs(hidden_states)
        if is_all:
            hidden_states = torch.exp(hidden_states)
        if self.cache_config.mode == "align":
            hidden_states = torch.sigmoid(hidden_states)
        if ring is not None and hidden_states.shape[0] > 0:
            hidden_states = torch.tanh(hidden_states)
        return self._scan(hidden_states, None)

    def _scan(self, x, residual):
        if residual is None:
            x = torch.relu(x)
        else:
            x = torch.square(x)
        return x


class ModeForCausalLM(Qwen2ForCausalLM):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        self.mixer = ModeMixer(vllm_config.cache_config)

    def forward(self, input_ids, positions, intermediate_tensors=None, inputs_embeds=None):
        hidden_states = self.model(input_ids, positions, intermediate_tensors, inputs_embeds)
        return self.mixer(hidden_states)
'''


def test_a_field_start_up_code_sets_to_literals_is_one_of_them(mini):
    """CacheConfig declares `mode = "none"`; start-up code (vllm/model_executor/models/config.py, as vLLM's
    MambaModelConfig) assigns it only "align" and "none": `mode == "all"` is false (its branch is not walked),
    `mode == "align"` stays open. `ring = None`, assigned only under `self.use_ring` (False at CacheConfig's
    default), is None: `ring is not None and ...` is decided, its branch not walked at all. The helper's `residual is None`
    is decided by the literal None its call passes (walk/calls.py binds an inlined function's arguments)."""
    (mini / "vllm/config/vllm.py").write_text((mini / "vllm/config/vllm.py").read_text(encoding="utf-8") + VLLM_CONFIG,
                                             encoding="utf-8")
    (mini / "vllm/config/cache.py").write_text(CACHE_CONFIG, encoding="utf-8")
    (mini / "vllm/model_executor/models/config.py").write_text(SETTERS, encoding="utf-8")
    _model(mini, "mode", "ModeForCausalLM", MODE_MODEL)
    a = analyze("ModeForCausalLM", str(mini), str(mini), "ascend", cache=False)
    ops = {op.name: op for op in a.walk.ops if op.file.endswith("mode.py")}
    assert "exp" not in ops and "tanh" not in ops and "abs" not in ops
    assert "align" in ops["sigmoid"].condition
    # the helper's parameter is bound to the call's literal None: only the `residual is None` branch runs
    assert ops["relu"].steady and "square" not in ops
