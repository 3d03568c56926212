"""Work items: what one worker runs on its one Vulkan device, and the sweeps that split into them.

Nothing here imports Dask: an item runs the same in a worker process as in this one, which is how the tests check
that a fanned-out sweep gives the single-process rows.

An item is (sweep, device key, parameters); its `key` names it across the cluster, and the gatherer keeps one
result per key (a worker that dies after finishing an item but before reporting it makes the item run again).
A device key names where an item may run: the device name (identical devices share the items: fan-out for
throughput) or, with `each_device`, name @ host#index (every physical device runs every item: comparison).
"""
from __future__ import annotations

import functools
import os
import socket
import time
from dataclasses import dataclass, field

import numpy as np

from ..measure import GPU_WARMUP_S


@dataclass(frozen=True)
class WorkItem:
    sweep: str
    device: str           # device key (see the module docstring)
    params: tuple         # ((name, value), ...): hashable, picklable, printable

    @property
    def key(self) -> str:
        return f"{self.sweep}|{self.device}|" + ",".join(f"{k}={v}" for k, v in self.params)


def device_keys(info, host: str | None = None) -> dict:
    """The two keys a device answers to: by name (shared by identical devices) and by physical device."""
    host = host or socket.gethostname()
    return {"key": info.name, "physical_key": f"{info.name} @ {host}#{info.index}"}


def probe_device(worker: str | None = None) -> dict:
    """Which Vulkan device this process serves (WORKBENCH_DEVICE, else the default), or why it has none."""
    from .. import vk
    selector = os.environ.get("WORKBENCH_DEVICE") or None
    host = socket.gethostname()
    probe = {"worker": worker, "host": host, "pid": os.getpid(), "selector": selector, "error": None,
             "key": None, "physical_key": None, "device": None, "index": None, "driver": None, "device_type": None}
    try:
        info = vk.select_device(selector)
    except Exception as error:  # DeviceNotFoundError, or no loader at all: reported per row, not a crash
        probe["error"] = f"{type(error).__name__}: {error}"
        return probe
    probe.update(device_keys(info, host), device=info.name, index=info.index, driver=info.driver_name,
                 device_type=info.device_type)
    return probe


# --- sweeps ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ConvTileSweep:
    """The conv tile sweep (workbench.kernels.conv_pw): one item per shape × tile, each row checked against the
    reference (`max_lsb_diff`, `outputs_off_by_one`). The reference and the input are made once per shape and
    process; each tile is its own SPIR-V, compiled once (disk cache shared by the workers of a host)."""

    shapes: tuple
    tiles: tuple
    saturate: bool = True
    timing: tuple = ()    # ((name, value), ...) passed to benchmarks.conv.measure
    seed: int = 0
    local_size: tuple | None = None   # None: ET-VK's rule (kernels.conv_pw.pick_local_size)
    name: str = field(default="conv-pw", init=False)
    key_columns = ("shape", "tile", "saturate")
    correctness_columns = ("max_lsb_diff", "outputs_off_by_one")
    # the device-vs-device chart (fanout.exports.chart): value, item label columns, facet, higher is better
    chart = dict(value="GOP/s", label="tile", facet="shape", higher_is_better=True)

    @staticmethod
    def chart_rows(frame):
        return frame

    @classmethod
    def suite(cls, quick: bool = False, cpu_device: bool = False) -> "ConvTileSweep":
        """conv_pw's suite grid; `quick`: its test grid; `cpu_device` (every device a CPU): every tile on the
        first suite shape only (the whole grid takes tens of minutes on lavapipe)."""
        from ..benchmarks import conv
        if quick:
            return cls(tuple(conv.QUICK_SHAPES), tuple(conv.QUICK_TILES),
                       timing=(("min_time_s", 0.01), ("min_samples", 3), ("target_us", 200.0)))
        shapes = conv.SUITE_SHAPES[:1] if cpu_device else conv.SUITE_SHAPES
        return cls(tuple(shapes), tuple(conv.SUITE_TILES))

    def items(self) -> list[tuple]:
        return [(("shape", tuple(s)), ("tile", tuple(t))) for s in self.shapes for t in self.tiles]

    def describe(self, params: dict) -> dict:
        from ..kernels import conv_pw
        shape = conv_pw.ConvPwShape.coerce(params["shape"])
        return {"kernel": conv_pw.SHADER, "shape": shape.label, "tile": conv_pw.tile_label(*params["tile"]),
                "saturate": self.saturate}

    def run(self, device, params: dict, warmup_s: float) -> list[dict]:
        from ..benchmarks.conv import measure
        from ..kernels import conv_pw
        q_input, packed, expected = _conv_problem(tuple(params["shape"]), self.seed)
        use_dot = bool(device.info.features.get("integer_dot_product"))
        base = conv_pw.ConvPwSpec(params["shape"], use_dot_ext=use_dot, saturate=self.saturate)
        with conv_pw.ConvPwBuffers(device, base, q_input, packed) as bufs:
            spec = base.with_tile(*params["tile"])
            if self.local_size is not None:
                from dataclasses import replace
                spec = replace(spec, local_size=tuple(self.local_size))
            row = measure(device, bufs, spec, expected=expected, warmup_s=warmup_s, **dict(self.timing))
        return [row]


