"""Issue 45, item 4: the compile path decided from the trees (passes/compile_path.py).

Which function `AscendCompiler.compile` runs (npugraph_ex_compile or fusion_pass_compile) follows from vLLM's
cudagraph_mode (the optimisation level's, or none with --enforce-eager / -O0), vllm-ascend's platform chain that
turns enable_npugraph_ex off, and the option's default; where each pass registers its patterns decides whether
it runs there. A pass that left the tree is said as the newer tree's release notes say: removed (0.23 -> 0.30:
MatmulAllReduceAddRMSNormPass, release_notes.md:300), moved to npugraph_ex (then not a regression), or unknown."""

from __future__ import annotations

import json

import pytest

from fusion_analyze.commands.diff import diff_paths, group_causes, to_markdown
from fusion_analyze.passes.compile_path import INDUCTOR, NPUGRAPH_EX, decide, left_the_tree, registries, release_notes


@pytest.fixture(scope="module")
def trees(real_tree):
    from fusion_analyze.analysis.session import Session

    out = {}
    for name, vllm, ascend in (("0.30", "vllm==0.30.0", "vllm-ascend==0.30.0rc2"),
                               ("0.23", "vllm==0.23.0", "vllm-ascend==0.23.0"),
                               ("0.13", "vllm==0.13.0", "vllm-ascend==0.13.0")):
        out[name] = Session.open(str(real_tree(vllm)), str(real_tree(ascend)))
    return out


def _at(path) -> list[str]:
    return [f"{c.file}:{c.line}" for c in path.evidence]


def test_vllm_defaults_run_the_pass_manager_through_fusion_pass_compile(trees):
    """O2's FULL_AND_PIECEWISE needs piecewise compilation, for which the platform turns npugraph_ex off."""
    p = decide(trees["0.30"].index)
    assert (p.compiler, p.registry, p.cudagraph_mode, p.mode, p.npugraph_ex) == (
        "fusion_pass_compile", INDUCTOR, "FULL_AND_PIECEWISE", "VLLM_COMPILE", False)
    assert _at(p) == ["vllm/config/vllm.py:440", "vllm/config/vllm.py:318", "vllm_ascend/platform.py:1310",
                      "vllm_ascend/compilation/compiler_interface.py:289"]
    assert "requires_piecewise_compilation()" in p.evidence[2].what
    p13 = decide(trees["0.13"].index)  # 0.13 turns FULL_AND_PIECEWISE into PIECEWISE first
    assert (p13.compiler, p13.cudagraph_mode) == ("fusion_pass_compile", "PIECEWISE")
    assert "vllm_ascend/platform.py:236" in _at(p13) and "vllm_ascend/platform.py:253" in _at(p13)


def test_eager_and_O0_compile_nothing(trees):
    for name in ("0.30", "0.23", "0.13"):
        for kw in ({"enforce_eager": True}, {"optimization_level": "O0"}):
            p = decide(trees[name].index, **kw)
            assert (p.compiler, p.registry, p.cudagraph_mode, p.mode) == ("eager", None, "NONE", "NONE"), (name, kw)
    p = decide(trees["0.30"].index, enforce_eager=True)
    assert "vllm/config/vllm.py:1546" in _at(p) and "vllm_ascend/platform.py:1305" in _at(p)
    assert p.stated == ("--enforce-eager",)


def test_full_graphs_only_keep_npugraph_ex_at_its_default(trees):
    p = decide(trees["0.30"].index, cudagraph_mode="FULL_DECODE_ONLY")
    assert (p.compiler, p.registry, p.npugraph_ex) == ("npugraph_ex_compile", NPUGRAPH_EX, True)
    assert "vllm_ascend/ascend_config.py:124" in _at(p) and "vllm_ascend/platform.py:1334" in _at(p)
    off = decide(trees["0.30"].index, cudagraph_mode="FULL_DECODE_ONLY",
                 additional_config={"ascend_compilation_config": {"enable_npugraph_ex": False}})
    assert off.compiler == "fusion_pass_compile" and "--additional-config enable_npugraph_ex=False" in off.stated
    # 0.13 reads the option at the top of additional_config, default False (ascend_config.py:131)
    p13 = decide(trees["0.13"].index, cudagraph_mode="FULL_DECODE_ONLY")
    assert p13.compiler == "fusion_pass_compile" and "vllm_ascend/ascend_config.py:131" in _at(p13)
    assert decide(trees["0.13"].index, cudagraph_mode="FULL_DECODE_ONLY",
                  additional_config={"enable_npugraph_ex": True}).compiler == "npugraph_ex_compile"


