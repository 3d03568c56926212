"""The ISA of a compute pipeline on every offline GPU, its instructions counted by class, and the diff of two.

    from workbench.vendors import isa
    got = isa.compile_isa(spirv, gpu="a740", spec_constants={3: 1}, local_size=(64, 1, 1))   # an `Isa`
    got.text                                   # the driver's final ISA (Turnip "IR3 Assembly", ...)
    isa.counts(got.text, "a740")               # DataFrame: one row per instruction class
    isa.summary(got.text, "a740")              # {"loads": .., "stores": .., "global loads": .., ...}
    isa.diff(before.text, after.text, "a740")  # IsaDiff: counts before / after, the aligned instruction streams

Where the ISA comes from: the compile of `workbench.vendors.mesa` (a child process per GPU, Mesa's Turnip, PanVK or
RADV on its no-op kernel driver) with VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR, reading
VK_KHR_pipeline_executable_properties' internal representations (`vk.Pipeline.internal_representations`). Mesa
25.0.7 exposes them on all three drivers, so no driver's own printout (TU_DEBUG, RADV_DEBUG, PAN_MESA_DEBUG) is
needed:

    * Turnip: "NIR from SPIRV", "Final NIR", "IR3 Assembly" (ir3's disassembly, with its own footer of counts:
      "N cat0, ..., N (ss), N (sy)"; `ir3_footer` reads it, and the tests check this module's counts against it);
    * PanVK: "NIR shader", "Assembly" (Valhall: one instruction a line; Bifrost: clauses of FMA `*` / ADD `+` tuples);
    * RADV: "NIR Shader(s)", "ACO IR", "Assembly" (built without LLVM, RADV prints ACO's program after lowering to
      hardware instructions instead of a disassembly: the same instructions, in ACO's notation).

Results are cached with the statistics (`stats_cache`, same folder and keys plus "internal"): a second look
compiles nothing. The live device's ISA, where its driver exposes internal representations: `live_isa`.

Counting (`instructions`, `counts`): each line of the final ISA is one instruction (ir3's `(rptN)` repeats count once,
as ir3's own footer counts them); each gets a class — alu (kind fp32 | fp16 | int | conversion | transcendental),
move, load / store / atomic (space global | shared | constant | texture | private; width in bits), barrier, sync,
control, nop, matrix (v_wmma), dot (v_dot*) — from a small table per ISA below. ir3 adds its category (cat0..cat7)
and the (ss) / (sy) sync flags; Valhall / Bifrost the unit (fma, cvt / add, sfu, ls, t, v).

Diff (`diff`): Mesa's ISA carries no source lines (none of ir3, ACO or the bifrost/valhall printer prints debug
line information in 25.0.7), so the two streams are aligned as sequences of opcodes (difflib), with the class counts
before and after.
"""
from __future__ import annotations

import dataclasses
import difflib
import re

__all__ = ["Isa", "IsaDiff", "ISA_NAMES", "compile_isa", "compile_isa_many", "final_isa", "isa_family",
           "instructions", "counts", "summary", "ir3_footer", "diff", "live_isa"]

#: The name of the final-ISA representation, per driver (the others are NIR / ACO IR stages).
ISA_NAMES = {"turnip": ("IR3 Assembly",), "panvk": ("Assembly",), "radv": ("Assembly", "Disassembly")}


@dataclasses.dataclass
class Isa:
    """One pipeline's compile on one GPU: `text` the final ISA ("" with an `error`), `representations` every
    internal representation the driver gave, `statistics` its statistics."""
    name: str
    gpu: str
    family: str                      # "ir3" | "valhall" | "bifrost" | "aco" | "" (unknown: the live device)
    text: str = ""
    representations: list = dataclasses.field(default_factory=list)
    statistics: dict = dataclasses.field(default_factory=dict)
    error: str | None = None

    def representation(self, name: str) -> str:
        for r in self.representations:
            if r["name"] == name:
                return r["text"]
        raise KeyError(f"{self.gpu} gave no representation {name!r}; it gave "
                       f"{', '.join(r['name'] for r in self.representations) or 'none'}")