@functools.lru_cache(maxsize=2)
def _conv_problem(shape: tuple, seed: int):
    """benchmarks.conv.sweep's problem for one shape: random input and weights, prepacked, and the int8 reference."""
    from ..kernels import conv_pw
    q_input, weight, scales, bias = conv_pw.random_problem(shape, seed)
    packed = conv_pw.prepack_weights(weight, scales, bias)
    expected = conv_pw.reference(q_input, weight, scales, bias, conv_pw.DEFAULT_QPARAMS).numpy()
    return q_input, packed, expected


@dataclass(frozen=True)
class PixelShuffleSweep:
    """The pixel shuffle suite (workbench.benchmarks.pixel_shuffle.bench_suite), one item per shape: its rows compare
    kernels of one shape with each other (vs torch, vs the chain, vs copy at the same traffic), so a shape is the
    smallest piece that carries its own comparisons."""

    shapes: tuple         # ((input NCHW, r), ...)
    quick: bool = False
    name: str = field(default="pixel-shuffle", init=False)
    key_columns = ("shape", "path", "variant", "in_layout", "out_layout", "storage", "packed_dim", "dtype",
                   "method", "size_mib")
    correctness_columns = ()
    chart = dict(value="GB/s", label=["path", "in_layout", "out_layout"], facet="shape", higher_is_better=True)

    @staticmethod
    def chart_rows(frame):
        """The fused and chain paths of the plain kernel (the block, output-order and specialized variants have
        charts of their own)."""
        if not len(frame) or "impl" not in frame:
            return frame
        keep = frame["impl"].isin(["fused", "chain"])
        for variant in ("block", "output_order", "r_specialized"):
            if variant in frame:
                keep &= ~frame[variant].fillna(False).astype(bool)
        return frame[keep]

    @classmethod
    def suite(cls, quick: bool = False, cpu_device: bool = False) -> "PixelShuffleSweep":
        """bench_suite's shapes; `cpu_device` (every device a CPU): ET-VK's two smallest PERF shapes (larger ones
        take minutes per kernel on lavapipe, and the sweep there shows the fan-out, not the kernel)."""
        from ..benchmarks import pixel_shuffle
        shapes = pixel_shuffle.suite_shapes(quick, cpu_device)
        if cpu_device and not quick:
            shapes = [s for s in shapes if s in pixel_shuffle.PERF_SHAPES[:2]]
        return cls(tuple(shapes), quick)

    def items(self) -> list[tuple]:
        return [(("shape", tuple(s)), ("r", int(r))) for s, r in self.shapes]

    def describe(self, params: dict) -> dict:
        return {"kernel": "q8ta_pixel_shuffle", "shape": "x".join(str(v) for v in params["shape"]),
                "r": params["r"]}

    def run(self, device, params: dict, warmup_s: float) -> list[dict]:
        from ..benchmarks import pixel_shuffle
        df = pixel_shuffle.bench_suite(device, None, quick=self.quick, show_progress=False,
                                       shapes=[(params["shape"], params["r"])])
        shape = self.describe(params)["shape"]
        rows = df.to_dict("records")
        for row in rows:  # the copy rows: measured at this shape's traffic
            if not isinstance(row.get("shape"), str):
                row["shape"] = shape
        return rows


