"""CI formats (issue 37, item 5): `--format sarif` (SARIF 2.1.0, validated against the OASIS schema vendored in
schemas/sarif-2.1.0.json) and `--format github` (workflow annotations), for one model and for `diff`."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from fusion_analyze.render.sarif import to_annotations

from .conftest import MINI, ROOT

_VALIDATOR = None


def validate_sarif(doc: dict) -> None:
    global _VALIDATOR
    jsonschema = pytest.importorskip("jsonschema")
    if _VALIDATOR is None:
        schema = json.loads((ROOT / "schemas" / "sarif-2.1.0.json").read_text(encoding="utf-8"))
        assert schema["id"].endswith("/sarif-schema-2.1.0.json") and schema["properties"]["version"]["enum"] == ["2.1.0"]
        jsonschema.Draft4Validator.check_schema(schema)
        _VALIDATOR = jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = sorted(_VALIDATOR.iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "; ".join(f"{list(e.path)}: {e.message[:200]}" for e in errors[:5])


def test_the_vendored_schema_rejects_what_sarif_does_not_allow():
    validate_sarif({"version": "2.1.0", "runs": []})
    jsonschema = pytest.importorskip("jsonschema")
    bad = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}},
                                         "results": [{"message": {"text": "m"}, "level": "severe"}]}]}
    with pytest.raises(AssertionError):
        validate_sarif(bad)
    with pytest.raises(AssertionError):
        validate_sarif({"version": "2.1.0", "runs": [{"tool": {"driver": {}}}]})  # a driver needs a name
    assert jsonschema  # (imported for the skip)


def _report(run, tmp_path, *extra):
    path = tmp_path / "q.json"
    r = run("qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--format", "json", "-o", str(path), *extra)
    assert r.exit_code == 0, r.stderr
    return json.loads(path.read_text(encoding="utf-8"))


def test_analyze_sarif_has_one_result_per_open_opportunity_with_file_line_and_pattern_rules(run, tmp_path):
    doc = _report(run, tmp_path)
    opens = [o for o in doc["opportunities"] if o["status"] == "open"]
    assert opens
    r = run("qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--format", "sarif")
    assert r.exit_code == 0 and r.stderr == "", r.stderr
    log = json.loads(r.stdout)
    validate_sarif(log)
    (sarif_run,) = log["runs"]
    results, rules = sarif_run["results"], sarif_run["tool"]["driver"]["rules"]
    assert sarif_run["tool"]["driver"]["name"] == "fusion-analyze"
    assert len(results) == len(opens)
    by_id = {r["id"]: r for r in rules}
    assert len(by_id) == len(rules) == len({o["scenario"] for o in opens})  # one rule per pattern
    for res, o in zip(results, opens):
        assert res["ruleId"] == o["scenario"] and rules[res["ruleIndex"]]["id"] == o["scenario"]
        loc = res["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uri"] == o["file"] and not o["file"].startswith("/")
        assert loc["region"]["startLine"] == o["line"]
        assert (MINI / o["file"]).is_file()  # relative to the tree root
        assert o["id"] in res["message"]["text"]
        assert res["partialFingerprints"]["fusionAnalyze/v1"] == f"Qwen3ForCausalLM:{o['id']}"
        rule = by_id[o["scenario"]]
        assert rule["shortDescription"]["text"] == o["title"]["en"]  # rule metadata from the pattern's title
        assert rule["properties"]["title_zh"] == o["title"]["zh"] and rule["properties"]["category"] == o["category"]
        assert rule["fullDescription"]["text"] == o["message"]["en"]
    # -o DIR/ names the file after the architecture, with the format's extension
    r = run("qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--format", "sarif", "-o", f"{tmp_path}/out/")
    assert r.exit_code == 0, r.stderr
    validate_sarif(json.loads((tmp_path / "out" / "Qwen3ForCausalLM.sarif").read_text(encoding="utf-8")))


ANNOTATION = re.compile(r"^::(warning|notice|error) file=([^,]+),line=(\d+),title=([^:]+)::(.+)$")


def test_analyze_github_annotations_are_one_workflow_command_per_open_opportunity(run, tmp_path):
    doc = _report(run, tmp_path)
    opens = [o for o in doc["opportunities"] if o["status"] == "open"]
    r = run("qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--format", "github")
    assert r.exit_code == 0 and r.stderr == "", r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(opens)
    for line, o in zip(lines, opens):
        m = ANNOTATION.match(line)
        assert m, line
        level, file, lineno, title, message = m.groups()
        assert (file, int(lineno)) == (o["file"], o["line"])
        assert title == f"Qwen3ForCausalLM%3A {o['title']['en']}" and o["id"] in message
        assert level == ("notice" if o["benefit"].get("rejected") else "warning")


def test_annotation_text_is_escaped():
    finding = {"rule": {"id": "x", "title": "t"}, "level": "warning", "file": "a,b:c.py", "line": 3,
               "title": "A: b, c", "message": "50% done\nnext line"}
    assert to_annotations([finding]) == "::warning file=a%2Cb%3Ac.py,line=3,title=A%3A b%2C c::50%25 done%0Anext line\n"


@pytest.fixture
def two_sides(tmp_path, run):
    v2 = tmp_path / "v2"
    shutil.copytree(MINI, v2)
    p = v2 / "vllm_ascend/compilation/passes/qknorm_rope_fusion_pass.py"
    p.write_text(p.read_text(encoding="utf-8").replace("torch.ops.vllm.npu_rotary_embedding(",
                                                       "torch.ops.npu.npu_apply_rotary_pos_emb("), encoding="utf-8")
    out = {}
    for name, root in (("old", MINI), ("new", v2)):
        r = run("all", "--vllm-root", str(root), "--ascend-root", str(root), "-o", str(tmp_path / name),
                "--only", "Qwen2*,Qwen3ForCausalLM,Hybrid*", "--lang", "en")
        assert r.exit_code == 0, r.stderr
        out[name] = tmp_path / name
    out["v2"] = v2
    return out


def test_diff_sarif_has_one_result_per_cause_naming_the_models_it_covers(run, two_sides):
    """Issue 47: a release diff is one result per cause (not one per model on the same line), at the place most of
    its regressions share, naming the models and scenarios; every location names its tree's base."""
    r = run("diff", str(two_sides["old"]), str(two_sides["new"]), "--format", "sarif", "--lang", "en")
    assert r.exit_code == 1 and r.stderr == "", r.stderr  # the exit code does not depend on the format
    log = json.loads(r.stdout)
    validate_sarif(log)
    results = log["runs"][0]["results"]
    doc = json.loads(run("diff", str(two_sides["old"]), str(two_sides["new"]), "--format", "json").stdout)
    regressions = [(m["architecture"], c) for m in doc["models"] for c in m["regressions"]]
    causes = doc["causes"]["regressions"]
    assert len(regressions) == 4 and len(causes) == 1
    assert len(results) == len(causes)
    (res,) = results
    assert "Cause: " not in res["message"]["text"] and "Ascend graph pass `QKNormRopeFusionPass`" in res["message"]["text"]
    assert sorted(res["properties"]["models"]) == sorted({a for a, _ in regressions})
    assert res["properties"]["regressions"] == 4
    assert sorted(res["properties"]["opportunities"]) == sorted(f"{a}:{c['id']}" for a, c in regressions)
    assert res["partialFingerprints"]["fusionAnalyze/v1"] == "pass:QKNormRopeFusionPass"
    loc = res["locations"][0]["physicalLocation"]
    assert (loc["artifactLocation"]["uri"], loc["region"]["startLine"]) in {(c["file"], c["line"]) for _, c in regressions}
    assert loc["artifactLocation"]["uriBaseId"] == "VLLM"
    old = [x["physicalLocation"]["artifactLocation"] for x in res["relatedLocations"]]
    assert {"uri": "vllm_ascend/compilation/passes/qknorm_rope_fusion_pass.py", "uriBaseId": "VLLM_ASCEND"} in old
    bases = log["runs"][0]["originalUriBaseIds"]
    assert set(bases) == {"VLLM", "VLLM_ASCEND"}
    assert "--sarif-root VLLM=PREFIX" in bases["VLLM"]["description"]["text"]
    gh = run("diff", str(two_sides["old"]), str(two_sides["new"]), "--format", "github", "--fail-on", "none")
    assert gh.exit_code == 0 and gh.stderr == ""
    lines = gh.stdout.splitlines()
    assert len(lines) == 1 and ANNOTATION.match(lines[0]) and lines[0].startswith("::warning ")
    same = run("diff", str(two_sides["old"]), str(two_sides["old"]), "--format", "sarif")
    assert same.exit_code == 0
    validate_sarif(json.loads(same.stdout))
    assert json.loads(same.stdout)["runs"][0]["results"] == []