def isa_family(gpu) -> str:
    """The ISA dialect of an offline GPU: "ir3" (Adreno), "valhall" | "bifrost" (Mali), "aco" (AMD)."""
    from . import mesa
    g = mesa.check_gpu(gpu)
    if g.vendor == "adreno":
        return "ir3"
    if g.vendor == "amd":
        return "aco"
    return "bifrost" if "bifrost" in g.arch else "valhall"


def final_isa(representations: list, driver: str | None = None) -> str:
    """The final ISA among a driver's internal representations (by name per driver, else the last text one)."""
    names = ISA_NAMES.get(driver or "", ()) or tuple(n for v in ISA_NAMES.values() for n in v)
    for r in representations:
        if r["name"] in names:
            return r["text"]
    for r in reversed(representations):
        if any(w in (r["name"] + " " + r["description"]).lower() for w in ("assembly", "disasm", "isa")):
            return r["text"]
    return ""


def compile_isa_many(shaders, gpu, *, root=None, timeout=None, refresh=None, **common) -> list[Isa]:
    """`Isa` of several shaders (anything `mesa.stats_many` takes: SPIR-V, Spirv, files, job dicts with
    spec_constants, local_size, entry_point) on one offline GPU. A shader the driver rejects gets an `Isa` whose
    `error` says why; MesaNotSetUpError when the compilers are not built."""
    from . import mesa
    g = mesa.check_gpu(gpu)
    family = isa_family(g)
    items = mesa._normalise_items(shaders)
    results = mesa.stats_many(items, g, root=root, timeout=timeout, errors="keep", refresh=refresh, internal=True,
                              **common)
    out = []
    for i, (item, result) in enumerate(zip(items, results)):
        name = (item.get("name") if isinstance(item, dict) else None) or common.get("name") or f"shader{i}"
        if "error" in result:
            out.append(Isa(name, g.name, family, error=result["error"]))
            continue
        reps = result.get("representations") or []
        text = final_isa(reps, g.driver)
        out.append(Isa(name, g.name, family, text, reps, result.get("statistics") or {},
                       None if text else f"{mesa.DRIVER_TITLES[g.driver]} gave no ISA representation (it gave "
                                         f"{', '.join(r['name'] for r in reps) or 'none'})"))
    return out


def compile_isa(shader, gpu="a740", *, root=None, timeout=None, refresh=None, **common) -> Isa:
    """The `Isa` of one shader on one offline GPU (see `compile_isa_many`)."""
    return compile_isa_many([shader], gpu, root=root, timeout=timeout, refresh=refresh, **common)[0]


def live_isa(device, spirv, *, spec_constants=None, local_size=None, entry_point="main", name="shader") -> Isa:
    """The ISA of a pipeline on a live device, where its driver exposes internal representations; else an `Isa`
    whose `error` says why (lavapipe exposes no VK_KHR_pipeline_executable_properties)."""
    info = device.info
    label = f"live: {info.name}"
    if not info.features.get("pipeline_executable_properties"):
        return Isa(name, label, "", error=f"{info.name} ({info.driver_name}) exposes no internal representations "
                                          "(no VK_KHR_pipeline_executable_properties)")
    with device.pipeline(spirv, spec_constants=spec_constants, local_size=local_size, entry_point=entry_point,
                         name=name, capture_statistics=True, capture_internal=True) as pipe:
        reps, statistics = pipe.internal_representations(), pipe.statistics()
    text = final_isa(reps)
    family = {"radv": "aco", "turnip": "ir3"}.get(info.driver_name.lower().split()[0] if info.driver_name else "", "")
    return Isa(name, label, family, text, reps, statistics,
               None if text else f"{info.driver_name} gave no ISA among its representations "
                                 f"({', '.join(r['name'] for r in reps) or 'none'})")


# ----------------------------------------------------------------------------------------------------------------
# Parsing: one instruction per line, classified by a small table per ISA
# ----------------------------------------------------------------------------------------------------------------

BITS = {"8": 8, "16": 16, "32": 32, "64": 64, "128": 128}
_TYPE_BITS = {"u8": 8, "s8": 8, "b8": 8, "u16": 16, "s16": 16, "f16": 16, "b16": 16, "u32": 32, "s32": 32,
              "f32": 32, "b32": 32, "u64": 64, "s64": 64, "f64": 64}


