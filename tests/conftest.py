"""Shared fixtures: the hand-written mini trees and released trees fetched (and cached) with pip.

Lanes (docs/testing.md): a test reads a released tree only through the `real_tree` fixture (directly, or through
a fixture that requests it, such as `session` and `hf`); `pytest_collection_modifyitems` below marks every such
test `realtree`, so `pytest -m "not realtree"` is the offline lane. Likewise a test that requests the `torch`
fixture is marked `torch` and skips where PyTorch is not installed."""

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


# The fixtures through which a test reads a released tree: the hook marks each test that requests one of them
# (directly or through other fixtures: `item.fixturenames` is the closure) `realtree`.
REAL_TREE_FIXTURES = frozenset({"real_tree"})


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="write tests/golden/ from this run's output instead of comparing with it "
                          "(also FUSION_ANALYZE_UPDATE_GOLDEN=1)")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks added here
def pytest_collection_modifyitems(config, items):
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & REAL_TREE_FIXTURES:
            item.add_marker(pytest.mark.realtree)
        if "torch" in names:
            item.add_marker(pytest.mark.torch)


@pytest.fixture(scope="session")
def torch():
    """PyTorch, for a test that runs code needing it (the stubs' reference implementations); the test skips
    where torch is not installed."""
    return pytest.importorskip("torch")


@pytest.fixture(scope="session")
def update_golden(request) -> bool:
    """True under `pytest --update-golden` or FUSION_ANALYZE_UPDATE_GOLDEN=1: a golden test writes its file."""
    return bool(request.config.getoption("--update-golden")) or os.environ.get("FUSION_ANALYZE_UPDATE_GOLDEN") == "1"


@pytest.fixture(scope="session")
def real_tree():
    """The fetch function for released trees: `real_tree("vllm==0.30.0")` is that release's unpacked tree (a
    Path), fetched once into the user cache; skipped offline unless CI is set. Requesting this fixture is what
    marks a test `realtree`."""
    return _fetch_tree


_FETCHED: dict[str, Path] = {}


def _fetch_tree(spec: str) -> Path:
    """A released tree, fetched once into the user cache; skipped offline unless in CI. Reach it through the
    `real_tree` fixture, never directly, so that the test is marked `realtree`."""
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
    from fusion_analyze.semantics.for_backend import binding_decider
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
def session(real_tree):
    """The primary pair, vLLM 0.30.0 with vllm-ascend 0.30.0rc2, one session for every test that reads it
    (a test module that needs other trees defines its own `session`)."""
    from fusion_analyze.analysis.session import Session

    return Session.open(str(real_tree("vllm==0.30.0")), str(real_tree("vllm-ascend==0.30.0rc2")))


@pytest.fixture(scope="session")
def hf(real_tree):
    """transformers 5.23.0's tree: the configuration classes' defaults."""
    return str(real_tree("transformers==5.23.0"))
