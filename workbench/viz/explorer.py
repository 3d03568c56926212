"""What the workbench's slider explorers share: any widget change redraws, and the element sliders stay inside the
sizes (clamping them redraws once, not once per slider)."""
from __future__ import annotations


class SliderExplorer:
    """Base of an explorer with ``element_sliders`` (a dict of IntSliders, one per dim of the sizes, in order) and an
    ``update()`` that redraws; widgets observe ``_on_change``."""

    _busy = False  # True while the explorer moves its own sliders

    def update(self):
        raise NotImplementedError

    def _on_change(self, change):
        if not self._busy:
            self.update()

    def _clamp_elements(self, sizes) -> None:
        """Each element slider's range to its size (max = size - 1), its value pulled inside."""
        self._busy = True
        try:
            for slider, size in zip(self.element_sliders.values(), sizes):
                if slider.value > size - 1:
                    slider.value = size - 1
                slider.max = size - 1
        finally:
            self._busy = False
