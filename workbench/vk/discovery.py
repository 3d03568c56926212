"""Instances, physical devices (`DeviceInfo`: properties, features, extensions) and device selection."""
from __future__ import annotations

import contextlib
import os
import re
import threading
from dataclasses import dataclass, field

import vulkan as vk

from .errors import DeviceNotFoundError, MissingFeatureError, ValidationError
from .spirv import binding_at

VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"
API_VERSION = vk.VK_MAKE_VERSION(1, 3, 0)
DEVICE_TYPES = {0: "other", 1: "integrated GPU", 2: "discrete GPU", 3: "virtual GPU", 4: "CPU"}
VENDORS = {0x10DE: "NVIDIA", 0x1002: "AMD", 0x8086: "Intel", 0x5143: "Qualcomm", 0x13B5: "ARM",
           0x10005: "Mesa", 0x1010: "Imagination", 0x106B: "Apple"}
EXT_EXECUTABLE_PROPERTIES = "VK_KHR_pipeline_executable_properties"
EXT_INTEGER_DOT_PRODUCT = "VK_KHR_shader_integer_dot_product"
EXT_SHADER_CLOCK = "VK_KHR_shader_clock"
EXT_SM_BUILTINS = "VK_NV_shader_sm_builtins"
EXT_COOPERATIVE_MATRIX_NV = "VK_NV_cooperative_matrix"
EXT_MAINTENANCE4 = "VK_KHR_maintenance4"
EXT_NON_SEMANTIC_INFO = "VK_KHR_shader_non_semantic_info"  # debugPrintfEXT
EXT_COOPERATIVE_MATRIX_KHR = "VK_KHR_cooperative_matrix"
# Workgroup-scope cooperative matrices (the vulkan wheel 1.3.275 predates it: its structs are laid out by hand below)
EXT_COOPERATIVE_MATRIX2_NV = "VK_NV_cooperative_matrix2"
STYPE_COOPERATIVE_MATRIX2_FEATURES_NV = 1000593000
STYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV = 1000593002
# the VkBool32 fields of VkPhysicalDeviceCooperativeMatrix2FeaturesNV in order; the first three are what its
# workgroup-scope GEMMs need (vk_cooperative_matrix_perf enables the same three)
COOPERATIVE_MATRIX2_FIELDS = ("workgroup_scope", "flexible_dimensions", "tensor_addressing")
_COOPERATIVE_MATRIX2_OFFSETS = {"workgroup_scope": 0, "flexible_dimensions": 1, "tensor_addressing": 5}
# VkComponentTypeNV / VkComponentTypeKHR share these values (0..10). The `vulkan` binding (1.3.275.1) leaves the
# *_NV names None, so they are spelled out here rather than read from it.
COMPONENT_TYPES = dict(enumerate(("float16", "float32", "float64", "sint8", "sint16", "sint32", "sint64", "uint8",
                                  "uint16", "uint32", "uint64")))


def _version(v: int) -> str:
    return f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def _text(value) -> str:
    return value if isinstance(value, str) else vk.ffi.string(value).decode(errors="replace")


# Validation modes beyond the layer's core checks, each through VK_EXT_validation_features (layer 1.3.239 and later).
MODES = {"sync": "VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT",
         "gpu": "VK_VALIDATION_FEATURE_ENABLE_GPU_ASSISTED_EXT",
         "printf": "VK_VALIDATION_FEATURE_ENABLE_DEBUG_PRINTF_EXT"}
# The layer's own id for debugPrintfEXT output (an INFO message, kept apart from the validation messages).
PRINTF_ID = "UNASSIGNED-DEBUG-PRINTF"


def validation_modes(modes=None, *, sync_validation=False, gpu_assisted=False, debug_printf=False) -> frozenset:
    """The set of modes ("sync", "gpu", "printf") from a comma-separated text / iterable and the keyword flags.
    GPU-assisted validation and debug printf exclude each other (the layer runs one of them)."""
    if isinstance(modes, str):
        modes = [m for m in re.split(r"[,+ ]+", modes.strip().lower()) if m]
    chosen = set(modes or ())
    chosen |= {m for m, on in (("sync", sync_validation), ("gpu", gpu_assisted), ("printf", debug_printf)) if on}
    unknown = chosen - set(MODES)
    if unknown:
        raise ValueError(f"unknown validation mode(s) {sorted(unknown)}; expected some of {sorted(MODES)}")
    if {"gpu", "printf"} <= chosen:
        raise ValueError("GPU-assisted validation and debug printf cannot run together (the validation layer "
                         "instruments shaders for one of them): pick one")
    return frozenset(chosen)


