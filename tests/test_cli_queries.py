"""Issue 37, items 1 and 2: a model query resolves to the model it names or is refused with the nearest names
(versions the tree lacks, typos, text matches only in a line that names the model, HF repo ids, checkpoint
directories, a file of several classes); and a warning on stderr where the answer changes (no Ascend tree: a CUDA
only report; a vllm-ascend tree made for another vLLM release). Exit codes and stderr are checked apart from
stdout (click's CliRunner keeps them apart)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import MINI

MODELS = "vllm/model_executor/models"


def _one_error(r, *needles) -> str:
    """Exit 2, nothing on stdout, one line on stderr holding every needle; that line."""
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert r.stdout == ""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def _locate(run, query, root=MINI, *extra):
    return run("locate", "--lang", "en", query, "--vllm-root", str(root), "--format", "json", *extra)


def _ok(r) -> dict:
    assert r.exit_code == 0, (r.stdout, r.stderr)
    return json.loads(r.stdout)


def _register(mini: Path, entries: dict[str, tuple[str, str]], files: dict[str, str]) -> None:
    """Add architectures (arch -> (module stem, class)) and model files to a copy of the mini tree."""
    for stem, text in files.items():
        (mini / MODELS / f"{stem}.py").write_text(text)
    reg = mini / MODELS / "registry.py"
    lines = "".join(f'    "{a}": ("{m}", "{c}"),\n' for a, (m, c) in entries.items())
    reg.write_text(reg.read_text().replace("    # [Decoder-only]\n", "    # [Decoder-only]\n" + lines, 1))


# -- a name of a version the tree does not have is refused, with the nearest names ----------------------------
def test_a_version_the_tree_lacks_is_refused_with_the_nearest(run, mini):
    # a dense GLM-4 file, as vLLM has: `glm-4.8` used to fall back to it (minor version dropped) with exit 0
    _register(mini, {"Glm4ForCausalLM": ("glm4", "Glm4ForCausalLM")},
              {"glm4": '"""Inference-only GLM-4-0414 model."""\n\nfrom torch import nn\n\n\n'
                       'class Glm4ForCausalLM(nn.Module):\n    pass\n'})
    line = _one_error(_locate(run, "glm-4.8", mini), "unknown model 'glm-4.8'", "did you mean GLM-4.7 / GLM-4.6")
    assert "Glm4ForCausalLM" not in line.split("did you mean")[0]
    # the versions the file names still resolve, and the dense model by its own name
    assert _ok(_locate(run, "GLM-4.6", mini))["architecture"] == "Glm4MoeForCausalLM"
    assert _ok(_locate(run, "glm4", mini))["architecture"] == "Glm4ForCausalLM"
    # the single-model command refuses it the same way, before any report
    _one_error(run("glm-4.8", "--vllm-root", str(mini), "-o", str(mini / "r.md")), "did you mean GLM-4.7")
    assert not (mini / "r.md").exists()


def test_a_marketing_name_the_tree_predates_names_those_it_has(run, mini):
    path = mini / MODELS / "glm4_moe.py"
    path.write_text(path.read_text().replace("GLM-4.5, GLM-4.6, GLM-4.7", "GLM-4.5, GLM-4.6"))
    line = _one_error(_locate(run, "GLM-4.7", mini), "no line of that file names it", "did you mean GLM-4.6")
    assert "GLM-4.7 /" not in line  # only names this tree has are suggested


@pytest.mark.parametrize("query, first", [("deepsek-v3", "DeepSeek-V3"), ("qwen3-moe-typo", "qwen3_moe"),
                                          ("Qwen3ForCausalLMM", "Qwen3ForCausalLM")])
def test_a_typo_suggests_the_name_meant(run, query, first):
    line = _one_error(_locate(run, query), f"unknown model '{query}'", "did you mean")
    assert line.split("did you mean ")[1].startswith(first), line


# -- a text match comes from a line that names the model ------------------------------------------------------
def test_a_comment_mentioning_another_model_is_no_match(run, mini):
    # deepseek_v2.py of vLLM 0.30 says "# Older GLM-5/5.2 configs require fp32 routing": GLM-5 is not DeepSeek
    path = mini / MODELS / "deepseek_v2.py"
    path.write_text(path.read_text().replace(
        "class DeepseekV2ForCausalLM(nn.Module):\n",
        "class DeepseekV2ForCausalLM(nn.Module):\n    # Older GLM-5/5.2 configs require fp32 routing\n"))
    _one_error(_locate(run, "GLM-5", mini), "unknown model 'GLM-5'")


def test_a_docstring_naming_the_model_is_a_match(run, mini):
    path = mini / MODELS / "qwen3_moe.py"
    path.write_text(path.read_text().replace('"""Inference-only Qwen3MoE model',
                                             '"""Inference-only Qwen3MoE (and Zephyr-9.5) model', 1))
    data = _ok(_locate(run, "Zephyr-9.5", mini))
    assert data["architecture"] == "Qwen3MoeForCausalLM"
    assert any("Zephyr-9.5" in e["text"] for e in data["verification"])


