"""The package's layers, read from its source: every import of an icl_race module (top-level or inside a
function) is an edge, and the edges must respect the layering and form no circle."""

import ast
from pathlib import Path

import pytest
from fresh_process import imported_by

PACKAGE = Path(__file__).parent.parent / "icl_race"

# (importer prefix, imported prefix): never allowed. A prefix names a module and everything below it.
FORBIDDEN = [
    ("icl_race.engine", "icl_race.config"),
    ("icl_race.engine", "icl_race.tasks"),
    ("icl_race.engine", "icl_race.models"),
    ("icl_race.engine", "icl_race.systems"),
    # the engine is pure: no checkpoints (orbax), no run directory, no driver of a run, no files
    ("icl_race.engine", "orbax"),
    ("icl_race.engine", "icl_race.rundir"),
    ("icl_race.engine", "icl_race.run"),
    ("icl_race.engine", "os"),
    ("icl_race.engine", "pathlib"),
    ("icl_race.engine", "shutil"),
    # what reads and renders results never drives a run
    ("icl_race.report", "icl_race.run"),
    ("icl_race.rundir", "icl_race.run"),
    ("icl_race.analysis", "icl_race.run"),
    ("icl_race.models", "icl_race.tasks"),
    ("icl_race.analysis", "icl_race.report"),
    ("icl_race.analysis", "icl_race.plots"),
    ("icl_race.analysis", "icl_race.rundir"),
    ("icl_race.analysis", "matplotlib"),
    ("icl_race", "icl_race.cli"),
    ("icl_race.rundir.files", "icl_race.rundir.write"),
    ("icl_race.rundir.verify", "icl_race.rundir.write"),
    ("icl_race.rundir.read", "icl_race.rundir.write"),
    ("icl_race.rundir.sweepdir", "icl_race.rundir.write"),
    ("icl_race.rundir.loading", "icl_race.rundir.write"),
    ("icl_race.rundir.layout", "icl_race.rundir.write"),
]
ENTRY = "icl_race.__main__"  # the console script's target (a signal handler, then cli): the one importer of cli


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(path: Path, modules: dict) -> set[str]:
    """Every module `path` imports: icl_race modules by full name, others by their top-level name."""
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            subs = {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules}
            out |= subs or {base}
    return {m if m.startswith("icl_race") else m.split(".")[0] for m in out if m} - {me}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: imports(path, modules) for name, path in modules.items()}


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def violations(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{a} imports {b}"
        for a, deps in graph.items()
        for b in deps
        for pa, pb in FORBIDDEN
        if _under(a, pa) and _under(b, pb) and a != pb and (a, b) != (ENTRY, "icl_race.cli")
    )


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Import circles among icl_race modules (Tarjan's strongly connected components of size > 1). A
    package's own submodules importing it back are not a circle: Python runs the package first."""
    edges = {a: {b for b in deps if b in graph and not _under(a, b)} for a, deps in graph.items()}
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_layers_hold():
    assert violations(_graph()) == []


def test_no_import_circle():
    assert circles(_graph()) == []


@pytest.mark.parametrize(
    "graph, broken",
    [
        (
            {"icl_race.engine.ensemble": {"icl_race.config"}, "icl_race.config": set()},
            ["icl_race.engine.ensemble imports icl_race.config"],
        ),
        (
            {"icl_race.models.x": {"icl_race.tasks.y"}, "icl_race.tasks.y": set()},
            ["icl_race.models.x imports icl_race.tasks.y"],
        ),
        ({"icl_race.analysis.s": {"matplotlib"}}, ["icl_race.analysis.s imports matplotlib"]),
        ({"icl_race.report": {"icl_race.cli"}, "icl_race.cli": set()}, ["icl_race.report imports icl_race.cli"]),
    ],
)
def test_the_checks_catch_what_they_forbid(graph, broken):
    assert violations(graph) == broken


def test_a_circle_is_found():
    graph = {
        "icl_race.a": {"icl_race.b"},
        "icl_race.b": {"icl_race.c"},
        "icl_race.c": {"icl_race.a"},
        "icl_race.p": set(),
        "icl_race.p.q": {"icl_race.p"},
    }
    assert circles(graph) == [["icl_race.a", "icl_race.b", "icl_race.c"]]


def test_imports_are_read_inside_functions_and_relative(tmp_path):
    modules = _modules()
    assert "icl_race.run.runner" in imports(PACKAGE / "cli.py", modules)  # imported inside a function
    assert "icl_race.plots.classification" in imports(PACKAGE / "report" / "classification_run.py", modules)


def test_loading_a_config_imports_no_jax_and_no_program():
    # The registry holds each system's sections and validation as code and its program and report by
    # name, so that the CLI's input errors and `icl-race report` stay free of jax (and its start-up time).
    code = (
        "from icl_race import config\nfor kind in ('classification', 'linear_regression', 'memorization'):\n"
        "    config.from_dict({'task': {'kind': kind}})\nconfig.from_dict({'model': {'kind': 'minimal'}})"
    )
    assert imported_by(code, ["jax", "icl_race.systems.classification", "icl_race.report", "matplotlib"]) == []


def test_every_registered_reference_resolves_inside_its_layer():
    from icl_race import systems
    from icl_race.configbase import resolve

    for s in systems.SYSTEMS:
        program = resolve(s.program)
        assert program.__module__.startswith("icl_race.systems.") and hasattr(program, "from_config"), s
        assert s.program.partition(":")[0] in _modules(), s  # a module the layering checks above read
        if s.report is None:
            assert s.no_report, s
        else:
            assert _under(s.report, "icl_race.report") and s.report in _modules(), s
            assert hasattr(resolve(s.report), "run_report"), s


def test_the_engine_opens_no_file():
    # `open` is a builtin, so the import rules above cannot see it: the engine computes, run/ and rundir/ write.
    calls = [
        f"{p.name}:{n.lineno}"
        for p in (PACKAGE / "engine").glob("*.py")
        for n in ast.walk(ast.parse(p.read_text()))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "open"
    ]
    assert calls == []


def test_the_top_of_the_package_is_its_entry_and_its_config():
    # run/, rundir/, report/, systems/, engine/ ... hold the rest (docs/architecture.md): a loose module at
    # the top is a room nobody owns.
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "cli.py", "config.py", "configbase.py"]