def make_sweep(name: str, quick: bool = False, **options):
    """The suite grid of the sweep `name` (a family's `sweep` in workbench.catalogue); ValueError listing them."""
    from .. import catalogue
    return catalogue.resolve(catalogue.sweep(name).sweep).suite(quick, **options)


# --- running one item ----------------------------------------------------------------------------------------------

_last_item_end: float | None = None  # when this process last finished an item (GPU clock warm-up)
IDLE_WARMUP_S = GPU_WARMUP_S         # on a GPU idle longer than this, the item's measure.keep_busy runs that long


def execute_item(sweep, item: WorkItem, worker: str | None = None) -> list[dict]:
    """Run one item on this process's device → its rows, each tagged with the item and where it ran.

    An exception inside the item becomes one row with an `error` column (the sweep goes on); a device that is not
    the one the item was routed to (a worker whose device changed) is such an error too."""
    global _last_item_end
    from .. import vk
    from ..measure import environment
    params = dict(item.params)
    started = time.time()  # wall clock: the gaps between a worker's items are the fan-out's cost per item
    start = time.perf_counter()
    where = {"item": item.key, "sweep": item.sweep, "device_key": item.device, "worker": worker or "local",
             "host": socket.gethostname(), "pid": os.getpid()}
    try:
        device = vk.get_device()
        keys = device_keys(device.info)
        if item.device not in keys.values():
            raise vk.DeviceNotFoundError(f"item for device {item.device!r} reached a worker whose device is "
                                         f"{device.info.name!r} ({keys['physical_key']})")
        cuda = _pin_cuda(device.info)
        if cuda is not None:  # NVIDIA: the CUDA device torch's rows ran on (the same GPU, matched by UUID)
            where["cuda_device"] = cuda
        idle = _last_item_end is None or time.perf_counter() - _last_item_end > IDLE_WARMUP_S
        warmup_s = IDLE_WARMUP_S if idle and not device.info.is_cpu else 0.0
        rows = sweep.run(device, params, warmup_s)
    except Exception as error:
        row = {**sweep.describe(params), "error": f"{type(error).__name__}: {error}"}
        try:
            row.update(environment(vk.get_device()))
        except Exception:
            row["device"] = item.device
        rows = [row]
    _last_item_end = time.perf_counter()
    seconds = _last_item_end - start
    return [{**row, **where, "item_started": started, "item_seconds": seconds} for row in rows]


def error_rows(sweep, items, device_label: str, message: str, worker: str | None = None) -> list[dict]:
    """Rows that say why items could not run at all (no worker has their device, a worker lacks its device)."""
    return [{**sweep.describe(dict(item.params)), "item": item.key, "sweep": item.sweep, "device_key": item.device,
             "device": device_label, "worker": worker, "error": message, "item_seconds": np.nan} for item in items]


_pinned: dict = {}


def _pin_cuda(info) -> int | None:
    """On an NVIDIA device, make torch's current CUDA device the same GPU (matched by UUID), so the torch rows of
    a suite time the GPU this worker's Vulkan device is. Returns the CUDA index, or None."""
    if info.vendor != "NVIDIA":
        return None
    if info.index not in _pinned:
        _pinned[info.index] = _cuda_index_of(info.index)
    return _pinned[info.index]


def _cuda_index_of(vulkan_index: int) -> int | None:
    try:
        import torch
        if not torch.cuda.is_available():
            return None
        want = vulkan_uuid(vulkan_index)
        for i in range(torch.cuda.device_count()):
            uuid = "".join(ch for ch in str(torch.cuda.get_device_properties(i).uuid).lower() if ch in "0123456789abcdef")
            if want and uuid.endswith(want):
                torch.cuda.set_device(i)
                return i
    except Exception:  # torch rows then run on CUDA's default device, as they do without the sweep
        return None
    return None


def vulkan_uuid(index: int) -> str | None:
    """VkPhysicalDeviceIDProperties.deviceUUID of device `index` as 32 hex digits (CUDA reports the same UUID)."""
    from .. import vk
    return vk.list_devices()[index].device_uuid