def test_a_docstring_of_a_file_of_several_models_picks_the_family(run, mini):
    path = mini / MODELS / "foo.py"
    path.write_text(path.read_text().replace('"""FooBaz and FooBar models."""',
                                             '"""FooBaz and FooBar models; also Glorp-2.1."""'))
    _one_error(_locate(run, "Glorp-2.1", mini), "ambiguous", "FooBazForCausalLM", "FooBarForCausalLM")


# -- HF repo ids and checkpoint directories --------------------------------------------------------------------
def test_an_hf_repo_id_is_its_model_name(run):
    assert _ok(_locate(run, "Qwen/Qwen3-8B"))["architecture"] == "Qwen3ForCausalLM"
    assert _ok(_locate(run, "zai-org/GLM-4.7"))["architecture"] == "Glm4MoeForCausalLM"
    assert _ok(_locate(run, "someone/qwen3_moe"))["architecture"] == "Qwen3MoeForCausalLM"
    _one_error(_locate(run, "Qwen/Qwen9-8B"), "Qwen/Qwen9-8B")


def test_an_hf_repo_id_applies_its_preset(run):
    r = run("Qwen/Qwen3-8B", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["configuration"]["decided_by"].startswith("preset Qwen3-8B (")


def test_a_checkpoint_directory_is_its_config(run, tmp_path):
    ckpt = tmp_path / "Qwen3-0.6B"
    ckpt.mkdir()
    (ckpt / "config.json").write_text((MINI.parent / "configs" / "qwen3-0.6b.json").read_text())
    (ckpt / "model.safetensors").write_bytes(b"")
    assert _ok(_locate(run, str(ckpt)))["architecture"] == "Qwen3ForCausalLM"
    r = run(str(ckpt), "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--format", "json")
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["configuration"]["decided_by"].startswith("config.json")  # it is the --config
    assert data["estimate"]["shapes"]["hidden_size"] == 1024


def test_a_folder_without_config_json_is_refused(run, tmp_path):
    _one_error(_locate(run, str(tmp_path)), "a folder without config.json")


# -- a file of several classes: the architecture its model type names ------------------------------------------
LLAMA = '''"""Inference-only LLaMA model compatible with HuggingFace weights."""

from torch import nn


class LlamaForCausalLM(nn.Module):
    pass


class CwmForCausalLM(LlamaForCausalLM):
    pass


class InternLM3ForCausalLM(LlamaForCausalLM):
    pass
'''


def _llama(mini: Path) -> None:
    _register(mini, {"LlamaForCausalLM": ("llama", "LlamaForCausalLM"),
                     "LLaMAForCausalLM": ("llama", "LlamaForCausalLM"),
                     "CwmForCausalLM": ("llama", "CwmForCausalLM"),
                     "InternLM3ForCausalLM": ("llama", "InternLM3ForCausalLM")}, {"llama": LLAMA})


def test_a_file_stem_of_several_classes_is_the_model_types_architecture(run, mini):
    _llama(mini)
    data = _ok(_locate(run, "llama", mini))
    assert (data["architecture"], data["file"]) == ("LlamaForCausalLM", f"{MODELS}/llama.py")
    assert _ok(_locate(run, "CwmForCausalLM", mini))["architecture"] == "CwmForCausalLM"


def test_the_transformers_auto_mapping_names_the_architecture(run, mini, tmp_path):
    # `foo` is ambiguous by name alone (FooBaz, FooBar); a transformers tree whose causal-LM mapping gives the
    # model type foo the class FooBarForCausalLM decides it
    hf = tmp_path / "hf" / "transformers"
    (hf / "models" / "auto").mkdir(parents=True)
    (hf / "__init__.py").write_text('__version__ = "9.0.0"\n')
    (hf / "models" / "auto" / "modeling_auto.py").write_text(
        'MODEL_FOR_CAUSAL_LM_MAPPING_NAMES = OrderedDict(\n    [\n        ("foo", "FooBarForCausalLM"),\n    ]\n)\n')
    _one_error(_locate(run, "foo", mini), "ambiguous")
    assert _ok(_locate(run, "foo", mini, "--hf-root", str(hf.parent)))["architecture"] == "FooBarForCausalLM"


# -- item 2: warnings where the answer changes -----------------------------------------------------------------
def _qwen3(run, *args):
    return run("qwen3", "--vllm-root", str(MINI), "--config", "Qwen3-8B", "--lang", "en", *args)


def test_without_an_ascend_tree_a_warning_and_a_cuda_only_report(run, tmp_path):
    r = _qwen3(run, "-o", str(tmp_path / "q.md"))
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "no vllm-ascend tree" in warnings[0] and "CUDA only" in warnings[0]
    md = (tmp_path / "q.md").read_text()
    header = md.splitlines()[2]
    assert "CUDA only" in header and "backend: cuda" in header
    assert "⚠" not in md and "open on Ascend" not in md  # no Ascend claim
    assert "Atlas" not in md  # no Ascend device named: the profile only prices the estimate
    data = json.loads(_qwen3(run, "--format", "json").stdout)
    assert data["backend"] == "cuda" and data["sources"]["vllm_ascend"] is None
    fused_on_cuda = [o for o in data["opportunities"] if o["cuda"].get("status") in ("fused_by_pass", "fused_by_pass_if")
                     and o["status"] == "open"]
    assert fused_on_cuda and not any(o["cuda_only"] for o in data["opportunities"])


def test_with_an_ascend_tree_no_warning_and_the_ascend_claims(run, tmp_path):
    r = _qwen3(run, "--ascend-root", str(MINI), "-o", str(tmp_path / "q.md"))
    assert r.exit_code == 0, r.stderr
    assert "warning" not in r.stderr
    md = (tmp_path / "q.md").read_text()
    assert "CUDA only" not in md.splitlines()[2] and "⚠ fused on CUDA by vLLM, open on Ascend" in md


def test_the_warning_never_makes_bad_input_two_lines(run):
    _one_error(run("qwen9000", "--vllm-root", str(MINI)), "unknown model 'qwen9000'")


@pytest.mark.parametrize("tag, warned", [("v0.98.0", True), ("v0.99.0", False), (None, False)])
def test_a_mismatched_pair_is_warned(run, mini, tag, warned):
    # the mini pair: vLLM 0.99.0, vllm-ascend 0.99.0rc1; its Dockerfile declares the vLLM it is built against
    if tag:
        (mini / "Dockerfile").write_text(f"FROM ubuntu\n\nARG VLLM_REPO=https://github.com/vllm-project/vllm.git\nARG VLLM_TAG={tag}\n")
    r = _locate(run, "qwen3", mini, "--ascend-root", str(mini))
    assert r.exit_code == 0 and json.loads(r.stdout)["architecture"] == "Qwen3ForCausalLM"
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    if not warned:
        assert lines == []
        return
    assert len(lines) == 1 and lines[0].startswith("warning: vllm-ascend 0.99.0rc1 is built against vLLM 0.98.0")
    assert "Dockerfile L4: ARG VLLM_TAG=v0.98.0" in lines[0] and "the vLLM tree is 0.99.0" in lines[0]
    r = run("qwen3", "--vllm-root", str(mini), "--ascend-root", str(mini), "--format", "json", "--lang", "en")
    assert r.exit_code == 0 and "built against vLLM 0.98.0" in r.stderr
    r = run("qwen3", "--vllm-root", str(mini), "--ascend-root", str(mini), "--format", "json")  # zh, the default
    assert r.exit_code == 0 and "vllm-ascend 0.99.0rc1 是基于vLLM 0.98.0 构建的" in r.stderr
    assert "built against" not in r.stderr and r.stderr.startswith("warning: ")
    assert run("-q", "qwen3", "--vllm-root", str(mini), "--ascend-root", str(mini), "--format", "json").stderr == ""


# -- the released trees ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def v030(real_tree):
    return str(real_tree("vllm==0.30.0"))


def test_real_tree_queries(run, v030):
    # the cases on vLLM 0.30.0
    line = _one_error(_locate(run, "glm-4.8", v030), "did you mean GLM-4.7 / GLM-4.6")
    assert "Glm4ForCausalLM" not in line
    assert "DeepSeek-V3" in _one_error(_locate(run, "deepsek-v3", v030)).split("did you mean")[1]
    _one_error(_locate(run, "GLM-5", v030), "unknown model 'GLM-5'")  # only deepseek_v2.py's comment names it
    assert _ok(_locate(run, "glm-5.2", v030))["architecture"] == "GlmMoeDsaForCausalLM"  # its package's docstring
    assert _ok(_locate(run, "Qwen/Qwen3-8B", v030))["architecture"] == "Qwen3ForCausalLM"
    assert _ok(_locate(run, "llama", v030))["architecture"] == "LlamaForCausalLM"


def test_real_mismatched_pair(run, real_tree):
    r = run("locate", "--lang", "en", "qwen3", "--vllm-root", str(real_tree("vllm==0.13.0")),
            "--ascend-root", str(real_tree("vllm-ascend==0.30.0rc2")))
    assert r.exit_code == 0
    assert ("warning: vllm-ascend 0.30.0rc2 is built against vLLM 0.30.0 (Dockerfile L34: ARG VLLM_TAG=v0.30.0), "
            "but the vLLM tree is 0.13.0") in r.stderr
    r = run("locate", "--lang", "en", "qwen3", "--vllm-root", str(real_tree("vllm==0.30.0")),
            "--ascend-root", str(real_tree("vllm-ascend==0.30.0rc2")))
    assert r.exit_code == 0 and r.stderr == ""