@dataclasses.dataclass(frozen=True)
class Instruction:
    line: int            # 1-based line of the ISA text
    opcode: str          # with its modifiers ("isam.v.base0", "LOAD.i32.unsigned.slot2", "buffer_load_dword")
    text: str            # the line, stripped
    cls: str             # alu | move | load | store | atomic | barrier | sync | control | nop | matrix | dot | other
    kind: str = ""       # alu: fp32 | fp16 | int | conversion | transcendental; scalar (AMD SALU)
    space: str = ""      # memory: global | shared | constant | texture | private
    bits: int = 0        # memory: bits one instruction moves per invocation (0: unknown)
    group: str = ""      # ir3: cat0..cat7; Mali: the unit (fma, cvt, sfu, ls, t, v; Bifrost fma / add)
    flags: str = ""      # ir3: "(sy)(ss)..." sync flags
    preamble: bool = False  # ir3: in the preamble (shps .. shpe: once per wave, not per invocation)


# --- ir3 (Adreno a6xx / a7xx) -------------------------------------------------------------------------------------
# Categories as ir3's encoding has them (src/freedreno/ir3/ir3.h); the names not listed fall back by prefix.
_IR3_CAT = {
    "cat0": ("nop", "end", "jump", "br", "brac", "brax", "bra", "brao", "braa", "ball", "bany", "kill", "demote",
             "shps", "shpe", "getone", "getlast", "predt", "predf", "prede", "chmask", "chsh", "call", "ret",
             "flow_rev", "bkt", "stks", "stkr", "prede"),
    "cat1": ("mov", "cov", "movmsk", "swz", "gat", "sct", "movs", "mova", "mova1", "movp", "movs"),
    "cat3": ("mad", "madsh", "sel", "sad", "shrm", "shlm", "shrg", "shlg", "andg", "dp2acc", "dp4acc", "wmm"),
    "cat4": ("rcp", "rsq", "log2", "exp2", "sin", "cos", "sqrt", "hrsq", "hlog2", "hexp2"),
    "cat5": ("isam", "isaml", "isamm", "sam", "samb", "saml", "samgq", "getlod", "conv", "convm", "getsize",
             "getbuf", "getpos", "getinfo", "dsx", "dsy", "gather4r", "gather4g", "gather4b", "gather4a", "samgp0",
             "samgp1", "samgp2", "samgp3", "dsxpp", "dsypp", "isamm", "brcst", "quad_shuffle", "tcinv"),
    "cat6": ("ldg", "stg", "ldl", "stl", "ldp", "stp", "ldib", "stib", "ldc", "ldlw", "stlw", "resinfo", "resfmt",
             "ldgb", "stgb", "ldlv", "stc", "stsc", "ldg.a", "stg.a", "getspid", "getwid", "getfiberid", "shfl",
             "ray_intersection", "resbase", "atomic", "ldgb", "stib.b", "ldib.b"),
    "cat7": ("bar", "fence", "sleep", "icinv", "dccln", "dcinv", "dcflu", "ccinv", "lock", "unlock", "alias"),
}
_IR3_CAT_OF = {name: cat for cat, names in _IR3_CAT.items() for name in names}
# memory: opcode base -> (space, class)
_IR3_MEMORY = {"ldg": ("global", "load"), "stg": ("global", "store"), "ldl": ("shared", "load"),
               "stl": ("shared", "store"), "ldlw": ("shared", "load"), "stlw": ("shared", "store"),
               "ldp": ("private", "load"), "stp": ("private", "store"), "ldib": ("global", "load"),
               "stib": ("global", "store"), "ldc": ("constant", "load"), "isam": ("global", "load"),
               "sam": ("texture", "load"), "samb": ("texture", "load"), "saml": ("texture", "load"),
               "isaml": ("texture", "load"), "ldgb": ("global", "load"), "stgb": ("global", "store"),
               "ldlv": ("shared", "load")}
