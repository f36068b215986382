"""The docstrings' ``>>>`` examples run: every module of ``agent/`` and ``ui/`` whose source holds
one is imported and its doctests run (one case per module), so a new example is tested without
editing this file. An example that needs a model, a server or large data is not written with
``>>>``: its heading says so (``Example (not run: needs a model)::``), or its line carries
``# doctest: +SKIP``."""
from __future__ import annotations

import doctest
import importlib
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "ui")
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

# Modules that cannot be imported here, by name: the package they need and why it is missing.
# Where that package is installed, the module's doctests run like any other's.
UNIMPORTABLE = {
    "agent.decoding.vllm_processor": ("vllm", "needs vLLM (a GPU serving engine, not installed for the tests)"),
}


def doctest_modules() -> list[str]:
    """The dotted names of the modules of ``agent/`` and ``ui/`` whose source has a ``>>>`` line."""
    names = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if not any(line.lstrip().startswith(">>>") for line in path.read_text(encoding="utf-8").splitlines()):
                continue
            parts = path.relative_to(REPO).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            names.append(".".join(parts))
    return names


MODULES = doctest_modules()


def test_modules_found() -> None:
    assert len(MODULES) >= 5, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    if name in UNIMPORTABLE:
        package, reason = UNIMPORTABLE[name]
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{name}: {reason}")
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    report: list[str] = []
    tests = finder.find(module, name)
    assert tests, f"{name} has '>>>' lines but no doctest was found in its docstrings"
    for test in sorted(tests, key=lambda t: t.name):
        runner.run(test, out=report.append)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} doctest example(s) failed in {name}:\n" + "".join(report)
