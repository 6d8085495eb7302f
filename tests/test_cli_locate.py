"""Model resolution on the mini tree: every query form, ambiguity, unknown names, bad roots."""

from __future__ import annotations

import json

import pytest

from .conftest import MINI


def _locate(run, *args):
    return run("locate", "--lang", "en", *args, "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--format", "json")


def _ok(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    "query, arch, file",
    [
        ("Qwen3ForCausalLM", "Qwen3ForCausalLM", "vllm/model_executor/models/qwen3.py"),
        ("qwen3forcausallm", "Qwen3ForCausalLM", "vllm/model_executor/models/qwen3.py"),
        ("qwen3", "Qwen3ForCausalLM", "vllm/model_executor/models/qwen3.py"),
        ("glm4_moe", "Glm4MoeForCausalLM", "vllm/model_executor/models/glm4_moe.py"),
        ("GLM-4.7", "Glm4MoeForCausalLM", "vllm/model_executor/models/glm4_moe.py"),
        ("GLM-4.7-Flash", "Glm4MoeLiteForCausalLM", "vllm/model_executor/models/glm4_moe_lite.py"),
        ("DeepSeek-V3", "DeepseekV3ForCausalLM", "vllm/model_executor/models/deepseek_v2.py"),
        ("NewForCausalLM", "NewForCausalLM", "vllm/models/newpkg/model.py"),
    ],
)
def test_query_forms(run, query, arch, file):
    data = _ok(_locate(run, query))
    assert data["architecture"] == arch
    assert data["file"] == file
    assert data["sources"] == {"vllm": {"version": "0.99.0"}, "vllm_ascend": {"version": "0.99.0rc1"}}


def test_marketing_name_needs_evidence_in_the_file(run):
    data = _ok(_locate(run, "GLM-4.7"))
    assert any("GLM-4.7" in e["text"] and e["line"] == 1 for e in data["verification"])
    flash = _ok(_locate(run, "GLM-4.7-Flash"))
    assert flash["verification"][0] == {
        "file": "vllm/model_executor/models/glm4_moe_lite.py",
        "line": 1,
        "text": '"""Inference-only GLM-4.7-Flash model compatible with HuggingFace weights."""',
    }


def test_alias_without_evidence_is_refused(run, mini):
    path = mini / "vllm/model_executor/models/glm4_moe.py"
    path.write_text(path.read_text().replace("GLM-4.5, GLM-4.6, GLM-4.7", "GLM-4.5"))
    result = run("locate", "--lang", "en", "GLM-4.7", "--vllm-root", str(mini))
    assert result.exit_code == 2
    assert "no line of that file names it" in result.stderr
    assert "Traceback" not in result.output


def test_config_json(run, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}))
    data = _ok(_locate(run, str(cfg)))
    assert data["architecture"] == "Qwen3ForCausalLM"
    assert data["class"] == "Qwen3ForCausalLM"


@pytest.mark.parametrize(
    "content, message",
    [("{not json", "not valid JSON"), (json.dumps({"model_type": "x"}), 'has no "architectures"')],
)
def test_bad_config_json(run, tmp_path, content, message):
    cfg = tmp_path / "config.json"
    cfg.write_text(content)
    result = _locate(run, str(cfg))
    assert result.exit_code == 2
    assert message in result.stderr
    assert result.stdout == ""


def test_ascend_override_and_class_line(run):
    data = _ok(_locate(run, "DeepseekV3ForCausalLM"))
    assert data["line"] == 10
    assert data["ascend_override"] == {
        "file": "vllm_ascend/models/deepseek_v3.py",
        "class": "AscendDeepseekV3ForCausalLM",
        "line": 4,
    }


def test_patches_are_listed(run):
    data = _ok(_locate(run, "Qwen3MoeForCausalLM"))
    targets = [p["target"] for p in data["patches"]]
    assert "vllm.model_executor.models.qwen3_moe.Qwen3MoeAttention.forward" in targets
    assert all(p["file"].startswith("vllm_ascend/patch/") for p in data["patches"])


def test_without_ascend_root(run):
    result = run("locate", "--lang", "en", "qwen3", "--vllm-root", str(MINI))
    assert result.exit_code == 0
    assert "not given (Ascend status unknown)" in result.stdout


def test_ambiguous(run):
    result = _locate(run, "foo")
    assert result.exit_code == 2
    assert "ambiguous" in result.stderr
    assert "FooBazForCausalLM" in result.stderr and "FooBarForCausalLM" in result.stderr
    assert "Traceback" not in result.output


