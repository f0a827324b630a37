"""--graph FILE: the dependency graph as GraphML, DOT or node-link JSON, with the report's facts."""
from __future__ import annotations

import json

import networkx as nx
import pytest
from click.testing import CliRunner
from conftest import FIXTURES
from test_goldens import CASES, GOLDENS

from cuda4amd.report import graph_export
from cuda4amd.report.redact import PrivateStrings, Redactor


@pytest.fixture(scope="module")
def scans(rules):
    from cuda4amd.report.document import build
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    out = {}
    for case, (target, options) in CASES.items():
        if "host" not in options:
            result = run_scan(ScanOptions(target=str(target)), rules=rules)
            out[case] = (result, build(result))
    return out


def as_data(graph: nx.DiGraph):
    return (dict(graph.graph), {n: dict(a) for n, a in graph.nodes(data=True)},
            {(s, t): dict(a) for s, t, a in graph.edges(data=True)})


def test_the_scan_graph_and_the_graph_of_its_report_are_the_same(scans):
    for case, (result, document) in scans.items():
        attributed = graph_export.attributed(result.graph, document)
        assert set(attributed.nodes) == set(result.graph.nodes) and set(attributed.edges) == set(result.graph.edges), case
        assert as_data(attributed) == as_data(graph_export.from_document(document)), case


def test_nodes_and_edges_carry_family_route_and_load(scans):
    result, document = scans["pe"]
    graph = graph_export.attributed(result.graph, document)
    edge = graph.edges["delay_solver.dll", "lib:cusolver64_11.dll"]
    assert (edge["load"], edge["family"], edge["route"], edge["how"]) == ("delay", "solver", "blocked", "unresolved")
    edge = graph.edges["blas_mixed.dll", "lib:cublas64_12.dll"]
    assert (edge["route"], edge["replacement"], edge["implemented"], edge["stub"]) == ("redirect", "cublas64_12.dll", 3, 2)
    assert graph.edges["chain/chain_app.exe", "chain/chain_helper.dll"]["how"] == "same-folder"
    assert graph.nodes["lib:cublas64_12.dll"] == {
        "basis": "zluda-release", "cuda": True, "family": "blas", "kind": "library", "name": "cublas64_12.dll",
        "replacement": "cublas64_12.dll", "route": "redirect"}
    helper = graph.nodes["chain/chain_helper.dll"]
    assert (helper["kind"], helper["verdict"], helper["cuda"], helper["format"]) == ("binary", "blocked", True, "PE")
    assert graph.nodes["plain.dll"]["cuda"] is False
    assert graph.graph == {"schema": "cuda4amd.graph/1", "target": str(FIXTURES / "pe"), "verdict": "partial",
                           "zluda_release": "v6-preview.69"}


def test_files_read_back_with_networkx(scans, tmp_path):
    result, document = scans["pe"]
    graph = graph_export.attributed(result.graph, document)
    graph_export.write(graph, tmp_path / "g.graphml")
    graph_export.write(graph, tmp_path / "g.json")
    from_graphml = nx.read_graphml(tmp_path / "g.graphml")
    from_json = nx.node_link_graph(json.loads((tmp_path / "g.json").read_text()), edges="edges")
    for copy in (from_graphml, from_json):
        assert as_data(copy)[1:] == as_data(graph)[1:]
        assert graph.graph.items() <= copy.graph.items()


def test_dot_quotes_odd_names():
    graph = nx.DiGraph(schema="cuda4amd.graph/1")
    graph.add_node('we"ird\\dir/a b.dll', kind="binary", verdict="blocked", cuda=True)
    graph.add_node("lib:x.dll", kind="library", name="x.dll", route="stub")
    graph.add_edge('we"ird\\dir/a b.dll', "lib:x.dll", load="by-name", stub=3)
    dot = graph_export.dumps(graph, "dot")
    assert dot.startswith("digraph cuda4amd {\n") and dot.endswith("}\n")
    assert '"we\\"ird\\\\dir/a b.dll" -> "lib:x.dll" [load="by-name", stub="3", style="dashed"];' in dot
    assert '"lib:x.dll" [kind="library", name="x.dll", route="stub", label="x.dll", fillcolor="#fff4d6", shape="ellipse"];' in dot


def test_redaction_reaches_ids_and_attributes(scans):
    result, document = scans["demo-tool"]
    graph = graph_export.attributed(result.graph, document)
    graph.nodes["lib:nvcuda.dll"]["resolved"] = "/home/bob/sdk/nvcuda.dll"
    nx.relabel_nodes(graph, {"render.dll": "bob_render.dll"}, copy=False)
    redacted = graph_export.redacted(graph, Redactor(PrivateStrings(homes=("/home/bob",), users=("bob",)), cwd=str(FIXTURES)))
    assert redacted.nodes["lib:nvcuda.dll"]["resolved"] == "<home>/sdk/nvcuda.dll"
    assert "<user>_render.dll" in redacted.nodes and redacted.has_edge("tool.exe", "<user>_render.dll")
    assert redacted.graph["target"] == "demo/Tool"


def test_unknown_graph_extension_is_a_usage_error(tmp_path):
    from cuda4amd.cli import main

    result = CliRunner().invoke(main, ["scan", str(FIXTURES / "pe"), "--graph", str(tmp_path / "g.png")])
    assert result.exit_code == 2 and "graph format" in result.output
    with pytest.raises(graph_export.GraphFormatError):
        graph_export.write(nx.DiGraph(), tmp_path / "g.svg")


def test_graph_on_stdout_json_keeps_stdout_clean(tmp_path):
    from cuda4amd.cli import main

    runner = CliRunner(mix_stderr=False) if _mix_stderr() else CliRunner()
    result = runner.invoke(main, ["scan", str(FIXTURES / "demo" / "Tool"), "--host", "none", "--format", "json",
                                  "--graph", str(tmp_path / "g.json")])
    json.loads(result.stdout)  # the report alone
    assert "graph written to" in result.stderr
    assert json.loads((tmp_path / "g.json").read_text())["graph"]["schema"] == "cuda4amd.graph/1"


def _mix_stderr() -> bool:
    import inspect

    return "mix_stderr" in inspect.signature(CliRunner.__init__).parameters


def test_golden_graphs_exist_in_every_format():
    for case in ("demo-tool", "pe", "byname"):
        assert {p.name for p in (GOLDENS / case).glob("graph.*")} == {"graph.graphml", "graph.dot", "graph.json"}