def env_validation() -> tuple[bool, frozenset]:
    """WORKBENCH_VALIDATION: 1/true/yes/on: the layer; a comma list of modes (sync, gpu, printf): the layer with
    those modes; empty / 0: none."""
    text = os.environ.get("WORKBENCH_VALIDATION", "").strip().lower()
    if text in ("", "0", "false", "no", "off"):
        return False, frozenset()
    if text in ("1", "true", "yes", "on"):
        return True, frozenset()
    return True, validation_modes(text)


# The layer's printf buffer per dispatch (its default, 1024 B, holds ~25 lines; 1 MiB held 23,832 lines of a 3-value
# format, the rest dropped without a word from layer 1.3.239): WORKBENCH_PRINTF_BUFFER_BYTES, read at the first
# validating instance.
PRINTF_BUFFER_BYTES = 8 << 20


def printf_settings() -> str | None:
    """Layer 1.3.239 reads the printf settings from a vk_layer_settings.txt only (VK_EXT_layer_settings came later):
    point VK_LAYER_SETTINGS_PATH at one that sends printf output to the messenger (not stdout), verbose (the
    dispatch index and invocation id come with each line) and with a large buffer. A settings file the user named
    is left alone. Written before the first validating instance of the process, whatever its modes: the layer
    reads the file once."""
    if os.environ.get("VK_LAYER_SETTINGS_PATH"):
        return None  # ours (a second instance), or the user's
    import tempfile
    size = int(os.environ.get("WORKBENCH_PRINTF_BUFFER_BYTES", PRINTF_BUFFER_BYTES))
    folder = tempfile.mkdtemp(prefix="workbench-layer-")
    path = os.path.join(folder, "vk_layer_settings.txt")
    with open(path, "w") as out:
        out.write("khronos_validation.printf_to_stdout = false\n"
                  "khronos_validation.printf_verbose = true\n"
                  f"khronos_validation.printf_buffer_size = {size}\n")
    os.environ["VK_LAYER_SETTINGS_PATH"] = path
    return path


@dataclass
class LayerMessage:
    """One message of the validation layer, attributed: the kernel (pipeline name), the dispatch (its label, index
    in its recording), the binding where the layer names one, and the invocation for GPU-AV / printf."""
    text: str
    severity: str
    message_id: str = ""
    recording: str | None = None
    dispatch: str | None = None
    dispatch_index: int | None = None
    kernel: str | None = None
    binding: int | None = None
    invocation: tuple | None = None
    objects: tuple = ()

    def __str__(self):
        where = ", ".join(f"{k} {v}" for k, v in (("kernel", self.kernel), ("dispatch", self.dispatch),
                                                  ("binding", self.binding), ("invocation", self.invocation))
                          if v is not None)
        return f"[{where}] {self.text}" if where else self.text


def env_layer() -> str | None:
    """WORKBENCH_VALIDATION_LAYER: empty / "system": the system's layer (None); else the folder of another
    VkLayer_khronos_validation.json (`workbench.toolchain.validation.resolve_layer` turns "built" into its folder)."""
    text = os.environ.get("WORKBENCH_VALIDATION_LAYER", "").strip()
    if text in ("", "system"):
        return None
    if not os.path.isfile(os.path.join(text, "VkLayer_khronos_validation.json")):
        raise ValidationError(f"WORKBENCH_VALIDATION_LAYER: expected 'system' or a folder holding "
                              f"VkLayer_khronos_validation.json, got {text!r} ('built' is resolved by the CLI and "
                              "workbench.toolchain.validation.resolve_layer)")
    return text


@contextlib.contextmanager
def layer_path(folder: str | None):
    """VK_LAYER_PATH = `folder` while the loader reads layer manifests (the system's validation layer hidden),
    restored after; nothing when `folder` is None."""
    if folder is None:
        yield
        return
    before = os.environ.get("VK_LAYER_PATH")
    os.environ["VK_LAYER_PATH"] = str(folder)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("VK_LAYER_PATH", None)
        else:
            os.environ["VK_LAYER_PATH"] = before


