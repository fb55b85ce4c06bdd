"""The HTML compile report: `kiln.report(path)` or `KILN_REPORT=path` (written when the process exits).

One self-contained page (no scripts or styles fetched from anywhere) built from what kiln already
records: the frontend's graph records (kiln.stats(): captured code, guards, the break that ended
each graph, the guard failure that recompiled it, start time and time per stage) and the code
generator's graphs (kiln/_codegen.py: ATen graph, loop IR, kernels and their fused ATen nodes,
build time per stage). Sections: a summary, a timeline of compiles, every graph with its guards,
breaks and recompiles linked to the user's source, its kernels and a picture of its ATen graph
(ops as nodes, each kernel's fused ops as a cluster), graph breaks, recompiles, and the user
source lines the page links to. Building it reads records only; nothing runs on the call path."""
from __future__ import annotations

import html
import linecache
import os
import re

_STAGE_COLORS = {"capture": "#4e79a7", "backend": "#9c755f", "trace": "#f28e2b", "lower": "#e15759", "codegen": "#76b7b2",
                 "compile": "#59a14f", "load": "#edc948", "training_build": "#b07aa1"}
_CODEGEN_STAGES = ("trace", "lower", "codegen", "compile", "load", "training_build")
_WHERE = re.compile(r"^(.*):(\d+)$")
# What a browser runs on a loaded report to list the links without a target on the page (the
# report links only within itself): the browser test and tools/report_screenshot.py check it.
UNRESOLVED_LINKS_JS = """
const bad = [];
for (const a of document.querySelectorAll('a[href]')) {
  const h = a.getAttribute('href');
  if (!h.startsWith('#') || !document.getElementById(h.slice(1))) bad.push(h);
}
return bad;"""


def _esc(s) -> str:
    return html.escape(str(s), quote=True)


class _Sources:
    """User source lines the page links to: one anchor per (file, line), shown in the last section."""

    def __init__(self):
        self.files: dict[str, int] = {}
        self.lines: dict[tuple[str, int], str] = {}

    def link(self, where: str) -> str:
        """`file:line` as a link to its line in the page's source section (plain text when unknown)."""
        m = _WHERE.match(where or "")
        if not m or int(m.group(2)) <= 0:
            return _esc(where or "?")
        path, line = m.group(1), int(m.group(2))
        text = linecache.getline(path, line)
        if not text:
            return _esc(where)
        fid = self.files.setdefault(path, len(self.files))
        self.lines[(path, line)] = text.rstrip("\n")
        return f'<a class="src" href="#src-{fid}-{line}">{_esc(os.path.basename(path))}:{line}</a>'

    def link_lines_in(self, text: str) -> str:
        """Escapes `text`, turning every `/path/file.py:N` in it into a link."""
        out, last = [], 0
        for m in re.finditer(r"(/[^\s:'\"()]+\.py):(\d+)", text):
            out.append(_esc(text[last:m.start()]))
            out.append(self.link(m.group(0)))
            last = m.end()
        out.append(_esc(text[last:]))
        return "".join(out)

    def render(self) -> str:
        if not self.files:
            return "<p>No user source lines are referenced.</p>"
        parts = []
        for path, fid in self.files.items():
            parts.append(f"<h3>{_esc(path)}</h3><pre class='code'>")
            for (p, line), text in sorted(self.lines.items(), key=lambda kv: kv[0][1]):
                if p == path:
                    parts.append(f'<span id="src-{fid}-{line}" class="srcline"><b>{line:5d}</b>  {_esc(text)}</span>\n')
            parts.append("</pre>")
        return "".join(parts)


# ---------------------------------------------------------------- parsing kiln's textual IRs

_ATEN_LINE = re.compile(r"^((?:%\d+|_)(?:, (?:%\d+|_))*) = (input \d+|constant \d+|[\w:.]+)(?:\((.*)\))?(?: : (.*))?$")
_KERNEL_LINE = re.compile(r"^kernel (\w+) outer\[[^\]]*\]\s*(?:#\s*(.*))?$")


