"""A kernel's tuning space: the parameters the tuner may choose, each with its choices, taken from the kernel's own
spec module (not a second copy), and the fixed problem (shape, layouts) they are tuned for. A space is registered in
its family's entry of `workbench.catalogue` (`spaces`), which names the builder functions below.

    space = tuning_space("conv-pw")                     # TILE_M × TILE_N4 × TILE_K4 of kernels.conv_pw
    space = tuning_space("pixel-shuffle", shape=(1, 96, 64, 36))
    space.params          # {"tile_m": (1, 2, 4), ...}
    space.check(config)   # the kernel's spec for that config, or ValueError saying why it is not valid
    space.valid()         # every valid config (the exhaustive grid), in a fixed order

A config is a dict {parameter: value}. Validity is the spec's own: a config is valid exactly when the kernel's
dataclass accepts it (its `__post_init__` raises ValueError otherwise), plus, for the conv, tiles larger than the
problem (they would only compute padding). Device-specific limits (a subgroup narrower than a pair store needs) are
checked where the candidate runs.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from .. import catalogue

__all__ = ["TuningSpace", "tuning_space", "SPACES", "config_label"]


def config_label(config: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items())


@dataclass(frozen=True)
class TuningSpace:
    kernel: str                 # the name `workbench tune` takes
    shader: str                 # the kernel's shader (rows' `kernel` column)
    params: dict                # name -> tuple of choices (the order is the grid's order)
    problem: dict               # the fixed problem: shape, layouts, quantization
    build: object = field(repr=False, compare=False)   # (problem, config) -> spec, ValueError when not valid

    def check(self, config: dict):
        """The spec of `config`, or ValueError naming what is wrong (an unknown or missing parameter, a value
        outside its choices, a combination the kernel refuses)."""
        unknown = sorted(set(config) - set(self.params))
        missing = sorted(set(self.params) - set(config))
        if unknown or missing:
            raise ValueError(f"{self.kernel}: a config sets exactly {list(self.params)}; got unknown {unknown}, "
                             f"missing {missing}")
        for name, value in config.items():
            if value not in self.params[name]:
                raise ValueError(f"{self.kernel}: {name}={value!r} is not one of {self.params[name]}")
        return self.build(self.problem, config)

    def is_valid(self, config: dict) -> bool:
        try:
            self.check(config)
        except ValueError:
            return False
        return True

    def grid(self) -> list[dict]:
        """Every combination of choices, valid or not."""
        names = list(self.params)
        return [dict(zip(names, values)) for values in itertools.product(*(self.params[n] for n in names))]

    def valid(self) -> list[dict]:
        """The exhaustive grid: every combination the kernel accepts."""
        return [c for c in self.grid() if self.is_valid(c)]

    def describe(self) -> dict:
        """The problem as row columns (strings for tuples)."""
        return {k: ("x".join(map(str, v)) if isinstance(v, tuple) else v) for k, v in self.problem.items()}


# --- the conv's accumulator tiles -----------------------------------------------------------------------------------

def _conv_problem(shape=None, saturate: bool = True) -> dict:
    from ..kernels import conv_pw
    shape = conv_pw.ConvPwShape.coerce(shape or CONV_DEFAULT_SHAPE)
    return {"shape": (shape.batch, shape.in_channels, shape.out_channels, shape.height, shape.width),
            "saturate": bool(saturate)}


def _conv_build(problem: dict, config: dict):
    from ..kernels import conv_pw
    spec = conv_pw.ConvPwSpec(problem["shape"], saturate=problem["saturate"]).with_tile(
        config["tile_m"], config["tile_n4"], config["tile_k4"])
    # a tile wider than the problem computes only padding in that dimension: the next smaller tile does the same work
    if config["tile_n4"] > 1 and spec.oc4 <= config["tile_n4"] // 2:
        raise ValueError(f"tile_n4={config['tile_n4']} exceeds the problem: {spec.oc4} output-channel blocks")
    if config["tile_m"] > 1 and spec.w4 <= config["tile_m"] // 2:
        raise ValueError(f"tile_m={config['tile_m']} exceeds the problem: {spec.w4} width blocks")
    if config["tile_k4"] > 1 and spec.ic4 <= config["tile_k4"] // 2:
        raise ValueError(f"tile_k4={config['tile_k4']} exceeds the problem: {spec.ic4} input-channel blocks")
    return spec


def conv_space(shape=None, saturate: bool = True) -> TuningSpace:
    """`kernels.conv_pw`'s tiles (TILE_VALUES for each of TILE_M, TILE_N4, TILE_K4) at one shape (N, Cin, Cout,
    H, W); default the conv suite's first shape, 1x96x64x64 -> 96."""
    from ..kernels import conv_pw
    values = tuple(conv_pw.TILE_VALUES)
    return TuningSpace("conv-pw", conv_pw.SHADER, {"tile_m": values, "tile_n4": values, "tile_k4": values},
                       _conv_problem(shape, saturate), _conv_build)


