"""General mechanisms that decide tests on something given, on a small tree written here in vLLM's idioms (the
real cases are in test_real_given_decided.py): a layer class outside the trees builds an object; `self.x` set in
a method `__init__` calls, its tests decided there; a helper that returns `config.text_config` or `config`; a
configuration class's dict literal with an open item, and a named expression; an `__init__` that sets
`rope_parameters` after transformers' base ran; what an undecided test waits on (a field given as None whose
item is read, a package a `try` imports); a tensor's `is_cuda` on Ascend."""

from __future__ import annotations

import ast

import libcst as cst
import pytest

from fusion_analyze.config.model_config import ConfigClass, ConfigFacts, _read_body
from fusion_analyze.ir.conditions import Truth
from fusion_analyze.semantics.environment import Environment
from fusion_analyze.status.waits import classify
from fusion_analyze.walk.walker import Walker

from .conftest import tree_index

MODEL = '''
import torch
from torch import nn


class Dense(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x)


class Sparse(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(8, 4)

    def forward(self, x):
        return self.gate(x)


def _text_config(config):
    if hasattr(config, "text_config"):
        return config.text_config
    return config


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self._init_ffn()
        if config.final_norm:
            self.norm = nn.LayerNorm(config.hidden_size)
        else:
            self.norm = None

    def _init_ffn(self):
        self.num_experts = getattr(self.config, "num_experts", 0)
        if self.num_experts == 0:
            self.mlp = Dense()
        else:
            self.mlp = Sparse()

    def forward(self, x):
        x = self.mlp(x)
        if self.num_experts > 0:
            x = x * 2
        if self.norm is not None:
            x = self.norm(x)
        return x


class ToyForCausalLM(nn.Module):
    def __init__(self, *, vllm_config):
        super().__init__()
        config = _text_config(vllm_config.model_config.hf_config)
        self.block = Block(config)

    def forward(self, x):
        return self.block(x)
'''


@pytest.fixture
def index(tmp_path):
    return tree_index(tmp_path, {"model_executor/models/toy.py": MODEL}, backend="cuda")


def _walk(index, facts):
    model = index.lookup("vllm.model_executor.models.toy", "ToyForCausalLM")
    return Walker(index, [], Environment(index.backend, index, config=facts)).walk_model(model)


def _cls(**fields) -> ConfigClass:
    return ConfigClass("ToyConfig", "toy_config.py", 1, "transformers", "0", dict(fields), set(fields))


def test_given_configuration_decides_through_a_helper_method_and_a_text_config_helper(index):
    """`config = _text_config(hf_config)` returns `config.text_config` or `config`: with a configuration that
    gives no text_config of its own either is the same configuration, so its fields decide; `self.num_experts`
    set in `_init_ffn()` (a method __init__ calls) is read there, and the test of that method decides which
    MLP is built; `nn.LayerNorm(...)` (a layer class outside the trees) is never None."""
    facts = ConfigFacts(None, None, cls=_cls(final_norm=True, hidden_size=8, num_experts=0))  # the class's defaults
    result = _walk(index, facts)
    ops = {op.path: op for op in result.ops}
    assert "block.mlp.fc" in ops and ops["block.mlp.fc"].condition is None, [
        (o.path, o.layer_class, o.condition) for o in result.ops]
    assert "block.mlp.gate" not in ops
    assert "block.norm" in ops and ops["block.norm"].condition is None, [(o.path, o.condition) for o in result.ops]
    assert not [op for op in result.ops if "num_experts" in (op.condition or "")]
    # a field the class does not declare stays open where a checkpoint may give it; a whole config.json decides it
    open_ = _walk(index, ConfigFacts(None, None, cls=_cls(final_norm=True, hidden_size=8)))
    assert any("num_experts" in (op.condition or "") for op in open_.ops)
    given = _walk(index, ConfigFacts({"final_norm": False, "hidden_size": 8, "num_experts": 4}, "config.json",
                                     complete=True, cls=_cls(final_norm=True, hidden_size=8)))
    ops = {op.path: op for op in given.ops}
    assert "block.mlp.gate" in ops and "block.mlp.fc" not in ops and "block.norm" not in ops


def test_without_configuration_the_tests_stay(index):
    result = _walk(index, None)
    assert any("self.norm is not None" in (op.condition or "") for op in result.ops)


