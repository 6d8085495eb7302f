"""The configuration decides the walk, on a small tree written here in vLLM's idioms: a field read with
`getattr(config, name, default)` and kept as `self.x`, an activation registry keyed by a config string, a
factory parameter's default, and a module handed to a helper. The same mechanism as on the real trees: no
code knows these names."""

from __future__ import annotations

import pytest

from fusion_analyze.config.model_config import ConfigClass, ConfigFacts
from fusion_analyze.walk.walker import Walker

from .conftest import tree_index

ACTIVATION = '''
from torch import nn


class SiluAndMul(nn.Module):
    def __init__(self, compile_native: bool = True):
        super().__init__()

    def forward(self, x):
        return x


class GeluAndMul(nn.Module):
    def forward(self, x):
        return x


class LazyDict(dict):
    pass


_REGISTRY = LazyDict({
    "gelu": lambda: GeluAndMul(),
    "silu": lambda: SiluAndMul(),
})


def get_act_and_mul_fn(name: str, *, compile_native: bool = True):
    name = name.lower()
    if not compile_native and name in ("silu", "swish"):
        return SiluAndMul(compile_native=False)
    return _REGISTRY[name]


def apply_act(act_fn, x):
    return act_fn(x)
'''

MODEL = '''
import torch
from torch import nn

from vllm.model_executor.layers.activation import apply_act, get_act_and_mul_fn


class RMSNorm(nn.Module):
    def forward(self, x):
        return x


class Block(nn.Module):
    def __init__(self, config, qk_norm: bool = False):
        super().__init__()
        self.qk_norm = qk_norm
        if self.qk_norm:
            self.q_norm = RMSNorm()
        self.act_fn = get_act_and_mul_fn(config.hidden_act)

    def forward(self, x):
        if self.qk_norm:
            x = self.q_norm(x)
        return apply_act(self.act_fn, x)


class ToyForCausalLM(nn.Module):
    def __init__(self, *, vllm_config):
        super().__init__()
        config = vllm_config.model_config.hf_config
        self.block = Block(config, qk_norm=getattr(config, "qk_norm", False))

    def forward(self, x):
        return self.block(x)
'''


@pytest.fixture
def index(tmp_path):
    return tree_index(tmp_path, {"model_executor/layers/activation.py": ACTIVATION,
                                 "model_executor/models/toy.py": MODEL}, backend="cuda")


def _walk(index, facts):
    model = index.lookup("vllm.model_executor.models.toy", "ToyForCausalLM")
    from fusion_analyze.semantics.environment import Environment

    return Walker(index, [], Environment(index.backend, index, config=facts)).walk_model(model)


def _cls(**fields) -> ConfigClass:
    return ConfigClass("ToyConfig", "toy_config.py", 1, "transformers", "0", dict(fields), set(fields))


def test_config_values_decide_construction_registry_and_branches(index):
    result = _walk(index, ConfigFacts({"hidden_act": "GELU"}, "config.json", complete=True))
    layers = [(op.path, op.layer_class, op.condition) for op in result.ops]
    assert ("block.act_fn", "GeluAndMul", None) in layers  # the registry entry the (lowered) string selects
    assert not any("q_norm" in op.path for op in result.ops)  # getattr default False: not built, not called
    # what another value of the key would select, with where; not the branch a parameter default rules out
    (alt,) = result.alternatives
    assert alt["decided"] and alt["path"] == "block.act_fn" and alt["chosen"] == "GeluAndMul"
    assert [(c["class"], c["condition"], c["selected_by"]) for c in alt["choices"]] == [
        ("SiluAndMul", "config.hidden_act == 'silu'", [{"key": "config.hidden_act", "value": "silu"}])]
    assert alt["choices"][0]["file"] == "vllm/model_executor/layers/activation.py" and alt["choices"][0]["line"] == 24


def test_a_declared_field_wins_over_the_getattr_default(index):
    result = _walk(index, ConfigFacts(None, None, cls=_cls(hidden_act="silu", qk_norm=True)))
    assert [op.layer_class for op in result.ops if op.path == "block.q_norm"] == ["RMSNorm"]
    act = [op for op in result.ops if op.path == "block.act_fn"]
    # compile_native keeps its default (True): the `not compile_native` return is not taken
    assert [(op.layer_class, op.kind) for op in act] == [("SiluAndMul", "silu_mul")]
    assert act[0].file == "vllm/model_executor/layers/activation.py"  # called inside the helper it was passed to


def test_unknown_values_stay_conditions_and_alternatives(index):
    result = _walk(index, None)
    q = [op for op in result.ops if op.path == "block.q_norm"]
    assert q and all("self.qk_norm" in op.condition for op in q)
    alt = next(a for a in result.alternatives if a["path"] == "block.act_fn")
    assert sorted([tuple(o) for o in alt["others"]] + [(alt["chosen"], alt["condition"])]) == [
        ("GeluAndMul", "config.hidden_act == 'gelu'"), ("SiluAndMul", "config.hidden_act == 'silu'")]


