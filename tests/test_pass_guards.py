"""A graph pass's __init__ guards decided with the model's values (issue 14, item 4): on a pass written in the
test (the mechanism), then on the released 0.30 pair's QKNormRopeFusionPass with Qwen3 configurations."""

from __future__ import annotations

import json

import pytest

from fusion_analyze.passes.guards import decide_guards
from fusion_analyze.passes.ascend_passes import read_pass_module
from fusion_analyze.analysis.pipeline import Options, analyze_in
from fusion_analyze.analysis.session import Session
from fusion_analyze.config.model_config import ConfigFacts
from fusion_analyze.ir.ops import Op
from fusion_analyze.semantics.environment import Environment

from .conftest import FIXTURES, tree_index, validate_report

PASS = '''
import torch
from vllm.attention import Attention, get_layers_from_vllm_config

HAS_TRITON = _probe()


class NormPattern:
    def __init__(self, vllm_config, eps=1e-6):
        self.eps = eps

    def register(self, pm):
        def pattern(x, w):
            return torch.ops.npu.npu_rms_norm(x, w, self.eps)
        return pattern


class WidePattern(NormPattern):
    def register(self, pm):
        def pattern(x, w):
            return torch.ops.npu.npu_rms_norm(x, w, self.eps)
        return pattern


class NormFusionPass:
    def __init__(self, vllm_config):
        dtype = vllm_config.model_config.dtype
        if dtype not in (torch.bfloat16,):
            return
        layers = get_layers_from_vllm_config(vllm_config, Attention)
        layer = next(iter(layers.values()))
        epsilons = [1e-6, 1e-5]
        for eps in epsilons:
            if layer.head_size != 128:
                continue
            NormPattern(vllm_config, eps=eps).register(self)
        if HAS_TRITON:
            WidePattern(vllm_config).register(self)
'''


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    index = tree_index(tmp_path_factory.mktemp("pass"), {"compilation/norm_pass.py": PASS})
    (found,) = read_pass_module(index, "vllm.compilation.norm_pass", "ascend")
    return index, found


def _attention(head_size=None):
    values = {} if head_size is None else {"head_size": head_size}
    return Op("attn", "attention", "attn", "Attention", "m.py", 1, "L.forward", "model.layers.attn", "layer",
              attrs={"values": values})


def _pattern(found, name):
    return next(p for p in found.patterns if p.name == name)


def test_guards_on_the_way_to_each_registration(written):
    _index, found = written
    norm = _pattern(found, "NormPattern")
    assert [(g.text, g.stops) for g in norm.guards] == [("dtype not in (torch.bfloat16,)", True),
                                                        ("layer.head_size != 128", True)]
    assert norm.constants == (("eps", (1e-6, 1e-5)),)  # the loop runs over a local list
    wide = _pattern(found, "WidePattern")  # the `continue` guards only its loop; the enclosing `if` holds here
    assert [(g.text, g.stops) for g in wide.guards] == [("dtype not in (torch.bfloat16,)", True), ("HAS_TRITON", False)]
    assert wide.constants == ()


def test_a_guard_the_model_fails_is_named_with_the_value_it_read(written):
    index, found = written
    facts = ConfigFacts({"torch_dtype": "bfloat16"}, source="c.json", complete=True)
    (decided,) = decide_guards(Environment(index.backend, index, config=facts), [found], [_attention(head_size=256)])
    norm = _pattern(decided, "NormPattern")
    assert norm.failed == ("`layer.head_size != 128` holds (layer.head_size = 256) (vllm/compilation/norm_pass.py:34)",)
    assert _pattern(decided, "WidePattern").undecided == ("`HAS_TRITON` holds (vllm/compilation/norm_pass.py:37)",)


def test_guards_that_pass_vanish_and_unknown_values_stay_conditions(written):
    index, found = written
    (ok,) = decide_guards(Environment(index.backend, index, config=ConfigFacts({"dtype": "bfloat16"}, complete=True)), [found], [_attention(head_size=128)])
    assert _pattern(ok, "NormPattern").failed == () and _pattern(ok, "NormPattern").undecided == ()
    (unknown,) = decide_guards(Environment(index.backend, index, config=None), [found], [_attention()])  # no configuration: nothing is known
    assert _pattern(unknown, "NormPattern").failed == ()
    assert [u.rsplit(" (", 1)[0] for u in _pattern(unknown, "NormPattern").undecided] == [
        "`dtype not in (torch.bfloat16,)` is false", "`layer.head_size != 128` is false"]
    (fp16,) = decide_guards(Environment(index.backend, index, config=ConfigFacts({"torch_dtype": "float16"}, complete=True)), [found], [_attention(head_size=128)])
    assert _pattern(fp16, "NormPattern").failed[0].startswith("`dtype not in (torch.bfloat16,)` holds (dtype = torch.float16)")


def test_a_model_without_attention_layers_fails_a_guard_that_reads_one(written):
    index, found = written
    (decided,) = decide_guards(Environment(index.backend, index, config=ConfigFacts({"dtype": "bfloat16"}, complete=True)), [found], [])
    assert _pattern(decided, "NormPattern").undecided  # next() of no layers: not known, never guessed


