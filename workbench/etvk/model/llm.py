"""A small Llama-style decoder lowered through ExecuTorch's own LLM export and profiled on ET-VK's runtime.

    from workbench.etvk.model import llm
    cfg = llm.Decoder()                                   # Llama-3.2-1B's head_dim / GQA / rope, scaled down
    programs = llm.lower(cfg, executorch="/path/to/executorch", out_dir=...)    # prefill + decode programs
    result = llm.profile(programs, runtime)               # dispatches, kernels, phases, outputs, shares, rates

    workbench etvk llm [--layers N] [--prefill P] [--decode N] [--out DIR] [--capture]

How it is lowered
    ``examples/models/llama/export_llama_lib._export_llama`` of the checkout, called with the options ET-VK's Llama
    tutorial gives (``docs/source/backends/vulkan/tutorials/etvk-llama-tutorial.md``) and weight-only 4-bit
    (:data:`EXPORT_ARGS`: ``--vulkan -qmode 4w -G 32 -E 4,32 -kv --use_sdpa_with_kv_cache -d fp32``), parsed by its own
    ``build_args_parser`` into its ``LlmConfig``; the weights are the Transformer's own initialisation under a seed,
    handed over as a checkpoint (``-c``; see :func:`_child` for why not the no-checkpoint path). In a child process
    (:mod:`.revision`'s reason: ET-VK registers its ops with torch on import): the
    checkout's ``backends/vulkan``, ``examples/models/llama`` and ``extension/llm/export`` go first on the wheel's
    package paths (the wheel's versions of the last two differ from the checkout's); ``extension/llm/custom_ops``
    stays the wheel's, whose library defines ``llama::custom_sdpa`` / ``update_cache``. ``summary.json`` records the
    file every one of these was imported from.

Two programs, static shapes (``--disable_dynamic_shape``)
    ``executor_runner`` fills each input with exactly the bytes of its planned size, so a dynamic-shape program
    would only ever run at its upper bound. *decode*: the export's own KV-cache example (tokens ``[1, 1]``,
    ``input_pos`` ``[1]`` = the position); *prefill*: the only change to the export is its example inputs, tokens
    ``[1, P]`` and ``input_pos = arange(P)`` (``[P]``): with static shapes the rotary tables are indexed by every
    position (``freqs_cos[input_pos]``) and ``custom_sdpa`` / ``update_cache`` start at ``input_pos[0]``.

Decode steps
    One decode step at position ``p`` is the decode program run with input files (token, ``p``), from a fresh start:
    SDPA reads ``p + 1`` cache rows whatever they hold, so the content does not change the time, only ``p`` does.
    The reference is the quantized model in torch (the export's eager module after its source transforms) at the
    same state: a fresh (zero) cache, the same inputs. Rows below ``p`` that no execution wrote are not zeros in
    ET-VK's cache tensors (NaN logits on lavapipe for every p ≥ 1), so the output is compared at p = 0 and the
    prefill; the positions after the prefill are timed.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

# the options of ET-VK's Llama tutorial, with weight-only 4-bit linears and 4-bit embedding (ET-VK's
# linear_q4gsw / embedding_q4gsw), fp32, KV cache with the custom SDPA, static shapes (see the module's docstring)
EXPORT_ARGS = ("--vulkan", "-qmode", "4w", "-kv", "--use_sdpa_with_kv_cache", "--disable_dynamic_shape",
               "-d", "fp32", "--model", "llama3_2")

# ET-VK's checks on the 4-bit linears (Q4gswLinear.cpp / QuantizedLinear.cpp, as docs/llm-decode.md lists them)
# and on the embedding (op_registry.register_quantized_decomposed_embedding_4bit)
FAMILIES = ("GEMV", "GEMM", "SDPA", "RMSNorm", "rotary", "embedding", "copies/views", "other")


def repeated_rows(weight, period: int):
    """`weight` (a copy) with its rows repeating every `period` (Decoder.repeat_rows); vectors and period 0 as
    they are."""
    if period <= 0 or weight.dim() < 2 or weight.shape[0] <= period:
        return weight.clone()
    reps = -(-weight.shape[0] // period)
    return weight[:period].repeat(reps, *([1] * (weight.dim() - 1)))[:weight.shape[0]].clone()


class LlmLoweringError(RuntimeError):
    """export_llama_lib failed in the child; its last lines say where."""


@dataclass(frozen=True)
class Decoder:
    """A Llama-3.2-1B-shaped decoder scaled down: head_dim 64, 4 query heads per KV head, SwiGLU, scaled RoPE
    (θ = 500000), untied output. Bad values are refused in one line naming what was expected."""

    name: str = "llama3_2_mini"
    n_layers: int = 2
    dim: int = 512
    n_heads: int = 8
    n_kv_heads: int = 2
    hidden_dim: int = 1536
    vocab_size: int = 8192
    max_seq_len: int = 128
    group_size: int = 32
    embedding_group_size: int = 32
    prefill: int = 32
    norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    #: 0: every weight random; R: every matrix's rows (output features, vocabulary entries) repeat every R — still
    #: the seed's random values and the full traffic per token, but a program that compresses R-fold, so a
    #: 1B-shaped model travels to a GPU host (`tools/gpu_llm.py`); the references are computed with the same weights
    repeat_rows: int = 0

    def __post_init__(self):
        def need(ok, what):
            if not ok:
                raise ValueError(f"{self.name}: {what}")
        for key in ("n_layers", "dim", "n_heads", "n_kv_heads", "hidden_dim", "vocab_size", "max_seq_len",
                    "group_size", "embedding_group_size", "prefill"):
            need(isinstance(getattr(self, key), int) and getattr(self, key) >= 1,
                 f"expected {key} a positive integer, got {getattr(self, key)!r}")
        need(self.dim % self.n_heads == 0,
             f"expected n_heads to divide dim, got dim={self.dim}, n_heads={self.n_heads}")
        need(self.n_heads % self.n_kv_heads == 0,
             f"expected n_kv_heads to divide n_heads (GQA), got n_heads={self.n_heads}, n_kv_heads={self.n_kv_heads}")
        need(self.head_dim % 2 == 0, f"expected an even head_dim (rotary pairs), got {self.head_dim}")
        need(self.group_size % 4 == 0 and self.group_size >= 8,
             f"expected group_size a multiple of 4 (ET-VK's linear_q4gsw), got {self.group_size}")
        for k in (self.dim, self.hidden_dim):
            # ET-VK's prepack_quantized_linear_weight needs K % 8; the groups must tile K
            need(k % self.group_size == 0 and k % 8 == 0,
                 f"expected group_size to divide every linear's K (dim={self.dim}, hidden_dim={self.hidden_dim}) "
                 f"and K % 8 == 0, got group_size={self.group_size}")
        need(self.dim % self.embedding_group_size == 0,
             f"expected embedding_group_size to divide dim={self.dim}, got {self.embedding_group_size}")
        need(self.hidden_dim % 4 == 0 and self.vocab_size % 4 == 0 and self.dim % 4 == 0,
             f"expected dim, hidden_dim and vocab_size multiples of 4 (ET-VK's N alignment), got "
             f"{self.dim}, {self.hidden_dim}, {self.vocab_size}")
        need(isinstance(self.repeat_rows, int) and self.repeat_rows >= 0,
             f"expected repeat_rows 0 (all random) or a positive row period, got {self.repeat_rows!r}")
        need(self.prefill < self.max_seq_len,
             f"expected prefill < max_seq_len={self.max_seq_len} (decode positions follow it), got {self.prefill}")

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def params(self) -> dict:
        """The params.json export_llama_lib reads (``ModelArgs`` fields)."""
        return {"dim": self.dim, "n_layers": self.n_layers, "n_heads": self.n_heads, "n_kv_heads": self.n_kv_heads,
                "hidden_dim": self.hidden_dim, "vocab_size": self.vocab_size, "norm_eps": self.norm_eps,
                "rope_theta": self.rope_theta, "use_scaled_rope": True, "multiple_of": 256}

    def export_args(self, params: Path, out: Path, output_name: str) -> list[str]:
        return [*EXPORT_ARGS, "-p", str(params), "-G", str(self.group_size),
                "-E", f"4,{self.embedding_group_size}", "--max_seq_length", str(self.max_seq_len),
                "--max_context_length", str(self.max_seq_len), "--output-dir", str(out),
                "--output_name", output_name]

    def linears(self) -> list[tuple[str, int, int]]:
        """(name, K, N) of every linear one token passes through, in order."""
        kv = self.n_kv_heads * self.head_dim
        layer = [("wq", self.dim, self.dim), ("wk", self.dim, kv), ("wv", self.dim, kv), ("wo", self.dim, self.dim),
                 ("w1", self.dim, self.hidden_dim), ("w3", self.dim, self.hidden_dim),
                 ("w2", self.hidden_dim, self.dim)]
        return [(f"layers.{i}.{n}", k, m) for i in range(self.n_layers) for n, k, m in layer] + \
            [("output", self.dim, self.vocab_size)]

    def weight_bytes(self, bits: int = 4, scale_bytes: int = 4) -> dict:
        """Bytes one decode token reads: every linear's packed weights (``bits`` per weight) and group scales (ET-VK
        keeps them in the IO dtype, fp32 here; symmetric, no zero points), one embedding row, the RMSNorm weights."""
        linear = sum(k * n * bits // 8 + (k // self.group_size) * n * scale_bytes for _, k, n in self.linears())
        embedding = self.dim * bits // 8 + self.dim // self.embedding_group_size * scale_bytes
        norms = (2 * self.n_layers + 1) * self.dim * 4
        return {"linear": linear, "embedding_row": embedding, "norms": norms, "total": linear + embedding + norms}

    def kv_bytes(self, position: int) -> int:
        """KV-cache bytes SDPA reads at decode position ``position`` (fp32 K and V, every layer)."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * (position + 1) * 4


