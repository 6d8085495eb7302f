"""A private attribute the plugin's code sets on another object after construction (`layer._state = plan`) is not
read from `__init__` nor from a `getattr` default (walk/construction/constructor.py `set_from_outside`): the
forward's test on it stays open, and a raise behind it is no blocker."""

from __future__ import annotations

from fusion_analyze.analysis.pipeline import analyze

from .test_walk_maybe_none import _model

STATE_MODEL = '''\
import torch
from torch import nn

from .qwen2 import Qwen2ForCausalLM


class StateMixer(nn.Module):
    def __init__(self):
        super().__init__()
        self._state = None

    def forward(self, hidden_states):
        state = getattr(self, "_state", None)
        if state is None or not getattr(self, "_ready", False):
            raise RuntimeError("the state is set up by the worker before the first step")
        return torch.tanh(hidden_states)


class StateForCausalLM(Qwen2ForCausalLM):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        self.mixer = StateMixer()

    def forward(self, input_ids, positions, intermediate_tensors=None, inputs_embeds=None):
        hidden_states = self.model(input_ids, positions, intermediate_tensors, inputs_embeds)
        return self.mixer(hidden_states)
'''

SETTER = '''\
def set_up_state(layer, plan):
    layer._state = plan
    layer._ready = True
'''


def _tanh_and_blockers(mini):
    _model(mini, "state", "StateForCausalLM", STATE_MODEL)
    a = analyze("StateForCausalLM", str(mini), str(mini), "ascend", cache=False)
    tanh = [op for op in a.walk.ops if op.name == "tanh" and op.file.endswith("state.py")]
    return tanh, [b for b in a.walk.blockers if b["file"].endswith("state.py")]


def test_state_the_plugin_sets_from_outside_is_not_inits(mini):
    (mini / "vllm_ascend/ops/state_setup.py").write_text(SETTER, encoding="utf-8")
    tanh, blockers = _tanh_and_blockers(mini)
    assert tanh and not blockers


def test_without_an_outside_setter_the_placeholder_decides(mini):
    # the control: nothing sets `_state`, so `state is None` holds and the raise is surely reached
    tanh, blockers = _tanh_and_blockers(mini)
    assert not tanh and blockers and "RuntimeError" in blockers[0]["raises"]
