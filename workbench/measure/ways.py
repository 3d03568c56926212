"""The ways of timing a dispatch back to back, as a model's runtime would run it among other work.

A `Way` says:
- `back_to_back`: how many copies of the dispatch one recording holds (a barrier before each); the time is per
  copy. A GPU kept busy holds its clock, as it does running a model's dispatches one after another, where a lone
  dispatch resubmitted lets it sag (the H200 fell from 1980 to ~1300 MHz);
- the timestamps (TIMESTAMPS): "etvk" puts each copy's start timestamp before the barrier that precedes it, so the
  barrier counts in its time, as ET-VK's runtime times a dispatch; "workbench" after it;
- the barriers (BARRIERS): "light" (compute / transfer shader and transfer access) or "full" (all commands, memory
  read / write: what ET-VK widens a write-after-read hazard to);
- `between` (`parse_between`): what runs, untimed, before each copy: "none", "copy:MIB" (a vkCmdCopyBuffer of MIB
  MiB) or "shader:MIB" (a compute-shader copy: another pipeline). Large ones evict the copy's inputs from the
  last-level cache, as a model's other ops do.
"""
from __future__ import annotations

from dataclasses import dataclass

from .method import sample_recording

TIMESTAMPS = ("etvk", "workbench")  # where the start timestamp goes: before the barrier (as ET-VK) or after it
BARRIERS = ("light", "full")        # compute / transfer shader access, or all commands with memory read / write
BETWEEN_KINDS = ("none", "copy", "shader")
BETWEEN_LABEL = "between"           # the label of what runs between copies (not timed)
# the columns that tell one way of timing from another, where a table has them: these above, and an execution in
# order's memory, chains a submit and burst (`capture.timeline.time_in_order`)
WAY_COLUMNS = ("timestamps", "between", "barriers", "memory", "chains", "burst")


def parse_between(between: str) -> tuple[str, int]:
    """``"none"``, ``"copy:MIB"`` or ``"shader:MIB"`` → (kind, bytes), the bytes rounded up to 16 B."""
    kind, _, size = str(between).partition(":")
    try:
        mib = float(size) if size else 0.0
    except ValueError:
        mib = -1.0
    if (kind == "none" and size) or kind not in BETWEEN_KINDS or (kind != "none" and mib <= 0):
        raise ValueError(f"between must be 'none', 'copy:MIB' or 'shader:MIB' with MIB > 0, got {between!r}")
    return kind, (-(-int(mib * 2**20) // 16) * 16 if kind != "none" else 0)


@dataclass(frozen=True)
class Way:
    """One way of timing (module docstring). `barrier_timed` is the "etvk" timestamps, `full_barriers` the "full"
    barriers."""

    back_to_back: int = 1
    between: str = "none"
    barrier_timed: bool = False
    full_barriers: bool = False

    def __post_init__(self):
        if isinstance(self.back_to_back, bool) or not isinstance(self.back_to_back, int) or self.back_to_back < 1:
            raise ValueError(f"back_to_back must be >= 1, got {self.back_to_back!r}")
        kind, _ = parse_between(self.between)
        if kind != "none" and self.back_to_back < 2:
            raise ValueError(f"between={self.between!r} needs back_to_back >= 2, got back_to_back={self.back_to_back}")

    @classmethod
    def named(cls, timestamps: str = "workbench", barriers: str = "light", between: str = "none",
              back_to_back: int = 1) -> "Way":
        """From the names of TIMESTAMPS and BARRIERS."""
        if timestamps not in TIMESTAMPS or barriers not in BARRIERS:
            raise ValueError(f"timestamps must be one of {TIMESTAMPS} and barriers one of {BARRIERS}, got "
                             f"{timestamps!r} and {barriers!r}")
        return cls(back_to_back, between, timestamps == "etvk", barriers == "full")

    @property
    def between_kind(self) -> str:
        return parse_between(self.between)[0]

    @property
    def between_bytes(self) -> int:
        return parse_between(self.between)[1]

    def recording_options(self) -> dict:
        """The options of `Device.record` this way times with."""
        return {"barrier_timed": self.barrier_timed, "full_barriers": self.full_barriers}

    def columns(self) -> dict:
        """The row's columns that say how it was timed."""
        return {"back_to_back": self.back_to_back, "between": self.between, "barrier_timed": self.barrier_timed,
                "full_barriers": self.full_barriers}

    def sample(self, device, record, *, label: str = "", shader_copy=None, **sampling):
        """Time what `record(rec)` records (one copy of the dispatch, with any dispatches it needs first) this way:
        a recording of `back_to_back` copies, the `between` work before each, sampled by `sample_recording` with
        the time per copy (what runs between is not counted). `shader_copy(rec, dst, src, nbytes, label)` records
        the compute-shader copy of "shader:MIB" (the runtime has no shader of its own). Returns (gpu_ns, host_ns)
        as `sample_recording` does."""
        kind, nbytes = parse_between(self.between)
        if kind == "shader" and shader_copy is None:
            raise ValueError(f"between={self.between!r} needs a shader_copy(rec, dst, src, nbytes, label) to record")
        extra = []
        try:
            if nbytes:
                extra = [device.buffer(nbytes=nbytes, name="between_src"),
                         device.buffer(nbytes=nbytes, name="between_dst")]
            with device.record(label=label, **self.recording_options()) as rec:
                for _ in range(self.back_to_back):
                    if kind == "copy":
                        rec.copy(extra[0], extra[1], label=BETWEEN_LABEL)
                    elif kind == "shader":
                        shader_copy(rec, extra[1], extra[0], nbytes, BETWEEN_LABEL)
                    record(rec)
                labels = {c.label for c in rec.commands if c.label != BETWEEN_LABEL} if extra else None
                return sample_recording(rec, repeats=self.back_to_back, labels=labels, **sampling)
        finally:
            for buffer in extra:
                buffer.close()
