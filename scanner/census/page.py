"""The census as one static HTML page: no server, no external file; a table sortable by any column (click its
head) and filterable (a text box), each row linked to its reports. Every string that comes from a report (names,
versions, reasons: other people's files) goes through html.escape, in text and attributes alike; the script
reads the table from the DOM and never builds HTML from strings. Verdicts are colour *and* a word with a mark,
readable without colour (WCAG 2.1, 1.4.1 Use of Color)."""
from __future__ import annotations

from html import escape
from typing import Any

from cuda4amd.evidence.matrix import COLUMNS

#: a verdict's mark and colour class (the mark and the word carry the meaning; the colour repeats it)
MARKS = {"ready": "\N{CHECK MARK}", "partial": "\N{CIRCLE WITH LEFT HALF BLACK}", "blocked": "\N{BALLOT X}",
         "no-cuda": "\N{EN DASH}", "unreadable": "!"}
HEADS = {"zluda": "ZLUDA"}
#: only these pages' own rules: a report's strings can never load or run anything (they are text anyway)
POLICY = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#111}
table{border-collapse:collapse;font-size:0.9em}
th,td{border:1px solid #bbb;padding:0.25em 0.5em;text-align:left;vertical-align:top}
th{background:#eee;cursor:pointer;user-select:none}
th[aria-sort=ascending]::after{content:" \\25B2"}
th[aria-sort=descending]::after{content:" \\25BC"}
.v-ready{background:#d6f5d6}.v-partial{background:#fff0c2}.v-blocked{background:#f8d0d0}
.v-no-cuda{background:#eeeeee}.v-unreadable{background:#e8d8f5}.v-mixed{background:#ffe3c7}
#filter{margin:0.5em 0;padding:0.3em;width:24em}
"""

SCRIPT = """
(function(){
  var table=document.getElementById('census'), body=table.tBodies[0], heads=table.tHead.rows[0].cells;
  var filter=document.getElementById('filter'), shown=document.getElementById('shown');
  function count(){var n=0;for(var r of body.rows){if(!r.hidden)n++;}shown.textContent=n;}
  filter.addEventListener('input',function(){
    var words=filter.value.toLowerCase().split(/\\s+/).filter(Boolean);
    for(var r of body.rows){
      var t=r.textContent.toLowerCase();r.hidden=!words.every(function(w){return t.includes(w);});
    }
    count();
  });
  Array.prototype.forEach.call(heads,function(th,i){
    th.addEventListener('click',function(){
      var up=th.getAttribute('aria-sort')!=='ascending';
      Array.prototype.forEach.call(heads,function(h){h.removeAttribute('aria-sort');});
      th.setAttribute('aria-sort',up?'ascending':'descending');
      var rows=Array.prototype.slice.call(body.rows);
      rows.sort(function(a,b){
        var x=a.cells[i].dataset.key||a.cells[i].textContent, y=b.cells[i].dataset.key||b.cells[i].textContent;
        var c=x.localeCompare(y,undefined,{numeric:true,sensitivity:'base'});return up?c:-c;
      });
      rows.forEach(function(r){body.appendChild(r);});
    });
  });
  count();
})();
"""


def verdict_class(verdict: str) -> str:
    """ready, partial, blocked, no-cuda, unreadable; mixed: reports of a cell disagree."""
    if "\N{MULTIPLICATION SIGN}" in verdict:
        return "mixed"
    word = verdict.split(":", 1)[0].strip()
    return word if word in MARKS else "mixed"


def _text(value: Any) -> str:
    return escape(", ".join(map(str, value)) if isinstance(value, list) else str(value), quote=True)


def _row(row: dict[str, Any], links: dict[str, str]) -> str:
    cells = []
    for column in COLUMNS:
        value = row.get(column, "")
        if column == "verdict":
            kind = verdict_class(str(value))
            mark = MARKS.get(kind, "\N{WARNING SIGN}")
            cells.append(f'<td class="v-{kind}" data-key="{_text(value)}">{escape(mark)} {_text(value)}</td>')
        elif column == "reports":
            anchors = [f'<a href="{escape(links[s], quote=True)}">{escape(s[:12])}\N{HORIZONTAL ELLIPSIS}</a>'
                       for s in row.get("sources", []) if s in links]
            cells.append(f'<td data-key="{int(value)}">{int(value)}: {" ".join(anchors)}</td>')
        else:
            cells.append(f"<td>{_text(value) or '&mdash;'}</td>")
    return "<tr>" + "".join(cells) + "</tr>"


def render_page(matrix: dict[str, Any], links: dict[str, str], title: str = "cuda4amd census") -> str:
    """`links`: a report's file name (the rows' `sources`) → its address relative to the page."""
    heads = "".join(f"<th scope=col>{escape(HEADS.get(c, c))}</th>" for c in COLUMNS)
    rows = "\n".join(_row(r, links) for r in matrix["rows"])
    skipped = "".join(f"<li>{_text(s.get('source', ''))}: {_text(s.get('reason', ''))}</li>"
                      for s in matrix.get("skipped", []))
    legend = " ".join(f'<span class="v-{k}">{escape(m)} {k}</span>' for k, m in MARKS.items())
    levels = " &lt; ".join(escape(str(level)) for level in matrix.get("levels", []))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{POLICY}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title><style>{STYLE}</style></head>
<body>
<h1>{escape(title)}</h1>
<p>What runs through ZLUDA, per package &times; version &times; platform &times; ZLUDA release, from cuda4amd's
static scans (software only: no GPU was examined). Verdicts: {legend}. <em>evidence</em>: {levels}.
Click a column's head to sort; type to filter (every word must match). <span id="shown">{len(matrix["rows"])}</span>
of {len(matrix["rows"])} rows shown.</p>
<input id="filter" type="search" placeholder="filter, e.g. windows blocked" aria-label="filter the rows">
<table id="census"><thead><tr>{heads}</tr></thead>
<tbody>
{rows}
</tbody></table>
{f"<h2>Skipped</h2><ul>{skipped}</ul>" if skipped else ""}
<script>{SCRIPT}</script>
</body></html>
"""
