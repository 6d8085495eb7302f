"""What a called function's tests read at its call (fixtures/mini .../models/grouped.py): an argument read where
the caller wrote it (`score_func=self.score_func`, a constructor argument from the configuration), a parameter
the call leaves at its default (`use_fp8: bool = False`) through a decision function's result kept in a local,
and an own forward that hands on to its base's dispatch only for the values its instance was not built with."""

from __future__ import annotations

import json

from fusion_analyze.analysis.pipeline import Options, analyze

from .conftest import MINI

CONFIG = {"architectures": ["GroupedForCausalLM"], "model_type": "grouped", "hidden_size": 64,
          "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "intermediate_size": 128,
          "vocab_size": 256, "rms_norm_eps": 1e-6, "hidden_act": "silu",
          "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
          "norm_groups": 2, "num_experts": 8, "score_func": "sigmoid", "top_k": 2}


def _grouped(tmp_path, **changes):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**CONFIG, **changes}), encoding="utf-8")
    return analyze("GroupedForCausalLM", str(MINI), str(MINI), None, options=Options(config=str(path)), cache=False)


def _layer(a):
    return [op for op in a.walk.ops if op.section == "layer"]


def test_argument_from_the_constructor_decides_the_callees_test(tmp_path):
    """`route(logits, score_func=self.score_func, ...)`: the router was built with `config.score_func`; with
    "sigmoid" only the sigmoid runs, with "softmax" only the softmax, and the test is left undecided nowhere."""
    for func, other in (("sigmoid", "softmax"), ("softmax", "sigmoid")):
        a = _grouped(tmp_path, score_func=func)
        kinds = [op.kind for op in _layer(a)]
        assert func in kinds and other not in kinds, kinds
        assert not [e for e in a.report["undecided"] if "score_func" in e["test"]], a.report["undecided"]
        assert not [op for op in a.walk.ops if "score_func" in (op.condition or "")]


def test_a_default_the_call_leaves_decides_through_a_local(tmp_path):
    """`quant_dtype = _quant_dtype(use_fp8=use_fp8)` with `use_fp8` left at its default False is None, so
    `quantize_input`'s `quant_dtype == "fp8"` is false: no fp8 quantisation kernel on any path."""
    a = _grouped(tmp_path)
    names = [k.name for op in a.walk.ops for k in op.kernels]
    assert "torch.ops._C.dynamic_scaled_fp8_quant" not in names, names
    assert not [e for e in a.report["undecided"] if "quant_dtype" in e["test"]], a.report["undecided"]


def test_own_forward_hands_on_to_the_dispatch_only_where_its_values_say(tmp_path):
    """GroupedRMSNorm.forward calls `super().forward(...)` (CustomOp's dispatch: forward_native on Ascend, no
    replacement registered under its name) only `if self.n_groups == 1`. Built with 2 groups its own code runs:
    no native ops nested under it, its own kernel only. Built with 1 group the dispatch runs."""
    a = _grouped(tmp_path)
    norms = [op for op in _layer(a) if op.layer_class == "GroupedRMSNorm"]
    assert norms and all("native" not in op.attrs for op in norms), [op.attrs for op in norms]
    assert not [op for op in _layer(a) if op.attrs.get("native_of", "").endswith("(GroupedRMSNorm)")]
    assert {k.name for op in norms for k in op.kernels} == {"torch.ops._C.rms_norm"}
    one = _grouped(tmp_path, norm_groups=1)
    norms = [op for op in _layer(one) if op.layer_class == "GroupedRMSNorm"]
    assert norms and all("native" in op.attrs for op in norms), [op.attrs for op in norms]
    assert [op for op in _layer(one) if op.attrs.get("native_of", "").endswith("(GroupedRMSNorm)")]


def test_an_undecided_test_on_parameters_says_what_the_caller_bound(tmp_path):
    """classify with the walk's reads (Walker.test_reads): a test on a parameter is read as a test on the code the
    caller bound it to. A `self.x` argument computed from a configuration field the configuration does not give
    waits on that field; an engine setting is the tool's debt; code no rule names stays not traced, saying what
    it reads."""
    from fusion_analyze.config.model_config import ConfigFacts
    from fusion_analyze.status.waits import classify

    facts = ConfigFacts({"hidden_size": 8, "model_type": "x"}, "t", complete=False)
    reads = {'score_func == "softmax"': ["self.score_func"], "width > 4": ["config.hidden_size"],
             "scale is None": ["a1q_scale"], "dst == torch.int8": ["to_dtype(self.vllm_config.cache_config.cache_dtype)"]}.get
    sources = {"score_func": [["score_func", "config.score_func"]]}

    def run(test):
        return classify(test, test, facts, None, lambda name: sources.get(name, []), reads)

    open_ = run('score_func == "softmax"')
    assert open_[:2] == ("config_field", False) and "score_func" in open_[2] and "`self.score_func`" in open_[2], open_
    assert run("width > 4")[:2] == ("config_field", True)
    assert run("dst == torch.int8")[:2] == ("engine_argument", True)
    traced = run("scale is None")
    assert traced[:2] == ("not_traced", None) and "`a1q_scale`" in traced[2]
    assert run("other")[2] == "a local value the walk did not trace to its inputs"


def test_the_walk_records_what_a_parameter_test_reads(tmp_path):
    """The router's `score_func` with no such field in the configuration: `route`'s test stays open, and it
    waits on the configuration field its caller's argument reads (`self.score_func`, built from
    `config.score_func`), not on "a local value"."""
    cfg = dict(CONFIG)
    del cfg["score_func"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    a = analyze("GroupedForCausalLM", str(MINI), str(MINI), None, options=Options(config=str(path)), cache=False)
    entry = next(e for e in a.report["undecided"] if e["test"] == 'score_func == "softmax"')
    assert (entry["waits_on"], entry["given"]) == ("config_field", False), entry
    assert "score_func" in entry["why"], entry


def test_an_attribute_a_load_hook_assigns_again_is_not_read_from_init(tmp_path):
    """GroupedRouter's `process_weights_after_loading` assigns `self.fp32_logits` again from the weights' dtype:
    __init__'s False is not what the forward reads, so `if self.fp32_logits:` stays open (its cast walked under
    it); `self.scaled` it only sets to the False __init__ gave stays False (no multiply)."""
    a = _grouped(tmp_path)
    router = [op for op in _layer(a) if op.file.endswith("grouped.py") and op.scope == "GroupedRouter.forward"]
    casts = [op for op in router if op.kind == "cast"]
    assert casts and all("self.fp32_logits" in (op.condition or "") for op in casts), [(op.kind, op.condition) for op in router]
    assert not [op for op in router if op.kind == "mul"], [(op.kind, op.line) for op in router]