# ---------------------------------------------------------------------------------------------------------------------
# Lowering (parent)

@dataclass
class Programs:
    folder: Path
    prefill: Path | None                     # a folder in revision.Program's layout (None: not lowered)
    decode: list = field(default_factory=list)    # one folder per decode position (the same .pte, linked)
    summary: dict = field(default_factory=dict)

    @property
    def folders(self) -> list[Path]:
        return [f for f in (self.prefill, *self.decode) if f is not None]


def lower(cfg: Decoder, *, executorch=None, out_dir, decode_positions=None, prefill: bool = True, seed: int = 0,
          timeout: float = 1800) -> Programs:
    """Lower `cfg` with the checkout's export_llama_lib (a child process) into `out_dir`: ``prefill/`` (unless
    `prefill` is False) and one ``decode-<p>/`` per position (default: 0, where the runtime's output can be
    checked, and the 4 positions after the prefill, which are timed)."""
    from .revision import python_tree, run_child
    from ..codegen import checkout_path
    root = checkout_path(executorch)
    tree, commit, label = python_tree(root, None)
    positions = list(decode_positions if decode_positions is not None else
                     [0, *range(cfg.prefill, cfg.prefill + 4)])
    bad = [p for p in positions if not 0 <= p < cfg.max_seq_len]
    if bad or not positions:
        raise ValueError(f"expected decode positions in 0..{cfg.max_seq_len - 1}, got {positions}")
    out = Path(out_dir)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    run_child("workbench.etvk.model.llm",
              ["--checkout", str(root), "--tree", str(tree), "--commit", commit, "--label", label, "--config",
               json.dumps(asdict(cfg)), "--positions", ",".join(map(str, positions)), "--seed", str(seed), "--out",
               str(out), *([] if prefill else ["--no-prefill"])],
              out / "llm.json", timeout, LlmLoweringError,
              f"lowering {cfg.name} with the checkout's export_llama_lib", tail_lines=15)
    return programs_in(out)


