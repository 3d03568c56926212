"""One candidate measured on one device: the work item the tuner sends to a Dask worker (or runs in this process).

`CandidateSweep` follows `workbench.fanout`'s sweep protocol (`name`, `run(device, params, warmup_s)`,
`describe(params)`), so `fanout.items.execute_item` runs it in a worker exactly as it runs the fan-out's own items:
the same device routing, the same error rows. Each candidate is measured by its family's candidate runner (the
catalogue's `Family.candidate`, defined below) the way the kernel's benchmark suite measures it (the conv:
`benchmarks.conv.measure`, through `fanout.items.ConvTileSweep`; the block pixel shuffle: one recording sampled by
`measure.sample_recording`, as `benchmarks.pixel_shuffle.limit_suite` does), and checked against its reference on
the same device (conv: `max_lsb_diff`; pixel shuffle: `exact`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import catalogue
from .space import config_label, tuning_space

__all__ = ["CandidateSweep", "QUICK_TIMING", "run_conv", "run_pixel_shuffle"]

#: Sampling for tests and smoke runs (a few short samples).
QUICK_TIMING = (("min_time_s", 0.01), ("min_samples", 3), ("max_samples", 5))


@dataclass(frozen=True)
class CandidateSweep:
    kernel: str                   # a tuning space's name (tune.space.SPACES, from the catalogue)
    problem: tuple                # ((name, value), ...): the space's fixed problem
    timing: tuple = ()            # ((name, value), ...) sampling options; () = the suite's own
    name: str = field(default="tune", init=False)
    key_columns = ("config",)
    correctness_columns = ("max_lsb_diff", "exact")

    def space(self):
        return tuning_space(self.kernel, **dict(self.problem))

    def describe(self, params: dict) -> dict:
        space = self.space()
        return {"kernel": space.shader, "tuned": self.kernel, "config": config_label(params), **space.describe(),
                **params}

    def run(self, device, params: dict, warmup_s: float) -> list[dict]:
        """The candidate `params` (a config) measured on `device` → one row; a row with `invalid` (and no timing)
        where the device cannot run it (a limit of this device, not of the kernel)."""
        space = self.space()
        spec = space.check(params)
        check_device = getattr(spec, "check_device", None)
        if check_device is not None:
            try:
                check_device(device)
            except ValueError as error:
                return [{**self.describe(params), "invalid": str(error)}]
        family, _ = catalogue.space(self.kernel)
        row = catalogue.resolve(family.candidate)(self, device, spec, warmup_s)
        return [{**self.describe(params), **row}]


# --- the candidate runners the catalogue names (a family's `candidate`) --------------------------------------------

def run_conv(candidate: CandidateSweep, device, spec, warmup_s: float) -> dict:
    """A conv tile (`kernels.conv_pw.ConvPwSpec`) measured as the fan-out's ConvTileSweep measures it."""
    from ..fanout.items import ConvTileSweep
    timing = dict(candidate.timing)
    conv_timing = {k: v for k, v in timing.items() if k in ("min_time_s", "min_samples", "max_time_s")}
    shape = tuple(spec.shape.as_dict().values())   # (N, Cin, Cout, H, W)
    sweep = ConvTileSweep((shape,), (spec.tile,), saturate=spec.saturate, timing=tuple(conv_timing.items()),
                          local_size=spec.local_size)
    params = {"shape": shape, "tile": spec.tile}
    row = sweep.run(device, params, warmup_s)[0]
    row["correct"] = row.get("max_lsb_diff") == 0
    return row


def run_pixel_shuffle(candidate: CandidateSweep, device, spec, warmup_s: float) -> dict:
    """A block pixel shuffle (`kernels.pixel_shuffle_block`): one recording sampled, then checked exact."""
    import time

    from ..benchmarks.pixel_shuffle import check_exact
    from ..kernels.pixel_shuffle import Q8taPixelShuffleRun, output_sizes, shape_str
    from ..measure import environment, measurement_row, sample_recording, sampling
    timing = {**sampling(False), **dict(candidate.timing)}
    with Q8taPixelShuffleRun(device, spec, seed=1) as run, device.record(spec.variant) as rec:
        run.record(rec)
        start = time.perf_counter()
        while time.perf_counter() - start < warmup_s:  # an idle GPU's clock ramps up under load
            rec.submit()
        gpu, host = sample_recording(rec, repeats=1, **timing)
    exact = check_exact(device, spec)
    row = measurement_row(spec.shader, environment(device), gpu, host_ns=host, bytes_moved=spec.bytes_moved(),
                          variant=spec.variant, shape=shape_str(spec.in_sizes),
                          out_shape=shape_str(output_sizes(spec.in_sizes, 2)), qpath=spec.path,
                          local_size=str(spec.local_size), threads=spec.threads, timer="vulkan timestamps")
    row["exact"] = bool(exact)
    row["correct"] = bool(exact)
    return row

