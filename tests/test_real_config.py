"""The model's configuration decides the walk, on the released 0.30 pair with transformers 5.23.0's
configuration classes (read statically): the four cases of issue 14, and what a report says decided it."""

from __future__ import annotations

import json

import pytest

from fusion_analyze.analysis.pipeline import Options, analyze_in, render

from .conftest import FIXTURES, validate_report
from .layers import after_first

LLAMA31 = FIXTURES / "configs" / "llama-3.1-8b.json"


def _ops(a, pred):
    """The ops of what every layer after the first runs (the first layer, walked apart, runs the same module)."""
    return [op for op in after_first(a.walk.ops) if pred(op)]


def test_llama31_rope_type_builds_llama3_rope_which_runs_native_on_ascend(session, hf):
    a = analyze_in(session, str(LLAMA31), Options(hf_root=hf))
    assert a.location.architecture == "LlamaForCausalLM"
    rope = _ops(a, lambda op: op.path.endswith("rotary_emb"))
    assert len(rope) == 1 and rope[0].layer_class == "Llama3RotaryEmbedding" and rope[0].condition is None
    assert "ascend_class" not in rope[0].attrs and "forward_native" in rope[0].attrs["native"]  # no Ascend class by that name
    assert not any("rotary" in k.name for k in rope[0].kernels)
    assert a.report["configuration"]["decided_by"] == "llama-3.1-8b.json + defaults of transformers 5.23.0's LlamaConfig"
    validate_report(a.report)


def test_qwen2_qk_norm_follows_the_getattr_default_of_a_checkpoint_config(session, hf):
    """Qwen2.5-7B-Instruct's published config.json (huggingface.co/Qwen/Qwen2.5-7B-Instruct) has no qk_norm:
    getattr's default False holds, so no q/k norm is built or claimed."""
    a = analyze_in(session, str(FIXTURES / "configs" / "qwen2.5-7b-instruct.json"), Options(hf_root=hf))
    assert not _ops(a, lambda op: "q_norm" in op.path or "k_norm" in op.path)
    assert not [o for o in a.opportunities if o.scenario in ("qknorm_rope", "qkv_split_norm_rope")]
    assert a.report["configuration"]["class"]["class"] == "Qwen2Config"
    assert a.report["unknown_callees"] == []


def test_class_defaults_alone_do_not_decide_an_undeclared_key(session, hf):
    """Qwen2Config does not declare qk_norm, and a checkpoint may carry a key its class does not declare
    (transformers keeps extra keys): with the class defaults alone the norms stay listed with their condition."""
    a = analyze_in(session, "Qwen2ForCausalLM", Options(hf_root=hf))
    q = _ops(a, lambda op: op.path.endswith("q_norm"))
    assert q and all("self.qk_norm" in (op.condition or "") for op in q)
    for o in a.opportunities:
        if o.scenario == "qknorm_rope":
            assert any("qk_norm" in c for c in o.conditions)  # never claimed without the condition


def test_without_a_configuration_qk_norm_stays_a_condition(session):
    a = analyze_in(session, "Qwen2ForCausalLM", Options(hf_root=None))
    if a.configuration.cls is not None:
        pytest.skip("an installed transformers gives the defaults")
    q = _ops(a, lambda op: op.path.endswith("q_norm"))
    assert q and all("self.qk_norm" in (op.condition or "") for op in q)  # listed with its condition, not claimed
    assert a.report["configuration"]["decided_by"] == "no configuration: branches listed as alternatives"


def test_an_activation_module_passed_to_a_helper_is_that_module(session, hf, real_tree):
    a = analyze_in(session, "LlamaForCausalLM", Options(hf_root=hf))
    act = _ops(a, lambda op: op.path == "model.layers.mlp.act_fn")
    assert len(act) == 1 and act[0].kind == "silu_mul" and act[0].layer_class == "SiluAndMul"
    assert act[0].file == "vllm/model_executor/layers/fusion/fused_act_quant.py"  # where `return act_fn(x)` calls it
    src = (real_tree("vllm==0.30.0") / act[0].file).read_text(encoding="utf-8").splitlines()
    assert src[act[0].line - 1].strip() == "return act_fn(x)"
    assert [k.name for k in act[0].kernels] == ["torch_npu.npu_swiglu"]
    scen = {o.scenario: o.status for o in a.opportunities}
    assert scen["silu_mul"] == "fused_by_ascend_kernel" and scen["gate_up_merge"] == "fused_in_model"