class Instance:
    """A VkInstance, with the validation layer and a messenger that collects its messages when asked for."""

    def __init__(self, validation: bool, modes: frozenset = frozenset(), layer: str | None = None):
        self.validation = validation or bool(modes) or layer is not None
        self.modes = frozenset(modes)
        self.layer = layer  # None: the system's validation layer; else the folder of another one's manifest
        self.messages: list[str] = []  # every validation message (not printf output), as text
        self.details: list[LayerMessage] = []  # the same, attributed
        self.printf: list[LayerMessage] = []  # debugPrintfEXT output (mode "printf")
        self.command_buffers: dict[int, object] = {}  # handle -> weakref to its Recording (attribution)
        self.layer_version: str | None = None
        self.dispatch_index_reliable = False
        layers = []
        extensions = []
        with layer_path(layer):  # the loader reads the manifests while it enumerates and creates
            self._create(layers, extensions)

    def _create(self, layers, extensions):
        if self.validation:
            available = {p.layerName for p in vk.vkEnumerateInstanceLayerProperties()}
            if VALIDATION_LAYER not in available:
                if self.layer is not None:
                    raise ValidationError(f"expected {VALIDATION_LAYER} in {self.layer}, found {sorted(available)}")
                raise ValidationError(
                    f"validation was requested but {VALIDATION_LAYER} is not installed "
                    f"(Debian/Ubuntu package: vulkan-validationlayers); available layers: {sorted(available)}")
            layers.append(VALIDATION_LAYER)
            extensions.append("VK_EXT_debug_utils")
            spec = next(p.specVersion for p in vk.vkEnumerateInstanceLayerProperties() if p.layerName == VALIDATION_LAYER)
            self.layer_version = _version(spec)
            # 1.3.239 reports "Compute Dispatch Index 0" for every dispatch of a command buffer (measured here)
            self.dispatch_index_reliable = tuple(int(v) for v in self.layer_version.split(".")) > (1, 3, 239)
            printf_settings()  # the layer reads its settings file once, at the first validating instance
        features = None
        if self.modes:
            layer_exts = {e.extensionName for e in vk.vkEnumerateInstanceExtensionProperties(VALIDATION_LAYER)}
            if "VK_EXT_validation_features" not in layer_exts:
                raise ValidationError(f"validation modes {sorted(self.modes)} need VK_EXT_validation_features, "
                                      f"which this {VALIDATION_LAYER} lacks (it has {sorted(layer_exts)})")
            extensions.append("VK_EXT_validation_features")
            enables = [getattr(vk, MODES[m]) for m in sorted(self.modes)]
            features = vk.VkValidationFeaturesEXT(enabledValidationFeatureCount=len(enables),
                                                  pEnabledValidationFeatures=enables)
        app_info = vk.VkApplicationInfo(pApplicationName="kernel-workbench", applicationVersion=1,
                                        pEngineName="workbench", engineVersion=1, apiVersion=API_VERSION)
        create_info = vk.VkInstanceCreateInfo(pNext=features, pApplicationInfo=app_info,
                                              enabledLayerCount=len(layers), ppEnabledLayerNames=layers,
                                              enabledExtensionCount=len(extensions),
                                              ppEnabledExtensionNames=extensions)
        self.handle = vk.vkCreateInstance(create_info, None)
        self._messenger = None
        if self.validation:
            # The `vulkan` binding keeps ONE Python callback for every messenger of the process (the last one
            # registered): route each message to its instance through pUserData.
            self._callback = _route_message
            self._user_data = vk.ffi.new_handle(self)  # alive as long as the instance
            severity = vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT
            if "printf" in self.modes:  # debugPrintfEXT output comes as INFO
                severity |= vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_INFO_BIT_EXT
            messenger_info = vk.VkDebugUtilsMessengerCreateInfoEXT(
                messageSeverity=severity,
                messageType=vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
                | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
                | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
                pfnUserCallback=self._callback, pUserData=self._user_data)
            create = vk.vkGetInstanceProcAddr(self.handle, "vkCreateDebugUtilsMessengerEXT")
            self._messenger = create(self.handle, messenger_info, None)
        self.physical_devices = list(vk.vkEnumeratePhysicalDevices(self.handle))

    def _on_message(self, severity, types, data, user_data=None):
        message = vk.ffi.string(data.pMessage).decode(errors="replace")
        message_id = vk.ffi.string(data.pMessageIdName).decode(errors="replace") if data.pMessageIdName else ""
        is_printf = PRINTF_ID.lower() in message_id.lower() or PRINTF_ID.lower() in message.lower()
        if severity & vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_INFO_BIT_EXT and not is_printf:
            return 0  # INFO is asked for only for printf
        detail = self._attribute(message, severity, message_id, data)
        if is_printf:
            self.printf.append(detail)
            return 0
        self.messages.append(str(detail) if detail.kernel or detail.dispatch else message)
        self.details.append(detail)
        log = os.environ.get("WORKBENCH_VALIDATION_LOG")
        if log:  # where no one can read `messages` (a kernel JupyterLab started), a file others can check
            try:
                with open(log, "a") as out:
                    out.write(f"[pid {os.getpid()}] {message}\n")
            except OSError:
                pass
        return 0

    def _attribute(self, message, severity, message_id, data) -> LayerMessage:
        """Name the recording, dispatch and kernel a message is about, from the objects the layer passes (the
        workbench names pipelines and command buffers) and the text (dispatch index, binding, invocation)."""
        objects = []
        recording = kernel = None
        for i in range(data.objectCount):
            o = data.pObjects[i]
            name = vk.ffi.string(o.pObjectName).decode(errors="replace") if o.pObjectName else None
            objects.append((int(o.objectType), int(o.objectHandle), name))
        # The layer names the command buffer and pipeline in its text: GPU-AV / printf "Command buffer (name)(0x..)
        # ... Pipeline (name)(0x..)", sync validation "VkCommandBuffer 0x..[name], VkPipeline 0x..[name]".
        m = (re.search(r"Command buffer (?:\([^)]*\))?\((0x[0-9a-fA-F]+)\)", message)
             or re.search(r"VkCommandBuffer (0x[0-9a-fA-F]+)", message))
        if m:
            ref = self.command_buffers.get(int(m.group(1), 16))
            recording = ref() if ref is not None else None
        m = (re.search(r"Pipeline \(([^)]*)\)\(0x", message) or re.search(r"VkPipeline 0x[0-9a-fA-F]+\[([^\]]*)\]",
                                                                         message))
        kernel = m.group(1) or None if m else None
        sev = ("error" if severity & vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT else
               "warning" if severity & vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT else "info")
        text = message
        m = re.search(r"Compute Dispatch Index (\d+)", message)
        dispatch_index = int(m.group(1)) if m else None
        m = re.search(r"Global invocation ID \(x, y, z\) = \(\s*(\d+),\s*(\d+),\s*(\d+)\s*\)", message)
        invocation = tuple(int(v) for v in m.groups()) if m else None
        m = re.search(r"binding #?(\d+)", message)
        binding = int(m.group(1)) if m else None
        if PRINTF_ID.lower() in (message_id + message).lower():
            # the printed text: after the invocation id (verbose) or the message id, before the source information
            start = (re.search(r"Global invocation ID \(x, y, z\) = \([^)]*\)\s*", message)
                     or re.search(r"MessageID = 0x[0-9a-fA-F]+ \|\s*", message))
            body = message[start.end():] if start else message
            end = re.search(r"\s*(Unable to find SPIR-V OpLine|Debug shader printf message generated)", body)
            text = (body[:end.start()] if end else body).strip()
        dispatch = None
        if recording is not None:
            label, index, name = recording.attribute(dispatch_index, kernel)
            recording_label, dispatch, dispatch_index = recording.label, label, index
            kernel = kernel or name
            m = re.search(r"Shader Instruction Index = (\d+)", message)
            pipeline = recording.pipeline_of(index)
            if binding is None and m and pipeline is not None and pipeline.code is not None:  # GPU-AV names the instruction, not the binding
                binding = binding_at(pipeline.code, int(m.group(1)))
        else:
            recording_label = None
        return LayerMessage(text=text, severity=sev, message_id=message_id, recording=recording_label,
                            dispatch=dispatch, dispatch_index=dispatch_index, kernel=kernel, binding=binding,
                            invocation=invocation, objects=tuple(objects))

    def close(self):
        if self._messenger is not None:
            destroy = vk.vkGetInstanceProcAddr(self.handle, "vkDestroyDebugUtilsMessengerEXT")
            destroy(self.handle, self._messenger, None)
            self._messenger = None
        if self.handle is not None:
            vk.vkDestroyInstance(self.handle, None)
            self.handle = None


