"""`workbench ab`'s sides: two things to run on the same inputs, checked to give the same output, then timed
interleaved by `measure.ab`, with the two ISAs' counts and the offline compilers' registers / occupancy beside.

    got = ab.compare(dev, "a.glsl", "b.glsl", groups=(64, 1, 1), push=[1000])    # AbResult: .frame, .verdicts, .isa
    got = ab.compare(dev, "shaders/x.glsl@HEAD~1", "shaders/x.glsl")              # two revisions of a file
    got = ab.compare(dev, "/tmp/etvk_caps/mobilenet_v2:3", shader="edit.glsl")   # a captured dispatch and its edit
    got = ab.compare(dev, "q8ta_add:storage=buffer", "q8ta_add:storage=texture3d")  # two settings of an ET-VK family
    got = ab.compare(dev, "linear_q4gsw_coop:shape=1x2048", "linear_q4gsw_coop:shape=1x2048,weight_load=u8vec4")
    got = ab.compare(dev, "q4-gemv:n=2048,k=2048,vec=1", "q4-gemv:n=2048,k=2048,vec=4")  # the workbench's GEMV builds

A side is (`side`):
- a shader file (.glsl / .comp / .spv) or FILE@REV (the file as git holds it at REV, compiled with the file's folder
  on the include path): its storage buffers made from the same seeded bytes for both sides (`nbytes` each: floats
  uniform in [-1, 1), which are valid integer words too), uniform buffers zeroed, `push` words as push constants,
  `groups` work groups; the two must bind the same interface (`vk.spirv.reflect`: bindings and push-constant size);
- a captured dispatch DIR:N (its captured bytes, `capture.replay.launch_of`); its edit: the dispatch with another
  shader (`shader=`, or a file / FILE@REV as B: `capture.edit.load_shader`'s compile, for the capture's target);
  each side's outputs are checked against the captured ones;
- an ET-VK family with settings, NAME[:key=value,...] (`etvk.run.make`: its generated inputs and torch reference;
  the settings as `workbench etvk run`'s options; a family with earlier dispatches is refused); one setting is
  ab's own: `weight_load=u8vec4` reads a q4 linear's buffer weight as u8vec4 words, as before ExecuTorch #12444 /
  #12610 (`etvk.isa.u8vec4_weight_variant`, ET-VK's block layout: the same output bytes), `ivec4` as ET-VK now;
- the workbench's own 4-bit GEMV, q4-gemv[:key=value,...] (`kernels.q4_gemv.Q4GemvSpec`'s fields: n, k, vec,
  layout, dequant, …; both sides on the same seeded problem, each checked against its float64 reference).
The ISA side of each goes through `etvk.isa`'s job dicts (`vendors.isa`, `vendors.mesa`): one path; beside it each
side's predicted time on the offline GPUs with a phone's figures (`vendors.phone.predict`: the same model as
`workbench phone`, from the side's work groups and bytes).
"""
from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import numpy as np

__all__ = ["Side", "AbResult", "side", "compare", "same_interface", "isa_beside", "KERNEL_SIDES"]


@dataclasses.dataclass
class Side:
    """One side of an A/B: its name, the job dict of its pipeline (SPIR-V, spec constants, local size, entry point:
    what `vendors.isa` and `vendors.mesa` compile) and `make(dev) -> (vk.Launch, outputs)`, outputs being
    [(name, resource, expected bytes or None)] to compare; `reference(outputs_bytes) -> str` ("" when right)."""
    label: str
    kind: str                       # "file" | "revision" | "capture" | "edit" | "family"
    job: dict
    make: object
    working_set: int
    reference: object = None
    decode: object = None           # families: outputs → the output as a torch tensor (NCHW), compared A vs B
    groups: tuple | None = None     # work groups (x, y, z) and local size, for the phone model (None: not known)
    local: tuple | None = None


@dataclasses.dataclass
class AbResult:
    frame: object                   # measure.ab.ab_frame: sample rows and summary rows
    same_output: str                # "" where A and B gave the same bytes, else one line saying where they differ
    checks: dict                    # side → "" (right against its reference) or why not
    isa: object                     # DataFrame: a row per side × GPU (counts, registers, occupancy), or None

    @property
    def summary(self):
        return self.frame[self.frame["row"] == "summary"].dropna(axis=1, how="all").reset_index(drop=True)

    @property
    def verdicts(self) -> list[str]:
        s = self.summary
        return [f"{r.cache}, {r.interleave}: {r.verdict}" for r in s.itertuples()]


