"""The test lanes (docs/testing.md): `pytest -m "not realtree"` reads no released tree.

tests/conftest.py marks `realtree` every test whose fixtures include `real_tree` (directly or through `session`,
`hf` or a module's own fixture). Here the offline lane is run over every test file that names a release
(`vllm==…`, `vllm-ascend==…`, `transformers==…`) with an empty cache and a pip that records its calls and fails:
the lane must pass without one call, so a test that reaches a tree any other way (a spec handed to the CLI, a
direct fetch) and so escapes the mark fails here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT

# A release as the fetcher reads it (fusion_analyze.sources.fetch): a file that names one may read a tree.
_RELEASE = re.compile(r"\b(?:vllm|vllm[-_]ascend|transformers)==[0-9]")


def _files_naming_a_release() -> list[str]:
    here = Path(__file__).name
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.py")
                  if p.name != here and _RELEASE.search(p.read_text(encoding="utf-8")))


def test_the_offline_lane_fetches_no_tree(tmp_path):
    files = _files_naming_a_release()
    assert "tests/test_real_walk.py" in files and "tests/test_cli_locate.py" in files
    calls = tmp_path / "pip-calls"
    pip = tmp_path / "pip"
    pip.write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\nexit 1\n', encoding="utf-8")
    pip.chmod(0o755)
    cache = tmp_path / "cache"
    cache.mkdir()
    # CI makes a fetch that fails an error rather than a skip: an unmarked test that fetches fails the lane
    env = dict(os.environ, FUSION_ANALYZE_CACHE=str(cache), FUSION_ANALYZE_PIP=str(pip), CI="1")
    env.pop("FUSION_ANALYZE_UPDATE_GOLDEN", None)
    r = subprocess.run([sys.executable, "-m", "pytest", "-m", "not realtree", "-q", "-p", "no:cacheprovider", *files],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    tail = r.stdout[-4000:] + r.stderr[-2000:]
    assert r.returncode == 0, tail
    assert not calls.exists(), calls.read_text(encoding="utf-8")
    assert not (cache / "trees").exists(), sorted(p.name for p in (cache / "trees").iterdir())
    deselected = re.search(r"(\d+) deselected", r.stdout)
    assert deselected and int(deselected.group(1)) > 100, tail  # the tests that read trees are marked