def _route_message(severity, types, data, user_data):
    """The process's one debug-utils callback: hands each message to the instance whose messenger it came from."""
    try:
        target = vk.ffi.from_handle(user_data)
    except Exception:  # no user data: the most recent validating instance
        target = next((i for i in reversed(instances()) if i.validation), None)
    return target._on_message(severity, types, data) if target is not None else 0


def filter_printf(messages, *, invocation=None, dispatch: str | None = None, kernel: str | None = None) -> list:
    """The printf messages of one global invocation id (int x or (x, y, z)), dispatch label and / or kernel."""
    if isinstance(invocation, int):
        invocation = (invocation, 0, 0)
    return [m for m in messages
            if (invocation is None or m.invocation == tuple(invocation))
            and (dispatch is None or m.dispatch == dispatch) and (kernel is None or m.kernel == kernel)]


_instances: dict[tuple, Instance] = {}
_instances_lock = threading.Lock()


def instance(validation: bool | None = None, modes=None, layer: str | None = None) -> Instance:
    """The process's instance for (validation, modes, layer); both default to the WORKBENCH_VALIDATION environment
    variable (1: the layer; "sync", "gpu", "printf" or a comma list of them: the layer with those modes). Any mode
    turns the layer on. `layer`: a folder holding another validation layer's manifest (default
    WORKBENCH_VALIDATION_LAYER; None: the system's), used only where validation is on."""
    env_on, env_modes = env_validation()
    if validation is None and modes is None:
        validation, modes = env_on, env_modes
    elif validation is None:
        validation = env_on
    modes = validation_modes(modes)
    validation = bool(validation) or bool(modes)
    layer = (str(layer) if layer is not None else env_layer()) if validation else None
    key = (validation, modes, layer)
    with _instances_lock:
        if key not in _instances:
            _instances[key] = Instance(validation, modes, layer)
        return _instances[key]