def test_activation_registry_keyed_by_the_config_string(session, hf):
    gemma = analyze_in(session, "Gemma3ForCausalLM", Options(hf_root=hf))  # hidden_activation: gelu_pytorch_tanh
    act = _ops(gemma, lambda op: op.path == "model.layers.mlp.act_fn")
    assert [op.layer_class for op in act] == ["GeluAndMul"]
    assert "silu_mul" not in {o.scenario for o in gemma.opportunities}  # no false npu_swiglu claim
    gpt2 = analyze_in(session, "GPT2LMHeadModel", Options(hf_root=hf))  # activation_function: gelu_new
    assert [op.layer_class for op in _ops(gpt2, lambda op: op.path == "transformer.layers.mlp.act")] == ["NewGELU"]


def test_unknown_key_lists_each_registry_entry_with_the_value_that_selects_it(session):
    a = analyze_in(session, "GPT2LMHeadModel", Options(hf_root=None))
    if a.configuration.cls is not None:
        pytest.skip("an installed transformers gives the defaults")
    alt = next(x for x in a.walk.alternatives if x["path"] == "transformer.layers.mlp.act")
    assert ("NewGELU", "config.activation_function == 'gelu_new'") in alt["others"]


def test_bad_configuration_is_one_line_and_exit_2(run, tmp_path, hf, real_tree):
    vllm, ascend = str(real_tree("vllm==0.30.0")), str(real_tree("vllm-ascend==0.30.0rc2"))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 8, "num_attention_heads": 2}))
    r = run("LlamaForCausalLM", "--vllm-root", vllm, "--ascend-root", ascend, "--config", str(other), "-o", str(tmp_path / "a.md"))
    assert r.exit_code == 2 and "not LlamaForCausalLM" in r.output and "Traceback" not in r.output
    typed = tmp_path / "typed.json"
    typed.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": "32"}))
    r = run("LlamaForCausalLM", "--vllm-root", vllm, "--ascend-root", ascend, "--config", str(typed), "-o", str(tmp_path / "b.md"))
    assert r.exit_code == 2 and "num_hidden_layers" in r.output
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    r = run("LlamaForCausalLM", "--vllm-root", vllm, "--ascend-root", ascend, "--config", str(broken), "-o", str(tmp_path / "c.md"))
    assert r.exit_code == 2 and "not valid JSON" in r.output


def test_a_transformers_tree_without_the_class_says_the_defaults_are_unknown(run, tmp_path, real_tree):
    fake = tmp_path / "hf"
    (fake / "transformers" / "models" / "auto").mkdir(parents=True)
    (fake / "transformers" / "__init__.py").write_text('__version__ = "0.0.1"\n')
    out = tmp_path / "q.json"
    r = run("Qwen2ForCausalLM", "--vllm-root", str(real_tree("vllm==0.30.0")), "--ascend-root",
            str(real_tree("vllm-ascend==0.30.0rc2")), "--hf-root", str(fake), "--format", "json", "-o", str(out))
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["configuration"]["class"] is None and doc["configuration"]["decided_by"].startswith("no configuration")


def test_all_takes_hf_root(run, tmp_path, hf, real_tree):
    out = tmp_path / "all"
    r = run("all", "--vllm-root", str(real_tree("vllm==0.30.0")), "--ascend-root", str(real_tree("vllm-ascend==0.30.0rc2")),
            "--hf-root", hf, "--only", "Qwen2ForCausalLM", "-o", str(out), "--no-cache")
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "Qwen2ForCausalLM.json").read_text(encoding="utf-8"))
    assert doc["configuration"]["class"]["class"] == "Qwen2Config"
    header = [ln for ln in (out / "Qwen2ForCausalLM.md").read_text(encoding="utf-8").splitlines() if "决定走查的配置: " in ln]
    assert header and "transformers 5.23.0" in header[0] and "Qwen2Config" in header[0]


def test_a_decided_choice_lists_what_another_config_value_builds(session, hf):
    """Llama-3.1's rope_type decides get_rope; the report still says what yarn (or default) would build, on
    Ascend, with the test that selects it and its line."""
    a = analyze_in(session, str(LLAMA31), Options(hf_root=hf))
    (alt,) = [x for x in a.report["alternatives"] if x["path"] == "model.layers.self_attn.rotary_emb"]
    assert alt["decided"] and alt["chosen"] == "Llama3RotaryEmbedding"
    yarn = [c for c in alt["choices"] if c["class"] == "YaRNScalingRotaryEmbedding"]
    assert yarn and yarn[0]["runs"] == "AscendYaRNRotaryEmbedding"
    assert {"key": "scaling_type", "value": "yarn"} in yarn[0]["selected_by"]
    assert yarn[0]["file"] == "vllm/model_executor/layers/rotary_embedding/__init__.py"
    line = (session.vllm.root / yarn[0]["file"]).read_text().splitlines()[yarn[0]["line"] - 1]
    assert "YaRNScalingRotaryEmbedding(" in line
    assert not any("not (scaling_type ==" in c["condition"] for c in alt["choices"])  # implied by its own test
    default = [c for c in alt["choices"] if c["class"] == "RotaryEmbedding"]
    assert default and default[0]["runs"] == "AscendRotaryEmbedding"
    validate_report(a.report)