def programs_in(folder) -> Programs:
    """The :class:`Programs` :func:`lower` wrote into `folder` (also after carrying it elsewhere)."""
    folder = Path(folder)
    if not (folder / "llm.json").is_file():
        raise FileNotFoundError(f"{folder} holds no lowered LLM (no llm.json): `workbench etvk llm --out` writes one")
    summary = json.loads((folder / "llm.json").read_text())
    return Programs(folder, folder / "prefill" if summary.get("prefill", True) else None,
                    [folder / d for d in summary["decode_folders"]], summary)


# ---------------------------------------------------------------------------------------------------------------------
# On ET-VK's runtime

def family(kernel: str) -> str:
    """The kernel family of one ET-VK shader variant (one of :data:`FAMILIES`), by its name."""
    k = kernel or ""
    # index_tensor: the model's one aten.index is the rotary tables' lookup (freqs_cos[input_pos])
    if "rotary" in k or "rope" in k or k.startswith("index_tensor"):
        return "rotary"
    if "embedding" in k:
        return "embedding"
    if "gemv" in k:
        return "GEMV"
    if "linear" in k or "gemm" in k:
        return "GEMM"
    if "sdpa" in k or "softmax" in k:
        return "SDPA"
    if "rms_norm" in k:
        return "RMSNorm"
    if any(w in k for w in ("view", "copy", "clone", "nchw", "image_to", "buffer_to", "permute", "no_op",
                            "transfer", "concat", "select", "slice", "squeeze")):
        return "copies/views"
    return "other"


def execute(programs: Programs, runtime, *, runs: int = 10, warmup: int = 2, device=None,
            warm_seconds: float = 1.5, quiet: bool = True) -> None:
    """Every program folder run ``warmup + runs`` times on `runtime` (:func:`.profile.execute`: run.etdp,
    outputs and run.json beside each program)."""
    from . import profile as P
    for folder in programs.folders:
        P.execute(folder, runtime, runs=runs, warmup=warmup, device=device, warm_seconds=warm_seconds,
                  note="", quiet=quiet)


