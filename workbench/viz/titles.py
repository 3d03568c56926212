"""Every chart of measurements names the device that took them: the title gets the data's `device` column."""
from __future__ import annotations


def device_names(*frames) -> str:
    """The devices of the rows of `frames` (DataFrames, None skipped), in order of first appearance, comma-joined;
    "" where no frame has a `device` column with a value."""
    names = []
    for frame in frames:
        if frame is not None and "device" in frame:
            names += [str(v) for v in frame["device"].dropna()]
    return ", ".join(dict.fromkeys(names))


def with_device(title: str, *frames, device: str | None = None) -> str:
    """`title · device` (`device`, else the frames' devices) unless the title names it already or none is known."""
    name = device or device_names(*frames)
    return f"{title} · {name}" if name and name not in title else title
