"""A vLLM custom op (`torch.ops.vllm.<name>`) whose function takes the calling layer from the forward context
and calls its methods is walked into those methods, through the `if`s the values decide (a platform check);
where a test there is not decided, the op says why its function is not walked (mini tree)."""

from __future__ import annotations

from fusion_analyze.analysis.pipeline import analyze

# a token mixer in ShortConv's shape (vllm/model_executor/layers/mamba/short_conv.py): forward hands the work
# to a custom op, whose function picks forward_cuda or forward_native by the platform; a second mixer's op
# tests a value nothing decides
OP_MIXER = '''\
import torch
from torch import nn
from vllm.forward_context import get_forward_context
from vllm.model_executor.layers.linear import MergedColumnParallelLinear, RowParallelLinear
from vllm.platforms import current_platform
from vllm.utils.torch_utils import direct_register_custom_op

from .qwen2 import Qwen2DecoderLayer, Qwen2ForCausalLM, Qwen2Model
from .utils import maybe_prefix


class OpMixer(nn.Module):
    def __init__(self, config, prefix=""):
        super().__init__()
        self.prefix = prefix
        self.in_proj = MergedColumnParallelLinear(config.hidden_size, [config.hidden_size] * 2, bias=False)
        self.out_proj = RowParallelLinear(config.hidden_size, config.hidden_size, bias=False)

    def forward(self, positions, hidden_states):
        output = torch.empty_like(hidden_states)
        torch.ops.vllm.{op}(hidden_states, output, self.prefix)
        return output

    def forward_cuda(self, hidden_states, output):
        bx, _ = self.in_proj(hidden_states)
        b, x = bx.chunk(2, dim=-1)
        y = b * x
        output[:], _ = self.out_proj(y)

    def forward_native(self, hidden_states, output):
        output[:] = hidden_states.sigmoid()


def op_mixer(hidden_states, output, layer_name):
    forward_context = get_forward_context()
    self = forward_context.no_compile_layers[layer_name]
    if not current_platform.is_cpu():
        self.forward_cuda(hidden_states=hidden_states, output=output)
    else:
        self.forward_native(hidden_states=hidden_states, output=output)


def op_mixer_open(hidden_states, output, layer_name):
    forward_context = get_forward_context()
    self = forward_context.no_compile_layers[layer_name]
    if forward_context.use_native:
        self.forward_native(hidden_states=hidden_states, output=output)
    else:
        self.forward_cuda(hidden_states=hidden_states, output=output)


direct_register_custom_op(op_name="op_mixer", op_func=op_mixer, mutates_args=["output"])
direct_register_custom_op(op_name="op_mixer_open", op_func=op_mixer_open, mutates_args=["output"])


class OpMixerDecoderLayer(Qwen2DecoderLayer):
    def __init__(self, config, cache_config=None, quant_config=None, prefix=""):
        super().__init__(config, prefix=prefix)
        self.self_attn = OpMixer(config, prefix=f"{{prefix}}.self_attn")


class OpMixerForCausalLM(Qwen2ForCausalLM):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        self.model = Qwen2Model(vllm_config=vllm_config, prefix=maybe_prefix(prefix, "model"),
                                decoder_layer_type=OpMixerDecoderLayer)
'''


def _register(mini, op: str) -> None:
    (mini / "vllm/model_executor/models/op_mixer.py").write_text(OP_MIXER.format(op=op), encoding="utf-8")
    registry = mini / "vllm/model_executor/models/registry.py"
    text = registry.read_text(encoding="utf-8")
    registry.write_text(text.replace('    "HybridForCausalLM":', '    "OpMixerForCausalLM": ("op_mixer", "OpMixerForCausalLM"),\n'
                                                               '    "HybridForCausalLM":', 1), encoding="utf-8")


def test_custom_op_through_a_platform_check_is_walked(mini):
    """`if not current_platform.is_cpu():` is decided on a device: forward_cuda's GEMMs and arithmetic are
    ops of the layer (its path), and no opaque kernel op stands for the custom op."""
    _register(mini, "op_mixer")
    for backend in ("ascend", "cuda"):
        a = analyze("OpMixerForCausalLM", str(mini), str(mini), backend, cache=False)
        mixer = [(op.kind, op.name) for op in a.walk.ops if op.path.startswith("model.layers.self_attn")
                 and op.kind != "view"]
        assert ("matmul", "in_proj") in mixer and ("matmul", "out_proj") in mixer, (backend, mixer)
        assert ("mul", "mul") in mixer and ("sigmoid", "sigmoid") not in mixer, (backend, mixer)
        assert not [op for op in a.walk.ops if op.kind == "kernel" and op.name == "op_mixer"], backend
        proj = next(op for op in a.walk.ops if op.name == "in_proj")
        assert proj.file.endswith("op_mixer.py") and proj.path == "model.layers.self_attn.in_proj"


def test_custom_op_whose_test_is_not_decided_says_so(mini):
    """`if forward_context.use_native:` is nothing the tool knows: the op stays one kernel op, and says which
    test kept its function from being walked, and where."""
    _register(mini, "op_mixer_open")
    a = analyze("OpMixerForCausalLM", str(mini), str(mini), "ascend", cache=False)
    op = next(op for op in a.walk.ops if op.kind == "kernel" and op.name == "op_mixer_open")
    why = str(op.attrs.get("not_walked"))
    assert "forward_context.use_native" in why and "op_mixer.py:" in why, why
    assert [k.name for k in op.kernels][:1] == ["torch.ops.vllm.op_mixer_open"]
    assert not [o for o in a.walk.ops if o.name == "in_proj"]
    assert a.report["ops"][[o["id"] for o in a.report["ops"]].index(op.id)]["attrs"]["not_walked"] == why