@dataclass
class LlmProfile:
    name: str
    dispatches: pd.DataFrame     # profile.read's columns + step (prefill / decode), position, tokens, family
    kernels: pd.DataFrame
    phases: pd.DataFrame
    outputs: pd.DataFrame        # + tolerance, within
    families: pd.DataFrame       # per step and family: dispatches, µs per step, share
    rates: pd.DataFrame          # per step: tokens, GPU µs, ETVK_EXECUTE µs, tokens/s
    roofline: pd.DataFrame       # decode: weight bytes per token against time per token, 4 / 3 / 2 bits

    def frames(self) -> dict:
        return {"dispatches": self.dispatches.drop(columns=["args"]), "kernels": self.kernels, "phases": self.phases,
                "outputs": self.outputs, "families": self.families, "rates": self.rates}

    def write(self, folder) -> list[Path]:
        """``etvk_profile_<what>_llm_<name>.csv`` for each frame, and ``llm_decode_roofline.csv``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for what, frame in self.frames().items():
            path = folder / f"etvk_profile_{what}_llm_{self.name}.csv"
            frame.to_csv(path, index=False)
            written.append(path)
        path = folder / "llm_decode_roofline.csv"
        self.roofline.to_csv(path, index=False)
        return written + [path]


# The runtime's logits against the quantized model in torch, both fp32: the 4-bit weights dequantize exactly
# (q · scale) on both sides, so what differs is the order of fp32 sums (dot products over K ≤ 1536, softmax over
# ≤ 128 keys, RMSNorm over dim) carried through the layers: ~1e-6 relative per op. 1e-4 of the logits' range
# leaves room for that and is far below one quantization step of a weight (a scale ≈ max|w| / 7).
RTOL = 1e-4


def read(programs: Programs) -> LlmProfile:
    """The executed programs' rows (:func:`.profile.read` per folder), tagged with phase / position / tokens,
    the shares of time per kernel family, the rates and decode's roofline."""
    from . import profile as P
    cfg = Decoder(**programs.summary["config"])
    parts = {k: [] for k in ("dispatches", "kernels", "phases", "outputs")}
    for folder in programs.folders:
        summary = json.loads((folder / "summary.json").read_text())
        tags = {"step": summary["phase"], "position": summary["position"], "tokens": summary["tokens"]}
        prof = P.read([folder])
        for key in parts:
            parts[key].append(getattr(prof, key).assign(**tags))
    dispatches, kernels, phases, outputs = (pd.concat(parts[k], ignore_index=True) for k in parts)
    dispatches["family"] = dispatches["kernel"].map(family)
    kernels["family"] = kernels["kernel"].map(family)
    # Decode at p ≥ 1 from a fresh start reads p rows of ET-VK's KV-cache tensors that no execution wrote (not the
    # eager model's zeros: NaN logits on lavapipe), so its output is not compared; position 0's is. The positions
    # after the prefill are the timed decode steps (position 0's SDPA reads one row).
    decode_positions = sorted(set(dispatches.loc[dispatches["step"] == "decode", "position"]))
    timed_from = cfg.prefill if any(p >= cfg.prefill for p in decode_positions) else 0
    dispatches["timed"] = (dispatches["step"] == "prefill") | (dispatches["position"] >= timed_from)
    phases["timed"] = (phases["step"] == "prefill") | (phases["position"] >= timed_from)
    outputs["compared"] = (outputs["step"] == "prefill") | (outputs["position"] == 0)
    outputs["tolerance"] = RTOL * outputs["reference_abs_max"]
    outputs["within"] = (outputs["max_abs_diff"] <= outputs["tolerance"]) | ~outputs["compared"]
    timed, timed_phases = dispatches[dispatches["timed"]], phases[phases["timed"]]
    rates = rate_table(timed, timed_phases)
    return LlmProfile(cfg.name, dispatches, kernels, phases, outputs, family_shares(timed), rates,
                      roofline(cfg, timed, rates))