def test_a_registry_choice_lists_the_other_entries_with_their_key(session, hf):
    a = analyze_in(session, "Gemma3ForCausalLM", Options(hf_root=hf))
    (alt,) = [x for x in a.report["alternatives"] if x["path"] == "model.layers.mlp.act_fn"]
    assert alt["decided"] and alt["chosen"] == "GeluAndMul"
    silu = [c for c in alt["choices"] if c["class"] == "SiluAndMul"]
    assert silu and silu[0]["runs"] == "AscendSiluAndMul"
    assert silu[0]["selected_by"][0] == {"key": "config.hidden_activation", "value": "silu"}
    md = render(a, "md", lang="en")
    # decided by the configuration: one line naming the key, the other classes in the JSON (issue 35)
    assert (f"`model.layers.mlp.act_fn`: `GeluAndMul` (decided by the configuration (config.hidden_activation); "
            f"{len(alt['choices'])} other classes for other values") in md


def test_a_registry_entry_outside_the_trees_is_its_leaf_op(session, hf):
    """OPTConfig's activation_function "relu" selects `lambda: nn.ReLU()` in vLLM's activation registry
    (get_act_fn): a class outside the trees, built through a factory and a registry, is still the leaf op its
    taxonomy entry names, not an unknown op."""
    a = analyze_in(session, "OPTForCausalLM", Options(hf_root=hf))
    (act,) = _ops(a, lambda op: op.path.endswith("activation_fn"))
    assert (act.kind, act.layer_class, act.line) == ("relu", "ReLU", 189)
    assert not [u for u in a.report["unknown_callees"] if u["name"] == "activation_fn"]


@pytest.mark.parametrize("arch,stem,cfg,expect", [
    # vLLM's Qwen3NextConfig: `layer_types` built in __init__ when the checkpoint gives none, every fourth full
    ("Qwen3NextForCausalLM", "qwen3_next", {"model_type": "qwen3_next", "num_hidden_layers": 8},
     ["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3 + ["full_attention"]),
    # vLLM's Qwen3.5-MoE text config: the interval from `kwargs.get("full_attention_interval", 4)`
    ("Qwen3_5MoeForCausalLM", "qwen3_5", {"model_type": "qwen3_5_moe_text", "num_hidden_layers": 6,
                                          "full_attention_interval": 3},
     ["linear_attention", "linear_attention", "full_attention"] * 2),
    # transformers' Gemma3TextConfig (__post_init__): `self._sliding_window_pattern = kwargs.get(...)` first
    ("Gemma3ForCausalLM", "gemma3", {"model_type": "gemma3_text", "num_hidden_layers": 7, "sliding_window_pattern": 3},
     ["sliding_attention", "sliding_attention", "full_attention"] * 2 + ["sliding_attention"]),
    # transformers' Gemma2Config: every second layer full
    ("Gemma2ForCausalLM", "gemma2", {"model_type": "gemma2", "num_hidden_layers": 4},
     ["sliding_attention", "full_attention"] * 2),
])
def test_layer_types_derived_by_the_configuration_class(session, hf, tmp_path, arch, stem, cfg, expect):
    from fusion_analyze.config.model_config import load_facts

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"architectures": [arch], **cfg}), encoding="utf-8")
    facts = load_facts(arch, stem, [session.vllm, session.hf_tree(hf)], str(path))
    assert facts.attr("layer_types").value == expect
    # what the checkpoint says wins
    path.write_text(json.dumps({"architectures": [arch], **cfg, "layer_types": ["x"] * len(expect)}), encoding="utf-8")
    assert load_facts(arch, stem, [session.vllm, session.hf_tree(hf)], str(path)).attr("layer_types").value == ["x"] * len(expect)


def test_a_parameter_the_init_rebinds_is_derived_not_its_default(session, hf, tmp_path):
    """vLLM's Qwen3NextConfig: `if mlp_only_layers is None: mlp_only_layers = []` then `self.mlp_only_layers =
    mlp_only_layers`: the field is [] (the parameter's default None is not the field's), given or not."""
    from fusion_analyze.config.model_config import load_facts

    for given in ({}, {"mlp_only_layers": None}):
        path = tmp_path / "config.json"
        path.write_text(json.dumps({"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", **given}))
        facts = load_facts("Qwen3NextForCausalLM", "qwen3_next", [session.vllm, session.hf_tree(hf)], str(path))
        assert facts.attr("mlp_only_layers").value == []
