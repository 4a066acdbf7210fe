"""The rules a reviewer should not have to check by hand.

1. ARCHITECTURE.md's import direction, through import-linter's contracts
   (``[tool.importlinter]`` in pyproject.toml), run exactly as CI runs them.
2. The same rules for the standard library, read from the AST: import-linter
   only sees what ``include_external_packages`` makes visible, and the rules that
   matter most (no event loop in ``common``, no sockets in ``store``, no uvloop
   in Spark executors) must not depend on that setting.
3. STYLE.md's tidy limits: module ≤ 600 lines, function ≤ 60 lines (docstring
   excluded: the limit is on logic, and must not discourage documentation),
   and the sleep-and-hope ban in tests (a literal sleep ≥ 50 ms outside
   ``tests/support``; ``asyncio.sleep(0)``, a pure yield, stays allowed).

Each checker is a plain function, tested on small sources here, so a rule that
silently stopped matching would show.
"""

from __future__ import annotations

import ast
import asyncio.streams
import operator
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = REPO_ROOT / "aiorocketmq"
TESTS_DIR = REPO_ROOT / "tests"

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
MIN_FORBIDDEN_SLEEP_S = 0.05

# package prefix -> imports it must not make (a name or any submodule of it)
FORBIDDEN_IMPORTS: dict[str, tuple[str, ...]] = {
    "aiorocketmq.common": ("asyncio", "uvloop", "socket"),
    "aiorocketmq.store": ("socket", "asyncio.streams", "aiorocketmq.remoting"),
    "aiorocketmq.analytics": (
        "uvloop",
        "aiorocketmq.remoting",
        "aiorocketmq.broker",
        "aiorocketmq.client",
        "aiorocketmq.namesrv",
    ),
}

# ``from asyncio import open_connection`` is a use of asyncio.streams.
_STREAM_NAMES = frozenset(asyncio.streams.__all__)


def _python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _show(offenders: list[str]) -> str:
    text = "\n".join(f"  {o}" for o in offenders)
    print(text)  # also in the captured output, one offender per line
    return f"{len(offenders)} offender(s):\n{text}"


# -- 1. import-linter -----------------------------------------------------------------


def test_import_linter_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    assert lint_imports.exists(), f"import-linter is not installed beside {sys.executable}"
    result = subprocess.run(
        [str(lint_imports), "--no-cache", "--no-logo"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"lint-imports failed:\n{result.stdout}\n{result.stderr}"
    assert "broken" in result.stdout and " 0 broken" in result.stdout, result.stdout


# -- 2. imports read from the AST -----------------------------------------------------


def imported_names(
    source: str, module: str, *, is_package: bool = False
) -> Iterator[tuple[int, str]]:
    """Yield ``(line, dotted name)`` for every import in ``source``.

    ``from a import b`` yields ``a`` and ``a.b`` (b may be a submodule);
    relative imports are resolved against ``module``.
    """
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"
                if base == "asyncio" and alias.name in _STREAM_NAMES:
                    yield node.lineno, "asyncio.streams"


def forbidden_in(
    source: str, module: str, forbidden: tuple[str, ...], *, is_package: bool = False
) -> list[tuple[int, str]]:
    """``(line, name)`` of each import of a forbidden name or one of its submodules."""
    return sorted(
        {
            (line, name)
            for line, name in imported_names(source, module, is_package=is_package)
            if any(name == bad or name.startswith(bad + ".") for bad in forbidden)
        }
    )


@pytest.mark.parametrize("package", sorted(FORBIDDEN_IMPORTS))
def test_layers_do_not_import_what_they_must_not(package: str) -> None:
    package_dir = REPO_ROOT.joinpath(*package.split("."))
    assert package_dir.is_dir(), f"{package} is missing"
    offenders = [
        f"{path.relative_to(REPO_ROOT)}:{line} imports {name}"
        for path in _python_files(package_dir)
        for line, name in forbidden_in(
            path.read_text(),
            _module_name(path),
            FORBIDDEN_IMPORTS[package],
            is_package=path.name == "__init__.py",
        )
    ]
    assert not offenders, _show(offenders)


def test_import_reader_sees_relative_aliased_and_stream_imports() -> None:
    source = (
        "import socket as s\n"
        "from asyncio import open_connection\n"
        "from ..remoting import frame\n"
        "from . import sibling\n"
        "def f():\n    import uvloop\n"
    )
    names = {n for _, n in imported_names(source, "aiorocketmq.store.commit_log")}
    assert {"socket", "asyncio.streams", "aiorocketmq.remoting.frame", "uvloop"} <= names
    assert "aiorocketmq.store.sibling" in names
    init = {n for _, n in imported_names("from . import x\n", "pkg.sub", is_package=True)}
    assert "pkg.sub.x" in init
    source = "import asyncio_extras\nimport asyncio.events\n"
    assert forbidden_in(source, "aiorocketmq.common.x", ("asyncio",)) == [(2, "asyncio.events")]


# -- 3. tidy: sizes -------------------------------------------------------------------


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int, int]]:
    """``(qualified name, first line, length)`` of functions longer than ``limit``.

    Length runs from the ``def`` line to the last line, minus the docstring.
    """
    found: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}."
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                length -= _docstring_lines(child)
                if length > limit:
                    found.append((name.rstrip("."), child.lineno, length))
            visit(child, name)

    visit(ast.parse(source), "")
    return found