def family_shares(dispatches: pd.DataFrame) -> pd.DataFrame:
    """Per step (prefill, decode) and family: dispatches and GPU µs per step (the mean over the step's programs,
    i.e. over the decode positions) and the share of the step's GPU time."""
    steps = dispatches.groupby("step")["position"].nunique()
    g = dispatches.groupby(["step", "family"])
    out = pd.DataFrame({"dispatches": g.size(), "gpu_us": g["gpu_us"].sum()}).reset_index()
    out["steps"] = out["step"].map(steps)
    out["dispatches"] = out["dispatches"] / out["steps"]
    out["gpu_us_per_step"] = out["gpu_us"] / out["steps"]
    total = out.groupby("step")["gpu_us"].transform("sum")
    out["share"] = out["gpu_us"] / total
    out["family"] = pd.Categorical(out["family"], FAMILIES, ordered=True)
    out = out.sort_values(["step", "family"]).reset_index(drop=True)
    out["family"] = out["family"].astype(str)
    first = dispatches.iloc[0]
    return out.assign(device=first["device"], driver=first["driver"], commit=first["commit"])[
        ["step", "family", "dispatches", "gpu_us_per_step", "share", "steps", "device", "driver", "commit"]]


def rate_table(dispatches: pd.DataFrame, phases: pd.DataFrame) -> pd.DataFrame:
    """Per step (prefill, decode): tokens, GPU µs per step (sum of the dispatch medians), ET-VK's ETVK_EXECUTE µs (the
    delegate's wall time: submit, wait and the CPU-side copies) and tokens/s by each."""
    rows = []
    first = dispatches.iloc[0]
    for step, group in dispatches.groupby("step", sort=False):
        per_position = group.groupby("position")["gpu_us"].sum()
        execute = phases[(phases["phase"] == "ETVK_EXECUTE") & (phases["step"] == step)]
        execute_us = float(execute["us"].median()) if len(execute) else float("nan")
        tokens = int(group["tokens"].iloc[0])
        gpu_us = float(per_position.median())
        rows.append({"step": step, "tokens": tokens, "steps": len(per_position),
                     "dispatches": int(len(group) / len(per_position)), "gpu_us": gpu_us,
                     "gpu_us_min_step": float(per_position.min()), "gpu_us_max_step": float(per_position.max()),
                     "etvk_execute_us": execute_us, "tokens_per_s_gpu": tokens / gpu_us * 1e6,
                     "tokens_per_s_execute": tokens / execute_us * 1e6, "device": first["device"],
                     "driver": first["driver"], "commit": first["commit"], "date": first["date"]})
    return pd.DataFrame(rows)


def roofline(cfg: Decoder, dispatches: pd.DataFrame, rates: pd.DataFrame) -> pd.DataFrame:
    """Decode's roofline: weight bytes one token moves against the time per token, measured at 4 bits; at 3 and
    2 bits the GEMV time scaled by the bytes at the GEMVs' measured bandwidth (scales unchanged), the rest of
    the step (SDPA, RMSNorm, rotary, copies: the other lever) as measured."""
    decode = dispatches[dispatches["step"] == "decode"]
    if decode.empty:
        return pd.DataFrame()
    steps = decode["position"].nunique()
    gemv_us = float(decode.loc[decode["family"] == "GEMV", "gpu_us"].sum()) / steps
    total_us = float(decode["gpu_us"].sum()) / steps
    mean_position = float(decode["position"].mean())
    base = cfg.weight_bytes(4)
    bandwidth = base["linear"] / (gemv_us * 1e-6) if gemv_us else float("nan")
    first = decode.iloc[0]
    rows = []
    for bits in (4, 3, 2):
        wb = cfg.weight_bytes(bits)
        g = gemv_us * wb["linear"] / base["linear"]
        t = total_us - gemv_us + g
        rows.append({"bits": bits, "source": "measured" if bits == 4 else "projected",
                     "weight_bytes_per_token": wb["total"], "linear_weight_bytes": wb["linear"],
                     "kv_bytes_per_token": cfg.kv_bytes(int(round(mean_position))),
                     "gemv_us_per_token": g, "non_gemv_us_per_token": total_us - gemv_us, "us_per_token": t,
                     "tokens_per_s": 1e6 / t, "speedup": total_us / t, "gemv_share": g / t,
                     "gemv_gb_s": bandwidth / 1e9, "weight_gb_s_overall": wb["total"] / (t * 1e-6) / 1e9,
                     "model": f"llm_{cfg.name}", "device": first["device"], "driver": first["driver"],
                     "commit": first["commit"], "date": first["date"]})
    return pd.DataFrame(rows)


