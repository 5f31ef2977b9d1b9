"""Human reports written beside plan.json: report.txt and a self-contained report.html
with an SVG timeline of the arena (tensors as rectangles over the schedule)."""

from __future__ import annotations

import html

PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac"]


def timeline_svg(plan_json: dict, width: int = 900, height: int = 360) -> str:
    """Boxes: x = steps first..last, y = arena offset..offset+size; plus live bytes per step."""
    steps = max(len(plan_json["steps"]), 1)
    arena = max(plan_json["arena_bytes"], 1)
    left, top, w, h = 70, 10, width - 80, height - 40
    sx, sy = w / steps, h / arena
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" id="timeline" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="10">',
             f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="#f7f7f7" stroke="#999"/>']
    for i, t in enumerate(plan_json["tensors"]):
        x = left + t["first"] * sx
        y = top + t["offset"] * sy
        color = "#cccccc" if t["kind"] == "scratch" else PALETTE[i % len(PALETTE)]
        title = html.escape(f'{t["c"]}: {t["size"]} B at {t["offset"]}, steps {t["first"]}..{t["last"]}')
        parts.append(f'<rect class="tensor" x="{x:.1f}" y="{y:.1f}" width="{max((t["last"] - t["first"] + 1) * sx, 1):.1f}" '
                     f'height="{max(t["size"] * sy, 0.5):.1f}" fill="{color}" stroke="#333" stroke-width="0.3">'
                     f'<title>{title}</title></rect>')
    live = plan_json.get("live_bytes", [])
    if live:
        pts = " ".join(f"{left + (i + 0.5) * sx:.1f},{top + h - v * sy:.1f}" for i, v in enumerate(live))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="#000" stroke-width="1.5" stroke-dasharray="4 2"/>')
    parts.append(f'<text x="{left - 5}" y="{top + 8}" text-anchor="end">0</text>')
    parts.append(f'<text x="{left - 5}" y="{top + h}" text-anchor="end">{arena} B</text>')
    parts.append(f'<text x="{left + w / 2}" y="{height - 8}" text-anchor="middle">schedule step (0..{steps - 1})</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def render_reports(cg, plan_json: dict) -> dict[str, str]:
    live = cg.plan.live_bytes()
    pj = dict(plan_json, live_bytes=live)
    peak_step = max(range(len(live)), key=lambda i: live[i]) if live else 0
    peak_tensors = [t for t in plan_json["tensors"] if t["first"] <= peak_step <= t["last"]]
    ctx = dict(plan_json=pj, svg=timeline_svg(pj), peak_step=peak_step, peak_tensors=peak_tensors, live=live)
    return {"report.txt": cg.render("report.txt.j2", **ctx), "report.html": cg.render("report.html.j2", **ctx)}