def test_unknown_lists_closest(run):
    result = _locate(run, "qwen4")
    assert result.exit_code == 2
    assert "unknown model 'qwen4'" in result.stderr
    assert "qwen3" in result.stderr


def test_broken_model_file_is_a_clear_error(run):
    result = _locate(run, "BrokenForCausalLM")
    assert result.exit_code == 2
    assert "vllm/model_executor/models/broken.py" in result.stderr or "syntax error" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("kind", ["missing", "file", "not-vllm"])
def test_bad_roots(run, tmp_path, kind):
    if kind == "missing":
        root = tmp_path / "nope"
        expect = "no such directory"
    elif kind == "file":
        root = tmp_path / "f.txt"
        root.write_text("x")
        expect = "not a directory"
    else:
        root = tmp_path
        expect = "not a vLLM tree"
    result = run("locate", "--lang", "en", "qwen3", "--vllm-root", str(root))
    assert result.exit_code == 2
    assert expect in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_ascend_root_not_ascend(run, tmp_path):
    result = run("locate", "--lang", "en", "qwen3", "--vllm-root", str(MINI), "--ascend-root", str(tmp_path))
    assert result.exit_code == 2
    assert "not a vllm-ascend tree" in result.stderr


def test_package_dir_itself_is_accepted(run):
    data = _ok(run("locate", "--lang", "en", "qwen3", "--vllm-root", str(MINI / "vllm"), "--format", "json"))
    assert data["file"] == "vllm/model_executor/models/qwen3.py"


def test_list_models(run):
    result = run("list-models", "--lang", "en", "--vllm-root", str(MINI), "--format", "json")
    assert result.exit_code == 0
    rows = {r["architecture"]: r for r in json.loads(result.stdout)}
    assert rows["NewForCausalLM"]["file"] == "vllm/models/newpkg/__init__.py"
    assert rows["Qwen3EmbedModel"]["table"] == "_EMBEDDING_MODELS"
    assert "OldForCausalLM" not in rows


def test_unparsable_registry(run, mini):
    (mini / "vllm/model_executor/models/registry.py").write_text("X = {\n")
    result = run("list-models", "--lang", "en", "--vllm-root", str(mini))
    assert result.exit_code == 2
    assert "registry" in result.stderr


def test_registry_without_tables(run, mini):
    (mini / "vllm/model_executor/models/registry.py").write_text("MODELS = []\n")
    result = run("list-models", "--lang", "en", "--vllm-root", str(mini))
    assert result.exit_code == 2
    assert "no architecture table" in result.stderr


def test_version_and_help(run):
    result = run("--version")
    assert result.exit_code == 0 and result.stdout.startswith("fusion-analyze ")
    result = run("-h")
    assert result.exit_code == 0 and "locate" in result.stdout


def test_fetch_failure_is_one_line(run, tmp_path, monkeypatch):
    fake = tmp_path / "pip"
    fake.write_text("#!/bin/sh\necho 'ERROR: No matching distribution found for vllm==9.9.9' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("FUSION_ANALYZE_PIP", str(fake))
    monkeypatch.setenv("FUSION_ANALYZE_CACHE", str(tmp_path / "cache"))
    result = run("fetch", "--lang", "en", "vllm==9.9.9")
    assert result.exit_code == 2
    progress, error = result.stderr.strip().splitlines()  # the fetch says it starts (it takes seconds), then why not
    assert progress.startswith("fetching vllm==9.9.9 with pip into ")
    assert error == (
        "error: cannot fetch vllm==9.9.9: ERROR: No matching distribution found for vllm==9.9.9 "
        "(no network, or no such release?); pass a local tree instead"
    )
    result = run("locate", "--lang", "en", "qwen3", "--vllm-root", "vllm==9.9.9")
    assert result.exit_code == 2 and "vllm==9.9.9" in result.stderr


def test_fetch_bad_spec(run):
    result = run("fetch", "--lang", "en", "torch==2.0")
    assert result.exit_code == 2
    assert "write it as vllm==VERSION" in result.stderr


def test_fetch_reuses_cache(run, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    tree = cache / "trees" / "vllm-9.9.9"
    shutil_copy(MINI, tree)
    monkeypatch.setenv("FUSION_ANALYZE_CACHE", str(cache))
    monkeypatch.setenv("FUSION_ANALYZE_PIP", "false")  # a download attempt would fail
    result = run("fetch", "--lang", "en", "vllm==9.9.9")
    assert result.exit_code == 0
    assert result.stdout.strip() == str(tree)


def shutil_copy(src, dest):
    import shutil

    shutil.copytree(src, dest)