def test_derive_keeps_a_dicts_known_items_and_binds_a_named_expression():
    """AfmoeConfig (vLLM): `rope_theta = kwargs.pop("rope_theta", 10000.0)` is open where the configuration may
    give it, but `{"rope_type": "default", "rope_theta": rope_theta}` still has its rope_type; an equality with
    such a dict is not decided. Gemma4TextConfig: `if self.layer_types and (last := self.layer_types[-1]) !=
    "full_attention":` binds `last`."""
    src = '''
class C(PretrainedConfig):
    def __init__(self, rope_parameters=None, layer_types=None, **kwargs):
        rope_theta = kwargs.pop("rope_theta", 10000.0)
        if rope_parameters is None:
            rope_parameters = {"rope_type": "default", "rope_theta": rope_theta}
        self.rope_parameters = rope_parameters
        self.same = rope_parameters == {"rope_type": "default", "rope_theta": 10000.0}
        self.has_type = "rope_type" in rope_parameters
        if layer_types is None:
            layer_types = ["a", "b", "a"]
        if layer_types and (last := layer_types[-1]) != "full":
            layer_types = layer_types + ["full"]
        self.layer_types = layer_types
        self.last = last
        super().__init__(**kwargs)
'''
    cls = ConfigClass("C", "c.py", 1, "vllm", "0")
    _read_body(ast.parse(src).body[0], cls)
    facts = ConfigFacts(None, None, cls=cls)
    rope = facts.attr("rope_parameters").value
    assert rope["rope_type"] == "default" and type(rope["rope_theta"]).__name__ == "Unknown"
    assert type(facts.attr("same")).__name__ == "Unknown"
    assert facts.attr("has_type").value is True
    assert facts.attr("layer_types").value == ["a", "b", "a", "full"] and facts.attr("last").value == "a"
    whole = ConfigFacts({"model_type": "c"}, "config.json", complete=True, cls=cls)
    assert whole.attr("rope_parameters").value == {"rope_type": "default", "rope_theta": 10000.0}


def test_rope_parameters_set_after_the_base_is_not_standardized():
    """vLLM's OlmoHybridConfig sets `self.rope_parameters = rope_parameters` after `super().__init__(**kwargs)`:
    transformers' base found none to standardize, so a whole config.json without rope parameters has none
    (None); with the class's defaults alone it is open (vLLM standardizes a rope_theta the checkpoint may give).
    One that sets it first is standardized to the default rope, as before."""
    late = '''
class Late(PretrainedConfig):
    def __init__(self, hidden_size=8, rope_parameters=None, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.rope_parameters = rope_parameters
'''
    early = late.replace("Late", "Early").replace(
        "        super().__init__(**kwargs)\n", "").replace("rope_parameters\n", "rope_parameters\n        super().__init__(**kwargs)\n")
    found = {}
    for src in (late, early):
        node = ast.parse(src).body[0]
        cls = ConfigClass(node.name, "c.py", 1, "vllm", "0")
        _read_body(node, cls)
        found[node.name] = cls
    assert found["Late"].rope_late and not found["Early"].rope_late
    assert ConfigFacts({"hidden_size": 8}, "config.json", complete=True, cls=found["Late"]).attr("rope_parameters").value is None
    assert type(ConfigFacts(None, None, cls=found["Late"]).attr("rope_parameters")).__name__ == "Unknown"
    assert ConfigFacts(None, None, cls=found["Early"]).attr("rope_parameters").value == {"rope_type": "default"}


def test_waits_on_a_field_given_as_none_whose_item_is_read_and_on_an_optional_package():
    facts = ConfigFacts(None, None, cls=_cls(layer_types=None, hidden_size=8))
    e = classify("self.is_local", "self.is_local", facts, None,
                 lambda name: [['config.layer_types[layer_idx] == "sliding_attention"']])
    assert e[:2] == ("config_field", False) and "layer_types" in e[2]
    # a field given as None and only compared is given
    e = classify("self.flag", "self.flag", facts, None, lambda name: [["config.layer_types is None"]])
    assert e[:2] == ("construction", True)
    e = classify("self._obj is not None", "self._obj is not None", facts, None,
                 lambda name: [["None", "torch.classes.ext.Ext()", "import ext.ops"]])
    assert e[:2] == ("optional_package", False) and "import ext.ops" in e[2]


def test_a_tensors_is_cuda_on_ascend():
    """No tensor of an Ascend host is a CUDA tensor (leaf_ops.yaml platform.tensor_attributes); on CUDA a
    tensor may be on the CPU; `current_platform.is_cuda` (no call) is no tensor."""
    test = cst.parse_expression("input.is_cuda")
    assert Environment("ascend", None).platform_truth(test) is Truth.FALSE
    assert Environment("cuda", None).platform_truth(test) is Truth.UNKNOWN
    assert Environment("ascend", None).platform_truth(cst.parse_expression("current_platform.is_cuda")) is Truth.UNKNOWN
