"""`workbench layout`: where an element lives in a layout; pictures of the layout."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("layout", help="where an element lives in a layout; pictures of the layout")
    p.add_argument("layout", help="4W4C, 4H4W, 4W, 4C, 4C1W, or a float buffer/texture layout")
    p.add_argument("--sizes", required=True, help="N,C,H,W")
    p.add_argument("--element", help="n,c,h,w")
    p.add_argument("--png", help="write the tensor and memory views to this PNG file")
    p.set_defaults(fn=lambda args: show_layout(args.layout, args.sizes, element=args.element, png=args.png))


def show_layout(name: str, sizes: str, *, element: str | None = None, png: str | None = None) -> int:
    from .. import layouts
    sizes = [int(v) for v in sizes.split(",")]
    coords = [int(v) for v in element.split(",")] if element else None
    if coords:
        print(layouts.describe_element(name, sizes, coords))
    if png:
        from ..viz.layout_views import save_layout_pictures
        paths = save_layout_pictures(layouts.get_layout(name), sizes, png, element=coords)
        print("wrote", paths)
    if not element and not png:
        layout = layouts.get_layout(name)
        print(layout)
        print("padded sizes (NCHW):", layout.padded_sizes(sizes))
    return 0
