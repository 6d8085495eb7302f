"""Presets (patterns/catalog/presets.yaml): each is a checkpoint's published config.json with its source named, of an
architecture the alias table maps its name to; a model query that names one applies it exactly as `--config NAME`
does (`--config` given wins), never a preset of another architecture; a complete preset's missing field is absent,
a field it leaves out (quantization_config) stays unknown."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from fusion_analyze.catalog import CatalogError, catalog, schema
from fusion_analyze.catalog.shape import read
from fusion_analyze.config.model_config import ConfigFacts
from fusion_analyze.config.reader import preset_for, preset_named, read_config
from fusion_analyze.locate.resolve import load_aliases
from fusion_analyze.semantics.values import Known, Unknown

from .conftest import FIXTURES, MINI, validate_report

PRESETS = catalog().check().presets.presets


def _alias_for(name: str):
    """The alias the resolver takes a query by: the first whose pattern matches the whole query."""
    return next((a for a in load_aliases() if re.fullmatch(a.match, name, re.IGNORECASE)), None)


# -- the shipped presets -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_preset_names_its_source_and_an_architecture_its_alias_maps_to(name):
    p = PRESETS[name]
    assert re.fullmatch(r"https://huggingface\.co/[\w.-]+/[\w.-]+/blob/main/config\.json", p.source), p.source
    assert f"/{name}/" in p.source  # the source is this checkpoint's own file
    archs = p.config["architectures"]
    alias = _alias_for(name)
    assert alias is not None, f"{name}: no alias of aliases.yaml takes it"
    assert alias.architectures[0] in archs, (name, alias.architectures, archs)
    assert "model_type" in p.config and isinstance(p.config.get("hidden_size"), int)
    assert not set(p.left_out) & set(p.config)
    assert "transformers_version" not in p.config and "auto_map" not in p.config
    assert "quantization_config" not in p.config  # deployment / quantisation is a separate feature
    if not p.complete or p.left_out != ("transformers_version",):
        assert p.note, f"{name}: say in `note` what is left out and where the values were read"


def test_the_fp8_checkpoints_say_their_quantisation_is_left_out():
    for name in ("DeepSeek-V3", "DeepSeek-R1"):
        p = PRESETS[name]
        assert p.complete and "quantization_config" in p.left_out and "FP8" in p.note


def test_a_preset_without_architectures_or_a_hub_source_is_refused(tmp_path):
    f = tmp_path / "presets.yaml"
    f.write_text(textwrap.dedent("""\
        presets:
          X-1B:
            source: https://example.com/config.json
            config: {hidden_size: 8}
        """), encoding="utf-8")
    with pytest.raises(CatalogError) as exc:
        read(schema.Presets, f, "p.yaml")
    assert exc.value.message.startswith("p.yaml:3: ") and "Hugging Face" in exc.value.message
    f.write_text(f.read_text().replace("https://example.com/", "https://huggingface.co/x/X-1B/blob/main/"))
    with pytest.raises(CatalogError, match=r"`config` has no `architectures` list"):
        read(schema.Presets, f, "p.yaml")


# -- which preset a query names ------------------------------------------------------------------------------
def test_a_query_names_a_preset_case_insensitively_of_its_own_architecture_only():
    assert preset_named("qwen3-8b") == "Qwen3-8B" and preset_named("GLM-4.7") == "GLM-4.7"
    assert preset_for("deepseek-v3", "DeepseekV3ForCausalLM") == "DeepSeek-V3"
    assert preset_for("Qwen3-8B", "Qwen3ForCausalLM") == "Qwen3-8B"
    assert preset_for("Qwen3-30B-A3B", "Qwen3ForCausalLM") is None  # never a preset of another architecture
    assert preset_for("Qwen3ForCausalLM", "Qwen3ForCausalLM") is None  # an architecture names no checkpoint
    assert read_config("qwen3-8b").source == f"preset Qwen3-8B ({PRESETS['Qwen3-8B'].source})"


def test_a_complete_preset_leaves_its_left_out_fields_unknown():
    r = read_config("DeepSeek-V3")
    facts = ConfigFacts(r.values, r.source, r.complete, left_out=r.left_out)
    quant = facts.getattr("quantization_config", Known(None))  # FP8 in the checkpoint: never "absent"
    assert isinstance(quant, Unknown) and "left out" in quant.reason
    assert facts.getattr("no_such_field", Known(7)) == Known(7)  # the whole file but for left_out: absent
    assert facts.attr("kv_lora_rank") == Known(512)
    glm = read_config("GLM-4.7")
    assert not glm.complete
    facts = ConfigFacts(glm.values, glm.source, glm.complete, left_out=glm.left_out)
    assert isinstance(facts.getattr("rope_theta", Known(10000)), Unknown)  # not complete: not known


# -- the CLI (mini tree) -------------------------------------------------------------------------------------
def _json(run, tmp_path, query, *extra, name="r.json"):
    out = tmp_path / name
    r = run(query, "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--format", "json", "-o", str(out), *extra)
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text(encoding="utf-8"))
    validate_report(doc)
    return out.read_text(encoding="utf-8"), doc


def test_a_marketing_name_applies_its_preset_as_config_does(run, tmp_path):
    by_name, doc = _json(run, tmp_path, "Qwen3-0.6B", name="a.json")
    by_config, _ = _json(run, tmp_path, "Qwen3-0.6B", "--config", "Qwen3-0.6B", name="b.json")
    assert by_name == by_config
    preset = PRESETS["Qwen3-0.6B"]
    assert doc["configuration"]["config"] == f"preset Qwen3-0.6B ({preset.source})"
    assert doc["configuration"]["complete"] is True
    assert any(o["benefit"].get("numbers") for o in doc["opportunities"])  # the preset's shapes: numeric
    _, lower = _json(run, tmp_path, "qwen3-0.6b", name="c.json")
    assert lower["configuration"]["config"] == doc["configuration"]["config"]


def test_config_given_wins_over_the_preset_the_name_names(run, tmp_path):
    _, doc = _json(run, tmp_path, "Qwen3-0.6B", "--config", str(FIXTURES / "configs" / "qwen3-0.6b.json"))
    assert doc["configuration"]["config"] == "qwen3-0.6b.json"
    _, plain = _json(run, tmp_path, "qwen3", name="p.json")  # a model type names no checkpoint: no preset
    assert plain["configuration"]["config"] is None


def test_config_naming_a_preset_of_another_architecture_is_refused(run, tmp_path):
    out = tmp_path / "x.md"
    r = run("qwen3", "--vllm-root", str(MINI), "--config", "DeepSeek-V3", "-o", str(out))
    assert r.exit_code == 2 and "not Qwen3ForCausalLM" in r.output and len(r.output.strip().splitlines()) == 1
    assert not out.exists()


# -- the primary pair ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pair(real_tree):
    return str(real_tree("vllm==0.30.0")), str(real_tree("vllm-ascend==0.30.0rc2"))


@pytest.mark.realtree
def test_qwen3_8b_by_name_is_the_report_of_config_qwen3_8b(run, tmp_path, pair):
    vllm, ascend = pair
    texts = []
    for name, extra in (("a.md", ()), ("b.md", ("--config", "Qwen3-8B"))):
        out = tmp_path / name
        r = run("Qwen3-8B", "--vllm-root", vllm, "--ascend-root", ascend, "--lang", "en", "-o", str(out), *extra)
        assert r.exit_code == 0, r.output
        texts.append(out.read_text(encoding="utf-8"))
    assert texts[0] == texts[1]
    head = texts[0].split("### 1.")[0]
    assert f"what decided the walk: preset Qwen3-8B ({PRESETS['Qwen3-8B'].source})" in head
