"""The dependency graph as a file: GraphML, Graphviz DOT or node-link JSON.

Nodes are the scanned binaries (their relative path) and the libraries found
outside the tree or nowhere (``lib:<name>``, the name folded to lower case
for Windows), as in `cuda4amd.graph.dependency_graph`; edges say who loads what.
`attributed` decorates a scan's networkx graph with what the report knows;
`from_document` rebuilds the same graph from a report document (a saved
JSON report), so `cuda4amd report scan.json --graph g.graphml` needs no
re-scan.

Node attributes: ``kind`` (``binary`` | ``library``), ``cuda``; binaries:
``format``, ``file_kind``, ``machine``, ``verdict``, ``reason`` (the
deciding one), ``distribution``, ``kernels``; libraries: ``name``,
``resolved``; both, for NVIDIA libraries: ``family``, ``route``, ``basis``,
``replacement``. Edge attributes: ``load`` (``static`` | ``delay`` |
``by-name``), ``how``, ``name``, ``family``, ``route``, ``basis``,
``replacement``, and the number of imported functions per state
(``implemented``, ``stub``, ``missing``, ``unchecked``, ``ordinals``).
Attributes without a value are left out (GraphML has no null).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx

from cuda4amd.model import REPORT_SYMBOL_STATES as SYMBOL_STATES
from cuda4amd.model import loader_key, platform_of
from cuda4amd.report import GRAPH_FORMATS
from cuda4amd.report.json_format import render as json_text

if TYPE_CHECKING:
    from cuda4amd.report.redact import Redactor

GRAPH_SCHEMA = "cuda4amd.graph/1"
FORMATS = GRAPH_FORMATS


class GraphFormatError(ValueError):
    """A graph file name whose format cannot be told."""


def format_for(path: str | Path) -> str | None:
    return FORMATS.get(Path(path).suffix.lower())


# ---------------------------------------------------------------------------
# attributes from the report document
# ---------------------------------------------------------------------------

def _clean(attrs: dict[str, Any]) -> dict[str, Any]:
    """Attributes with a value, in name order (so every way to the graph writes the same file)."""
    return {k: v for k, v in sorted(attrs.items()) if v is not None and v != ""}


class _Facts:
    """Node and edge attributes the report document gives, keyed like the scan graph."""

    def __init__(self, document: dict) -> None:
        binaries = document.get("binaries") or []
        self.paths = {b["path"] for b in binaries}
        self.nodes: dict[str, dict[str, Any]] = {}
        self.edges: dict[tuple[str, str], dict[str, Any]] = {}
        self.graph = _clean({
            "schema": GRAPH_SCHEMA,
            "target": (document.get("target") or {}).get("path"),
            "verdict": document.get("verdict"),
            "zluda_release": (document.get("zluda") or {}).get("release"),
        })
        for binary in binaries:
            me = binary.get("nvidia_library") or {}
            kernels = (binary.get("kernels") or {}).get("state")
            self.nodes[binary["path"]] = _clean({
                "kind": "binary",
                "format": binary.get("format"),
                "file_kind": binary.get("kind"),
                "machine": binary.get("machine"),
                "verdict": binary.get("verdict"),
                "cuda": binary.get("verdict") != "no-cuda",
                "reason": (binary.get("reasons") or [None])[0],
                "distribution": binary.get("distribution"),
                "kernels": kernels if kernels not in (None, "none") else None,
                "family": me.get("family"),
                "route": me.get("route"),
                "basis": me.get("basis"),
                "replacement": me.get("replacement"),
            })
        for binary in binaries:
            for dep in binary.get("dependencies") or []:
                node = self.node_of(binary, dep)
                symbols = dep.get("symbols") or {}
                self.edges[(binary["path"], node)] = _clean({
                    "load": dep.get("load"),
                    "how": dep.get("how"),
                    "name": dep.get("name"),
                    "family": dep.get("family"),
                    "route": dep.get("route"),
                    "basis": dep.get("basis"),
                    "replacement": dep.get("replacement"),
                    **{state: len(symbols[state]) for state in SYMBOL_STATES if symbols.get(state)},
                    "ordinals": len(dep.get("ordinals") or []) or None,
                })
                if node in self.paths or node in self.nodes:
                    continue
                self.nodes[node] = _clean({
                    "kind": "library",
                    "name": dep.get("name"),
                    "resolved": dep.get("resolved"),
                    "cuda": dep.get("family") is not None,
                    "family": dep.get("family"),
                    "route": dep.get("route"),
                    "basis": dep.get("basis"),
                    "replacement": dep.get("replacement"),
                })

    def node_of(self, binary: dict, dep: dict) -> str:
        """The graph node a dependency points at: the binary found in the tree, or lib:<name>."""
        resolved = dep.get("resolved")
        if isinstance(resolved, str) and resolved in self.paths:
            return resolved
        name = dep.get("name") or ""
        return f"lib:{loader_key(name, platform_of(binary.get('format') or 'ELF'))}"


def attributed(graph: nx.DiGraph, document: dict) -> nx.DiGraph:
    """A copy of a scan's graph, nodes and edges sorted, with the report's facts as attributes."""
    facts = _Facts(document)
    out = nx.DiGraph(**facts.graph)
    for node in sorted(graph.nodes):
        out.add_node(node, **_clean({**graph.nodes[node], **facts.nodes.get(node, {})}))
    for source, target in sorted(graph.edges):
        out.add_edge(source, target, **_clean({**graph.edges[source, target], **facts.edges.get((source, target), {})}))
    return out


def from_document(document: dict) -> nx.DiGraph:
    """The dependency graph of a report document (e.g. a saved JSON report)."""
    facts = _Facts(document)
    out = nx.DiGraph(**facts.graph)
    for node in sorted(facts.nodes):
        out.add_node(node, **facts.nodes[node])
    for source, target in sorted(facts.edges):
        out.add_edge(source, target, **facts.edges[source, target])
    return out


def redacted(graph: nx.DiGraph, redactor: Redactor) -> nx.DiGraph:
    """The graph with private strings replaced (a `cuda4amd.redact.Redactor`)."""
    keep = {"kind", "format", "file_kind", "machine", "verdict", "cuda", "kernels", "family", "route", "basis",
            "load", "how", "schema", "zluda_release", *SYMBOL_STATES, "ordinals"}

    def attrs(values: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for key, value in values.items():
            if key == "resolved":
                value = redactor.resolved(value)
            elif key == "target":
                value = redactor.target_path(value)
            elif isinstance(value, str) and key not in keep:
                value = redactor.text(value)
            out[key] = value
        return out

    out = nx.DiGraph(**attrs(graph.graph))
    for node in sorted(graph.nodes):
        out.add_node(redactor.text(node), **attrs(graph.nodes[node]))
    for source, target in sorted(graph.edges):
        out.add_edge(redactor.text(source), redactor.text(target), **attrs(graph.edges[source, target]))
    return out


# ---------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------

def dumps(graph: nx.DiGraph, fmt: str) -> str:
    if fmt == "json":
        return _json(graph)
    if fmt == "dot":
        return _dot(graph)
    if fmt == "graphml":
        return "\n".join(nx.generate_graphml(graph, prettyprint=True)) + "\n"
    raise GraphFormatError(f"unknown graph format {fmt!r}")


def write(graph: nx.DiGraph, path: str | Path, fmt: str | None = None) -> None:
    fmt = fmt or format_for(path)
    if fmt is None:
        raise GraphFormatError(f"cannot tell the graph format from {str(path)!r}: use .graphml, .dot or .json")
    Path(path).write_text(dumps(graph, fmt), encoding="utf-8")


def _json(graph: nx.DiGraph) -> str:
    """Node-link JSON, readable by ``networkx.node_link_graph(data, edges="edges")``."""
    data = {
        "directed": True,
        "multigraph": False,
        "graph": dict(graph.graph),
        "nodes": [{"id": node, **graph.nodes[node]} for node in sorted(graph.nodes)],
        "edges": [{"source": s, "target": t, **graph.edges[s, t]} for s, t in sorted(graph.edges)],
    }
    return json_text(data)


_FILL = {"ready": "#dff5e1", "degraded": "#fff4d6", "blocked": "#ffe1e1", "no-cuda": "#f6f8fa"}
_ROUTE_FILL = {"redirect": "ready", "passthrough": "ready", "stub": "degraded", "blocked": "blocked"}


def _quote(value: Any) -> str:
    if isinstance(value, bool):
        value = "true" if value else "false"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def _dot_attrs(attrs: dict[str, Any]) -> str:
    return ", ".join(f"{key}={_quote(value)}" for key, value in attrs.items())


def _dot(graph: nx.DiGraph) -> str:
    """Graphviz DOT: the data attributes, plus a label and colours to look at."""
    lines = ["digraph cuda4amd {"]
    if graph.graph:
        lines.append(f"  graph [{_dot_attrs(graph.graph)}];")
    lines.append('  graph [rankdir="LR"];')
    lines.append('  node [shape="box", style="filled", fillcolor="#ffffff", fontname="Helvetica"];')
    for node in sorted(graph.nodes):
        attrs = dict(graph.nodes[node])
        library = attrs.get("kind") == "library"
        state = _ROUTE_FILL.get(attrs.get("route", ""), "no-cuda") if library else attrs.get("verdict", "no-cuda")
        shown = {"label": attrs.get("name", node) if library else node, "fillcolor": _FILL.get(state, "#ffffff")}
        if library:
            shown["shape"] = "ellipse"
        lines.append(f"  {_quote(node)} [{_dot_attrs({**attrs, **shown})}];")
    for source, target in sorted(graph.edges):
        attrs = dict(graph.edges[source, target])
        if attrs.get("load") in ("delay", "by-name"):
            attrs["style"] = "dashed"
        lines.append(f"  {_quote(source)} -> {_quote(target)} [{_dot_attrs(attrs)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
