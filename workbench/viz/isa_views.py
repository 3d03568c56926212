"""The ISA beside its GLSL: an HTML widget from texts and counts (no device, no compiler here).

    from workbench.etvk.isa import target, isa
    from workbench.viz.isa_views import isa_view
    t = target("copy"); got = isa(t, "a740")
    isa_view(t.glsl, got.text, title="copy on a740", counts=vendors.isa.summary(got.text, "a740"))
"""
from __future__ import annotations

import html

__all__ = ["isa_html", "isa_view"]

_STYLE = ("font-family: monospace; font-size: 11px; white-space: pre; overflow: auto; max-height: 480px; "
          "border: 1px solid #ccc; padding: 4px; margin: 0")


def isa_html(glsl: str, isa_text: str, *, title: str = "", counts: dict | None = None) -> str:
    """Two scrolling columns, the GLSL (or a note where there is none: SPIR-V files, captures) and the ISA, with the
    non-zero counts under the title."""
    shown = {k: v for k, v in (counts or {}).items() if v}
    summary = ", ".join(f"{k} {v}" for k, v in shown.items())
    left = html.escape(glsl) if glsl else "(no GLSL: a SPIR-V file or a captured dispatch)"
    return (f"<div><b>{html.escape(title)}</b><div style='font-size: 11px'>{html.escape(summary)}</div>"
            "<table style='width: 100%; table-layout: fixed'><tr>"
            f"<td style='vertical-align: top; width: 50%'><pre style='{_STYLE}'>{left}</pre></td>"
            f"<td style='vertical-align: top; width: 50%'><pre style='{_STYLE}'>{html.escape(isa_text)}</pre></td>"
            "</tr></table></div>")


def isa_view(glsl: str, isa_text: str, *, title: str = "", counts: dict | None = None):
    """`isa_html` as an ipywidgets.HTML (its `value` is the HTML), or the HTML text where ipywidgets is absent."""
    text = isa_html(glsl, isa_text, title=title, counts=counts)
    try:
        import ipywidgets
    except ImportError:
        return text
    return ipywidgets.HTML(text)