_IR3_FLAG = re.compile(r"^\((sy|ss|jp|ss|eq|ul|sat|nop\d|rpt\d|r)\)")
_IR3_SKIP = re.compile(r"^(;|@|[A-Za-z_]\w*:\s*$|Native code|$)")


def _ir3(n: int, line: str) -> Instruction | None:
    text = line.strip()
    if _IR3_SKIP.match(text):
        return None
    flags = ""
    while (m := _IR3_FLAG.match(text)):
        flags += m.group(0)
        text = text[m.end():].lstrip()
    if not text:
        return None
    opcode, _, operands = text.partition(" ")
    base = opcode.split(".")[0]
    cat = _IR3_CAT_OF.get(opcode) or _IR3_CAT_OF.get(base)
    if base.startswith("atomic"):
        cat = "cat6"
    if cat is None:  # cat2 is the rest of the ALU (add.f, mul.f, cmps.s, and.b, shl.b, absneg, ...)
        cat = "cat2"
    out = dict(line=n, opcode=opcode, text=line.strip(), group=cat, flags=flags)
    half = operands.lstrip().startswith(("hr", "(neg)hr", "(abs)hr")) or ".f16" in opcode or ".u16" in opcode \
        or ".s16" in opcode or opcode.startswith(("hrsq", "hlog2", "hexp2"))
    if cat == "cat0":
        out["cls"] = "nop" if base == "nop" else "control"
    elif cat == "cat1":
        out["cls"], out["kind"] = ("alu", "conversion") if base == "cov" else ("move", "")
    elif cat == "cat4":
        out["cls"], out["kind"] = "alu", "transcendental"
    elif cat in ("cat2", "cat3"):
        floating = bool(re.search(r"\.f(16|32)?(\b|$)", opcode)) or base in ("absneg.f",) or opcode.startswith(
            ("cmps.f", "cmpv.f", "max.f", "min.f", "floor.f", "ceil.f", "rndne.f", "rndaz.f", "trunc.f", "sign.f"))
        out["cls"] = "dot" if base in ("dp2acc", "dp4acc") else "matrix" if base == "wmm" else "alu"
        out["kind"] = ("fp16" if half else "fp32") if floating else "int"
    elif cat == "cat7":
        out["cls"] = "barrier" if base == "bar" else "sync"
    else:  # cat5 / cat6: memory and the rest
        space_cls = _IR3_MEMORY.get(base)
        if base.startswith("atomic") or ".atomic" in opcode:
            space_cls = ("shared" if ".l." in opcode or "atomic.l" in opcode else "global", "atomic")
        if space_cls is None:
            out["cls"] = "other"
        else:
            out["space"], out["cls"] = space_cls
            out["bits"] = _ir3_bits(opcode, operands, base)
    return Instruction(**out)


def _ir3_bits(opcode: str, operands: str, base: str) -> int:
    """Bits one ir3 load / store moves: its type × its component count (isam: the write mask `(xyzw)`; ldg / stg /
    ldl / stl: the last operand; stib / ldib: the `.N` after the type)."""
    types = re.findall(r"\b[usfb](?:8|16|32|64)\b", opcode + " " + operands.replace("(", " ").replace(")", " "))
    bits = _TYPE_BITS.get(types[0], 32) if types else 32
    if base in ("isam", "sam", "samb", "saml", "isaml"):
        mask = re.search(r"\(([xyzw]+)\)", operands)
        return bits * (len(mask.group(1)) if mask else 4)
    m = re.search(r"\.(?:[usfb](?:8|16|32|64))\.(\d)\b", opcode)
    if m:
        return bits * int(m.group(1))
    last = operands.rsplit(",", 1)[-1].strip()
    return bits * int(last) if last.isdigit() else bits


def ir3_footer(text: str) -> dict:
    """ir3's own counts at the end of its disassembly: {"cat0": n, ..., "(ss)": n, "(sy)": n, "sstall": n,
    "systall": n, "instr": n, "nops": n} ({} when absent)."""
    out = {}
    for m in re.finditer(r"(\d+) (cat\d|\(ss\)|\(sy\)|sstall|systall|instr|nops|non-nops|mov|cov|dwords)(?=[\s,]|$)", text):
        out.setdefault(m.group(2), int(m.group(1)))
    return out