def test_sarif_root_maps_each_tree_into_the_jobs_repository(run, two_sides):
    r = run("diff", str(two_sides["old"]), str(two_sides["new"]), "--format", "sarif",
            "--sarif-root", "VLLM=third_party/vllm/", "--sarif-root", "vllm_ascend=third_party/vllm-ascend")
    assert r.exit_code == 1, r.stderr
    log = json.loads(r.stdout)
    validate_sarif(log)
    bases = log["runs"][0]["originalUriBaseIds"]
    assert bases["VLLM"]["uri"] == "third_party/vllm/" and bases["VLLM"]["uriBaseId"] == "%SRCROOT%"
    assert bases["VLLM_ASCEND"]["uri"] == "third_party/vllm-ascend/"
    gh = run("diff", str(two_sides["old"]), str(two_sides["new"]), "--format", "github", "--fail-on", "none",
             "--sarif-root", "VLLM=third_party/vllm/")
    assert "file=third_party/vllm/vllm/model_executor/" in gh.stdout
    for bad in ("VLLM", "NOPE=x/", "VLLM=/abs/path", "VLLM=../up"):
        r = run("diff", str(two_sides["old"]), str(two_sides["new"]), "--format", "sarif", "--sarif-root", bad)
        assert r.exit_code == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, (bad, r.stderr)
        assert "--sarif-root" in r.stderr


