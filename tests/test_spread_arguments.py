"""A wrapper that passes its caller's positional arguments on (`def w(n, *args, **kw): return f(*args, ...)`):
the binder spreads what `*args` collected, in order, where the caller wrote them out (semantics/scope.py
bind_params). Where a keyword then names a parameter those positionals took, Python refuses the call with a
TypeError before it runs: the model cannot be built, and the report says so with the call's file:line (vllm-
ascend 0.30.0rc2's `_ascend_FusedMoE` does this to Jamba's positional `FusedMoEFactory(...)`)."""

from __future__ import annotations

from fusion_analyze.analysis.pipeline import analyze

from .test_walk_maybe_none import _model

SPREAD_MODEL = '''\
import torch
from torch import nn

from .qwen2 import Qwen2ForCausalLM


class Mixer(nn.Module):
    def __init__(self, width, scale=1.0):
        super().__init__()
        self.width = width
        self.scale = scale

    def forward(self, hidden_states):
        if self.scale > 1:
            return torch.tanh(hidden_states)
        return torch.relu(hidden_states)


def make_mixer(width, scale=1.0):
    return Mixer(width, scale)


def passes_on(*args, **kwargs):
    return make_mixer(*args, **kwargs)


def names_first(width, *args, **kwargs):
    return make_mixer(*args, width=width, **kwargs)


class SpreadForCausalLM(Qwen2ForCausalLM):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        self.mixer = BUILD

    def forward(self, input_ids, positions, intermediate_tensors=None, inputs_embeds=None):
        hidden_states = self.model(input_ids, positions, intermediate_tensors, inputs_embeds)
        return self.mixer(hidden_states)
'''


def _run(mini, build: str):
    _model(mini, "spread", "SpreadForCausalLM", SPREAD_MODEL.replace("BUILD", build))
    a = analyze("SpreadForCausalLM", str(mini), str(mini), "ascend", cache=False)
    ops = {op.name for op in a.walk.ops if op.file.endswith("spread.py")}
    return ops, [b for b in a.walk.blockers if b["file"].endswith("spread.py")]


def test_positionals_a_wrapper_spreads_are_bound_in_order(mini):
    ops, blockers = _run(mini, "passes_on(8, 2.0)")
    assert "tanh" in ops and "relu" not in ops and not blockers  # scale = 2.0 reached Mixer through *args


def test_a_keyword_naming_a_parameter_the_spread_took_is_a_typeerror(mini):
    ops, blockers = _run(mini, "names_first(8, 2.0)")  # make_mixer(2.0, width=8): width given twice
    assert len(blockers) == 1 and blockers[0]["when"] == "construction"
    assert blockers[0]["raises"] == "TypeError: make_mixer() got multiple values for argument 'width'"
    assert blockers[0]["line"] == 28  # the call that Python refuses, in the wrapper


def test_the_same_wrapper_called_by_keyword_builds(mini):
    # the control: nothing is spread, so nothing is given twice
    ops, blockers = _run(mini, "names_first(8, scale=2.0)")
    assert "tanh" in ops and "relu" not in ops and not blockers


def test_jamba_cannot_be_built_on_ascend_and_olmo2_norms_take_their_eps(session, hf):
    """0.30 pair. Jamba calls `FusedMoEFactory(num_experts, top_k, hidden_size, intermediate_size, ...)` by
    position (jamba.py:86); vllm-ascend's platform patch replaces it with `_ascend_FusedMoE(num_experts, top_k,
    *args, ...)`, which calls the original as `_original_FusedMoE(*args, num_experts=num_experts, top_k=top_k,
    ...)` (patch_fused_moe.py:177): hidden_size and intermediate_size take num_experts and top_k, then the
    keywords give them again. A wrapper that spreads them right binds them: Olmo2's q_norm is built through the
    Transformers backend's norm fuser with `Olmo2RMSNorm(width, config.rms_norm_eps)`, eps 1e-5 (not the
    parameter's default 1e-6)."""
    from fusion_analyze.analysis.pipeline import Options, analyze_in

    a = analyze_in(session, "JambaForCausalLM", Options(hf_root=hf))
    raised = [b for b in a.walk.blockers if b["file"] == "vllm_ascend/patch/platform/patch_fused_moe.py"]
    assert [(b["line"], b["raises"]) for b in raised][:1] == [
        (177, "TypeError: FusedMoEFactory() got multiple values for argument 'num_experts'")]
    olmo = analyze_in(session, "Olmo2ForCausalLM", Options(hf_root=hf))
    q_norm = [op for op in olmo.report["ops"] if op["scope"] == "Olmo2Attention.forward"
              and op["attrs"].get("values", {}).get("hidden_size_code") == "config.num_attention_heads * self.head_dim"]
    assert q_norm and all(op["attrs"]["values"]["eps"] == 1e-05 for op in q_norm)