# --- Valhall (Mali v9+ in PanVK's printout) and Bifrost -----------------------------------------------------------
_MALI_MEMORY = {  # opcode base -> (class, space, unit)
    "LOAD": ("load", "global", "ls"), "STORE": ("store", "global", "ls"), "LD_BUFFER": ("load", "global", "ls"),
    "LD_PKA": ("load", "constant", "ls"), "LD_UBO": ("load", "constant", "ls"), "LD_TILE": ("load", "texture", "t"),
    "LD_VAR": ("load", "texture", "v"), "LD_VAR_IMM": ("load", "texture", "v"), "LD_ATTR": ("load", "texture", "v"),
    "LD_ATTR_IMM": ("load", "texture", "v"), "LD_TEX": ("load", "texture", "t"), "LD_TEX_IMM": ("load", "texture", "t"),
    "TEX": ("load", "texture", "t"), "TEX_FETCH": ("load", "texture", "t"), "TEX_SINGLE": ("load", "texture", "t"),
    "TEX_GATHER": ("load", "texture", "t"), "TEXS_2D": ("load", "texture", "t"), "TEXC": ("load", "texture", "t"),
    "ST_CVT": ("store", "texture", "ls"), "ST_TILE": ("store", "texture", "ls"), "ATOM": ("atomic", "global", "ls"),
    "ATOM_RETURN": ("atomic", "global", "ls"), "ATOM1_RETURN": ("atomic", "global", "ls"),
    "AXCHG": ("atomic", "global", "ls"), "ACMPXCHG": ("atomic", "global", "ls"),
}
_MALI_SFU = ("FEXP", "FRCP", "FRSQ", "FLOG", "FSIN", "FCOS", "FLOGD", "FPOW", "FRCP_APPROX", "FRSQ_APPROX",
             "FREXPE", "FREXPM", "FLOG_TABLE", "FEXP_TABLE", "FATAN", "FSQRT")
_MALI_FMA = ("FMA", "FADD", "FMUL", "IMUL", "FMA_RSCALE", "FADD_RSCALE", "IDP", "DOT", "FMA_RSCALE_N",
             "FMA_RSCALE_LEFT", "FMA_RSCALE_SCALE", "CSEL", "IMULD")
_MALI_CONTROL = ("BRANCHZ", "BRANCHZI", "BRANCH", "JUMP", "DISCARD", "NOP")


def _mali(n: int, line: str, bifrost: bool) -> Instruction | None:
    text = line.strip()
    if not text or text.startswith(("clause_", "{", "}", "ds(", "SHADER-DB", "/*", "//")):
        return None
    unit = ""
    if bifrost:
        if text[0] not in "*+":
            return None
        unit, text = ("fma" if text[0] == "*" else "add"), text[1:].lstrip()
    opcode = text.split(" ", 1)[0]
    base = opcode.split(".")[0]
    mods = opcode.split(".")[1:]
    out = dict(line=n, opcode=opcode, text=line.strip(), group=unit)
    if base == "NOP":
        out["cls"] = "nop"
    elif base in _MALI_MEMORY or base.startswith("ATOM"):
        cls, space, u = _MALI_MEMORY.get(base, ("atomic", "global", "ls"))
        if "wls" in mods:
            space = "shared"
        if "tl" in mods or "stack" in mods:
            space = "private"
        out.update(cls=cls, space=space, bits=next((BITS[m[1:]] for m in mods if m[:1] == "i" and m[1:] in BITS), 0))
        out["group"] = unit or u
    elif base == "BARRIER":
        out.update(cls="barrier", group=unit or "ls")
    elif base in ("LEA_BUFFER", "LEA_ATTR", "LEA_TEX", "LEA_VARY", "LEA_ATTR_IMM", "LEA_TEX_IMM"):
        out.update(cls="other", group=unit or "ls")   # address computation in the message unit, no data
    elif base in _MALI_CONTROL or base.startswith("BRANCH"):
        out.update(cls="control", group=unit or "cvt")
    elif base.startswith("MOV") or base in ("MKVEC", "SWZ", "IADD_IMM") and "#" in text and "0x0," in text:
        out.update(cls="move", group=unit or "cvt")
    elif "_TO_" in base or base in ("F16_TO_F32", "V2F32_TO_V2F16"):
        out.update(cls="alu", kind="conversion", group=unit or "cvt")
    elif base in _MALI_SFU or base.rstrip("_0123456789") in _MALI_SFU:
        out.update(cls="alu", kind="transcendental", group=unit or "sfu")
    else:
        floating = base.startswith("F") or any(m in ("f32", "v2f16", "f16") for m in mods)
        half = any(m in ("v2f16", "f16") for m in mods)
        out.update(cls="dot" if base in ("IDP", "DOT") else "alu", kind=("fp16" if half else "fp32") if floating
                   else "int", group=unit or ("fma" if base in _MALI_FMA else "cvt"))
    return Instruction(**out)


