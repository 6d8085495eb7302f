"""Construction idioms that decide tests on the configuration a model gave, on a small tree written here in
vLLM's idioms (the real cases are in test_real_given_decided.py): locals unpacked from a helper's tuple
(Granite SWA's `granite_layer_attn_params`), a dict literal that spreads a known dict, a per-layer configuration
getter the configuration class does not have (NemotronH's `getattr(config, "get_..._for_layer", None)`), a list
filled in a loop under a test on the loop's index (Zamba2's shared attention blocks), and what a method's test
waits on where it computes with a configuration field its class leaves None (DeepSeek-V2's top_k)."""

from __future__ import annotations

import libcst as cst
import pytest

from fusion_analyze.config.model_config import ConfigClass, ConfigFacts
from fusion_analyze.semantics.environment import Environment
from fusion_analyze.semantics.evaluator import Evaluator
from fusion_analyze.semantics.scope import Scope
from fusion_analyze.semantics.values import Known, OneOf
from fusion_analyze.status.waits import classify
from fusion_analyze.walk.construction.constructor import NONE_OPERAND_SOURCE
from fusion_analyze.walk.walker import Walker

from .conftest import tree_index

MODEL = '''
import torch
from torch import nn


def _layer_params(config):
    norm = getattr(config, "norm_flag", True)
    width = config.hidden_size if norm else 0
    return width, norm


class Expert(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.fc = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, x):
        return self.fc(x)


class RMSNorm(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x):
        return x * self.weight


class Block(nn.Module):
    def __init__(self, config, num_blocks):
        super().__init__()
        width, norm = _layer_params(config)
        if norm and width > 0:
            self.pre = Expert(config)
        else:
            self.pre = None
        get_layer_config = getattr(config, "get_toy_config_for_layer", None)
        layer_config = get_layer_config(0) if get_layer_config else config
        if layer_config.n_shared is None or layer_config.n_shared == 0:
            self.shared = None
        else:
            self.shared = Expert(layer_config)
        self.experts = nn.ModuleList([])
        for block_idx in range(num_blocks):
            if block_idx % config.mem_blocks == 0:
                expert = RMSNorm(config.hidden_size)
            else:
                expert = nn.Identity()
            self.experts.append(expert)

    def forward(self, x, idx):
        if self.pre is not None:
            x = self.pre(x)
        if self.shared is not None:
            x = x + self.shared(x)
        return self.experts[idx](x)


class ToyForCausalLM(nn.Module):
    def __init__(self, *, vllm_config):
        super().__init__()
        config = vllm_config.model_config.hf_config
        ids = [i for i, kind in enumerate(config.kinds) if kind == "hybrid"]
        self.block = Block(config, len(ids))

    def forward(self, x):
        return self.block(x, 0)
'''


@pytest.fixture
def index(tmp_path):
    return tree_index(tmp_path, {"model_executor/models/toy.py": MODEL}, backend="cuda")


def _walk(index, facts):
    model = index.lookup("vllm.model_executor.models.toy", "ToyForCausalLM")
    return Walker(index, [], Environment(index.backend, index, config=facts)).walk_model(model)


def _cls(**fields) -> ConfigClass:
    cls = ConfigClass("ToyConfig", "toy_config.py", 1, "transformers", "0", dict(fields), set(fields))
    cls.bases = ("PreTrainedConfig",)
    cls.class_attrs = set(fields)
    return cls


_DEFAULTS = dict(hidden_size=8, n_shared=1, mem_blocks=1, kinds=["mamba", "hybrid", "mamba", "hybrid", "hybrid"])


def _ops(result) -> dict:
    return {op.path: op for op in result.ops}


