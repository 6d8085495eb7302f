"""Shared fixtures: the hand-written mini trees and released trees fetched (and cached) with pip."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fusion_analyze.cli import app
from fusion_analyze.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
MINI = FIXTURES / "mini"


@pytest.fixture
def mini(tmp_path) -> Path:
    """A private copy of the mini tree, so a test may change it."""
    dest = tmp_path / "mini"
    shutil.copytree(MINI, dest)
    return dest


@pytest.fixture
def run():
    runner = CliRunner()

    def _run(*args: str):
        result = runner.invoke(app, list(args))
        return result

    return _run


_FETCHED: dict[str, Path] = {}


def real_tree(spec: str) -> Path:
    """A released tree, fetched once into the user cache; skipped offline unless in CI."""
    if spec in _FETCHED:
        return _FETCHED[spec]
    from fusion_analyze.sources.fetch import fetch_spec

    try:
        path = fetch_spec(spec)
    except UserError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"cannot fetch {spec}: {exc.message}")
    _FETCHED[spec] = path
    return path


def tree_index(tmp_path: Path, files: dict, backend: str = "ascend"):
    """A ModuleIndex over a small vllm tree made of `files` (path under vllm/ -> source text or bytes), every
    folder a package: for tests of one idiom."""
    from fusion_analyze.index.modules import ModuleIndex
    from fusion_analyze.semantics.evaluator import binding_decider
    from fusion_analyze.sources.trees import open_tree

    pkg = tmp_path / "vllm"
    (pkg / "model_executor").mkdir(parents=True, exist_ok=True)
    for rel, source in files.items():
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for folder in [path.parent, *path.parent.parents]:
            if folder == tmp_path:
                break
            (folder / "__init__.py").touch()
        path.write_bytes(source if isinstance(source, bytes) else source.encode("utf-8"))
    (pkg / "__init__.py").touch()
    return ModuleIndex([open_tree(str(tmp_path), "vllm", required=True)], backend=backend, decider=binding_decider)


_SCHEMA = None


def validate_report(doc: dict) -> None:
    """Every JSON report a test produces must follow schemas/report.schema.json."""
    global _SCHEMA
    import json

    import jsonschema

    if _SCHEMA is None:
        _SCHEMA = json.loads((ROOT / "schemas" / "report.schema.json").read_text(encoding="utf-8"))
    errors = sorted(jsonschema.Draft202012Validator(_SCHEMA).iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "; ".join(f"{list(e.path)}: {e.message[:200]}" for e in errors[:5])


@pytest.fixture(scope="session")
def session():
    """The primary pair, vLLM 0.30.0 with vllm-ascend 0.30.0rc2, one session for every test that reads it
    (a test module that needs other trees defines its own `session`)."""
    from fusion_analyze.analysis.session import Session

    return Session.open(str(real_tree("vllm==0.30.0")), str(real_tree("vllm-ascend==0.30.0rc2")))


@pytest.fixture(scope="session")
def hf():
    """transformers 5.23.0's tree: the configuration classes' defaults."""
    return str(real_tree("transformers==5.23.0"))