# --- ACO (AMD GCN / RDNA) -----------------------------------------------------------------------------------------
_ACO_LINE = re.compile(r"^(?:[sv]\d+[a-z]*:\s*%\S+(?:,\s*[sv]\d+[a-z]*:\s*%\S+)*\s*=\s*)?([a-z_][a-z0-9_]*)\b")
_ACO_TRANS = ("v_exp", "v_log", "v_rcp", "v_rsq", "v_sqrt", "v_sin", "v_cos", "v_frexp", "v_ldexp")


def _aco_width(opcode: str) -> int:
    m = re.search(r"_(?:dword|b)(x?)(\d*)$", opcode)
    if "dword" in opcode:
        k = re.search(r"dwordx(\d)", opcode)
        return 32 * (int(k.group(1)) if k else 1)
    if m and m.group(2):
        return int(m.group(2))
    if re.search(r"_(u|i)?byte|_[ui]8$|_d16", opcode):
        return 8
    if re.search(r"_(u|i)?short|_[ui]16$|_b16$", opcode):
        return 16
    return 0


def _aco(n: int, line: str) -> Instruction | None:
    text = line.strip()
    if not text or text.startswith(("/*", "BB", "ACO shader", "After ", "Shader disassembly", ";", "//")):
        return None
    m = _ACO_LINE.match(text)
    if not m:
        return None
    opcode = m.group(1)
    out = dict(line=n, opcode=opcode, text=text)
    if opcode.startswith(("v_wmma", "v_swmmac")):
        out["cls"] = "matrix"
    elif opcode.startswith("v_dot"):
        out["cls"] = "dot"
    elif opcode.startswith(("buffer_", "global_", "flat_", "scratch_", "ds_", "image_", "s_load", "s_buffer_load",
                            "s_store", "tbuffer_")):
        space = ("shared" if opcode.startswith("ds_") else "texture" if opcode.startswith("image_") else
                 "constant" if opcode.startswith(("s_load", "s_buffer_load")) else
                 "private" if opcode.startswith("scratch_") else "global")
        cls = ("atomic" if "_atomic" in opcode or opcode.startswith(("ds_add", "ds_min", "ds_max", "ds_and", "ds_or"))
               else "store" if any(w in opcode for w in ("_store", "_write")) else "load")
        out.update(cls=cls, space=space, bits=_aco_width(opcode))
    elif opcode == "s_barrier" or opcode.startswith("s_barrier"):
        out["cls"] = "barrier"
    elif opcode.startswith(("s_waitcnt", "s_delay_alu", "s_wait", "s_sleep", "buffer_wbinvl", "buffer_gl",
                            "s_dcache")):
        out["cls"] = "sync"
    elif opcode == "s_nop":
        out["cls"] = "nop"
    elif opcode.startswith(("s_branch", "s_cbranch", "s_endpgm", "s_sendmsg", "s_setpc", "s_call", "s_getpc",
                            "s_code_end", "p_")):
        out["cls"] = "control"
    elif opcode.startswith(("v_mov", "s_mov", "s_movk", "v_readfirstlane", "v_readlane", "v_writelane",
                            "s_cmov", "v_cndmask")):
        out["cls"] = "move"
    elif opcode.startswith("v_cvt") or opcode.startswith("v_pack"):
        out.update(cls="alu", kind="conversion")
    elif opcode.startswith(_ACO_TRANS):
        out.update(cls="alu", kind="transcendental")
    elif opcode.startswith("s_"):
        out.update(cls="alu", kind="scalar")
    elif opcode.startswith("v_"):
        kind = ("fp16" if re.search(r"_f16|_pk_.*f16", opcode) else "fp32" if re.search(r"_f32|_f64|fmac|fma_mix",
                                                                                          opcode) else "int")
        out.update(cls="alu", kind=kind)
    else:
        out["cls"] = "other"
    return Instruction(**out)


