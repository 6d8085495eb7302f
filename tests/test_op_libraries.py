"""Which `torch.ops.<namespace>` libraries the backend's install lacks (locate/op_libraries.py), on small trees in
the shape of vLLM's and vllm-ascend's: a namespace only vLLM's C++ sources register is missing on Ascend where
vllm-ascend's Dockerfile installs vLLM for a target device vLLM's setup.py builds no extension for; anything the
trees do not say leaves it present (nothing is called absent on a guess)."""

from __future__ import annotations

from pathlib import Path

from fusion_analyze.locate.op_libraries import OpLibraries
from fusion_analyze.sources.trees import SourceTree

SETUP = '''\
import os
import sys

VLLM_TARGET_DEVICE = envs.VLLM_TARGET_DEVICE
if sys.platform.startswith("darwin") and VLLM_TARGET_DEVICE != "cpu":
    VLLM_TARGET_DEVICE = "cpu"
elif sys.platform.startswith("linux") and os.getenv("VLLM_TARGET_DEVICE") is None:
    VLLM_TARGET_DEVICE = "cuda"


def _no_device() -> bool:
    return VLLM_TARGET_DEVICE == "empty"


def _is_cuda() -> bool:
    """CUDA."""
    return VLLM_TARGET_DEVICE == "cuda" and has_cuda


ext_modules = []
if _is_cuda():
    ext_modules.append(CMakeExtension(name="vllm._C"))
    ext_modules.append(CMakeExtension(name="vllm._moe_C_stable_libtorch"))
CLEAR
setup(ext_modules=ext_modules)
'''


class _Index:
    def __init__(self, trees, backend="ascend"):
        self.trees = {t.package: t for t in trees}
        self.backend = backend
        self.facts: dict = {}


def _trees(tmp_path: Path, target: str = "empty", clear: str = "if _no_device():\n    ext_modules = []\n",
           dockerfile: bool = True, ascend_py: str = "") -> _Index:
    v, a = tmp_path / "v", tmp_path / "a"
    (v / "vllm").mkdir(parents=True)
    (v / "vllm" / "__init__.py").write_text("")
    (v / "setup.py").write_text(SETUP.replace("CLEAR\n", clear))
    (v / "csrc" / "moe").mkdir(parents=True)
    (v / "csrc" / "torch_bindings.cpp").write_text("TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {\n}\n"
                                                   "TORCH_LIBRARY_FRAGMENT(CONCAT(TORCH_EXTENSION_NAME, _custom_ar), m) {}\n")
    (v / "csrc" / "moe" / "bindings.cpp").write_text("STABLE_TORCH_LIBRARY_FRAGMENT(_moe_C, m) {\n}\n")
    (a / "vllm_ascend").mkdir(parents=True)
    (a / "vllm_ascend" / "__init__.py").write_text("")
    (a / "vllm_ascend" / "ops.py").write_text(ascend_py)
    if dockerfile:
        (a / "Dockerfile").write_text(f'FROM base\nRUN VLLM_TARGET_DEVICE="{target}" python3 -m pip install -e '
                                      "/vllm-workspace/vllm/[audio] && \\\n    true\n")
    (a / "csrc").mkdir()
    (a / "csrc" / "utils.h").write_text("#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)\n")
    (a / "csrc" / "torch_binding.cpp").write_text("TORCH_LIBRARY_EXPAND(CONCAT(_C, _ascend), ops) {\n}\n")
    return _Index([SourceTree("vllm", v, "0.99.0"), SourceTree("vllm_ascend", a, "0.99.0")])


def test_vllms_namespaces_are_missing_where_the_install_builds_none(tmp_path):
    libs = OpLibraries(_trees(tmp_path))
    for kernel, ns in (("torch.ops._C.rms_norm", "_C"), ("torch.ops._moe_C.moe_sum", "_moe_C"),
                       ("torch.ops._C_custom_ar.all_reduce", "_C_custom_ar")):
        got = libs.missing(kernel)
        assert got is not None and got.namespace == ns, (kernel, got)
        assert (got.target, got.installed_at, got.cleared_at) == ("empty", "Dockerfile:2", "setup.py:25"), got
    for kernel in ("torch.ops._C_ascend.npu_add_rms_norm_bias", "torch.ops.vllm.unified_attention_with_output",
                   "torch_npu.npu_swiglu", "torch.ops.npu.npu_rms_norm", None, "torch.ops._C"):
        assert libs.missing(kernel) is None, kernel


def test_nothing_is_missing_where_the_trees_do_not_say_so(tmp_path):
    # the install builds vLLM for a device setup.py builds extensions for
    assert OpLibraries(_trees(tmp_path / "cuda", target="cuda")).missing("torch.ops._C.rms_norm") is None
    # no Dockerfile: how vLLM is installed is not known
    assert OpLibraries(_trees(tmp_path / "none", dockerfile=False)).missing("torch.ops._C.rms_norm") is None
    # setup.py builds no extension for the device without clearing the list (its appends are for CUDA only)
    assert OpLibraries(_trees(tmp_path / "cudaonly", clear="")).missing("torch.ops._C.rms_norm") is not None
    # an extension it may build for the device (a test it cannot decide), or a change of the list not followed
    maybe = "if has_cuda:\n    ext_modules.append(CMakeExtension(name=\"vllm._C\"))\n"
    assert OpLibraries(_trees(tmp_path / "maybe", clear=maybe)).missing("torch.ops._C.rms_norm") is None
    after = "if _no_device():\n    ext_modules = []\next_modules.append(CMakeExtension(name=\"vllm._C\"))\n"
    assert OpLibraries(_trees(tmp_path / "after", clear=after)).missing("torch.ops._C.rms_norm") is None
    looped = "if _no_device():\n    ext_modules = []\nfor name in NAMES:\n    ext_modules.append(name)\n"
    assert OpLibraries(_trees(tmp_path / "loop", clear=looped)).missing("torch.ops._C.rms_norm") is None
    # the CUDA backend is not asked about Ascend's install
    index = _trees(tmp_path / "cudabackend")
    index.backend = "cuda"
    assert OpLibraries(index).missing("torch.ops._C.rms_norm") is None


def test_a_namespace_python_code_defines_is_present(tmp_path):
    libs = OpLibraries(_trees(tmp_path, ascend_py='lib = torch.library.Library("_moe_C", "DEF")\n'
                                                  '@register_fake("_C::rms_norm")\ndef f(): ...\n'))
    assert libs.missing("torch.ops._moe_C.moe_sum") is None
    assert libs.missing("torch.ops._C.rms_norm") is not None  # register_fake defines no op