def capture(programs: Programs, runtime, out, *, names: dict | None = None, device=None,
            position: int | None = None, events: bool = True) -> pd.DataFrame:
    """The decode program (at `position`, default the one after the prefill) run once under GFXReconstruct's capture layer
    (:func:`.capture_join.capture_program`) and every dispatch replayed alone (:func:`.capture_join.coverage`):
    the rows of ``capture_coverage.csv`` for it. ``events=False`` (a host without ExecuTorch's Inspector): the
    run's ETDump is set aside as ``events.etdp`` and the rows carry no ET-VK events; :func:`join_events` adds
    them where Inspector runs."""
    from . import capture_join as CJ
    folder = _decode_folder(programs, position)
    out = Path(out)
    CJ.capture_program(runtime, CJ.lowered_program(folder), out)
    if not events:
        (out / "run.etdp").replace(out / "events.etdp")
    return CJ.coverage(out, f"llm_{programs.summary['config']['name']}_decode", names, device=device)


def join_events(table: pd.DataFrame, etdump) -> pd.DataFrame:
    """Coverage rows made without ET-VK's events (``capture(..., events=False)``) with them: phase, operator,
    ET-VK's µs, and the ETDump's kernel name as the variant where no SPIR-V matched."""
    from . import capture_join as CJ
    joined = CJ.join_events(table, etdump)
    unnamed = (joined["variant_from"].fillna("") == "") & (joined["kernel"].fillna("") != "")
    joined.loc[unnamed, "variant"] = joined.loc[unnamed, "kernel"]
    joined.loc[unnamed, "variant_from"] = "etdump"
    return joined[CJ.COVERAGE_COLUMNS]


RUN_FILES = ("run.etdp", "run.json")      # and output-*.bin: what an execution adds to a program folder


def pack_returned(programs: Programs, capture_dir, tar_path) -> Path:
    """One tar of what a GPU host sends back: each program folder's run files and the capture's coverage rows
    (``coverage_host.csv``), its ETDump and manifest."""
    import tarfile
    with tarfile.open(tar_path, "w") as tar:
        for folder in programs.folders:
            for f in sorted(folder.iterdir()):
                if f.name in RUN_FILES or f.name.startswith("output-"):
                    tar.add(f, arcname=f"llm/{folder.name}/{f.name}")
        if capture_dir is not None:
            for name in ("coverage_host.csv", "events.etdp", "capture.json"):
                if (Path(capture_dir) / name).is_file():
                    tar.add(Path(capture_dir) / name, arcname=f"capture/{name}")
    return Path(tar_path)


def read_returned(tar_path, lowered, work) -> tuple[LlmProfile, pd.DataFrame | None]:
    """What :func:`pack_returned` packed on a GPU host, read here where Inspector runs: the programs `lowered`
    (the folder :func:`lower` wrote and the host ran) copied into `work` with the host's run files, then
    :func:`read`; the capture's rows joined with its events. Returns (profile, coverage or None)."""
    import tarfile
    lowered, work = Path(lowered), Path(work)
    programs = programs_in(lowered)
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(lowered, work / "llm", ignore=lambda d, names: [n for n in names if n in RUN_FILES or
                                                                     n.startswith("output-")])
    with tarfile.open(tar_path) as tar:
        members = tar.getnames()
        wanted = {f"llm/{f.name}/run.etdp" for f in programs.folders}
        missing = sorted(wanted - set(members))
        if missing:
            raise FileNotFoundError(f"{tar_path} lacks {missing}: not the return of these programs ({lowered})")
        tar.extractall(work, filter="data")
    profile = read(programs_in(work / "llm"))
    coverage = None
    if (work / "capture" / "coverage_host.csv").is_file():
        coverage = join_events(pd.read_csv(work / "capture" / "coverage_host.csv", keep_default_na=False,
                                           dtype={"pipeline": str}),
                               work / "capture" / "events.etdp")
    return profile, coverage


def _decode_folder(programs: Programs, position) -> Path:
    if position is None:      # the first timed step: the position after the prefill
        position = programs.summary["config"]["prefill"]
        if position not in programs.summary["positions"]:
            return programs.decode[0]
    for folder in programs.decode:
        if json.loads((folder / "summary.json").read_text())["position"] == position:
            return folder
    raise ValueError(f"no decode program at position {position}; lowered: {programs.summary['positions']}")


# ---------------------------------------------------------------------------------------------------------------------
# The child

def _put_first(package, path: Path) -> None:
    # a namespace package's _NamespacePath has no insert: the attribute is replaced by a plain list
    package.__path__ = [str(path), *package.__path__]


# Imported at module level by export_llama_lib / the LLM builder for paths this lowering never takes (a Hub
# download of a checkpoint, a tokenizer for calibration, a Hydra config as export_llama's argument); not in the
# workbench's environment. Where missing, each stands in as a module whose functions say so when called.
_UNUSED_IMPORTS = {"huggingface_hub": ("snapshot_download",), "pytorch_tokenizers": ("get_tokenizer",),
                   "omegaconf": ("DictConfig", "OmegaConf")}


