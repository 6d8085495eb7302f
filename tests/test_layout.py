"""The layout holds: packages as layers (import contracts in pyproject.toml), none too large, data types out of
the walker, no dead code."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from .conftest import ROOT

SRC = ROOT / "src" / "fusion_analyze"


def _loaded_after(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(m for m in sys.modules if m.startswith('fusion_analyze')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def _contracts() -> list[dict]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]


def test_match_and_status_read_the_walks_data_not_the_walker():
    for module in ("fusion_analyze.match.matcher", "fusion_analyze.status.derive"):
        walk = {m for m in _loaded_after(module) if m.startswith("fusion_analyze.walk")}
        assert walk == set(), f"{module} pulls in {sorted(walk)}"
        assert "fusion_analyze.ir.ops" in _loaded_after(module)


def test_renderers_do_not_import_the_pipeline():
    for module in ("fusion_analyze.render.markdown", "fusion_analyze.render.json"):
        assert "fusion_analyze.analysis.pipeline" not in _loaded_after(module)


def test_the_import_contracts_hold():
    """lint-imports (import-linter) checks every contract of [tool.importlinter]: the layers, the binder that
    knows no values, match without status, the walk's rooms, renderers on report data."""
    exe = shutil.which("lint-imports")
    assert exe, "lint-imports is not installed: python -m pip install '.[test]'"
    result = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_every_package_of_src_is_a_layer_of_the_contract():
    """A package or module added at the top of src/ without a place in the layers would escape the contract."""
    layers = next(c for c in _contracts() if c["type"] == "layers" and "containers" not in c)["layers"]
    named = {name.strip() for layer in layers for name in layer.replace(":", "|").split("|")}
    top = {f"fusion_analyze.{p.stem if p.is_file() else p.name}" for p in SRC.iterdir()
           if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.name != "__init__.py")}
    assert top - named == set()


def test_no_subpackage_holds_more_than_a_third_of_src():
    lines = {p: len(p.read_text(encoding="utf-8").splitlines()) for p in SRC.rglob("*.py")}
    total = sum(lines.values())
    per = {}
    for p, n in lines.items():
        rel = p.relative_to(SRC).parts
        if len(rel) > 1:
            per[rel[0]] = per.get(rel[0], 0) + n
    assert {k: v for k, v in per.items() if v > total / 3} == {}, (per, total)


def test_src_is_pyflakes_clean():
    result = subprocess.run([sys.executable, "-m", "pyflakes", str(SRC)], capture_output=True, text=True)
    assert result.returncode == 0 and not result.stdout, result.stdout + result.stderr


def test_readme_is_short():
    """A short user README (ruff / semgrep style); the rest lives in docs/."""
    assert len((ROOT / "README.md").read_bytes()) <= 15 * 1024
