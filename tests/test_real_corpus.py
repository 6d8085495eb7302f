"""Corpus sweep: `all` over three whole releases must end with zero internal errors."""

from __future__ import annotations

import json
import sys

import pytest

from fusion_analyze.commands.batch import BatchJob, run_batch
from fusion_analyze.locate.registry import TEXT_TABLE, served_text_model
from fusion_analyze.analysis.session import Session

from .completeness import figures

INTERNAL = ("internal error", "worker died", "timed out")


# The share of architectures whose report gives a complete decoder layer (tests/completeness.py), measured
# (docs/walk.md, with the Transformers backend's architectures): 0.13.0 117/118, 0.30.0 133/136, 0.34.0
# 146/149; issue 17 asks 95 % of each.
@pytest.mark.parametrize("vllm,ascend,floor", [
    ("vllm==0.13.0", "vllm-ascend==0.13.0", 0.95),
    ("vllm==0.30.0", "vllm-ascend==0.30.0rc2", 0.95),
    ("vllm==0.34.0", None, 0.95),
])
def test_all_on_a_release_has_no_internal_error(tmp_path, vllm, ascend, floor, real_tree):
    vroot = str(real_tree(vllm))
    aroot = str(real_tree(ascend)) if ascend else None
    s = Session.open(vroot, aroot, cache=False)
    # the text-generation table and the architectures the Transformers backend serves (read with transformers')
    archs = sorted({e.architecture for e in s.resolver.entries if e.table == TEXT_TABLE or served_text_model(e)})
    hf = str(real_tree("transformers==5.23.0"))
    results = run_batch(BatchJob(vroot, aroot, None, str(tmp_path / "out"), hf_root=hf), archs, workers=2, timeout=600)
    bad = [r for r in results if not r["ok"] and r["error"].startswith(INTERNAL)]
    refused = [r for r in results if not r["ok"] and not r["error"].startswith(INTERNAL)]
    print(f"\ncorpus {vllm}{' + ' + ascend if ascend else ''}: {len(results) - len(bad) - len(refused)}/{len(results)} "
          f"architectures analyzed, {len(refused)} refused with a clear error, {len(bad)} internal errors", file=sys.stderr)
    for r in refused:
        print(f"  refused {r['architecture']}: {r['error']}", file=sys.stderr)
    reports = {r["architecture"]: json.loads((tmp_path / "out" / f"{r['architecture']}.json").read_text())
               for r in results if r["ok"]}
    good, total, missing = figures(reports)
    total = len(results)  # a refused architecture counts against the share
    print(f"sweep {vllm}: {good}/{total} ({good / total:.1%}) give a complete decoder layer; not: {missing}",
          file=sys.stderr)
    assert not bad, bad
    assert len(results) >= 50
    assert good / total >= floor