def instances() -> list[Instance]:
    """The instances this process has made (one per validation setting and set of modes)."""
    with _instances_lock:
        return list(_instances.values())


def validation_messages() -> list[str]:
    """Every message the validation layer reported to any instance of this process, in a new list."""
    with _instances_lock:
        return [m for inst in _instances.values() for m in inst.messages]


def validation_details() -> list[LayerMessage]:
    """The same messages, attributed (kernel, dispatch, binding, invocation where known)."""
    with _instances_lock:
        return [m for inst in _instances.values() for m in inst.details]


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    vendor: str
    vendor_id: int
    device_id: int
    device_type: str
    driver_name: str
    driver_info: str
    driver_version: int
    api_version: str
    subgroup_size: int
    timestamp_period_ns: float
    timestamp_valid_bits: int
    max_workgroup_size: tuple[int, int, int]
    max_workgroup_invocations: int
    max_workgroup_count: tuple[int, int, int]
    shared_memory_bytes: int
    max_storage_buffer_range: int
    max_push_constants_bytes: int
    max_image_dimension_3d: int
    max_image_dimension_2d: int
    features: dict = field(default_factory=dict)
    extensions: tuple = ()
    device_uuid: str = ""  # VkPhysicalDeviceIDProperties.deviceUUID, 32 hex digits (CUDA reports the same UUID)

    @property
    def is_cpu(self) -> bool:
        return self.device_type == "CPU"

    def summary(self) -> dict:
        """One flat row, for tables and DataFrame metadata."""
        row = {k: getattr(self, k) for k in (
            "index", "name", "vendor", "device_type", "driver_name", "driver_info", "api_version", "subgroup_size",
            "timestamp_period_ns", "max_workgroup_invocations", "shared_memory_bytes")}
        row.update({f"feature.{k}": v for k, v in self.features.items()})
        return row