def _stand_in_unused_imports() -> list[str]:
    import importlib.util
    import types
    stood_in = []
    for name, attributes in _UNUSED_IMPORTS.items():
        if importlib.util.find_spec(name) is not None:
            continue
        module = types.ModuleType(name)
        for attribute in attributes:
            def unavailable(*_, _what=f"{name}.{attribute}", **__):
                raise RuntimeError(f"{_what} is not installed: the workbench lowers without checkpoints, "
                                   "tokenizers or Hydra configs")
            setattr(module, attribute, type(attribute, (), {"__init__": unavailable}) if attribute[0].isupper()
                    else unavailable)
        sys.modules[name] = module
        stood_in.append(name)
    return stood_in


def _child(args) -> int:
    checkout, tree, out = Path(args.checkout), Path(args.tree), Path(args.out)
    cfg = Decoder(**json.loads(args.config))
    positions = [int(p) for p in args.positions.split(",")]
    import importlib
    stood_in = _stand_in_unused_imports()
    import executorch.backends as backends
    _put_first(backends, tree / "backends")
    import executorch.examples.models as models
    import executorch.extension.llm as llm_ext
    # only these two from the checkout: the wheel's custom_ops folder holds the library of llama:: ops
    overlay = out / ".overlay"
    (overlay / "models").mkdir(parents=True)
    (overlay / "llm").mkdir(parents=True)
    (overlay / "models" / "llama").symlink_to(checkout / "examples" / "models" / "llama", target_is_directory=True)
    (overlay / "llm" / "export").symlink_to(checkout / "extension" / "llm" / "export", target_is_directory=True)
    _put_first(models, overlay / "models")
    _put_first(llm_ext, overlay / "llm")
    import torch
    from ...quiet import import_quietly
    vulkan = import_quietly("executorch.backends.vulkan")
    lib = import_quietly("executorch.examples.models.llama.export_llama_lib")
    config_mod = import_quietly("executorch.extension.llm.export.config.llm_config")
    files = {}
    for name in ("executorch.backends.vulkan", "executorch.examples.models.llama.export_llama_lib",
                 "executorch.extension.llm.export.builder", "executorch.extension.llm.export.partitioner_lib",
                 "executorch.examples.models.llama.source_transformation.quantize",
                 "executorch.examples.models.llama.source_transformation.sdpa",
                 "executorch.examples.models.llama.llama_transformer", "executorch.extension.llm.custom_ops",
                 "executorch.exir"):
        files[name] = str(Path(importlib.import_module(name).__file__).resolve())
    if not files["executorch.backends.vulkan"].startswith(str(checkout.resolve())):
        raise SystemExit(f"ET-VK was imported from {files['executorch.backends.vulkan']}, not from {checkout}")
    for key in ("export_llama_lib", "builder"):
        f = next(v for k, v in files.items() if k.endswith(key))
        if not f.startswith(str(checkout.resolve())):
            raise SystemExit(f"{key} was imported from {f}, not from the checkout {checkout}")
    params = out / "params.json"
    params.write_text(json.dumps(cfg.params(), indent=1) + "\n")
    # Random weights through a checkpoint, not export_llama's no-checkpoint path: that one builds the model on
    # the meta device and calls to_empty(), which also replaces the buffers built on the CPU (the rotary tables,
    # the zero KV caches, the causal mask) with uninitialised memory: the logits come out NaN.
    margs = import_quietly("executorch.examples.models.llama.model_args")
    transformer = import_quietly("executorch.examples.models.llama.llama_transformer")
    torch.manual_seed(args.seed)
    built = transformer.construct_transformer(margs.ModelArgs(**cfg.params(), max_seq_len=cfg.max_seq_len,
                                                              max_context_len=cfg.max_seq_len))
    checkpoint = out / "checkpoint.pth"
    torch.save({k: repeated_rows(v.detach(), cfg.repeat_rows) for k, v in built.named_parameters()}, checkpoint)
    del built
    real_prepare = lib._prepare_for_llama_export
    made = {}

    def run(phase: str, tokens: int):
        def prepare(llm_config):
            manager = real_prepare(llm_config)
            if phase == "prefill":
                # the export's KV-cache example is (tokens, {"input_pos": …}), positional
                manager.example_inputs = (torch.arange(1, tokens + 1, dtype=torch.long).unsqueeze(0),
                                          {"input_pos": torch.arange(tokens, dtype=torch.long)})
            made[phase] = copy.deepcopy(manager.model)     # before export: a fresh KV cache
            return manager
        argv = [*cfg.export_args(params, out, phase), "-c", str(checkpoint)]
        parsed = lib.build_args_parser().parse_args(argv)
        llm_config = config_mod.LlmConfig.from_args(parsed)
        lib._prepare_for_llama_export = prepare
        t = time.perf_counter()
        try:
            builder = import_quietly_call(lib._export_llama, llm_config)
        finally:
            lib._prepare_for_llama_export = real_prepare
        return builder, argv, time.perf_counter() - t

    prefill_builder, prefill_argv, prefill_s = run("prefill", cfg.prefill) if args.prefill else (None, None, 0.0)
    decode_builder, decode_argv, decode_s = run("decode", 1)
    rng = torch.Generator().manual_seed(args.seed + 1)
    prompt = torch.randint(1, cfg.vocab_size, (1, cfg.prefill), generator=rng, dtype=torch.long)
    common = {"model": f"llm_{cfg.name}", "setting": "after", "revision": args.label, "commit": args.commit,
              "etvk_python": str(Path(vulkan.__file__).resolve().parent), "config": asdict(cfg),
              "export_args": None, "lowered_by": files,
              "stood_in": stood_in}

    def write(folder: Path, phase: str, builder, argv, inputs: tuple, position: int, pte: Path | None):
        folder.mkdir(parents=True, exist_ok=True)
        if pte is None:
            (out / f"{phase}.pte").replace(folder / "model.pte")
        else:
            try:
                os.link(pte, folder / "model.pte")
            except OSError:
                shutil.copy2(pte, folder / "model.pte")
        model = copy.deepcopy(made[phase])
        with torch.no_grad():
            ref = model(inputs[0], {"input_pos": inputs[1]})
        ref = ref[0] if isinstance(ref, (tuple, list)) else ref
        torch.save([ref.detach().float().contiguous()], folder / "reference.pt")
        torch.save(list(inputs), folder / "inputs.pt")
        names = []
        for i, x in enumerate(inputs):
            (folder / f"input-{i}.bin").write_bytes(x.contiguous().numpy().tobytes())
            names.append(f"input-{i}.bin")
        edge = builder.edge_manager.exported_program().graph_module.graph.nodes
        cpu = [str(n.target) for n in edge if n.op == "call_function" and "call_delegate" not in str(n.target)
               and "getitem" not in str(n.target)]
        summary = {**common, "phase": phase, "position": position, "tokens": int(inputs[0].shape[1]),
                   "export_args": argv, "input_shapes": [list(x.shape) for x in inputs],
                   "input_dtypes": [str(x.dtype) for x in inputs], "input_files": names,
                   "output_shapes": [list(ref.shape)], "output_dtypes": ["torch.float32"], "cpu_ops": cpu,
                   "delegates": sum(1 for n in edge if "call_delegate" in str(n.target)),
                   "pte_bytes": (folder / "model.pte").stat().st_size,
                   "input_pos": inputs[1].tolist(), "seconds": {"export": round(
                       prefill_s if phase == "prefill" else decode_s, 2)},
                   "side_label": args.label}
        (folder / "summary.json").write_text(json.dumps(summary, indent=1, default=str))

    if args.prefill:
        write(out / "prefill", "prefill", prefill_builder, prefill_argv,
              (prompt, torch.arange(cfg.prefill, dtype=torch.long)), 0, None)
    decode_pte = out / "decode.pte"
    folders = []
    for p in positions:
        token = torch.randint(1, cfg.vocab_size, (1, 1), generator=rng, dtype=torch.long)
        folder = out / f"decode-{p}"
        write(folder, "decode", decode_builder, decode_argv, (token, torch.tensor([p], dtype=torch.long)), p,
              decode_pte)
        folders.append(folder.name)
    decode_pte.unlink()
    checkpoint.unlink()
    shutil.rmtree(overlay)
    (out / "llm.json").write_text(json.dumps({**common, "prefill": args.prefill, "decode_folders": folders,
                                              "positions": positions,
                                              "prefill_args": prefill_argv, "decode_args": decode_argv,
                                              "seconds": {"prefill_export": round(prefill_s, 2),
                                                          "decode_export": round(decode_s, 2)}},
                                             indent=1, default=str))
    return 0


def import_quietly_call(fn, *args):
    from ...quiet import quiet_imports
    with quiet_imports():
        return fn(*args)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m workbench.etvk.model.llm",
                                description="lower a small Llama with the checkout's export_llama_lib (the child)")
    for name in ("checkout", "tree", "commit", "label", "config", "positions", "out"):
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-prefill", dest="prefill", action="store_false")
    return _child(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