def parse_aten_graph(text: str):
    """(nodes, owner, outputs) from the ATen graph's textual form (csrc/ir/aten_graph.h): nodes maps
    each node, keyed by its first output's value id, to (op, the value ids it reads, its type);
    owner maps every value id to the key of the node that defines it."""
    nodes, owner, outputs = {}, {}, []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("return"):
            outputs = [int(v) for v in re.findall(r"%(\d+)", line)]
            continue
        m = _ATEN_LINE.match(line)
        if m:
            op, args, ty = m.group(2), m.group(3) or "", m.group(4) or ""
            defined = [int(v) for v in re.findall(r"%(\d+)", m.group(1))]
            if defined:
                nodes[defined[0]] = (op, [int(a) for a in re.findall(r"%(\d+)", args)], ty)
                owner.update((v, defined[0]) for v in defined)
    return nodes, owner, outputs


def parse_kernels(program_text: str):
    """[(kernel name, [value ids it computes])] from the loop IR's textual form (csrc/ir/loop_ir.h)."""
    out = []
    for line in program_text.splitlines():
        m = _KERNEL_LINE.match(line.strip())
        if m:
            out.append((m.group(1), [int(v) for v in re.findall(r"%(\d+)=", m.group(2) or "")]))
    return out


# ---------------------------------------------------------------- the graph picture

# Operators that only re-index their input: lowering folds them into their readers' indexing.
_VIEW_OPS = {"view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "t", "transpose", "permute", "expand", "slice",
             "select", "alias", "as_strided", "detach", "split", "split_with_sizes", "chunk", "unbind", "narrow", "diagonal"}