def _query_features(physical_device, extensions):
    dot = vk.VkPhysicalDeviceShaderIntegerDotProductFeatures()
    f16i8 = vk.VkPhysicalDeviceShaderFloat16Int8Features(pNext=dot)
    s16 = vk.VkPhysicalDevice16BitStorageFeatures(pNext=f16i8)
    s8 = vk.VkPhysicalDevice8BitStorageFeatures(pNext=s16)
    head = s8
    stats = None
    if EXT_EXECUTABLE_PROPERTIES in extensions:
        stats = vk.VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR(pNext=s8)
        head = stats
    # Optional extensions the roofline probes use (clock reads, SM count, tensor cores): chained only where present.
    memory_model = None
    if "VK_KHR_vulkan_memory_model" in extensions:
        memory_model = head = vk.VkPhysicalDeviceVulkanMemoryModelFeatures(pNext=head)
    address = None  # buffer device addresses (PhysicalStorageBufferAddresses: pointers in push constants, buffers)
    if "VK_KHR_buffer_device_address" in extensions:
        address = head = vk.VkPhysicalDeviceBufferDeviceAddressFeatures(pNext=head)
    maintenance4 = None  # LocalSizeId (glslang's local_size_*_id at Vulkan 1.3) needs it
    if EXT_MAINTENANCE4 in extensions:
        maintenance4 = head = vk.VkPhysicalDeviceMaintenance4Features(pNext=head)
    optional = {}
    for ext, struct, fields in ((EXT_SHADER_CLOCK, "VkPhysicalDeviceShaderClockFeaturesKHR",
                                 {"shader_subgroup_clock": "shaderSubgroupClock",
                                  "shader_device_clock": "shaderDeviceClock"}),
                                (EXT_SM_BUILTINS, "VkPhysicalDeviceShaderSMBuiltinsFeaturesNV",
                                 {"sm_builtins": "shaderSMBuiltins"}),
                                (EXT_COOPERATIVE_MATRIX_NV, "VkPhysicalDeviceCooperativeMatrixFeaturesNV",
                                 {"cooperative_matrix_nv": "cooperativeMatrix"}),
                                (EXT_COOPERATIVE_MATRIX_KHR, "VkPhysicalDeviceCooperativeMatrixFeaturesKHR",
                                 {"cooperative_matrix_khr": "cooperativeMatrix"})):
        if ext in extensions:
            head = getattr(vk, struct)(pNext=head)
            optional.update({name: (head, field) for name, field in fields.items()})
    coop2 = None
    if EXT_COOPERATIVE_MATRIX2_NV in extensions:
        coop2 = cooperative_matrix2_struct(head)
        head = vk.ffi.cast("void*", coop2)
    features2 = vk.VkPhysicalDeviceFeatures2(pNext=head)
    vk.vkGetPhysicalDeviceFeatures2(physical_device, features2)
    core = features2.features
    extra = {name: bool(getattr(struct, field)) for name, (struct, field) in optional.items()}
    for name in ("shader_subgroup_clock", "shader_device_clock", "sm_builtins", "cooperative_matrix_nv",
                 "cooperative_matrix_khr"):
        extra.setdefault(name, False)
    extra["vulkan_memory_model"] = bool(memory_model.vulkanMemoryModel) if memory_model is not None else False
    extra["vulkan_memory_model_device_scope"] = (bool(memory_model.vulkanMemoryModelDeviceScope)
                                                 if memory_model is not None else False)
    extra["maintenance4"] = bool(maintenance4.maintenance4) if maintenance4 is not None else False
    extra["buffer_device_address"] = bool(address.bufferDeviceAddress) if address is not None else False
    extra["cooperative_matrix2_nv"] = coop2 is not None and all(
        coop2[4 + _COOPERATIVE_MATRIX2_OFFSETS[f]] for f in COOPERATIVE_MATRIX2_FIELDS)
    return {
        "integer_dot_product": bool(dot.shaderIntegerDotProduct),
        "storage_buffer_8bit": bool(s8.storageBuffer8BitAccess),
        "uniform_and_storage_buffer_8bit": bool(s8.uniformAndStorageBuffer8BitAccess),
        "storage_buffer_16bit": bool(s16.storageBuffer16BitAccess),
        "shader_float16": bool(f16i8.shaderFloat16),
        "shader_int8": bool(f16i8.shaderInt8),
        "shader_int16": bool(core.shaderInt16),
        "shader_int64": bool(core.shaderInt64),
        "pipeline_executable_properties": bool(stats.pipelineExecutableInfo) if stats is not None else False,
        **extra,
    }