def _read_revision(text: str) -> tuple[str, Path, str]:
    """FILE@REV → (its text at REV, the file's path, REV); ValueError in one line where git has no such file."""
    name, _, rev = text.rpartition("@")
    path = Path(name)
    folder = path.parent if path.parent.is_dir() else None
    if folder is None:
        raise ValueError(f"ab: expected FILE@REV with FILE's folder existing, got {text!r} (no folder {path.parent})")
    got = subprocess.run(["git", "-C", str(folder), "show", f"{rev}:./{path.name}"], capture_output=True)
    if got.returncode != 0:
        why = got.stderr.decode(errors="replace").strip().splitlines()
        raise ValueError(f"ab: expected {path.name} at git revision {rev!r}, git says: {why[0] if why else 'nothing'}")
    return got.stdout.decode(errors="replace"), path, rev


def _compile_file(text: str, defines, target_env=None) -> tuple[bytes, str]:
    """(SPIR-V, kind) of a file or FILE@REV, through the toolchain (the capture's Vulkan target where given)."""
    from ..toolchain import shaders
    if "@" in text and not Path(text).is_file():
        source, path, rev = _read_revision(text)
        if source.encode()[:4] == b"\x03\x02\x23\x07":
            raise ValueError(f"ab: {text}: SPIR-V at a revision is not read; give GLSL")
        try:
            return shaders.compile_glsl(source, name=path.stem, defines=defines, include_dirs=[path.parent],
                                        target_env=target_env or "vulkan1.1").code, "revision"
        except shaders.ShaderCompileError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ValueError(f"ab: expected {text} to compile, it does not: {first}") from None
    path = Path(text)
    if not path.is_file():
        raise ValueError(f"ab: expected a shader file (.glsl, .comp, .spv), FILE@REV, a capture DIR:N or an ET-VK "
                         f"family NAME[:key=value,...]; found no file {text}")
    data = path.read_bytes()
    if data[:4] == b"\x03\x02\x23\x07":
        return data, "file"
    try:
        return shaders.compile_glsl(data.decode(errors="replace"), name=path.stem, defines=defines,
                                    include_dirs=[path.parent], source_path=path,
                                    target_env=target_env or "vulkan1.1").code, "file"
    except shaders.ShaderCompileError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"ab: expected {text} to compile, it does not: {first}") from None


def _is_capture(text: str) -> bool:
    folder, _, number = text.rpartition(":")
    return bool(folder) and number.isdigit() and Path(folder).is_dir()


def _captured(text: str):
    from ..capture.format import read_folder
    folder, _, number = text.rpartition(":")
    found = {d.dispatch: d for d in read_folder(folder)}
    if int(number) not in found:
        raise ValueError(f"ab: expected a dispatch number 0..{len(found) - 1} of {folder}, got {number}")
    return found[int(number)]


def _capture_side(label: str, d, kind: str) -> Side:
    from ..capture.replay import launch_of, launch_parameters
    from ..capture.stats import pipelines

    def make(dev):
        launch, outputs = launch_of(dev, d)
        return launch, [(f"binding {c.set}.{c.binding}", r, c.after) for c, r in outputs]
    local = launch_parameters(d)[1]
    spec = pipelines([d])[0]["spec_constants"]  # decoded values, the local size's ids left out (the stats' jobs)
    job = {"shader": d.spirv, "name": label, "spec_constants": spec, "local_size": tuple(local),
           "entry_point": d.entry_point}
    return Side(label, kind, job, make, max(16, sum(len(b.after or b"") for b in d.bindings)),
                groups=tuple(d.groups) if getattr(d, "groups", None) else None, local=tuple(local))


