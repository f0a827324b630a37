"""The package's layout rules, checked on its source (docs/design.md "Layout"):
no import cycles between cuda4amd's modules, no private name (`_x`) of one
module used by another, and the rules below the stages that use them.

Both read the modules with `ast`, so they see imports under TYPE_CHECKING and
inside functions too: a cycle hidden in either is still a cycle.
"""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PACKAGE = "cuda4amd"
SOURCE = Path(__file__).resolve().parents[2] / "scanner"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SOURCE).with_suffix("")
    parts = [PACKAGE, *rel.parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, ast.Module]:
    return {_module_name(p): ast.parse(p.read_text(encoding="utf-8"), str(p)) for p in sorted(SOURCE.rglob("*.py"))}


def _imports(tree: ast.Module, modules: dict[str, ast.Module]):
    """(module imported, names taken from it, line) for every cuda4amd import in `tree`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE):
                    yield alias.name, (), node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE) and node.level == 0:
            names = []
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                if sub in modules:  # `from cuda4amd.fix import plan`: a module, not a name
                    yield sub, (), node.lineno
                else:
                    names.append(alias.name)
            if names:
                yield node.module, tuple(names), node.lineno


def import_graph(modules: dict[str, ast.Module]) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, tree in modules.items():
        for target, _names, _line in _imports(tree, modules):
            if target in modules and target != name:
                graph.add_edge(name, target)
    return graph


def private_uses(modules: dict[str, ast.Module]) -> list[str]:
    """`from m import _x`, and `alias._x` where `alias` is an imported cuda4amd module."""
    found = []
    for name, tree in modules.items():
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(PACKAGE) and alias.asname:
                        aliases[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    if sub in modules:
                        aliases[alias.asname or alias.name] = sub
        for target, names, line in _imports(tree, modules):
            for n in names:
                if n.startswith("_") and not n.startswith("__"):
                    found.append(f"{name}:{line} imports {target}.{n}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                found.append(f"{name}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    return found


def test_the_package_is_read():
    modules = _modules()
    assert "cuda4amd.model" in modules and "cuda4amd.scan.pipeline" in modules
    assert import_graph(modules).number_of_edges() > 50


def test_no_import_cycles():
    graph = import_graph(_modules())
    cycles = list(nx.simple_cycles(graph))
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join([*c, c[0]]) for c in cycles[:10])


def test_no_private_name_is_used_outside_its_module():
    assert private_uses(_modules()) == []


#: what the rule data's code sits below (docs/design.md: rules "imports nothing from `scan/`")
ABOVE_RULES = ("scan", "fix", "cli", "report")


def upward_imports(modules: dict[str, ast.Module], package: str, above: tuple[str, ...]) -> list[str]:
    """Imports by a module of `package` (cuda4amd.<package> and below) of a module of an `above` package."""
    inside = f"{PACKAGE}.{package}"
    banned = tuple(f"{PACKAGE}.{a}" for a in above)
    found = []
    for name, tree in modules.items():
        if name != inside and not name.startswith(inside + "."):
            continue
        for target, _names, line in _imports(tree, modules):
            if any(target == b or target.startswith(b + ".") for b in banned):
                found.append(f"{name}:{line} imports {target}")
    return found


def test_rules_import_nothing_from_the_stages_above_them():
    assert upward_imports(_modules(), "rules", ABOVE_RULES) == []


def test_the_checks_catch_what_they_look_for():
    """Both checks, run on a made-up package, find the cycle and the private import."""
    modules = {
        "cuda4amd.a": ast.parse("from cuda4amd.b import _helper\n"),
        "cuda4amd.b": ast.parse("def f():\n    from cuda4amd.a import thing\n"),
        "cuda4amd.c": ast.parse("import cuda4amd.b as bee\nbee._hidden()\n"),
    }
    assert list(nx.simple_cycles(import_graph(modules))) != []
    assert private_uses(modules) == ["cuda4amd.a:1 imports cuda4amd.b._helper", "cuda4amd.c:2 uses cuda4amd.b._hidden"]
    layered = {
        "cuda4amd.rules.x": ast.parse("from cuda4amd.scan.distributions import canonical_name\n"),
        "cuda4amd.rules.y": ast.parse("def f():\n    import cuda4amd.report.json\n"),
        "cuda4amd.rules.z": ast.parse("from cuda4amd.project_names import canonical_name\n"),
        "cuda4amd.rulesets": ast.parse("from cuda4amd.cli import main\n"),  # not under cuda4amd.rules
    }
    assert upward_imports(layered, "rules", ABOVE_RULES) == [
        "cuda4amd.rules.x:1 imports cuda4amd.scan.distributions", "cuda4amd.rules.y:2 imports cuda4amd.report.json"]