def _describe(index: int, physical_device) -> DeviceInfo:
    extensions = tuple(sorted(e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(physical_device, None)))
    ids = vk.VkPhysicalDeviceIDProperties()
    driver = vk.VkPhysicalDeviceDriverProperties(pNext=ids)
    subgroup = vk.VkPhysicalDeviceSubgroupProperties(pNext=driver)
    props2 = vk.VkPhysicalDeviceProperties2(pNext=subgroup)
    vk.vkGetPhysicalDeviceProperties2(physical_device, props2)
    props = props2.properties
    limits = props.limits
    queues = vk.vkGetPhysicalDeviceQueueFamilyProperties(physical_device)
    compute_queue = next((q for q in queues if q.queueFlags & vk.VK_QUEUE_COMPUTE_BIT), None)
    return DeviceInfo(
        index=index, name=_text(props.deviceName), vendor=VENDORS.get(props.vendorID, f"{props.vendorID:#x}"),
        vendor_id=props.vendorID, device_id=props.deviceID,
        device_type=DEVICE_TYPES.get(props.deviceType, str(props.deviceType)),
        driver_name=_text(driver.driverName), driver_info=_text(driver.driverInfo),
        driver_version=props.driverVersion, api_version=_version(props.apiVersion),
        subgroup_size=subgroup.subgroupSize, timestamp_period_ns=float(limits.timestampPeriod),
        timestamp_valid_bits=compute_queue.timestampValidBits if compute_queue else 0,
        max_workgroup_size=tuple(limits.maxComputeWorkGroupSize),
        max_workgroup_invocations=limits.maxComputeWorkGroupInvocations,
        max_workgroup_count=tuple(limits.maxComputeWorkGroupCount),
        shared_memory_bytes=limits.maxComputeSharedMemorySize,
        max_storage_buffer_range=limits.maxStorageBufferRange,
        max_push_constants_bytes=limits.maxPushConstantsSize,
        max_image_dimension_3d=limits.maxImageDimension3D,
        max_image_dimension_2d=limits.maxImageDimension2D,
        features=_query_features(physical_device, extensions), extensions=extensions,
        device_uuid=bytes(ids.deviceUUID[i] for i in range(vk.VK_UUID_SIZE)).hex())


def list_devices(validation: bool | None = None) -> list[DeviceInfo]:
    """Every physical device the loader sees, described; creates no logical device."""
    inst = instance(validation)
    return [_describe(i, pd) for i, pd in enumerate(inst.physical_devices)]


def select_device(selector=None, devices: list[DeviceInfo] | None = None) -> DeviceInfo:
    """Pick by index or name substring (case-insensitive); default: WORKBENCH_DEVICE, else the first discrete or
    integrated GPU, else the first CPU device."""
    devices = list_devices() if devices is None else devices
    listing = "; ".join(f"[{d.index}] {d.name} ({d.device_type}, {d.driver_name})" for d in devices) or "none"
    if not devices:
        raise DeviceNotFoundError("no Vulkan device found: install a driver (Debian/Ubuntu: mesa-vulkan-drivers "
                                  "libvulkan1 for the lavapipe CPU device)")
    if selector is None or selector == "":
        selector = os.environ.get("WORKBENCH_DEVICE") or None
    if selector is None:
        for kinds in (("discrete GPU", "integrated GPU"), ("virtual GPU",), ("CPU",), ("other",)):
            for d in devices:
                if d.device_type in kinds:
                    return d
    text = str(selector).strip()
    if text.isdigit():
        index = int(text)
        if index < len(devices):
            return devices[index]
        raise DeviceNotFoundError(f"no Vulkan device with index {index}; devices: {listing}")
    matches = [d for d in devices if text.lower() in d.name.lower() or text.lower() == d.driver_name.lower()]
    if not matches:
        raise DeviceNotFoundError(f"no Vulkan device matches {text!r}; devices: {listing}")
    return matches[0]


def raw_enumerate(inst: Instance, physical_device, name: str, struct: str, stype: int | None) -> list:
    """Call an instance-level vkGetPhysicalDevice*Properties*(pd, &count, props) enumerator through its raw
    pointer, with sType set on every element (the binding's own wrapper leaves them zero)."""
    from vulkan import _vulkan as raw
    ptr = raw._callApi(vk.lib.vkGetInstanceProcAddr, inst.handle, name)
    if ptr == vk.ffi.NULL:
        return []
    fn = vk.ffi.cast("PFN_" + name, ptr)
    count = vk.ffi.new("uint32_t*")
    if fn(physical_device, count, vk.ffi.NULL) != vk.VK_SUCCESS or count[0] == 0:
        return []
    props = vk.ffi.new(f"{struct}[]", count[0])
    for i in range(count[0] if stype is not None else 0):
        props[i].sType = stype
    if fn(physical_device, count, props) != vk.VK_SUCCESS:
        return []
    return [props[i] for i in range(count[0])]


