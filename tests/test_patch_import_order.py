"""A patch that rebinds a module function reaches a `from m import f` only where the importing module is imported
after the patch runs (walk/construction/rebinding.py). What is imported by then is derived from the code that
imports the patch package: the function whose body imports it (vllm-ascend's `adapt_patch`, `from
vllm_ascend.patch import worker` on the `else` side of `if is_global_patch:`), each call of it (`adapt_patch()`
in the worker's `__init__`, its arguments deciding the package), and the module-level imports of the module the
call stands in, transitively. The FalconH1 hand check: vllm-ascend's worker.py imports vLLM's gpu_worker, which
imports mamba_mixer2 before `NPUWorker.__init__` runs the worker patches, so the mixer's from-imported
causal_conv1d_fn / causal_conv1d_update are vLLM's own."""

from __future__ import annotations

import json

from fusion_analyze.analysis.pipeline import analyze
from fusion_analyze.analysis.session import Session
from fusion_analyze.ir.conditions import Truth
from fusion_analyze.walk.construction.rebinding import patch_triggers, read_first

ADAPT = '''


def adapt_patch(is_global_patch=False):
    if is_global_patch:
        from vllm_ascend.patch import platform  # noqa: F401
    else:
        from vllm_ascend.patch import worker  # noqa: F401
'''

# the worker module: its module-level imports load the model module (vLLM's worker utilities import the mixer)
WORKER = '''\
import vllm.model_executor.models.conv_mixer  # noqa: F401


class NPUWorker:
    def __init__(self, vllm_config):
        from vllm_ascend.utils import adapt_patch

        adapt_patch()
'''

# another class whose __init__ also imports the worker patches, from a module that does not load the model
OTHER_WORKER = '''\
class OtherWorker:
    def __init__(self):
        from vllm_ascend import utils

        utils.adapt_patch(is_global_patch=False)
'''

PLATFORM = '''\
class NPUPlatform:
    @classmethod
    def pre_register_and_update(cls, parser=None):
        from vllm_ascend.utils import adapt_patch

        adapt_patch(is_global_patch=True)
'''


def _tree(mini, *, other: bool = False):
    utils = mini / "vllm_ascend" / "utils.py"
    utils.write_text(utils.read_text(encoding="utf-8") + ADAPT, encoding="utf-8")
    (mini / "vllm_ascend" / "patch" / "platform").mkdir()
    (mini / "vllm_ascend" / "patch" / "platform" / "__init__.py").write_text("", encoding="utf-8")
    (mini / "vllm_ascend" / "worker").mkdir()
    (mini / "vllm_ascend" / "worker" / "__init__.py").write_text("", encoding="utf-8")
    (mini / "vllm_ascend" / "worker" / "worker.py").write_text(WORKER, encoding="utf-8")
    (mini / "vllm_ascend" / "platform.py").write_text(PLATFORM, encoding="utf-8")
    if other:
        (mini / "vllm_ascend" / "worker" / "other.py").write_text(OTHER_WORKER, encoding="utf-8")
    return mini


def _conv_ops(a):
    return [op for op in a.walk.ops if op.section == "layer" and op.path.endswith("self_attn")]


def test_the_code_that_imports_a_patch_package_is_derived(mini):
    s = Session.open(str(_tree(mini, other=True)), str(mini), "ascend", cache=False)
    assert patch_triggers(s.index, "vllm_ascend") == [
        ("vllm_ascend.patch.platform", "vllm_ascend.platform", True),  # adapt_patch(is_global_patch=True)
        ("vllm_ascend.patch.worker", "vllm_ascend.worker.other", True),  # utils.adapt_patch(is_global_patch=False)
        ("vllm_ascend.patch.worker", "vllm_ascend.worker.worker", True)]  # adapt_patch(): the default
    patch = "vllm_ascend.patch.worker.patch_conv"
    assert read_first(s.index, patch, "vllm.model_executor.models.conv_mixer") is Truth.UNKNOWN  # one closure has it
    assert read_first(s.index, patch, "vllm.model_executor.models.qwen3") is Truth.FALSE  # no closure has it
    # the patch module's own imports ran first
    assert read_first(s.index, patch, "vllm.model_executor.layers.conv_ops.conv") is Truth.TRUE


def test_a_from_import_of_a_module_the_worker_loads_first_keeps_the_original(mini):
    """ConvMixer's module is imported by the worker module: its `from ...conv import conv_state, conv_update` and
    `from conv_ops import gated_rule` ran before `adapt_patch()` imported the worker patches, so they hold vLLM's
    functions; `conv_mod.conv_fwd(...)` reads the module attribute when it runs: the patch's function."""
    a = analyze("ConvMixerForCausalLM", str(_tree(mini)), str(mini), "ascend", cache=False)
    ops = _conv_ops(a)
    by = {op.name: (op.file, op.attrs.get("replaced_by")) for op in ops}
    patch = "vllm_ascend/patch/worker/patch_conv.py"
    assert by["sigmoid"] == ("vllm_ascend/ops/conv.py",
                             f"vllm.model_executor.layers.conv_ops.conv.conv_fwd = _npu_conv_fwd ({patch}:19)")
    assert "silu" not in by and "tanh" not in by and "relu" not in by  # the Ascend functions of the from-imports
    # vLLM's conv_state calls its module's `conv_fwd` when it runs: the patch's (a second sigmoid); conv_gate's
    # patch (a lambda) is not followed: vLLM's kernel
    kernels = [op.name for op in ops if op.kind == "kernel"]
    assert kernels == ["_conv_update_kernel", "_gated_rule_kernel", "_conv_fwd_kernel"]
    assert [op.name for op in ops].count("sigmoid") == 2
    assert not [op for op in ops if op.attrs.get("replacement_open")]
    # nothing of the patches no read reaches is said
    assert not [alt for alt in a.walk.alternatives if "conv_update" in alt["path"] or "gated_rule" in alt["path"]]


def test_where_only_some_callers_load_the_module_first_the_replacement_is_said_open(mini):
    """A second class imports the worker patches from a module that does not load ConvMixer's: which one runs
    first is not known, so the from-imports may hold either; the walk follows the patch, each of its ops says so,
    and the original is listed as the undecided alternative."""
    a = analyze("ConvMixerForCausalLM", str(_tree(mini, other=True)), str(mini), "ascend", cache=False)
    ops = _conv_ops(a)
    silu = next(op for op in ops if op.name == "silu")
    assert silu.file == "vllm_ascend/ops/conv.py"
    assert "vllm.model_executor.models.conv_mixer" in silu.attrs["replacement_open"]
    assert "vllm_ascend/patch/worker/patch_conv.py:18" in silu.attrs["replacement_open"]
    sigmoid = next(op for op in ops if op.name == "sigmoid")  # read when it runs: after the patch, for sure
    assert not sigmoid.attrs.get("replacement_open")
    alt = next(alt for alt in a.walk.alternatives if alt["path"] == "vllm.model_executor.layers.conv_ops.conv.conv_update")
    assert alt["decided"] is False and alt["others"][0][0] == "vllm.model_executor.layers.conv_ops.conv.conv_update"
    from fusion_analyze.render.markdown import render_markdown
    from .conftest import validate_report

    validate_report(json.loads(json.dumps(a.report)))
    assert "may not apply" in render_markdown(a, lang="en")