def _docstring_lines(func: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    first = func.body[0] if func.body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return (first.end_lineno or first.lineno) - first.lineno + 1
    return 0


def test_modules_stay_under_the_size_limit() -> None:
    offenders = []
    for path in _python_files(PACKAGE_DIR):
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            offenders.append(f"{path.relative_to(REPO_ROOT)}: {lines} lines > {MAX_MODULE_LINES}")
    assert not offenders, _show(offenders)


def test_functions_stay_under_the_size_limit() -> None:
    offenders = [
        f"{path.relative_to(REPO_ROOT)}:{line} {name}: {length} lines > {MAX_FUNCTION_LINES}"
        for path in _python_files(PACKAGE_DIR)
        for name, line, length in long_functions(path.read_text())
    ]
    assert not offenders, _show(offenders)


def test_function_length_counter() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(60))
    ok = f'def ok():\n    """Doc.\n\n    More doc.\n    """\n{body[: body.rindex(chr(10))]}\n'
    too_long = f"class C:\n    async def slow(self):\n{body.replace('    ', '        ')}\n"
    assert long_functions(ok) == []
    assert long_functions(too_long) == [("C.slow", 2, 61)]


# -- 3. tidy: no sleep-and-hope in tests -----------------------------------------------

_BINOPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _literal_seconds(node: ast.expr) -> float | None:
    """The value of a numeric literal (or constant arithmetic), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _literal_seconds(node.left), _literal_seconds(node.right)
        if (
            left is not None
            and right is not None
            and not (isinstance(node.op, ast.Div) and right == 0)
        ):
            return _BINOPS[type(node.op)](left, right)
    return None


def _sleep_callables(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Names bound to the time/asyncio modules, and to their ``sleep`` functions."""
    modules, sleeps = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name in ("time", "asyncio")}
        elif isinstance(node, ast.ImportFrom) and node.module in ("time", "asyncio"):
            sleeps |= {a.asname or a.name for a in node.names if a.name == "sleep"}
    return modules, sleeps


def long_sleeps(source: str) -> list[tuple[int, float]]:
    """``(line, seconds)`` of time/asyncio sleeps with a literal ≥ 50 ms."""
    tree = ast.parse(source)
    modules, sleeps = _sleep_callables(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        is_sleep = (isinstance(func, ast.Name) and func.id in sleeps) or (
            isinstance(func, ast.Attribute)
            and func.attr == "sleep"
            and isinstance(func.value, ast.Name)
            and func.value.id in modules
        )
        args = [*node.args[:1], *(k.value for k in node.keywords if k.arg in ("delay", "secs"))]
        for arg in args if is_sleep else []:
            seconds = _literal_seconds(arg)
            if seconds is not None and seconds >= MIN_FORBIDDEN_SLEEP_S:
                found.append((node.lineno, seconds))
    return sorted(found)


def test_tests_do_not_sleep_and_hope() -> None:
    support = TESTS_DIR / "support"
    offenders = [
        f"{path.relative_to(REPO_ROOT)}:{line} sleeps {seconds:g}s: wait_until a condition"
        for path in _python_files(TESTS_DIR)
        if support not in path.parents
        for line, seconds in long_sleeps(path.read_text())
    ]
    assert not offenders, _show(offenders)


def test_sleep_detector() -> None:
    source = (
        "import asyncio, time as t\n"
        "from time import sleep as nap\n"
        "async def f():\n"
        "    await asyncio.sleep(0)\n"
        "    await asyncio.sleep(0.01)\n"
        "    await asyncio.sleep(0.1)\n"
        "    t.sleep(1)\n"
        "    nap(secs=2 / 10)\n"
        "    await asyncio.sleep(delay)\n"
        "    'time.sleep(5) in a string is fine'\n"
    )
    assert long_sleeps(source) == [(6, 0.1), (7, 1.0), (8, 0.2)]