def test_config_methods_and_properties_run_over_the_fields():
    """`config.is_kda_layer(i)` / `config.is_moe`: a method or property of the configuration class, its
    statements run over the configuration's values (config/derive.py run_method); what they do not decide
    stays unknown."""
    import ast

    from fusion_analyze.config.model_config import _read_body
    from fusion_analyze.semantics.values import Known, Unknown

    src = '''
class ToyConfig:
    def __init__(self, linear_attn_config=None, num_experts=None, **kwargs):
        self.linear_attn_config = linear_attn_config
        self.num_experts = num_experts

    @property
    def is_moe(self):
        return self.num_experts is not None

    def is_kda_layer(self, layer_idx: int):
        return self.linear_attn_config is not None and (layer_idx + 1) in self.linear_attn_config["kda_layers"]

    def is_mla_layer(self, layer_idx):
        return self.is_moe and not self.is_kda_layer(layer_idx)

    def undecided(self, i):
        for x in range(i):
            return x
'''
    cls = ConfigClass("ToyConfig", "toy.py", 1, "vllm", "0")
    _read_body(ast.parse(src).body[0], cls)
    facts = ConfigFacts({"linear_attn_config": {"kda_layers": [1, 2, 3]}, "num_experts": 8}, "toy", True, cls)
    assert facts.attr("is_moe") == Known(True)
    assert [facts.method("is_kda_layer", (i,)) for i in range(4)] == [Known(True)] * 3 + [Known(False)]
    assert facts.method("is_mla_layer", (3,)) == Known(True) and facts.method("is_mla_layer", (0,)) == Known(False)
    assert isinstance(facts.method("undecided", (2,)), Unknown)
    partial = ConfigFacts({"linear_attn_config": {}}, "toy", True, cls)
    assert isinstance(partial.method("is_kda_layer", (0,)), Unknown)  # `kda_layers` not given: not decided
    assert partial.attr("is_moe") == Known(False)  # num_experts: the class default, None


def test_a_configuration_rebuilt_from_another_ones_dict():
    """`FlashConfig(**hf_config.__dict__)` (LongCat-Flash): the fields of the first configuration's `__dict__`
    carry over (an alias of its attribute_map, a property are not in it), by name into the second class's
    __init__ parameters, the rest through its **kwargs to transformers' base, which sets them as attributes
    (derive.py base_init); the class's own defaults and statements apply, `hasattr(self, "x")` included. What
    the first one may hold but does not know stays unknown."""
    import ast

    from fusion_analyze.config.model_config import _read_body
    from fusion_analyze.semantics.values import Known, Unknown

    hf_src = '''
class HubConfig:
    attribute_map = {"intermediate_size": "ffn_hidden_size", "moe_intermediate_size": "expert_ffn_hidden_size"}
    hidden_size: int = 6144
    ffn_hidden_size: int = 12288
    expert_ffn_hidden_size: int = 2048
    q_lora_rank: int = 1536
    num_layers: int = 28

    @property
    def num_hidden_layers(self):
        return 2 * self.num_layers
'''
    model_src = '''
class RebuiltConfig(PretrainedConfig):
    moe_intermediate_size: int

    def __init__(self, hidden_size=4096, intermediate_size=8192, num_layers=28, num_hidden_layers=None,
                 q_lora_rank=512, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.q_lora_rank = q_lora_rank
        self.num_hidden_layers = num_hidden_layers if num_hidden_layers is not None else num_layers
        self.intermediate_size = self.ffn_hidden_size if hasattr(self, "ffn_hidden_size") else intermediate_size
        if hasattr(self, "moe_intermediate_size"):
            self.moe_intermediate_size = self.moe_intermediate_size
        elif hasattr(self, "expert_ffn_hidden_size"):
            self.moe_intermediate_size = self.expert_ffn_hidden_size
        else:
            self.moe_intermediate_size = self.intermediate_size
'''
    hub = ConfigClass("HubConfig", "hub.py", 1, "transformers", "5")
    _read_body(ast.parse(hf_src).body[0], hub)
    model = ConfigClass("RebuiltConfig", "model.py", 1, "vllm", "0")
    _read_body(ast.parse(model_src).body[0], model)
    given = ConfigFacts({"hidden_size": 7168, "q_lora_rank": 1024}, "checkpoint", True, hub).rebuilt(model)
    assert given.attr("hidden_size") == Known(7168) and given.attr("q_lora_rank") == Known(1024)
    assert given.attr("intermediate_size") == Known(12288)  # hasattr(self, "ffn_hidden_size"): handed on
    assert given.attr("moe_intermediate_size") == Known(2048)  # the alias is not in __dict__: the elif runs
    assert given.attr("num_hidden_layers") == Known(28)  # the property is not in __dict__: num_layers
    assert given.has("ffn_hidden_size") == Known(True) and given.has("q_lora_rank") == Known(True)
    assert given.has("n_routed_experts") == Known(False)  # a whole config.json lacks it
    # the hub class's defaults alone (a configuration not given): a checkpoint may carry more fields
    defaults = ConfigFacts({}, None, False, hub).rebuilt(model)
    assert defaults.attr("q_lora_rank") == Known(1536) and defaults.attr("moe_intermediate_size") == Known(2048)
    assert isinstance(defaults.has("n_routed_experts"), Unknown)
    # nothing known of the first configuration: the second one's defaults are not taken for its fields
    blind = ConfigFacts({}, None, False, None).rebuilt(model)
    assert isinstance(blind.attr("q_lora_rank"), Unknown) and isinstance(blind.attr("intermediate_size"), Unknown)