def test_analyze_sarif_names_each_trees_base(run):
    r = run("qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--format", "sarif")
    log = json.loads(r.stdout)
    validate_sarif(log)
    locs = [loc for res in log["runs"][0]["results"] for loc in res.get("locations", []) + res.get("relatedLocations", [])]
    assert locs and all(loc["physicalLocation"]["artifactLocation"]["uriBaseId"] in log["runs"][0]["originalUriBaseIds"]
                        for loc in locs)
    assert "0.99.0" in log["runs"][0]["originalUriBaseIds"]["VLLM"]["description"]["text"]  # the tree's release


def test_diff_of_two_models_is_refused_unless_asked(run, tmp_path):
    paths = []
    for model in ("qwen3", "qwen2"):
        out = tmp_path / f"{model}.json"
        r = run(model, "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--format", "json", "-o", str(out))
        assert r.exit_code == 0, r.stderr
        paths.append(str(out))
    r = run("diff", *paths)
    assert r.exit_code == 2 and r.stdout == "" and "--different-models" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = run("diff", *paths, "--different-models", "--fail-on", "none")
    assert r.exit_code == 0 and "→" in r.stdout


def test_compare_writes_sarif_too(run, two_sides, tmp_path):
    out = tmp_path / "cmp.sarif"
    r = run("compare", "Qwen3ForCausalLM", "--base", str(MINI), "--head", str(two_sides["v2"]),
            "--ascend-root", str(MINI), "--head-ascend", str(two_sides["v2"]), "--format", "sarif", "-o", str(out))
    assert r.exit_code == 1 and r.stderr == "", r.stderr
    log = json.loads(out.read_text(encoding="utf-8"))
    validate_sarif(log)
    (res,) = log["runs"][0]["results"]  # one cause: the pass both scenarios lost
    assert res["properties"]["scenarios"] == ["qknorm_rope", "qkv_split_norm_rope"]


def test_past_ten_annotations_a_closing_notice_says_how_many_there_are():
    found = [{"rule": {"id": "x", "title": "t"}, "level": "warning", "file": "f.py", "line": i, "message": "m"}
             for i in range(1, 13)]
    lines = to_annotations(found).splitlines()
    assert len(lines) == 13 and lines[-1].startswith("::notice title=fusion-analyze::12 annotations")
    assert "::notice" not in to_annotations(found[:10])
