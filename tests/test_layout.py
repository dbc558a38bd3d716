"""The names a newcomer navigates by (docs/layout.md): tests/ mirrors icl_race/, so that every module with
logic has a test file of its name (icl_race/run/pack.py: tests/run/test_pack.py) or a line of
docs/layout.md naming the test that covers it; no two modules share a basename unless docs/layout.md lists
them as one role in parallel packages; an `__init__.py` only re-exports; every test path named exists."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "icl_race"
LAYOUT = ROOT / "docs" / "layout.md"


def _block(title: str) -> list[str]:
    """The lines of the fenced block under docs/layout.md's `## title`."""
    body = LAYOUT.read_text().split(f"\n## {title}\n", 1)[1]
    return [line for line in body.split("```\n", 2)[1].splitlines() if line.strip()]


def _has_logic(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for n in tree.body)


def modules() -> list[str]:
    """Every module of the package that defines a function or a class, relative to icl_race/."""
    found = (p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" and _has_logic(p))
    return sorted(str(p.relative_to(PACKAGE)) for p in found)


def mirror(module: str) -> str:
    """The test file of a module's name: run/sweep/plan.py -> tests/run/sweep/test_plan.py."""
    path = Path(module)
    return str(Path("tests") / path.parent / f"test_{path.name}")


def covering() -> dict[str, str]:
    """docs/layout.md's `## Tests` lines, `tests/X.py  a.py, pkg/b.py`: module -> the test covering it."""
    out: dict[str, str] = {}
    for line in _block("Tests"):
        test, modules = line.split(maxsplit=1)
        for m in (m.strip() for m in modules.split(",")):
            assert m not in out, f"docs/layout.md names two tests for {m}"
            out[m] = test
    return out


def uncovered(mods: list[str], cover: dict[str, str], exists) -> list[str]:
    """The modules with neither a test file of their name nor a covering test named (`exists(path)`)."""
    return [m for m in mods if not exists(mirror(m)) and not (m in cover and exists(cover[m]))]


def shared(paths: list[str]) -> dict[str, set[str]]:
    """Basename -> the folders of the modules sharing it (`paths` relative to icl_race/), where shared."""
    found: dict[str, set[str]] = {}
    for p in map(Path, paths):
        if p.name != "__init__.py":
            found.setdefault(p.name, set()).add(str(p.parent))
    return {name: folders for name, folders in found.items() if len(folders) > 1}


def listed() -> dict[str, set[str]]:
    """docs/layout.md's `## Shared names` lines, `name.py  a/, b/: why`: basename -> the folders."""
    out = {}
    for line in _block("Shared names"):
        name, rest = line.split(maxsplit=1)
        out[name] = {f.strip().rstrip("/") for f in rest.split(":", 1)[0].split(",")}
    return out


def test_every_module_with_logic_has_a_test_of_its_name_or_a_line_naming_the_test_that_covers_it():
    cover = covering()
    assert uncovered(modules(), cover, lambda p: (ROOT / p).exists()) == []
    stale = {m: t for m, t in cover.items() if not (PACKAGE / m).exists() or not (ROOT / t).exists()}
    assert stale == {}, "docs/layout.md names a module or a test that does not exist"
    twice = [m for m, t in cover.items() if (ROOT / mirror(m)).exists()]
    assert twice == [], "docs/layout.md names a covering test for a module that has a test of its name"


def test_no_two_modules_share_a_basename_unless_listed_as_one_role_in_parallel_packages():
    assert shared([str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")]) == listed()


def test_a_test_folder_is_a_folder_of_the_package():
    # tests/run/sweep/ for icl_race/run/sweep/; the files at the top of tests/ are the top modules' (cli,
    # config) and those across the package (docs, layering, errors, integrity, ...).
    found = [p.relative_to(ROOT / "tests") for p in (ROOT / "tests").rglob("test_*.py")]
    assert [str(f) for f in found if f.parent != Path(".") and not (PACKAGE / f.parent).is_dir()] == []


def test_an_init_only_re_exports():
    # Its docstring, imports, __all__ and __version__. plots/ also picks matplotlib's backend: that must come
    # before any of its modules imports pyplot, so in the one file that runs before each of them.
    logic = []
    for p in PACKAGE.rglob("__init__.py"):
        for n in ast.parse(p.read_text()).body:
            if isinstance(n, ast.Import | ast.ImportFrom) or (
                isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
            ):
                continue
            if isinstance(n, ast.Assign) and {getattr(t, "id", "") for t in n.targets} <= {"__all__", "__version__"}:
                continue
            if p.parent.name == "plots" and ast.unparse(n) == "matplotlib.use('Agg')":
                continue
            logic.append(f"{p.relative_to(PACKAGE)}:{n.lineno}")
    assert logic == []


def test_every_test_path_named_in_the_docs_the_package_and_the_tests_exists():
    texts = [*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md"), *PACKAGE.rglob("*.py"), ROOT / "Makefile"]
    texts += [*(ROOT / ".ci").rglob("*"), *(p for p in (ROOT / "tests").rglob("*.py") if p.name != "test_layout.py")]
    named = {
        (m, str(p.relative_to(ROOT)))
        for p in texts
        if p.is_file()
        for m in re.findall(r"tests/[\w/]+\.py", p.read_text())
    }
    assert sorted(f"{m} (named in {p})" for m, p in named if not (ROOT / m).exists()) == []


def test_the_checks_see_a_module_without_its_test_and_a_name_shared_unlisted():
    assert mirror("run/sweep/plan.py") == "tests/run/sweep/test_plan.py" and mirror("cli.py") == "tests/test_cli.py"
    have = {"tests/run/test_runner.py", "tests/run/sweep/test_sweep.py"}
    mods = ["run/runner.py", "run/sweep/plan.py", "run/sweep/spec.py"]
    cover = {"run/sweep/plan.py": "tests/run/sweep/test_sweep.py", "run/sweep/spec.py": "tests/run/sweep/test_gone.py"}
    assert uncovered(mods, cover, have.__contains__) == ["run/sweep/spec.py"]
    assert shared(["a/x.py", "b/x.py", "a/y.py", "a/__init__.py", "b/__init__.py"]) == {"x.py": {"a", "b"}}