_PARSERS = {"ir3": _ir3, "aco": _aco, "valhall": lambda n, l: _mali(n, l, False),
            "bifrost": lambda n, l: _mali(n, l, True)}


def _family(gpu_or_family) -> str:
    if gpu_or_family in _PARSERS:
        return gpu_or_family
    return isa_family(gpu_or_family)


def instructions(text: str, gpu) -> list[Instruction]:
    """The instructions of an ISA text (`gpu`: an offline GPU name or an ISA family "ir3" | "valhall" |
    "bifrost" | "aco"), each classified. ir3's text after its `end` (padding nops) and its footer are left out."""
    family = _family(gpu)
    if not isinstance(text, str):
        raise TypeError(f"expected the ISA as text, got {type(text).__name__}")
    parse = _PARSERS[family]
    out = []
    preamble = False
    for n, line in enumerate(text.splitlines(), 1):
        ins = parse(n, line)
        if ins is None:
            continue
        if family == "ir3":
            preamble = preamble or ins.opcode == "shps"
            if preamble:
                ins = dataclasses.replace(ins, preamble=True)
            preamble = preamble and ins.opcode != "shpe"
        out.append(ins)
        if family == "ir3" and ins.opcode == "end":
            break
    return _valhall_shared(out) if family == "valhall" else out


_REG = re.compile(r"\^?(r\d+)")
_DST = re.compile(r"@?(r\d+)(?::(r\d+))?")


def _valhall_shared(found: list[Instruction]) -> list[Instruction]:
    """Valhall's LOAD / STORE name no address space: one whose address register derives from
    `workgroup_local_pointer` (through IADD / MOV) is a shared-memory access."""
    local: set[str] = set()
    out = []
    for ins in found:
        parts = ins.text.split(" ", 1)[1] if " " in ins.text else ""
        operands = [o.strip() for o in parts.split(",")]
        base = ins.opcode.split(".")[0]
        if base in ("LOAD", "STORE"):
            address = next((m.group(1) for o in operands[1:2] for m in [_REG.match(o)] if m), None)
            if address in local:
                ins = dataclasses.replace(ins, space="shared")
        dsts = _DST.match(operands[0]) if operands and base != "STORE" else None
        if dsts:
            sources = " ".join(operands[1:])
            tainted = base not in ("LOAD", "LD_BUFFER") and (
                "workgroup_local_pointer" in sources or any(r in local for r in _REG.findall(sources)))
            for reg in filter(None, dsts.groups()):
                (local.add if tainted else local.discard)(reg)
        out.append(ins)
    return out


COUNT_COLUMNS = ("cls", "kind", "space", "bits", "group")


def counts(text: str, gpu):
    """A DataFrame, one row per instruction class: cls, kind, space, bits, group (ir3 category / Mali unit),
    count; plus, on ir3, rows of cls "flag" for (ss) and (sy)."""
    import pandas as pd
    found = instructions(text, gpu)
    frame = pd.DataFrame([{c: getattr(i, c) for c in COUNT_COLUMNS} for i in found],
                         columns=list(COUNT_COLUMNS))
    table = frame.groupby(list(COUNT_COLUMNS), dropna=False).size().reset_index(name="count")
    if _family(gpu) == "ir3":
        flags = [{"cls": "flag", "kind": f, "space": "", "bits": 0, "group": "",
                  "count": sum(i.flags.count(f) for i in found)} for f in ("(ss)", "(sy)")]
        table = pd.concat([table, pd.DataFrame(flags)], ignore_index=True)
    return table.sort_values(["cls", "kind", "space", "bits"]).reset_index(drop=True)


