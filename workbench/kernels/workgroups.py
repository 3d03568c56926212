"""ET-VK's work-group pickers (ComputeGraph.cpp, Common.cpp), once: the workbench's own kernels pick local sizes
by them, and `workbench.etvk.dispatch` (ET-VK's families, above kernels in the package order) uses them from here."""
from __future__ import annotations


def create_local_wg_size(global_size) -> tuple[int, int, int]:
    """``ComputeGraph::create_local_wg_size``, literally: the same three compare-and-swaps (ties keep axis order),
    the local size from the 2nd and 3rd largest extents, and the same final indexing — which is
    ``local[order[i]]``, not "the largest axis gets local[0]" (they differ when the sort is a 3-cycle)."""
    desc = [(axis, int(v)) for axis, v in enumerate(global_size)]
    if desc[0][1] < desc[1][1]:
        desc[0], desc[1] = desc[1], desc[0]
    if desc[1][1] < desc[2][1]:
        desc[1], desc[2] = desc[2], desc[1]
    if desc[0][1] < desc[1][1]:
        desc[0], desc[1] = desc[1], desc[0]
    local = [8, max(1, min(4, desc[1][1])), max(1, min(2, desc[2][1]))]
    if desc[2][1] == 1:
        if desc[1][1] == 1:
            local[0], local[1] = 64, 1
        elif desc[1][1] % 4 == 0:
            local[0], local[1] = 16, 4
        else:
            local[0], local[1] = 32, 2
    return tuple(local[desc[i][0]] for i in range(3))


def pick_hw_square_wg_size(global_size) -> tuple[int, int, int]:
    """``pick_hw_square_wg_size``: (8, 8, 1) if x ≥ 6 and y ≥ 6, else (4, 16, 1) if x < 6, else (16, 4, 1)."""
    x, y = int(global_size[0]), int(global_size[1])
    if x >= 6 and y >= 6:
        return (8, 8, 1)
    return (4, 16, 1) if x < 6 else (16, 4, 1)