def _local_label(local) -> str:
    return "etvk" if local is None else "x".join(map(str, local))


def _conv_wg_build(problem: dict, config: dict):
    from dataclasses import replace

    from ..kernels import conv_pw
    choices = {_local_label(c): c for c in conv_pw.LOCAL_SIZE_CHOICES}
    spec = _conv_build(problem, {k: v for k, v in config.items() if k != "local"})
    return replace(spec, local_size=choices[config["local"]])


def conv_wg_space(shape=None, saturate: bool = True) -> TuningSpace:
    """The conv's tiles × its work-group shape (`kernels.conv_pw.LOCAL_SIZE_CHOICES`, "etvk" for ET-VK's rule): the
    tile space with the other knob ET-VK's C++ fixes by a rule."""
    from ..kernels import conv_pw
    values = tuple(conv_pw.TILE_VALUES)
    return TuningSpace("conv-pw-wg", conv_pw.SHADER,
                       {"tile_m": values, "tile_n4": values, "tile_k4": values,
                        "local": tuple(_local_label(c) for c in conv_pw.LOCAL_SIZE_CHOICES)},
                       _conv_problem(shape, saturate), _conv_wg_build)


CONV_DEFAULT_SHAPE = (1, 96, 96, 64, 64)

# --- the block pixel shuffle's options ------------------------------------------------------------------------------

PIXEL_SHUFFLE_DEFAULT_SHAPE = (1, 96, 128, 72)   # ET-VK's largest PERF case (RefineNet's decoder), r = 2


def _pixel_shuffle_problem(shape=None, in_layout: str = "4W4C", out_layout: str = "4C1W",
                           requant: bool = True, fixed: bool = False) -> dict:
    from .. import layouts as L
    shape = tuple(int(v) for v in (shape or PIXEL_SHUFFLE_DEFAULT_SHAPE))
    if len(shape) != 4:
        raise ValueError(f"a pixel shuffle input is NCHW (4 sizes), got {shape}")
    return {"shape": shape, "in_layout": L.get_layout(in_layout).name,
            "out_layout": L.get_layout(out_layout).name, "requant": bool(requant), "fixed": bool(fixed)}


def _pixel_shuffle_build(problem: dict, config: dict):
    from ..kernels.pixel_shuffle import DIFF_QP, SAME_QP
    from ..kernels.pixel_shuffle_block import Q8taPixelShuffleBlockSpec
    qp = DIFF_QP if problem["requant"] else SAME_QP
    if not problem["requant"] and (config["lut"] or config["convert"]):
        raise ValueError("a requantize path (lut, convert) needs requant=True: passthrough does no math")
    if problem.get("fixed") and (config["lut"] or config["convert"]):
        raise ValueError("the integer requantize (fixed) takes neither lut nor convert")
    return Q8taPixelShuffleBlockSpec(problem["shape"], 2, problem["in_layout"], problem["out_layout"],
                                     *qp, fixed=bool(problem.get("fixed")) and problem["requant"], **config)


def pixel_shuffle_space(shape=None, in_layout: str = "4W4C", out_layout: str = "4C1W",
                        requant: bool = True, fixed: bool = False) -> TuningSpace:
    """The block pixel shuffle's options (`kernels.pixel_shuffle_block`: thread order TILE_CO_CHOICES, local size
    LOCAL_X_CHOICES, requantize path LUT_CHOICES / convert, swizzle, pixel tile, pair store) for one layout pair
    and shape (default 4W4C -> 4C1W with requantization at ET-VK's 1x96x128x72, r = 2); `fixed`: the integer
    requantize (`kernels.requant_fixed`) instead of the fp32 one (then lut / convert are not choices)."""
    from ..kernels import pixel_shuffle_block as B
    params = {"tile_co": tuple(B.TILE_CO_CHOICES), "local_x": tuple(B.LOCAL_X_CHOICES), "lut": tuple(B.LUT_CHOICES),
              "convert": (False, True), "swizzle": (False, True), "pixel_tile": (False, True),
              "pair_store": (False, True)}
    return TuningSpace("pixel-shuffle", B.BLOCK_SHADER, params,
                       _pixel_shuffle_problem(shape, in_layout, out_layout, requant, fixed), _pixel_shuffle_build)


#: name -> space builder: the catalogue's spaces (`workbench.catalogue`, each family's `spaces`)
SPACES = catalogue.Resolved({name: entry.build for name, (_, entry) in catalogue.spaces().items()})


def tuning_space(kernel: str, **problem) -> TuningSpace:
    """The space of `kernel` (a name of SPACES) for the problem given (shape=..., and the kernel's own options)."""
    _, entry = catalogue.space(kernel)
    problem = {k: v for k, v in problem.items() if v is not None}
    return catalogue.resolve(entry.build)(**problem)
