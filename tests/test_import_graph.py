"""No import circle in starling.node or starling.orchestrator, counting every import.

grimp builds the import graph from the source: imports at module level, inside functions
and under ``TYPE_CHECKING`` alike, since a deferred import still makes one module need
another. A strongly connected component of more than one module is a circle; the failure
lists each one with the imports that close it. The layer contracts of ``[tool.importlinter]``
(``make lint``) say which way imports may go; this test holds the whole graph acyclic,
inside sub-packages too.
"""

from __future__ import annotations

from collections.abc import Iterable

import grimp
import pytest

PACKAGES = ("starling.node", "starling.orchestrator")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES)


def strongly_connected(modules: Iterable[str], imports) -> list[list[str]]:
    """Tarjan's algorithm: every strongly connected component of the graph whose edges
    are ``imports(module)``, each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(imports(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            components.append(sorted(component))

    for module in sorted(modules):
        if module not in index:
            visit(module)
    return components


def describe(graph: grimp.ImportGraph, circle: list[str]) -> str:
    members = set(circle)
    lines = [f"  a circle of {len(circle)} modules: {', '.join(circle)}; closed by"]
    for importer in circle:
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
            for detail in graph.get_import_details(importer=importer, imported=imported):
                lines.append(
                    f"    {importer} -> {imported} "
                    f"(line {detail['line_number']}: {detail['line_contents']})"
                )
    return "\n".join(lines)


def test_the_search_finds_a_circle_and_only_a_circle():
    """The component search itself, on a small graph with a known answer."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    components = strongly_connected(edges, edges.__getitem__)
    assert sorted(c for c in components if len(c) > 1) == [["a", "b", "c"]]


@pytest.mark.parametrize("package", ["starling.node", "starling.orchestrator"])
def test_no_import_circle(graph, package):
    ours = {m for m in graph.modules if m == package or m.startswith(package + ".")}
    circles = [
        c
        for c in strongly_connected(graph.modules, graph.find_modules_directly_imported_by)
        if len(c) > 1 and ours & set(c)
    ]
    assert not circles, (
        f"import circles in {package} (every import counts: module level, in a function, "
        "under TYPE_CHECKING); move the shared definition down or merge the modules:\n"
        + "\n".join(describe(graph, c) for c in circles)
    )