def test_where_each_pass_registers_its_patterns(trees):
    """0.23+: base_pattern.py's register hands each pattern to Inductor's matcher and to npugraph_ex; 0.13's
    passes/ register with Inductor only (its npugraph_ex patterns live in npugraph_ex_passes/)."""
    asc, _ = trees["0.30"].passes()
    for p in asc:
        regs = registries(trees["0.30"].index, p.file[:-3].replace("/", "."))
        assert {k: f"{c.file}:{c.line}" for k, c in regs.items()} == {
            INDUCTOR: "vllm_ascend/compilation/passes/base_pattern.py:56",
            NPUGRAPH_EX: "vllm_ascend/compilation/passes/base_pattern.py:58"}, p.name
    asc13, _ = trees["0.13"].passes()
    assert asc13 and all(set(registries(trees["0.13"].index, p.file[:-3].replace("/", "."))) == {INDUCTOR}
                         for p in asc13)


def test_a_declared_default_wins_over_a_later_get(trees):
    """0.23's AscendCompilationConfig declares fuse_allreduce_rms=False, synced into additional_config by
    platform.py, so the manager's `.get("fuse_allreduce_rms", True)` reads False; 0.13's fuse_qknorm_rope is
    `HAS_TRITON or fuse_qknorm_rope`: not decided."""
    by = {p.name: p for p in trees["0.23"].passes()[0]}
    ar = by["MatmulAllReduceAddRMSNormPass"]
    assert (ar.default, ar.default_file, ar.default_line, ar.default_on()) == (
        "False", "vllm_ascend/ascend_config.py", 613, False)
    qk = {p.name: p for p in trees["0.13"].passes()[0]}["QKNormRopeFusionPass"]
    assert qk.default == "HAS_TRITON or fuse_qknorm_rope" and qk.default_on() is None


def test_the_release_notes_say_the_allreduce_norm_pass_was_removed_not_moved(trees):
    old, new = release_notes(trees["0.23"].index), release_notes(trees["0.30"].index)
    assert old["file"] == new["file"] == "docs/source/user_guide/release_notes.md"
    said = left_the_tree("MatmulAllReduceAddRMSNormPass", old, new)
    assert (said["how"], said["line"]) == ("removed", 300)
    assert said["text"].startswith("- Removed matmul all-reduce and matmul all-reduce RMSNorm fusions.")
    # the npugraph_ex note naming the fusion (0.30's line 868) was already in 0.23's notes: no evidence of a move
    assert any("MatmulAllReduceAddRMSNorm" in t for _, t in old["lines"])
    assert left_the_tree("SequenceParallelismPass", old, new)["how"] == "unknown"


def _report(arch, status, passes, notes, fuser=True):
    ev = [{"file": "vllm_ascend/compilation/passes/ar.py", "line": 134,
           "what": "MatmulAllReduceAddRMSNormPass (pattern P: a -> b)"}] if fuser else []
    return {"model": {"architecture": arch}, "ops": [],
            "opportunities": [{"id": "allreduce_norm@L.f", "status": status, "scenario": "allreduce_norm",
                               "title": "allreduce norm", "evidence": ev}],
            "passes": {"ascend": [{"name": p} for p in passes], "cuda": []},
            "compile": {"release_notes": notes}}


def test_a_pass_moved_to_npugraph_ex_is_said_so_not_a_regression(tmp_path):
    old_notes = {"file": "docs/source/user_guide/release_notes.md", "lines": []}
    new_notes = {"file": "docs/source/user_guide/release_notes.md", "lines": [
        [12, "- The MatmulAllReduceAddRMSNorm fusion pass moved to npugraph_ex, which now fuses it by default."]]}
    for side, status, passes, notes in (("old", "fused_by_ascend_graph_pass", ["MatmulAllReduceAddRMSNormPass"], old_notes),
                                        ("new", "open", ["Other"], new_notes)):
        (tmp_path / side).mkdir()
        (tmp_path / side / "A.json").write_text(json.dumps(_report("A", status, passes, notes, side == "old")))
    diffs = diff_paths(str(tmp_path / "old"), str(tmp_path / "new"))
    assert not diffs[0].regressions and len(diffs[0].moved_out) == 1
    assert group_causes(diffs, True) == []
    md = to_markdown(diffs, "old", "new")
    assert "fused by npugraph_ex (outside the trees; release note docs/source/user_guide/release_notes.md:12)" in md
    assert "Regressions" not in md and "gone" not in md


def test_compare_says_the_removed_pass_with_its_release_note(run, real_tree):
    """0.23 with the pass enabled against the 0.30 pair: a regression whose cause cites 0.30's release note."""
    r = run("compare", "Qwen3ForCausalLM", "--base", str(real_tree("vllm==0.23.0")),
            "--base-ascend", str(real_tree("vllm-ascend==0.23.0")), "--head", str(real_tree("vllm==0.30.0")),
            "--head-ascend", str(real_tree("vllm-ascend==0.30.0rc2")),
            "--base-args", "--additional-config '{\"ascend_compilation_config\": {\"fuse_allreduce_rms\": true}}'",
            "--format", "json", "--fail-on", "none")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    causes = {c["subject"]: c for c in doc["causes"]["regressions"]}
    presence = causes["MatmulAllReduceAddRMSNormPass"]["presence"]
    assert presence.startswith("removed by the release: the new tree has no such pass (release note "
                               "docs/source/user_guide/release_notes.md:300: - Removed matmul all-reduce")