def graph_svg(graph_text: str, program_text: str, max_nodes: int = 400) -> str:
    """SVG of an ATen graph: ops as boxes (blue clusters: a kernel's fused ops; orange: extern ATen
    calls; white: views; grey: inputs and constants), a layered left-to-right layout, edges between ops."""
    nodes, owner, outputs = parse_aten_graph(graph_text)
    if not nodes:
        return "<p>(no ATen graph)</p>"
    if len(nodes) > max_nodes:
        return f"<p>(graph of {len(nodes)} values: too large to draw; see the ATen graph text)</p>"
    group_of, groups = {}, []  # value id -> group index; group: (label, kind, [value ids])
    for name, ids in parse_kernels(program_text or ""):
        members = list(dict.fromkeys(owner[i] for i in ids if i in owner and owner[i] not in group_of))
        if members:
            for i in members:
                group_of[i] = len(groups)
            groups.append((name, "kernel", members))
    for vid in sorted(nodes):
        if vid not in group_of:
            op = nodes[vid][0]
            base = op.replace("aten::", "").split(".")[0]
            kind = ("input" if op.startswith("input") else "constant" if op.startswith("constant")
                    else "view" if base in _VIEW_OPS else "extern")
            group_of[vid] = len(groups)
            groups.append(("", kind, [vid]))

    def reads(vid):  # the nodes a node reads
        return [owner[a] for a in nodes[vid][1] if a in owner]

    # Layer of a group: one past the deepest group it reads from (group graph order follows value ids).
    layer = [0] * len(groups)
    for g, (_, _, members) in enumerate(groups):
        for vid in members:
            for a in reads(vid):
                if group_of[a] != g:
                    layer[g] = max(layer[g], layer[group_of[a]] + 1)
    for _ in range(len(groups)):  # groups listed before their producers: settle the layering
        changed = False
        for g, (_, _, members) in enumerate(groups):
            for vid in members:
                for a in reads(vid):
                    if group_of[a] != g and layer[g] <= layer[group_of[a]]:
                        layer[g] = layer[group_of[a]] + 1
                        changed = True
        if not changed:
            break
    box_w, box_h, gap_x, gap_y, pad = 190, 22, 60, 16, 8
    columns: dict[int, list[int]] = {}
    for g in range(len(groups)):
        columns.setdefault(layer[g], []).append(g)
    pos, group_box = {}, {}
    height = 0
    for col, gs in sorted(columns.items()):
        x = 10 + col * (box_w + 2 * pad + gap_x)
        y = 30
        for g in gs:
            members = groups[g][2]
            top = y
            y += pad + (12 if groups[g][1] == "kernel" else 0)
            for vid in members:
                pos[vid] = (x + pad, y)
                y += box_h + 4
            y += pad - 4
            group_box[g] = (x, top, box_w + 2 * pad, y - top)
            y += gap_y
        height = max(height, y)
    width = 10 + (max(columns) + 1) * (box_w + 2 * pad + gap_x)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" width="{width}" height="{height + 10}" '
             f'viewBox="0 0 {width} {height + 10}" font-family="monospace" font-size="11">']
    parts.append('<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="6" markerHeight="6" orient="auto">'
                 '<path d="M0,0 L8,4 L0,8 z" fill="#888"/></marker></defs>')
    fills = {"kernel": "#e8f1fb", "extern": "#fdf0e0", "input": "#eeeeee", "constant": "#f6f6f6", "view": "#ffffff"}
    for g, (name, kind, members) in enumerate(groups):
        x, y, w, h = group_box[g]
        if kind == "kernel":
            parts.append(f'<g class="cluster"><title>{_esc(name)}: {len(members)} fused ops</title>'
                         f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="6" fill="{fills[kind]}" stroke="#4e79a7"/>'
                         f'<text x="{x + 6}" y="{y + 13}" fill="#4e79a7">{_esc(name)}</text></g>')
    for vid, (op, args, ty) in nodes.items():
        x, y = pos[vid]
        for a in reads(vid):
            if a in pos:
                ax, ay = pos[a]
                parts.append(f'<line x1="{ax + box_w}" y1="{ay + box_h / 2}" x2="{x}" y2="{y + box_h / 2}" stroke="#aaa" '
                             f'marker-end="url(#arrow)"/>')
    out_set = {owner[v] for v in outputs if v in owner}
    for vid, (op, args, ty) in nodes.items():
        x, y = pos[vid]
        kind = groups[group_of[vid]][1]
        label = op.replace("aten::", "")
        stroke = "#c0392b" if vid in out_set else "#666"
        parts.append(f'<g class="op"><title>%{vid} = {_esc(op)} : {_esc(ty)}</title>'
                     f'<rect x="{x}" y="{y}" width="{box_w}" height="{box_h}" rx="3" fill="{fills[kind] if kind != "kernel" else "#ffffff"}" '
                     f'stroke="{stroke}"/><text x="{x + 4}" y="{y + 15}">%{vid} {_esc(label[:22])}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


# ---------------------------------------------------------------- the timeline

def _timeline_svg(rows) -> str:
    """rows: (label, [(stage, start_s, seconds)]) on one clock; drawn as horizontal bars."""
    rows = [r for r in rows if r[1]]
    if not rows:
        return "<p>No compiles were recorded.</p>"
    t0 = min(s for _, segs in rows for _, s, _ in segs)
    t1 = max(s + d for _, segs in rows for _, s, d in segs)
    span = max(t1 - t0, 1e-6)
    label_w, plot_w, row_h = 330, 760, 18
    height = 40 + row_h * len(rows)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{label_w + plot_w + 20}" height="{height}" '
             f'font-family="sans-serif" font-size="11">']
    for k in range(6):  # time axis
        x = label_w + plot_w * k / 5
        parts.append(f'<line x1="{x}" y1="20" x2="{x}" y2="{height}" stroke="#eee"/>'
                     + (f'<text x="{x + 2}" y="14" fill="#666">' if k < 5 else f'<text x="{x}" y="14" fill="#666" text-anchor="end">')
                     + f'{span * k / 5 * 1e3:.0f} ms</text>')  # the last label ends at the axis' end, inside the picture
    for i, (label, segs) in enumerate(rows):
        y = 24 + i * row_h
        parts.append(f'<text x="4" y="{y + 12}">{_esc(label[:52])}</text>')
        for stage, start, secs in segs:
            x = label_w + plot_w * (start - t0) / span
            w = max(plot_w * secs / span, 1.0)
            parts.append(f'<rect class="stage" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row_h - 4}" '
                         f'fill="{_STAGE_COLORS.get(stage, "#bab0ac")}"><title>{_esc(label)}: {_esc(stage)} '
                         f'{secs * 1e3:.2f} ms</title></rect>')
    parts.append("</svg>")
    legend = " ".join(f'<span class="key" style="background:{c}"></span>{_esc(s)}' for s, c in _STAGE_COLORS.items())
    return "".join(parts) + f'<p class="legend">{legend}</p>'


# ---------------------------------------------------------------- the page