def test_unpacked_helper_items_a_configuration_getter_and_a_loop_index_decide(index):
    """`width, norm = _layer_params(config)`: each name is item k of the helper's return, so `if norm and
    width > 0:` is decided (a whole config.json gives `norm_flag`); `getattr(config, "get_toy_config_for_layer", None)` of a name the
    class gives no attribute is data or None, never a callable, so `layer_config` is the configuration and its
    `n_shared` (1) builds the shared expert under no test; each list element is an RMSNorm where
    `block_idx % config.mem_blocks == 0` holds for every index the loop takes (mem_blocks 1), and the list's
    length comes from a comprehension over `enumerate(config.kinds)`."""
    facts = ConfigFacts({**_DEFAULTS, "norm_flag": True}, "config.json", complete=True, cls=_cls(**_DEFAULTS))
    ops = _ops(_walk(index, facts))
    assert ops["block.pre.fc"].condition is None, [(o.path, o.condition) for o in ops.values()]
    assert "block.shared.fc" in ops and ops["block.shared.fc"].condition is None, [(o.path, o.condition) for o in ops.values()]
    expert = [op for path, op in ops.items() if path.startswith("block.experts")]
    assert expert and all(op.condition is None for op in expert), [(o.path, o.condition) for o in expert]
    # two memory blocks: the elements differ by index, the test stays
    two = ConfigFacts({**_DEFAULTS, "norm_flag": True, "mem_blocks": 2}, "config.json", complete=True,
                      cls=_cls(**_DEFAULTS))
    expert = [op for path, op in _ops(_walk(index, two)).items() if path.startswith("block.experts")]
    assert any("block_idx % config.mem_blocks == 0" in (op.condition or "") for op in expert)


def test_a_getter_the_class_has_is_not_taken_for_data(index):
    """Where the configuration's class has the method, or is not a direct subclass of transformers' base (a
    parent may define it), the getter may be a callable: the per-layer configuration is not decided."""
    cls = _cls(**_DEFAULTS)
    cls.class_attrs = set(_DEFAULTS) | {"get_toy_config_for_layer"}
    ops = _ops(_walk(index, ConfigFacts(None, None, cls=cls)))
    assert any("n_shared" in (op.condition or "") for op in ops.values()), [(o.path, o.condition) for o in ops.values()]
    derived = _cls(**_DEFAULTS)
    derived.bases = ("OtherToyConfig",)
    ops = _ops(_walk(index, ConfigFacts(None, None, cls=derived)))
    assert any("n_shared" in (op.condition or "") for op in ops.values())


def test_a_dict_spread_and_loop_values(index):
    """`{**d, "k": v}` keeps the known items of `d`; a loop's name read where no iteration is told apart is one
    of its values, and arithmetic and comparisons over them are decided where every value agrees."""
    module = index.get("vllm.model_executor.models.toy")
    ev = Evaluator(Environment("cuda", index))
    scope = Scope(module=module, values={"d": Known({"rope_type": "default", "theta": 1})})
    got = ev.infer(cst.parse_expression('{**d, "theta": 2}'), scope)
    assert got == Known({"rope_type": "default", "theta": 2})
    scope = Scope(module=module, loops={"i": (cst.parse_expression("range(3)"), None)})
    assert ev.infer(cst.parse_expression("i"), scope) == OneOf((Known(0), Known(1), Known(2)))
    assert ev.infer(cst.parse_expression("i % 1 == 0"), scope) == Known(True)
    assert ev.infer(cst.parse_expression("i >= 0"), scope) == Known(True)
    assert not isinstance(ev.infer(cst.parse_expression("i % 2 == 0"), scope), Known)
    comp = ev.infer(cst.parse_expression('{k: i for i, k in enumerate(("a", "b"))}'), Scope(module=module))
    assert comp == Known({"a": 0, "b": 1})


def test_waits_on_a_field_left_none_that_a_method_computes_with():
    """`self.top_k > n` in a method left undecided where `self.top_k` holds None: Python raises there, so what
    runs holds the value a checkpoint gives for the field the class leaves None (NONE_OPERAND_SOURCE): the test
    waits on that field; a field stated null by a whole config.json is what the user gave."""
    marker = NONE_OPERAND_SOURCE.format("top_k ; config.num_experts_per_tok ; config")
    cls = _cls(num_experts_per_tok=None, hidden_size=8)
    e = classify("not self.is_fused(x)", "not self.is_fused(x)", ConfigFacts(None, None, cls=cls), None,
                 lambda name: [["self.top_k > x.shape[-1]", "top_k", "config.num_experts_per_tok", marker]])
    assert e[:2] == ("config_field", False) and "num_experts_per_tok" in e[2], e
    stated = ConfigFacts({"num_experts_per_tok": None, "hidden_size": 8}, "config.json", complete=True, cls=cls)
    e = classify("not self.is_fused(x)", "not self.is_fused(x)", stated, None,
                 lambda name: [["self.top_k > x.shape[-1]", "config.num_experts_per_tok", marker]])
    assert e[:2] == ("construction", True), e