# -- the released 0.30 pair ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def session(real_tree):
    return Session.open(str(real_tree("vllm==0.30.0")), str(real_tree("vllm-ascend==0.30.0rc2")))


def _qknorm(a):
    return next(o for o in a.opportunities if o.scenario == "qknorm_rope")


def _config(tmp_path, **changes):
    cfg = json.loads((FIXTURES / "configs" / "qwen3-0.6b.json").read_text())
    cfg.update(changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_qwen3_checkpoint_passes_the_qknorm_rope_guards(session):
    a = analyze_in(session, "Qwen3ForCausalLM", Options(config=str(FIXTURES / "configs" / "qwen3-0.6b.json")))
    o = _qknorm(a)
    assert str(o.status) == "fused_by_ascend_graph_pass"
    assert not [c for c in o.conditions if "head_size" in c or "dtype" in c or "eps" in c]  # decided: not printed
    attn = next(op for op in a.walk.ops if op.kind == "attention")
    assert attn.attrs["values"]["head_size"] == 128
    validate_report(a.report)


def test_qwen3_without_configuration_lists_the_guards_as_conditions(session):
    a = analyze_in(session, "Qwen3ForCausalLM", Options(hf_root=None))
    if a.configuration.cls is not None:
        pytest.skip("an installed transformers gives the defaults")
    o = _qknorm(a)
    assert str(o.status) == "fused_by_ascend_graph_pass"
    assert any(c.startswith("`dtype not in (torch.bfloat16,)` is false (vllm_ascend/compilation/passes/qknorm_rope_fusion_pass.py:")
               for c in o.conditions)
    assert any("eps is one of (1e-06, 1e-05)" in c for c in o.conditions)


@pytest.mark.parametrize("changes, reason", [
    ({"torch_dtype": "float16"}, "`dtype not in (torch.bfloat16,)` holds (dtype = torch.float16)"),
    ({"head_dim": 64}, "`layer.head_size != 128` holds (layer.head_size = 64)"),
    ({"rms_norm_eps": 1e-7}, "it is registered for eps in (1e-06, 1e-05) only"),
])
def test_qwen3_checkpoint_that_fails_a_guard_is_open_with_the_guard_named(session, tmp_path, changes, reason):
    a = analyze_in(session, "Qwen3ForCausalLM", Options(config=_config(tmp_path, **changes)))
    o = _qknorm(a)
    assert str(o.status) == "open"
    assert "QKNormRopeFusionPass would rewrite this, but does not register" in o.note and reason in o.note
    assert "qknorm_rope_fusion_pass.py:" in o.note


def test_a_float32_checkpoint_runs_in_the_platforms_first_dtype(session, tmp_path):
    a = analyze_in(session, "Qwen3ForCausalLM", Options(config=_config(tmp_path, torch_dtype="float32")))
    assert str(_qknorm(a).status) == "fused_by_ascend_graph_pass"  # NPUPlatform.supported_dtypes[0] is bfloat16


def test_the_devices_hardware_profile_is_read_from_the_tree(session):
    from fusion_analyze.passes.hardware import read_profiles

    profiles = read_profiles(session.index)
    assert {"A2", "A3", "_310P", "A5"} <= set(profiles)
    assert profiles["A2"].supports("GRAPH_QKV_NORM_ROPE_FUSION") and not profiles["A2"].supports("FUSED_MOE_COMPATIBILITY")
    assert profiles["_310P"].supports("FUSED_MOE_COMPATIBILITY")
    assert profiles["A3"].supports("MC2_FULLMESH_V2_COMM") and not profiles["A2"].supports("MC2_FULLMESH_V2_COMM")
    assert profiles["A2"].file == "vllm_ascend/device/hardware_profile.py"


def test_the_ascend_moe_factory_patch_builds_the_fused_gating_router(session):
    """vllm-ascend replaces FusedMoEFactory (patch_fused_moe.py); its router factory, decided with the device's
    profile and check_npu_moe_gating_top_k run on the model's arguments, builds AscendFusedTopKRouter."""
    from fusion_analyze.walk.walker import Walker
    from fusion_analyze.passes.hardware import read_profiles

    loc = session.resolver.resolve("Qwen3MoeForCausalLM")
    walker = Walker(session.index, session.resolver.patches,
                    Environment("ascend", session.index, hardware=read_profiles(session.index)["A2"]))
    root = walker.ctor.attr
    from fusion_analyze.walk.construction.constructor import Instance

    layer = root(root(root(Instance(loc.definition), "model"), "layers").element, "mlp")
    experts = root(layer, "experts")
    assert experts.factory == "vllm_ascend.patch.platform.patch_fused_moe._ascend_FusedMoE"
    router = root(experts, "router")
    assert router.cls.name == "AscendFusedTopKRouter"
    assert root(experts, "gate").cls.name == "ReplicatedLinear"  # handed through **kwargs of the patch