def _file_side(label: str, code: bytes, kind: str, *, groups, push, nbytes: int, seed: int) -> Side:
    from .. import vk
    from ..vk import spirv as sp
    r = sp.reflect(code)
    images = [b for b in r.bindings if b.kind not in (sp.STORAGE_BUFFER, sp.UNIFORM_BUFFER)]
    if images:
        raise ValueError(f"ab: {label}: expected storage or uniform buffers (a shader file's inputs are generated), "
                         f"got {images[0].kind} at binding {images[0].set}.{images[0].binding}; time it in a capture")
    if groups is None:
        raise ValueError(f"ab: {label}: expected --groups X[,Y,Z] (how many work groups a shader file launches), "
                         "got none")
    words = b"".join(np.float32(v).tobytes() if isinstance(v, float) else np.uint32(v).tobytes() for v in push or ())
    pc = words[:r.push_constant_size] + b"\0" * max(0, r.push_constant_size - len(words))
    if len(words) > r.push_constant_size:
        raise ValueError(f"ab: {label}: expected at most {r.push_constant_size} bytes of push constants, got "
                         f"{len(words)} (--push)")
    rng = np.random.default_rng(seed)
    data = {b.binding: (rng.uniform(-1, 1, max(4, nbytes) // 4).astype(np.float32).view(np.uint8)
                        if b.kind == sp.STORAGE_BUFFER else np.zeros(-(-(b.block_size or 16) // 16) * 16, np.uint8))
            for b in r.bindings}

    def make(dev):
        res = {}
        try:
            for b in r.bindings:
                name = f"{b.set}.{b.binding}:{b.name}"
                res[b.binding] = dev.buffer(data[b.binding], name=name) if b.kind == sp.STORAGE_BUFFER else \
                    dev.uniform(data[b.binding], name=name)
        except BaseException:
            for x in res.values():
                x.close()
            raise
        launch = vk.Launch(code, res, groups=tuple(groups), push_constants=pc, name=label)
        return launch, [(f"binding {b.set}.{b.binding}", res[b.binding], None) for b in r.bindings
                        if b.kind == sp.STORAGE_BUFFER]
    job = {"shader": code, "name": label}
    return Side(label, kind, job, make, sum(len(v) for v in data.values()), groups=tuple(groups),
                local=tuple(r.local_size or r.local_size_default or (1, 1, 1)))


def _settings(text: str, what: str) -> tuple[str, dict]:
    """NAME:key=value,... → (NAME, {key: int, AxB tuple for shape, or text})."""
    name, _, settings = text.partition(":")
    options = {}
    for item in filter(None, (s.strip() for s in settings.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"ab: expected NAME:key=value,... for {what}, got {item!r} in {text!r}")
        key, value = key.strip().replace("-", "_"), value.strip()
        options[key] = (tuple(int(v) for v in value.split("x")) if key == "shape"
                        else int(value) if value.isdigit() else value)
    return name.strip(), options


WEIGHT_LOADS = ("ivec4", "u8vec4")


def _family_side(text: str, executorch) -> Side:
    from .. import vk
    from .codegen import Codegen, source
    from .run import allocate, check, compiled, make as make_dispatch, read_back
    name, options = _settings(text, "an ET-VK family")
    load = options.pop("weight_load", "ivec4")
    if load not in WEIGHT_LOADS:
        raise ValueError(f"ab: {text}: expected weight_load among {', '.join(WEIGHT_LOADS)}, got {load!r}")
    gen = Codegen(source(executorch))
    try:
        d = make_dispatch(gen, name, **options)
        if load == "u8vec4":
            from .isa import u8vec4_weight_variant
            d = dataclasses.replace(d, variant=u8vec4_weight_variant(gen, d.variant, "block"))
    except TypeError as exc:
        raise ValueError(f"ab: {text}: {exc}") from None
    if d.before:
        raise ValueError(f"ab: {text}: expected one dispatch, got {len(d.before) + 1} (ET-VK records "
                         f"{', '.join(s.variant for s in d.before)} first); time its last one from a capture")
    spirv = gen.compile(d.variant)

    def make(dev):
        compiled(dev, gen, d)
        made = allocate(dev, d)
        bound = made if d.bindings is None else [made[i] for i in d.bindings]
        launch = vk.Launch(spirv, bound, global_size=d.global_size, push_constants=d.push_constants,
                           spec_constants=d.spec_constants, local_size=d.local_size, name=d.variant)
        _OWNED[id(launch)] = made  # every resource, closed with the launch (`_close`)
        return launch, [("output", made[d.output], None)]

    def reference(outputs):
        c = check(d, d.decode(read_back(outputs[0][1])))
        return "" if c["correct"] else f"max |diff| {c['max_abs_diff']:.3g} vs torch ({c['mismatch_map']})"
    job = {"shader": spirv.code, "name": f"{text} ({d.variant})", "spec_constants": dict(d.spec_constants),
           "local_size": tuple(d.local_size)}
    working_set = int(d.bytes_moved or sum(r.nbytes or len(r.data if r.data is not None else b"")
                                           for r in d.resources))
    local = tuple(d.local_size)
    return Side(text, "family", job, make, working_set, reference,
                lambda outputs: d.decode(read_back(outputs[0][1])),
                groups=tuple(-(-int(g) // int(l)) for g, l in zip(d.global_size, local)), local=local)


def _q4_gemv_side(text: str) -> Side:
    """The workbench's 4-bit GEMV (`kernels.q4_gemv`) at the spec's fields given as settings; the seeded problem
    `random_problem` makes (the same for both sides), checked against `expected`'s reference and tolerance."""
    import dataclasses as dc

    import torch

    from .. import vk
    from ..kernels import q4_gemv as q4
    from ..toolchain.shaders import compile_shader
    _, options = _settings(text, "the workbench's q4-gemv")
    fields = {f.name: f.type for f in dc.fields(q4.Q4GemvSpec)}
    unknown = sorted(set(options) - set(fields))
    if unknown or not {"n", "k"} <= set(options):
        raise ValueError(f"ab: {text}: expected q4-gemv:n=N,k=K[,key=value,...] with keys among {', '.join(fields)}; "
                         f"got {'unknown ' + ', '.join(unknown) if unknown else 'no n and k'}")
    options = {k: bool(v) if fields[k] == "bool" else v for k, v in options.items()}
    spec = q4.Q4GemvSpec(**options)  # a refused config: ValueError in one line
    x, q, scales = q4.random_problem(spec)
    want, tolerance = q4.expected(spec, x, q, scales)
    spirv = compile_shader(spec.shader, defines=spec.defines)

    def make(dev):
        run = q4.Q4GemvRun(dev, spec, x, q, scales)
        launch = vk.Launch(spirv, run.resources(), global_size=spec.global_size(dev),
                           push_constants=spec.push_constants(), spec_constants=spec.spec_constants(),
                           local_size=spec.local_size, name=spec.variant)
        _OWNED[id(launch)] = [run]
        return launch, [("output", run.out, None)]

    def output(outputs):
        return outputs[0][1].download(np.float32).reshape(spec.m, spec.n)

    def reference(outputs):
        c = q4.compare(output(outputs), want, tolerance)
        return "" if c["correct"] else \
            f"max |diff| {c['max_abs_diff']:.3g} vs the reference (tolerance {tolerance:.3g})"
    job = {"shader": spirv.code, "name": f"{text} ({spec.variant})", "spec_constants": dict(spec.spec_constants()),
           "local_size": tuple(spec.local_size)}
    return Side(text, "kernel", job, make, spec.bytes_moved(), reference,
                lambda outputs: torch.from_numpy(output(outputs).copy()),
                groups=(spec.work_groups, 1, 1), local=tuple(spec.local_size))


#: the workbench's own kernels a side may name (NAME[:key=value,...]); any other name is an ET-VK family
KERNEL_SIDES = {"q4-gemv": _q4_gemv_side}


def side(text: str, *, like: Side | None = None, like_dispatch=None, groups=None, push=None, nbytes: int = 1 << 20,
         defines=None, executorch=None, seed: int = 0) -> Side:
    """The `Side` `text` names (module docstring); `like_dispatch`: the captured dispatch A, making a file B its
    edit. ValueError in one line naming what was expected and what was given."""
    text = str(text).strip()
    if not text:
        raise ValueError("ab: expected a side (a shader file, FILE@REV, a capture DIR:N or an ET-VK family), got "
                         "nothing")
    if _is_capture(text):
        return _capture_side(text, _captured(text), "capture")
    looks_file = Path(text).suffix in (".glsl", ".comp", ".spv") or Path(text).is_file() or \
        Path(text.rpartition("@")[0]).suffix in (".glsl", ".comp")
    if looks_file:
        if like_dispatch is not None:
            from ..capture.edit import load_shader, target_env
            if "@" in text and not Path(text).is_file():
                code, _ = _compile_file(text, defines, target_env(like_dispatch.spirv))
            else:
                code = load_shader(text, like_dispatch)
            return _capture_side(f"{text} (edit)", dataclasses.replace(like_dispatch, spirv=code), "edit")
        code, kind = _compile_file(text, defines)
        return _file_side(text, code, kind, groups=groups, push=push, nbytes=nbytes, seed=seed)
    if text.partition(":")[0].strip() in KERNEL_SIDES:
        return KERNEL_SIDES[text.partition(":")[0].strip()](text)
    return _family_side(text, executorch)


def same_interface(a: Side, b: Side) -> None:
    """ValueError (one line) unless A and B bind the same interface: bindings (set, binding, kind) and push-constant
    size. ET-VK families and the workbench's kernels compare by their outputs only (each has its own resources)."""
    if {"family", "kernel"} & {a.kind, b.kind}:
        return
    from ..vk import spirv as sp

    def shape(s):
        r = sp.reflect(s.job["shader"])
        return [(x.set, x.binding, x.kind) for x in r.bindings], r.push_constant_size
    (ba, pa), (bb, pb) = shape(a), shape(b)
    if ba != bb or pa != pb:
        raise ValueError(f"ab: expected B to bind A's interface (bindings {ba}, {pa} B of push constants), got "
                         f"{bb}, {pb} B ({b.label})")


def _bytes(resource) -> bytes:
    from ..capture.replay import resource_bytes
    return resource_bytes(resource)


_OWNED: dict = {}  # id(launch) -> the resources a family's launch owns beyond those it binds


def _close(launch) -> None:
    owned = _OWNED.pop(id(launch), None)
    if owned is None:
        owned = launch.resources.values() if isinstance(launch.resources, dict) else launch.resources
    for r in owned:
        r.close()


def _outputs_differ(out_a, out_b) -> str:
    for (name, _, _), (ga, gb) in zip(out_a[0], zip(out_a[1], out_b[1])):
        if ga != gb:
            n = min(len(ga), len(gb))
            diff = np.flatnonzero(np.frombuffer(ga[:n], np.uint8) != np.frombuffer(gb[:n], np.uint8))
            return (f"A and B differ at {name}: {diff.size} of {n} bytes, the first at byte {int(diff[0])}" if diff.size
                    else f"A and B differ at {name}: {len(ga)} vs {len(gb)} bytes")
    return ""


def _tensors_differ(a, b) -> str:
    if tuple(a.shape) != tuple(b.shape):
        return f"A and B differ: outputs of shapes {tuple(a.shape)} and {tuple(b.shape)}"
    diff = (a.double() - b.double()).abs()
    wrong = int((diff > 0).sum())
    return f"A and B differ at {wrong} of {diff.numel()} output elements, max |diff| {float(diff.max()):.3g}" \
        if wrong else ""


def _check_side(s: Side, outputs, got: list) -> str:
    if s.reference is not None:
        return s.reference(outputs)
    wrong = [name for (name, _, want), g in zip(outputs, got) if want is not None and g[:len(want)] != want]
    return f"differs from the captured output at {', '.join(wrong)}" if wrong else ""


def isa_beside(a: Side, b: Side, gpus):
    """A DataFrame, a row per side × offline GPU: instructions, ALU, loads, stores, barriers (`vendors.isa`
    counts), registers, spills, occupancy (`vendors.mesa.stats_rows`) and, on a GPU with a phone's figures, the
    phone model's prediction (`vendors.phone.predict`: phone_us, phone_bound; the side's work groups and bytes);
    None without GPUs."""
    if not gpus:
        return None
    import pandas as pd

    from ..vendors import mesa, phone
    from .isa import Target, counts_table
    gpus = [mesa.check_gpu(g) for g in gpus]
    if not mesa.is_set_up():
        raise mesa.MesaNotSetUpError(f"ab: the offline compilers are not built in {mesa.cache_root()}; run "
                                     "`workbench compilers setup`, or pass --gpu none")
    targets = [Target(name, s.kind, [dict(s.job)]) for name, s in (("A", a), ("B", b))]
    counts = counts_table(targets, gpus)
    keep = ["target", "gpu", "error", "instructions", "alu", "loads", "stores", "barriers"]
    counts = counts[[c for c in keep if c in counts.columns]].rename(columns={"target": "side"})
    jobs = [{**s.job, "name": str(i), "local_size": s.job.get("local_size") or s.local} for i, s in enumerate((a, b))]
    stats = mesa.stats_rows(jobs, gpu=gpus, errors="keep")
    stats["side"] = stats["name"].map({"0": "A", "1": "B"})
    stats["dispatches"] = stats["name"]
    errors = stats["error"] if "error" in stats else [None] * len(stats)
    stats["reason"] = [f"compiler: {e}" if isinstance(e, str) and e else "" for e in errors]
    out = counts.merge(stats[["side", "gpu", "registers", "register_unit", "spills", "occupancy"]], on=["side", "gpu"],
                       how="left")
    phones = [g.name for g in gpus if g.name in phone.PHONES]
    known = [{"dispatch": i, "groups": s.groups, "local_size": s.local, "bytes": s.working_set}
             for i, s in enumerate((a, b)) if s.groups and s.local]
    if phones and known:
        rows = phone.predict(known, stats, phones)
        rows["side"] = rows["dispatch"].map({0: "A", 1: "B"})
        rows = rows.rename(columns={"time_us": "phone_us", "bound": "phone_bound"})
        out = out.merge(rows[["side", "gpu", "phone_us", "phone_bound"]], on=["side", "gpu"], how="left")
    return out


def compare(dev, a: str, b: str | None = None, *, shader=None, regimes=("hot", "cold"), modes=("submits",),
            gpus=(), groups=None, push=None, nbytes: int = 1 << 20, defines=None, executorch=None,
            min_pairs: int = 20, min_time_s: float = 0.4, max_time_s: float = 20.0, quick: bool = False) -> AbResult:
    """A against B on `dev` (module docstring): run each once and compare outputs, then time them interleaved in
    every regime × mode (`measure.ab.sample_interleaved`), the ISAs beside on `gpus`. `b` None with `shader`: A is a
    captured dispatch, B its edit."""
    from .. import vk
    from ..kernels.copy import flush_for
    from ..measure import ab as mab
    from ..measure.cache import parse_regimes, rotation
    regimes = parse_regimes(regimes)
    bad = [m for m in modes if m not in mab.MODES]
    if bad or not modes:
        raise ValueError(f"ab: expected interleavings among {', '.join(mab.MODES)}, got {bad or 'none'}")
    if (b is None) == (shader is None):
        raise ValueError("ab: expected B, or --shader FILE with a captured dispatch A, not "
                         f"{'both' if b is not None else 'neither'}")
    opts = dict(groups=groups, push=push, nbytes=nbytes, defines=defines, executorch=executorch)
    side_a = side(a, **opts)
    dispatch = _captured(a) if side_a.kind == "capture" else None
    if shader is not None and dispatch is None:
        raise ValueError(f"ab: --shader edits a captured dispatch; expected A as DIR:N, got {a!r}")
    side_b = side(shader if b is None else b, like_dispatch=dispatch, **opts)
    same_interface(side_a, side_b)
    isa = isa_beside(side_a, side_b, gpus)
    made = []
    try:
        la, oa = side_a.make(dev)
        made.append(la)
        lb, ob = side_b.make(dev)
        made.append(lb)
        with vk.Launches(dev, [la, lb]) as launches:
            with dev.record("ab check") as rec:
                la.record(rec, launches.pipeline_of(0))
                lb.record(rec, launches.pipeline_of(1))
                once = [t.gpu_ns for t in rec.submit() if t.gpu_ns]
            repeats = mab.repeats_for(dev, min(once) if once else 0.0)  # a sample's dispatches back to back
            got_a = [_bytes(r) for _, r, _ in oa]
            got_b = [_bytes(r) for _, r, _ in ob]
            checks = {"A": _check_side(side_a, oa, got_a), "B": _check_side(side_b, ob, got_b)}
            if side_a.decode is not None and side_b.decode is not None:
                differ = _tensors_differ(side_a.decode(oa), side_b.decode(ob))
            elif {"family", "kernel"} & {side_a.kind, side_b.kind}:
                differ = "A and B write outputs of different kinds (each checked against its reference instead)"
            else:
                differ = _outputs_differ((oa, got_a), (ob, got_b))
            sets, extra = [], {}
            for regime in regimes:
                rot = rotation(dev, max(side_a.working_set, side_b.working_set), regime, quick=quick)
                extra[regime] = rot.columns()
                sa, sb = [la], [lb]
                try:
                    for _ in range(rot.copies - 1):
                        sa.append(side_a.make(dev)[0])
                        sb.append(side_b.make(dev)[0])
                    with flush_for(dev, rot) as flush:
                        for mode in modes:
                            got = mab.sample_interleaved(
                                dev, lambda rec, i, label: sa[i].record(rec, launches.pipeline_of(0), label=label),
                                lambda rec, i, label: sb[i].record(rec, launches.pipeline_of(1), label=label),
                                rot, mode=mode, flush=flush, repeats=repeats, min_pairs=min_pairs,
                                min_time_s=min_time_s, max_time_s=max_time_s, max_pairs=max(min_pairs, 400))
                            sets.append((regime, got))
                finally:
                    for launch in sa[1:] + sb[1:]:
                        _close(launch)
    finally:
        for launch in made:
            _close(launch)
    frame = mab.ab_frame(sets, extra)
    frame.insert(1, "A", side_a.label)
    frame.insert(2, "B", side_b.label)
    frame.loc[frame["row"] == "summary", "same_output"] = differ or "same"
    return AbResult(frame, differ, checks, isa)
