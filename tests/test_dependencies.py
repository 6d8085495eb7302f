"""Every module the tests, the generated code and src/ import comes from a package the project declares (issue 47).

A clean `python -m pip install '.[test]'` must be enough for `python -m pytest`: an import that only works because
the machine happens to have a package (numpy for Triton's interpreter, say) fails a user's first run. `.ci/run`
installs into a fresh virtual environment for the same reason; this test says which import is missing, and where,
without building one.

What is checked, by reading the files (nothing is imported but the installed packages' metadata):
- src/ imports only the standard library, itself and the runtime dependencies;
- tests/ and the kernel templates (the code `--scaffold` writes) import only those and the `test` extra; imports
  that may fail (inside `try: ... except ImportError`, or `pytest.importorskip`) are optional and not counted;
- modules of a declared package that the tests run but that package does not declare (Triton's interpreter, which
  `TRITON_INTERPRET=1` runs, imports numpy) are provided by a declared dependency too.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib")  # Python 3.11+

# Modules of the project itself, and what the code `--scaffold` writes imports of its own folder or of the
# deployment it is integrated into (vllm / vllm-ascend / torch_npu exist on the NPU host, never in the tests: the
# generated code imports them only where it runs there, and the integration test skips without them).
LOCAL = {"fusion_analyze", "tests", "conftest"}
DEPLOYMENT = {"vllm", "vllm_ascend", "torch_npu"}


def _req_name(req: str) -> str:
    return re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0].lower().replace("_", "-")


def _declared() -> tuple[set[str], set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = {_req_name(r) for r in project["dependencies"]}
    test = {_req_name(r) for r in project["optional-dependencies"]["test"]}
    return runtime, runtime | test


@functools.lru_cache(maxsize=1)
def _distributions() -> dict:
    return md.packages_distributions()


def _providers(module: str) -> set[str]:
    """The distributions (normalised names) that install top-level `module`."""
    return {d.lower().replace("_", "-") for d in _distributions().get(module, [])}


def _optional_lines(tree: ast.AST) -> set[int]:
    """Lines of imports that may fail: in a try whose handlers catch ImportError / ModuleNotFoundError / Exception."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            caught = set()
            for h in node.handlers:
                types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
                caught |= {t.id for t in types if isinstance(t, ast.Name)} | ({"*"} if h.type is None else set())
            if caught & {"ImportError", "ModuleNotFoundError", "Exception", "*"}:
                for stmt in node.body:
                    for sub in ast.walk(stmt):
                        lines.add(getattr(sub, "lineno", -1))
    return lines


def _imports(source: str) -> list[tuple[int, str]]:
    """(line, top-level module) of each import that must succeed; relative imports are local."""
    tree = ast.parse(source)
    optional = _optional_lines(tree)
    out = []
    for node in ast.walk(tree):
        if node.lineno in optional if hasattr(node, "lineno") else False:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.append((node.lineno, node.module.split(".")[0]))
    return out


_IMPORT_LINE = re.compile(r"^[ \t]*(?:import ([\w.]+)|from ([\w.]+) import )", re.M)


def _template_imports(text: str) -> list[tuple[int, str]]:
    """(line, top-level module) of each import line of a Jinja template (not Python until rendered: read by line;
    a module named by a template expression is the generated folder's own)."""
    return [(text.count("\n", 0, m.start()) + 1, (m.group(1) or m.group(2)).split(".")[0])
            for m in _IMPORT_LINE.finditer(text)]


def _missing(files: list[tuple[Path, str]], allowed: set[str], extra_local: set[str] = frozenset(),
             reader=_imports) -> list[str]:
    stdlib = set(sys.stdlib_module_names)
    bad = []
    for path, source in files:
        for line, mod in reader(source):
            if mod in stdlib or mod in LOCAL or mod in extra_local:
                continue
            if not (_providers(mod) & allowed):
                bad.append(f"{path.relative_to(ROOT)}:{line}: imports {mod!r}, provided by "
                           f"{sorted(_providers(mod)) or 'no installed package'}, which pyproject.toml does not declare")
    return bad


def test_src_imports_only_runtime_dependencies():
    runtime, _ = _declared()
    files = [(p, p.read_text(encoding="utf-8")) for p in sorted((ROOT / "src").rglob("*.py"))]
    assert not _missing(files, runtime)


def test_tests_import_only_declared_dependencies():
    _, declared = _declared()
    own = {p.stem for p in (ROOT / "tests").glob("*.py")}
    files = [(p, p.read_text(encoding="utf-8")) for p in sorted((ROOT / "tests").rglob("*.py"))]
    assert not _missing(files, declared, own)


def test_generated_code_imports_only_declared_dependencies():
    """The kernels, tests, benchmarks and integrations `--scaffold` writes run with the test extra (and, for the
    integration, on the deployment's host: vllm / vllm_ascend / torch_npu)."""
    _, declared = _declared()
    templates = sorted((ROOT / "templates" / "kernels").glob("*.py.j2"))
    assert templates
    files = [(p, p.read_text(encoding="utf-8")) for p in templates]
    assert sum(len(_template_imports(src)) for _, src in files) > len(files)  # the reader sees their imports
    assert not _missing(files, declared, DEPLOYMENT, reader=_template_imports)


def test_what_the_interpreter_runs_is_declared():
    """Triton's interpreter (`TRITON_INTERPRET=1`, how the scaffold tests run kernels on a CPU) imports packages
    Triton itself does not require: each must be a declared dependency of the project or a requirement of Triton."""
    if not importlib.util.find_spec("triton"):
        pytest.skip("triton is not installed on this platform")
    _, declared = _declared()
    reqs = {_req_name(r) for r in (md.requires("triton") or []) if "extra ==" not in r}
    spec = importlib.util.find_spec("triton.runtime.interpreter")
    assert spec and spec.origin
    path = Path(spec.origin)
    stdlib = set(sys.stdlib_module_names)
    missing = [f"{path.name}:{line}: {mod}" for line, mod in _imports(path.read_text(encoding="utf-8"))
               if mod not in stdlib and mod != "triton" and not (_providers(mod) & (declared | reqs))]
    assert not missing, f"Triton's interpreter needs packages the test extra does not declare: {missing}"


def test_the_reader_sees_a_missing_dependency():
    """The check itself can fail: an import of a package nobody declares is reported with its file and line."""
    src = "import os\nimport numpy_not_declared_anywhere\ntry:\n    import optional_thing\nexcept ImportError:\n    pass\n"
    bad = _missing([(ROOT / "tests" / "x.py", src)], {"pytest"})
    assert bad == ["tests/x.py:2: imports 'numpy_not_declared_anywhere', provided by no installed package, "
                   "which pyproject.toml does not declare"]