def summary(text: str, gpu) -> dict:
    """The counts in one flat dict: instructions (no nops), nops, alu, alu fp32 / fp16 / int / conversion /
    transcendental / scalar, move, loads, stores, atomics, '<space> loads' / '<space> stores', load bits (total),
    barriers, syncs, control, matrix, dot, and per group (cat0.. / fma, cvt, ...); ir3 adds (ss), (sy)."""
    found = instructions(text, gpu)
    out = {"instructions": sum(i.cls != "nop" for i in found), "nops": sum(i.cls == "nop" for i in found)}
    for cls, key in (("alu", "alu"), ("move", "move"), ("load", "loads"), ("store", "stores"), ("atomic", "atomics"),
                     ("barrier", "barriers"), ("sync", "syncs"), ("control", "control"), ("matrix", "matrix"),
                     ("dot", "dot"), ("other", "other")):
        out[key] = sum(i.cls == cls for i in found)
    for kind in ("fp32", "fp16", "int", "conversion", "transcendental", "scalar"):
        out[f"alu {kind}"] = sum(i.cls == "alu" and i.kind == kind for i in found)
    for space in ("global", "shared", "constant", "texture", "private"):
        out[f"{space} loads"] = sum(i.cls == "load" and i.space == space for i in found)
        out[f"{space} stores"] = sum(i.cls == "store" and i.space == space for i in found)
    out["load bits"] = sum(i.bits for i in found if i.cls == "load")
    out["store bits"] = sum(i.bits for i in found if i.cls == "store")
    for group in sorted({i.group for i in found if i.group}):
        out[group] = sum(i.group == group for i in found)
    if _family(gpu) == "ir3":
        out["(ss)"] = sum(i.flags.count("(ss)") for i in found)
        out["(sy)"] = sum(i.flags.count("(sy)") for i in found)
    return out


# ----------------------------------------------------------------------------------------------------------------
# Diff
# ----------------------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class IsaDiff:
    """`table`: the `summary` counts before (A), after (B) and B − A, one row per count that is non-zero in
    either; `hunks`: difflib opcodes over the two instruction streams (tag, a range, b range);
    `text`: a unified diff of the instruction lines (opcodes aligned, operands shown)."""
    table: object
    hunks: list
    text: str
    aligned_by: str = "opcode sequence"

    def __str__(self) -> str:
        return self.table.to_string(index=False) + "\n\n" + self.text


def diff(a: str, b: str, gpu, *, labels=("A", "B"), context: int = 2) -> IsaDiff:
    """Two ISA texts of the same GPU compared: the class counts before / after and the instruction streams
    aligned as opcode sequences (Mesa's ISA carries no source lines)."""
    import pandas as pd
    sa, sb = summary(a, gpu), summary(b, gpu)
    keys = list(dict.fromkeys(list(sa) + list(sb)))
    rows = [{"count": k, labels[0]: sa.get(k, 0), labels[1]: sb.get(k, 0), "delta": sb.get(k, 0) - sa.get(k, 0)}
            for k in keys if sa.get(k, 0) or sb.get(k, 0)]
    table = pd.DataFrame(rows, columns=["count", labels[0], labels[1], "delta"])
    ia, ib = instructions(a, gpu), instructions(b, gpu)
    matcher = difflib.SequenceMatcher(a=[i.opcode for i in ia], b=[i.opcode for i in ib], autojunk=False)
    hunks = [h for h in matcher.get_opcodes() if h[0] != "equal"]
    lines = []
    for group in matcher.get_grouped_opcodes(context):
        (_, a0, _, b0, _), (_, _, a1, _, b1) = group[0], group[-1]
        lines.append(f"@@ {labels[0]} {a0 + 1},{a1 - a0} {labels[1]} {b0 + 1},{b1 - b0} @@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [f"  {ia[i].text}" for i in range(i1, i2)]
                continue
            lines += [f"- {ia[i].text}" for i in range(i1, i2)]
            lines += [f"+ {ib[j].text}" for j in range(j1, j2)]
    return IsaDiff(table, hunks, "\n".join(lines))
