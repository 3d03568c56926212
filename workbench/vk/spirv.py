"""Just enough SPIR-V reflection to build a compute pipeline without being told its interface.

From the module's words we learn: the descriptor bindings (set, binding, kind, name), the push-constant block's size,
the specialization constants (id → scalar type) and the fixed local size, if any. Pipelines use this to create their
layouts and to check every dispatch's resources, so a missing or wrong resource is an error naming the binding rather
than a driver crash.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

SPIRV_MAGIC = 0x07230203

# Opcodes used below (SPIR-V spec, section 3.x "Instructions").
OP_NAME, OP_EXECUTION_MODE, OP_TYPE_BOOL, OP_TYPE_INT, OP_TYPE_FLOAT = 5, 16, 20, 21, 22
OP_TYPE_VECTOR, OP_TYPE_MATRIX, OP_TYPE_IMAGE, OP_TYPE_SAMPLED_IMAGE = 23, 24, 25, 27
OP_TYPE_ARRAY, OP_TYPE_RUNTIME_ARRAY, OP_TYPE_STRUCT, OP_TYPE_POINTER = 28, 29, 30, 32
OP_CONSTANT, OP_SPEC_CONSTANT_TRUE, OP_SPEC_CONSTANT_FALSE, OP_SPEC_CONSTANT = 43, 48, 49, 50
OP_CONSTANT_COMPOSITE, OP_SPEC_CONSTANT_COMPOSITE = 44, 51
OP_VARIABLE, OP_DECORATE, OP_MEMBER_DECORATE, OP_EXECUTION_MODE_ID = 59, 71, 72, 331
OP_ENTRY_POINT, EXECUTION_MODEL_GL_COMPUTE = 15, 5
# Decorations and enums.
DEC_SPEC_ID, DEC_BLOCK, DEC_BUFFER_BLOCK, DEC_ARRAY_STRIDE, DEC_MATRIX_STRIDE = 1, 2, 3, 6, 7
DEC_BUILTIN, DEC_BINDING, DEC_DESCRIPTOR_SET, DEC_OFFSET = 11, 33, 34, 35
SC_UNIFORM_CONSTANT, SC_UNIFORM, SC_PUSH_CONSTANT, SC_STORAGE_BUFFER = 0, 2, 9, 12
SC_PHYSICAL_STORAGE_BUFFER = 5349  # buffer device addresses
EXEC_LOCAL_SIZE, EXEC_LOCAL_SIZE_ID = 17, 38
BUILTIN_WORKGROUP_SIZE = 25

STORAGE_BUFFER, UNIFORM_BUFFER, STORAGE_IMAGE, SAMPLED_IMAGE, COMBINED_IMAGE_SAMPLER = (
    "storage_buffer", "uniform_buffer", "storage_image", "sampled_image", "combined_image_sampler")
IMAGE_DIMS = {0: 1, 1: 2, 2: 3}  # SPIR-V Dim operand (1D, 2D, 3D) → number of dimensions


@dataclass(frozen=True)
class Binding:
    set: int
    binding: int
    kind: str  # one of STORAGE_BUFFER, UNIFORM_BUFFER, STORAGE_IMAGE, SAMPLED_IMAGE, COMBINED_IMAGE_SAMPLER
    name: str
    dims: int | None = None  # images: 1, 2 or 3 (None for buffers, and for image kinds beyond 1-D/2-D/3-D)
    block_size: int | None = None  # uniform buffers: the end of the block's last member, in bytes

@dataclass
class Reflection:
    bindings: list[Binding] = field(default_factory=list)
    push_constant_size: int = 0
    spec_constants: dict[int, str] = field(default_factory=dict)  # id → 'int' | 'uint' | 'float' | 'bool'
    local_size: tuple[int, int, int] | None = None  # literal local size, None if set by specialization constants
    local_size_from_spec: bool = False
    local_size_id: bool = False  # the LocalSizeId execution mode (needs the maintenance4 feature)
    # the specialization constant ids that carry x, y, z (None for a literal axis), from LocalSizeId or a
    # WorkgroupSize built-in made of spec constants, any ids (ET-VK: 0, 1, 2; ncnn: 233, 234, 235); None: literal
    local_size_spec_ids: tuple | None = None
    local_size_default: tuple[int, int, int] | None = None  # the module's own local size (spec defaults, literals)
    spec_defaults: dict[int, int] = field(default_factory=dict)  # SpecId → its default word (a pipeline's value
    # where it does not specialize the constant)
    entry_points: list[str] = field(default_factory=list)  # the names of the module's compute entry points
    # buffer device addresses: where the module reads pointers (PhysicalStorageBuffer), {"push" or (set, binding):
    # [byte offsets of 8-byte pointer members of the block, arrays of pointers unrolled to their declared length]}
    pointers: dict = field(default_factory=dict)


def _string(words: list[int]) -> str:
    raw = struct.pack(f"<{len(words)}I", *words)
    return raw.split(b"\0", 1)[0].decode()


def reflect(code: bytes) -> Reflection:
    if len(code) < 20 or len(code) % 4:
        raise ValueError(f"not a SPIR-V module: {len(code)} bytes (expected a multiple of 4, at least 20)")
    words = struct.unpack(f"<{len(code) // 4}I", code)
    if words[0] != SPIRV_MAGIC:
        raise ValueError(f"not a SPIR-V module: magic {words[0]:#010x}, expected {SPIRV_MAGIC:#010x}")

    names: dict[int, str] = {}
    decorations: dict[int, dict[int, list[int]]] = {}
    member_offsets: dict[int, dict[int, int]] = {}
    types: dict[int, tuple] = {}
    constants: dict[int, int] = {}
    variables: list[tuple[int, int, int]] = []  # (pointer type, id, storage class)
    spec_ids: dict[int, int] = {}  # result id → SpecId
    spec_types: dict[int, int] = {}  # result id → type id
    local_size = None
    local_size_ids = ()
    builtin_ids: set[int] = set()  # ids decorated BuiltIn WorkgroupSize
    composites: dict[int, list[int]] = {}  # (spec) constant composite id → constituents
    spec_defaults: dict[int, int] = {}  # OpSpecConstant result id → its default word
    entry_points = []

    i = 5
    while i < len(words):
        opcode, count = words[i] & 0xFFFF, words[i] >> 16
        if count == 0:
            raise ValueError(f"corrupt SPIR-V: zero-length instruction at word {i}")
        ops = list(words[i + 1:i + count])
        if opcode == OP_NAME:
            names[ops[0]] = _string(ops[1:])
        elif opcode == OP_ENTRY_POINT and ops[0] == EXECUTION_MODEL_GL_COMPUTE:
            entry_points.append(_string(ops[2:]))
        elif opcode == OP_DECORATE:
            decorations.setdefault(ops[0], {})[ops[1]] = ops[2:]
            if ops[1] == DEC_SPEC_ID:
                spec_ids[ops[0]] = ops[2]
            if ops[1] == DEC_BUILTIN and ops[2] == BUILTIN_WORKGROUP_SIZE:
                builtin_ids.add(ops[0])
        elif opcode == OP_MEMBER_DECORATE and ops[2] == DEC_OFFSET:
            member_offsets.setdefault(ops[0], {})[ops[1]] = ops[3]
        elif opcode == OP_EXECUTION_MODE and ops[1] == EXEC_LOCAL_SIZE:
            local_size = tuple(ops[2:5])
        elif opcode == OP_EXECUTION_MODE_ID and ops[1] == EXEC_LOCAL_SIZE_ID:
            local_size = None
            local_size_ids = tuple(ops[2:5])  # what glslang emits for local_size_*_id at Vulkan 1.3
        elif opcode in (OP_TYPE_BOOL,):
            types[ops[0]] = ("bool",)
        elif opcode == OP_TYPE_INT:
            types[ops[0]] = ("int", ops[1], ops[2])
        elif opcode == OP_TYPE_FLOAT:
            types[ops[0]] = ("float", ops[1])
        elif opcode == OP_TYPE_VECTOR:
            types[ops[0]] = ("vector", ops[1], ops[2])
        elif opcode == OP_TYPE_MATRIX:
            types[ops[0]] = ("matrix", ops[1], ops[2])
        elif opcode == OP_TYPE_IMAGE:
            types[ops[0]] = ("image", ops[6], ops[2])  # Sampled (2 means storage image), Dim
        elif opcode == OP_TYPE_SAMPLED_IMAGE:
            types[ops[0]] = ("sampled_image", ops[1])
        elif opcode == OP_TYPE_ARRAY:
            types[ops[0]] = ("array", ops[1], ops[2])
        elif opcode == OP_TYPE_RUNTIME_ARRAY:
            types[ops[0]] = ("runtime_array", ops[1])
        elif opcode == OP_TYPE_STRUCT:
            types[ops[0]] = ("struct", tuple(ops[1:]))
        elif opcode == OP_TYPE_POINTER:
            types[ops[0]] = ("pointer", ops[1], ops[2])
        elif opcode == OP_CONSTANT:
            constants[ops[1]] = ops[2]
        elif opcode in (OP_SPEC_CONSTANT, OP_SPEC_CONSTANT_TRUE, OP_SPEC_CONSTANT_FALSE):
            spec_types[ops[1]] = ops[0]
            spec_defaults[ops[1]] = ops[2] if opcode == OP_SPEC_CONSTANT else int(opcode == OP_SPEC_CONSTANT_TRUE)
        elif opcode in (OP_CONSTANT_COMPOSITE, OP_SPEC_CONSTANT_COMPOSITE):
            composites[ops[1]] = ops[2:]
        elif opcode == OP_VARIABLE:
            variables.append((ops[0], ops[1], ops[2]))
        i += count

    def size_of(type_id: int) -> int:
        t = types[type_id]
        if t[0] in ("int", "float"):
            return t[1] // 8
        if t[0] == "bool":
            return 4
        if t[0] == "pointer":  # a PhysicalStorageBuffer pointer: a 64-bit address
            return 8
        if t[0] == "vector":
            return size_of(t[1]) * t[2]
        if t[0] == "matrix":
            stride = decorations.get(type_id, {}).get(DEC_MATRIX_STRIDE, [size_of(t[1])])[0]
            return stride * t[2]
        if t[0] == "array":
            stride = decorations.get(type_id, {}).get(DEC_ARRAY_STRIDE, [size_of(t[1])])[0]
            return stride * constants[t[2]]
        if t[0] == "struct":
            offsets = member_offsets.get(type_id, {})
            return max((offsets.get(k, 0) + size_of(m) for k, m in enumerate(t[1])), default=0)
        return 0

    def pointer_offsets(type_id: int, base: int = 0) -> list[int]:
        """Byte offsets of the PhysicalStorageBuffer pointers in a block (structs and sized arrays walked)."""
        t = types.get(type_id, ("?",))
        if t[0] == "pointer" and t[1] == SC_PHYSICAL_STORAGE_BUFFER:
            return [base]
        if t[0] == "struct":
            offsets = member_offsets.get(type_id, {})
            return [o for k, m in enumerate(t[1]) for o in pointer_offsets(m, base + offsets.get(k, 0))]
        if t[0] == "array" and t[2] in constants:
            stride = decorations.get(type_id, {}).get(DEC_ARRAY_STRIDE, [8])[0]
            return [o for n in range(constants[t[2]]) for o in pointer_offsets(t[1], base + n * stride)]
        return []

    refl = Reflection()
    for ptr_type, var_id, storage_class in variables:
        if storage_class not in (SC_UNIFORM_CONSTANT, SC_UNIFORM, SC_PUSH_CONSTANT, SC_STORAGE_BUFFER):
            continue  # function-local, private, workgroup and built-in variables are no part of the interface
        pointee = types[ptr_type][2]
        while types[pointee][0] in ("array", "runtime_array"):
            pointee = types[pointee][1]
        dec = decorations.get(var_id, {})
        name = names.get(var_id) or names.get(pointee, f"%{var_id}")
        if storage_class == SC_PUSH_CONSTANT:
            refl.push_constant_size = size_of(pointee)
            if pointer_offsets(pointee):
                refl.pointers["push"] = pointer_offsets(pointee)
            continue
        if DEC_BINDING not in dec:
            continue
        dims = None
        if storage_class == SC_STORAGE_BUFFER:
            kind = STORAGE_BUFFER
        elif storage_class == SC_UNIFORM:
            kind = STORAGE_BUFFER if DEC_BUFFER_BLOCK in decorations.get(pointee, {}) else UNIFORM_BUFFER
        elif storage_class == SC_UNIFORM_CONSTANT and types[pointee][0] == "image":
            kind = STORAGE_IMAGE if types[pointee][1] == 2 else SAMPLED_IMAGE
            dims = IMAGE_DIMS.get(types[pointee][2])
        elif storage_class == SC_UNIFORM_CONSTANT and types[pointee][0] == "sampled_image":
            kind = COMBINED_IMAGE_SAMPLER
            dims = IMAGE_DIMS.get(types[types[pointee][1]][2])
        else:
            raise ValueError(f"unsupported descriptor kind for variable {name!r} (storage class {storage_class})")
        if kind in (STORAGE_BUFFER, UNIFORM_BUFFER) and pointer_offsets(pointee):
            refl.pointers[(dec.get(DEC_DESCRIPTOR_SET, [0])[0], dec[DEC_BINDING][0])] = pointer_offsets(pointee)
        block_size = size_of(pointee) if kind == UNIFORM_BUFFER else None
        refl.bindings.append(Binding(dec.get(DEC_DESCRIPTOR_SET, [0])[0], dec[DEC_BINDING][0], kind, name, dims,
                                     block_size))
    refl.bindings.sort(key=lambda b: (b.set, b.binding))

    for result_id, spec_id in spec_ids.items():
        t = types.get(spec_types.get(result_id, -1))
        if t is None:
            continue
        if t[0] == "bool":
            refl.spec_constants[spec_id] = "bool"
        elif t[0] == "float" and t[1] == 32:
            refl.spec_constants[spec_id] = "float"
        elif t[0] == "int" and t[1] == 32:
            refl.spec_constants[spec_id] = "int" if t[2] else "uint"
        else:
            raise ValueError(f"specialization constant {spec_id} has an unsupported type {t}")
    # the ids whose values are the local size: LocalSizeId's operands, else the WorkgroupSize built-in's constituents
    axes = list(local_size_ids) if len(local_size_ids) == 3 else next(
        (composites[b] for b in builtin_ids if len(composites.get(b, ())) == 3), [])
    spec_axes = tuple(spec_ids.get(a) for a in axes)
    if axes and any(sid is not None and sid in refl.spec_constants for sid in spec_axes):
        refl.local_size_spec_ids = spec_axes
        refl.local_size_default = tuple(int(spec_defaults.get(a, constants.get(a, 1))) for a in axes)
    from_ids = len(local_size_ids) == 3 and refl.local_size_spec_ids is not None
    refl.local_size_from_spec = refl.local_size_spec_ids is not None
    refl.local_size_id = from_ids
    if not refl.local_size_from_spec and axes and all(a in constants for a in axes):
        local_size = tuple(int(constants[a]) for a in axes)  # a WorkgroupSize built-in of plain constants
    refl.local_size = None if refl.local_size_from_spec else local_size
    refl.spec_defaults = {spec_ids[r]: v for r, v in spec_defaults.items() if r in spec_ids}
    refl.entry_points = entry_points
    return refl


def declared(module, spec_constants) -> dict:
    """The entries of `spec_constants` (id → value) whose ids the module (SPIR-V bytes, a compiled shader with
    `.code`, or its Reflection) declares. A pipeline passes only these: Vulkan ignores the others, ET-VK's C++
    passes its whole list whatever the variant reads, and glslc -O removes unused constants."""
    refl = module if isinstance(module, Reflection) else reflect(bytes(getattr(module, "code", module)))
    return {int(k): v for k, v in dict(spec_constants or {}).items() if int(k) in refl.spec_constants}


OP_LOAD, OP_STORE, OP_ACCESS_CHAIN, OP_IN_BOUNDS_ACCESS_CHAIN, OP_PTR_ACCESS_CHAIN, OP_COPY_OBJECT = 61, 62, 65, 66, 67, 83
OP_IMAGE_READ, OP_IMAGE_WRITE, OP_IMAGE_FETCH, OP_IMAGE_TEXEL_POINTER = 98, 99, 95, 60
OP_ATOMICS = set(range(227, 243)) | {OP_IMAGE_TEXEL_POINTER}


def binding_at(code: bytes, index: int) -> int | None:
    """The descriptor binding the instruction at ``index`` accesses (0 = the first instruction after the header, as
    GPU-assisted validation's "Shader Instruction Index" counts), through its pointer's access chains or the image it
    loaded; None where it accesses no descriptor."""
    words = struct.unpack(f"<{len(code) // 4}I", code)
    base, bindings = {}, {}
    at, k = 5, 0
    while at < len(words):
        count, opcode = words[at] >> 16, words[at] & 0xFFFF
        if count == 0:
            return None
        ops = words[at + 1:at + count]
        if opcode == OP_DECORATE and ops[1] == DEC_BINDING:
            bindings[ops[0]] = ops[2]
        elif opcode == OP_VARIABLE:
            base[ops[1]] = ops[1]
        elif opcode in (OP_ACCESS_CHAIN, OP_IN_BOUNDS_ACCESS_CHAIN, OP_PTR_ACCESS_CHAIN, OP_COPY_OBJECT, OP_LOAD) \
                and ops[2] in base:
            base[ops[1]] = base[ops[2]]  # a pointer into, or an image loaded from, a variable
        if k == index:
            if opcode == OP_STORE:
                pointer = ops[0]
            elif opcode in (OP_LOAD, OP_IMAGE_READ, OP_IMAGE_FETCH) or opcode in OP_ATOMICS:
                pointer = ops[2]
            elif opcode == OP_IMAGE_WRITE:
                pointer = ops[0]
            else:
                return None
            return bindings.get(base.get(pointer))
        at += count
        k += 1
    return None


# ---------------------------------------------------------------------------------------------------------------------
# Capabilities: what a module declares it uses, and the device feature each needs
# ---------------------------------------------------------------------------------------------------------------------

OP_CAPABILITY, OP_MEMORY_MODEL = 17, 14


@dataclass(frozen=True)
class CapabilityFeature:
    """The device feature a SPIR-V capability needs: `key` as `vk.discovery` names it in ``DeviceInfo.features``
    (None: not queried), `vulkan` its name in Vulkan's feature structs, `words` what it is for a reader."""
    key: str | None
    vulkan: str
    words: str


_DOT = CapabilityFeature("integer_dot_product", "shaderIntegerDotProduct",
                         "int8 dot product (VK_KHR_shader_integer_dot_product)")
#: OpCapability operand → the feature it needs (the capabilities the workbench, ET-VK and captured programs declare).
CAPABILITY_FEATURES = {
    9: CapabilityFeature("shader_float16", "shaderFloat16", "fp16 arithmetic (shaderFloat16)"),
    10: CapabilityFeature(None, "shaderFloat64", "fp64 arithmetic (shaderFloat64)"),
    11: CapabilityFeature("shader_int64", "shaderInt64", "int64 arithmetic (shaderInt64)"),
    22: CapabilityFeature("shader_int16", "shaderInt16", "int16 arithmetic (shaderInt16)"),
    39: CapabilityFeature("shader_int8", "shaderInt8", "int8 arithmetic (shaderInt8)"),
    4433: CapabilityFeature("storage_buffer_16bit", "storageBuffer16BitAccess", "16-bit storage buffers"),
    4434: CapabilityFeature(None, "uniformAndStorageBuffer16BitAccess", "16-bit uniform buffers"),
    4448: CapabilityFeature("storage_buffer_8bit", "storageBuffer8BitAccess", "8-bit storage buffers"),
    4449: CapabilityFeature("uniform_and_storage_buffer_8bit", "uniformAndStorageBuffer8BitAccess",
                            "8-bit uniform buffers"),
    6016: _DOT, 6017: _DOT, 6018: _DOT, 6019: _DOT,
    6022: CapabilityFeature("cooperative_matrix_khr", "cooperativeMatrix",
                            "cooperative matrices (VK_KHR_cooperative_matrix)"),
    5345: CapabilityFeature("vulkan_memory_model", "vulkanMemoryModel", "the Vulkan memory model"),
    5347: CapabilityFeature("buffer_device_address", "bufferDeviceAddress",
                            "buffer device addresses (PhysicalStorageBufferAddresses)"),
}


def capabilities(code) -> list[int]:
    """The OpCapability operands of a SPIR-V module (bytes or its words), in order: they come first, before
    OpMemoryModel."""
    words = (struct.unpack(f"<{len(code) // 4}I", bytes(code[:len(code) // 4 * 4]))
             if isinstance(code, (bytes, bytearray, memoryview)) else [int(w) for w in code])
    found, i = [], 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if opcode == OP_CAPABILITY:
            found.append(words[i + 1])
        elif opcode in (OP_MEMORY_MODEL, OP_ENTRY_POINT) or count == 0:
            break
        i += count
    return found


def needed_features(code) -> list[CapabilityFeature]:
    """The features `code`'s capabilities need, each once, in capability order (unknown capabilities: none)."""
    out = []
    for capability in capabilities(code):
        feature = CAPABILITY_FEATURES.get(capability)
        if feature is not None and feature not in out:
            out.append(feature)
    return out