_CSS = """
body{font-family:sans-serif;margin:24px;color:#222;max-width:1400px}
h1{margin-bottom:4px} h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
table{border-collapse:collapse;margin:8px 0} td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4} pre{background:#f8f8f8;padding:8px;overflow:auto;font-size:12px;max-height:420px}
.key{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}
.card{border:1px solid #ccc;border-radius:6px;padding:10px 14px;margin:14px 0}
.break{color:#b03a2e} .recompile{color:#9a6b00} .graphpic{overflow:auto;border:1px solid #eee}
details{margin:6px 0} summary{cursor:pointer;font-weight:bold}
.srcline:target{background:#fff3b0}
"""


def _timeline_rows(records, by_record, finished):
    """A row per capture (capture, backend) and one per graph generated from it (its build stages)."""
    rows = []
    for i, r in enumerate(records):
        start = r.get("started_s")
        if start is None:
            continue
        rows.append((f"graph {i}: {r['function']}", [("capture", start, r["capture_s"]),
                                                     ("backend", start + r["capture_s"], r["backend_s"])]))
        for k, g in enumerate(by_record.get(i, [])):
            t = dict(g.timings)
            end = finished.get(id(g))
            if end is None or "total" not in t:
                continue
            segs, at = [], end - t["total"]
            for stage in _CODEGEN_STAGES:
                if isinstance(t.get(stage), float) and t[stage] > 0:
                    segs.append((stage, at, t[stage]))
                    at += t[stage]
            rows.append((f"  graph {i} codegen {k}", segs))
    return rows


def _summary(stats, graphs) -> str:
    out = ["<table>"]
    for key in ("frames_compiled", "graphs", "graph_breaks", "recompiles", "guard_failures", "cache_hits", "cache_misses",
                "eager_runs", "recompile_limit_hits", "skipped_frames"):
        out.append(f"<tr><th>{_esc(key.replace('_', ' '))}</th><td>{_esc(stats.get(key, 0))}</td></tr>")
    cs = stats.get("compile_s", {})
    build_s = sum(dict(g.timings).get("total", 0.0) for g in graphs)
    out.append(f"<tr><th>capture time</th><td>{cs.get('capture', 0) * 1e3:.1f} ms</td></tr>"
               f"<tr><th>backend time (at capture)</th><td>{cs.get('backend', 0) * 1e3:.1f} ms</td></tr>"
               f"<tr><th>code generation time</th><td>{build_s * 1e3:.1f} ms over {len(graphs)} generated graphs</td></tr></table>")
    out.extend(f"<p>note: {_esc(note)}</p>" for note in stats.get("notes", []))
    return "".join(out)


def _generated(k, g) -> str:
    """What the code generator made of a graph: status, timings, kernels with fused ops, picture, IRs."""
    t = dict(g.timings)
    stages = ", ".join(f"{s} {t[s] * 1e3:.1f} ms" for s in _CODEGEN_STAGES if isinstance(t.get(s), float))
    out = [f"<h4>generated code {k}: {_esc(g.status)}</h4><p>{g.num_kernels} kernels, {g.num_externs} extern calls"
           f"{'; ' + stages if stages else ''}{'; cache hit' if t.get('cache_hit') else ''}"
           f"{'; training: ' + _esc(g.training_status) if g.training_status else ''}</p>"]
    graph_text, program_text = g.graph_text, g.program_text or ""
    kernels = parse_kernels(program_text)
    if kernels:
        nodes, owner, _ = parse_aten_graph(graph_text or "")
        out.append("<table><tr><th>kernel</th><th>fused ATen ops</th></tr>")
        for name, ids in kernels:
            ops = ", ".join(f"%{v} {nodes[owner[v]][0].replace('aten::', '')}" if v in owner else f"%{v}" for v in ids)
            out.append(f"<tr><td><code>{_esc(name)}</code></td><td>{_esc(ops)}</td></tr>")
        out.append("</table>")
    if graph_text:
        out.append(f"<details open><summary>picture of the ATen graph (blue clusters: kernels and the ops each fuses; "
                   f"orange: extern ATen calls; white: views; grey: inputs and constants)</summary><div class='graphpic'>"
                   f"{graph_svg(graph_text, program_text)}</div></details>")
    for title, text in (("ATen graph", graph_text), ("loop IR", program_text), ("generated kernels", g.source)):
        if text:
            out.append(f"<details><summary>{title}</summary><pre>{_esc(text)}</pre></details>")
    return "".join(out)


