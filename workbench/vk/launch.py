"""The one launch path: a dispatch described by what the runtime needs, its pipeline made, bound, recorded, run.

    launch = Launch(spirv_bytes, {0: out, 1: inp}, groups=(4, 2, 1), push_constants=b"...",
                    spec_constants={3: 1, 4: b"\\x00\\x00\\x80\\x3f"}, local_size=(64, 1, 1), entry_point="main")
    with Launches(device, [launch]) as launches:
        timings = launches.run()                      # one submit; a DispatchTiming per launch
        with device.record("timed") as rec:           # or record them into a recording of one's own,
            launches.record(rec)                      # which `workbench.measure` samples
            gpu_ns, host_ns = sample_recording(rec)

A `Launch` is what a captured vkCmdDispatch holds (SPIR-V, entry point, specialization constants, push-constant
bytes, resources by binding, work-group counts) and what a kernel family's description turns into; it knows nothing
of layouts, kernels or ET-VK. Undeclared specialization constants are dropped by the pipeline
(`Pipeline.dropped_spec_constants`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import Closable
from .pipeline import Pipeline


@dataclass
class Launch:
    """One compute dispatch. `code`: SPIR-V bytes (or a compiled shader with `.code`). `resources`: buffers and
    images in binding order, or a mapping binding number → resource. The size: `groups` (work-group counts) or
    `global_size` (threads, rounded up to whole work groups). `spec_constants`: id → value or raw bytes.
    `local_size`: None for the module's own (literal, or the default where it comes from constants 0..2)."""

    code: object
    resources: object = ()
    groups: tuple | None = None
    global_size: tuple | None = None
    push_constants: bytes = b""
    spec_constants: Mapping = field(default_factory=dict)
    local_size: tuple | None = None
    entry_point: str = "main"
    name: str | None = None
    label: str | None = None
    barrier: object = True  # the recording's barrier before it; or a `Barrier` (or several) as a program recorded
    base_group: tuple = (0, 0, 0)  # the first work group's id (vkCmdDispatchBase); (0, 0, 0): vkCmdDispatch

    def __post_init__(self):
        if (self.groups is None) == (self.global_size is None):
            raise ValueError(f"launch {self.title}: give its size as groups or as global_size, not "
                             f"{'both' if self.groups is not None else 'neither'}")

    @property
    def title(self) -> str:
        return self.name or getattr(self.code, "name", None) or "kernel"

    def program(self) -> tuple:
        """What makes the pipeline: launches with equal programs share one."""
        code = bytes(getattr(self.code, "code", self.code))
        local = None if self.local_size is None else tuple(self.local_size)
        return (code, tuple(sorted((int(k), v) for k, v in dict(self.spec_constants).items())), local,
                self.entry_point, any(self.base_group))

    def pipeline(self, device, *, capture_statistics: bool = False) -> Pipeline:
        """A new pipeline for this launch; the caller closes it (or uses `with`)."""
        return device.pipeline(self.code, spec_constants=self.spec_constants, local_size=self.local_size,
                               capture_statistics=capture_statistics, name=self.title,
                               entry_point=self.entry_point, dispatch_base=any(self.base_group))

    def record(self, rec, pipeline: Pipeline, *, barrier=None, label: str | None = None):
        """Bind and dispatch into the recording `rec` with `pipeline` (this launch's, or an equal one)."""
        return rec.dispatch(pipeline, self.resources, self.global_size, self.push_constants,
                            label=label or self.label or pipeline.name,
                            barrier=self.barrier if barrier is None else barrier, groups=self.groups,
                            base_group=self.base_group)


class Launches(Closable):
    """The pipelines of a list of launches (one per distinct program), owned until close(); `record(rec)` adds
    every launch in order, a barrier before each but the first command of the recording. `capture_statistics`:
    the indices of the launches whose pipelines keep driver statistics (`pipeline_of(i).statistics()`)."""

    def __init__(self, device, launches, *, capture_statistics=()):
        self.device = device
        self.launches = list(launches)
        self._by_program: dict = {}
        self.pipelines: list[Pipeline] = []
        capture = set(capture_statistics)
        try:
            for i, launch in enumerate(self.launches):
                key = (launch.program(), i in capture)
                if key not in self._by_program:
                    self._by_program[key] = launch.pipeline(device, capture_statistics=i in capture)
                self.pipelines.append(self._by_program[key])
        except BaseException:
            self.close()
            raise

    def pipeline_of(self, index: int) -> Pipeline:
        return self.pipelines[index]

    def record(self, rec) -> None:
        for launch, pipeline in zip(self.launches, self.pipelines):
            launch.record(rec, pipeline)

    def run(self, label: str = "launches") -> list:
        """Record every launch into one recording, submit it once and wait: one DispatchTiming per launch."""
        with self.device.record(label) as rec:
            self.record(rec)
            return rec.submit()

    def close(self) -> None:
        for pipeline in self._by_program.values():
            pipeline.close()
        self._by_program.clear()
