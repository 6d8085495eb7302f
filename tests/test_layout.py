"""The layout holds: small modules with one job, data types out of the walker, no dead code."""

from __future__ import annotations

import subprocess
import sys

from .conftest import ROOT

SRC = ROOT / "src" / "fusion_analyze"
MAX_LINES = 500


def _loaded_after(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(m for m in sys.modules if m.startswith('fusion_analyze')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_match_and_status_read_the_walks_data_not_the_walker():
    for module in ("fusion_analyze.match.matcher", "fusion_analyze.status.derive"):
        walk = {m for m in _loaded_after(module) if m.startswith("fusion_analyze.walk.")}
        assert walk == {"fusion_analyze.ir.ops"}, f"{module} pulls in {sorted(walk)}"


def test_renderers_do_not_import_the_pipeline():
    for module in ("fusion_analyze.render.markdown", "fusion_analyze.render.json"):
        assert "fusion_analyze.analysis.pipeline" not in _loaded_after(module)


def test_no_module_over_the_size_limit():
    sizes = {p.relative_to(SRC).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in SRC.rglob("*.py")}
    assert {k: v for k, v in sizes.items() if v > MAX_LINES} == {}


def test_src_is_pyflakes_clean():
    result = subprocess.run([sys.executable, "-m", "pyflakes", str(SRC)], capture_output=True, text=True)
    assert result.returncode == 0 and not result.stdout, result.stdout + result.stderr