def _graph_card(i, r, generated, src) -> str:
    out = [f"<div class='card' id='graph-{i}'><h3>Graph {i}: <code>{_esc(r['function'])}</code></h3>",
           f"<p>captured from {src.link(r.get('where', ''))}; backend <code>{_esc(r.get('backend', ''))}</code>; "
           f"{r['ops']} ops, {r['inputs']} inputs, {r['guard_count']} guards, {r.get('inlined_functions', 0)} inlined calls; "
           f"capture {r['capture_s'] * 1e3:.2f} ms</p>"]
    if r.get("recompile_reason"):
        out.append(f"<p class='recompile'>recompiled because a guard failed: <code>{_esc(r['recompile_reason'])}</code></p>")
    if r.get("break_reason"):
        out.append(f"<p class='break'>ends at a graph break at {src.link(r.get('break_where', ''))}: {_esc(r['break_reason'])}</p>")
    out.append(f"<details><summary>captured graph</summary><pre>{src.link_lines_in(r['code'])}</pre></details>")
    out.append(f"<details><summary>guards</summary><pre>{_esc(r['guards'])}</pre></details>")
    out.extend(_generated(k, g) for k, g in enumerate(generated))
    out.append("</div>")
    return "".join(out)


def _breaks(breaks, src) -> str:
    if not breaks:
        return "<p>No graph breaks.</p>"
    rows = "".join(f"<tr id='break-{i}'><td>{i}</td><td><code>{_esc(b['function'])}</code></td><td>{src.link(b['where'])}</td>"
                   f"<td>{_esc(b['reason'])}</td><td><pre>{src.link_lines_in(b.get('stack', ''))}</pre></td></tr>"
                   for i, b in enumerate(breaks))
    return ("<table><tr><th>#</th><th>function</th><th>where</th><th>reason</th><th>user stack (outermost first)</th></tr>"
            + rows + "</table>")


def _recompiles(reasons, stacks, src) -> str:
    if not reasons:
        return "<p>No recompiles.</p>"
    items = "".join(f"<li id='recompile-{i}'><code>{_esc(r)}</code>"
                    f"{'<pre>' + src.link_lines_in(stacks[i]) + '</pre>' if i < len(stacks) else ''}</li>"
                    for i, r in enumerate(reasons))
    return "<ol>" + items + "</ol>"


def build(stats: dict | None = None, graphs=None, owners=None, finished=None, title: str = "kiln compile report") -> str:
    """The page as a string (kiln.report writes it). Defaults: this process's records."""
    from . import _codegen
    if stats is None:
        from . import stats as _stats
        stats = _stats()
    graphs = list(_codegen.GRAPHS) if graphs is None else graphs
    owners = list(_codegen.GRAPH_OWNERS) if owners is None else owners
    finished = dict(_codegen.FINISHED_AT) if finished is None else finished
    src = _Sources()
    records = stats.get("graph_records", [])
    by_record: dict[int, list] = {}  # graph record index -> the generated graphs compiled from it
    for g, owner in zip(graphs, owners):
        by_record.setdefault(owner, []).append(g)
    cards = "".join(_graph_card(i, r, by_record.get(i, []), src) for i, r in enumerate(records)) or "<p>No graphs were captured.</p>"
    sections = [("summary", "Summary", _summary(stats, graphs)),
                ("timeline", "Timeline", _timeline_svg(_timeline_rows(records, by_record, finished))),
                ("graphs", "Graphs", cards),
                ("breaks", "Graph breaks", _breaks(stats.get("breaks", []), src)),
                ("recompiles", "Recompiles", _recompiles(stats.get("recompile_reasons", []), stats.get("recompile_stacks", []), src)),
                ("sources", "Sources", None)]  # last: it lists the lines the sections above link to
    out = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_esc(title)}</title><style>{_CSS}</style></head><body>",
           f"<h1>{_esc(title)}</h1><nav>" + " · ".join(f"<a href='#{a}'>{t.lower()}</a>" for a, t, _ in sections) + "</nav>"]
    for anchor, heading, body in sections:
        out.append(f"<h2 id='{anchor}'>{heading}</h2>{src.render() if body is None else body}")
    out.append("</body></html>")
    return "".join(out)


def write(path: str) -> str:
    """Writes this process's report to `path` (directories created) and returns the path."""
    page = build()
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path