def cooperative_matrix2_struct(pnext, enable: bool = False):
    """VkPhysicalDeviceCooperativeMatrix2FeaturesNV as raw words (sType, pNext, 7 VkBool32), chained to `pnext`;
    `enable`: COOPERATIVE_MATRIX2_FIELDS set (for vkCreateDevice). Keep the returned buffer alive while chained."""
    words = vk.ffi.new("uint32_t[12]")
    words[0] = STYPE_COOPERATIVE_MATRIX2_FEATURES_NV
    if pnext is None:
        vk.ffi.cast("void**", words)[1] = vk.ffi.NULL
    else:  # the binding's structs are struct values (ffi.new(T*)[0]): chain their address
        is_struct = vk.ffi.typeof(pnext).kind == "struct"
        vk.ffi.cast("void**", words)[1] = vk.ffi.cast("void*", vk.ffi.addressof(pnext) if is_struct else pnext)
    for field in COOPERATIVE_MATRIX2_FIELDS if enable else ():
        words[4 + _COOPERATIVE_MATRIX2_OFFSETS[field]] = 1
    return words


def cooperative_matrix_flexible_properties(inst: Instance, physical_device) -> list[dict]:
    """VK_NV_cooperative_matrix2's flexible-dimension entries (vkGetPhysicalDeviceCooperativeMatrixFlexible-
    DimensionsPropertiesNV, through its raw pointer): one dict each with M, N, K (granularities), A, B, C, D,
    saturating, scope (2: workgroup) and invocations (the workgroup size it is for); [] where absent."""
    from vulkan import _vulkan as raw
    name = "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV"
    ptr = raw._callApi(vk.lib.vkGetInstanceProcAddr, inst.handle, name)
    if ptr == vk.ffi.NULL:
        return []
    fn = vk.ffi.cast("VkResult(*)(VkPhysicalDevice, uint32_t*, void*)", ptr)
    count = vk.ffi.new("uint32_t*")
    if fn(physical_device, count, vk.ffi.NULL) != vk.VK_SUCCESS or count[0] == 0:
        return []
    words = vk.ffi.new("uint32_t[]", 14 * count[0])  # 56-byte structs: sType (+4 pad), pNext, 10 uint32 fields
    for i in range(count[0]):
        words[14 * i] = STYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV
    if fn(physical_device, count, words) != vk.VK_SUCCESS:
        return []
    rows = []
    for i in range(count[0]):
        f = [words[14 * i + 4 + j] for j in range(10)]
        rows.append({"extension": "NV2", "M": f[0], "N": f[1], "K": f[2],
                     **{k: COMPONENT_TYPES.get(t, t) for k, t in zip("ABCD", f[3:7])},
                     "saturating": bool(f[7]), "scope": f[8], "invocations": f[9]})
    return rows


def cooperative_matrix_properties(inst: Instance, physical_device, extensions) -> list[dict]:
    """Every (M, N, K, A, B, C, D, scope) the driver lists, from the NV and the KHR extension where present (raw
    vkGetPhysicalDeviceCooperativeMatrixProperties* calls): one dict per entry, keys extension ("NV" / "KHR"),
    M, N, K, A, B, C, D (component types: "sint8", "sint32", ...) and scope (3: subgroup)."""
    rows = []
    for ext, stype, result in (("NV", vk.VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV, "DType"),
                               ("KHR", vk.VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR, "ResultType")):
        if f"VK_{ext}_cooperative_matrix" not in extensions:
            continue
        for p in raw_enumerate(inst, physical_device, f"vkGetPhysicalDeviceCooperativeMatrixProperties{ext}",
                               f"VkCooperativeMatrixProperties{ext}", stype):
            types = (p.AType, p.BType, p.CType, getattr(p, result))  # the NV struct says D, the KHR one Result
            rows.append({"extension": ext, "M": p.MSize, "N": p.NSize, "K": p.KSize,
                         **{k: COMPONENT_TYPES.get(t, t) for k, t in zip("ABCD", types)}, "scope": int(p.scope)})
    return rows


__all__ = ["DeviceInfo", "Instance", "instance", "list_devices", "select_device", "validation_messages",
           "MissingFeatureError"]
