"""Instances, physical devices (`DeviceInfo`: properties, features, extensions) and device selection."""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

import vulkan as vk

from .errors import DeviceNotFoundError, MissingFeatureError, ValidationError

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
EXT_COOPERATIVE_MATRIX_KHR = "VK_KHR_cooperative_matrix"
# VkComponentTypeNV / VkComponentTypeKHR share these values (0..10). The `vulkan` binding (1.3.275.1) leaves the
# *_NV names None, so they are spelled out here rather than read from it.
COMPONENT_TYPES = dict(enumerate(("float16", "float32", "float64", "sint8", "sint16", "sint32", "sint64", "uint8",
                                  "uint16", "uint32", "uint64")))


def _version(v: int) -> str:
    return f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def _text(value) -> str:
    return value if isinstance(value, str) else vk.ffi.string(value).decode(errors="replace")


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class Instance:
    """A VkInstance, with the validation layer and a messenger that collects its messages when asked for."""

    def __init__(self, validation: bool):
        self.validation = validation
        self.messages: list[str] = []
        layers = []
        extensions = []
        if validation:
            available = {p.layerName for p in vk.vkEnumerateInstanceLayerProperties()}
            if VALIDATION_LAYER not in available:
                raise ValidationError(
                    f"validation was requested but {VALIDATION_LAYER} is not installed "
                    f"(Debian/Ubuntu package: vulkan-validationlayers); available layers: {sorted(available)}")
            layers.append(VALIDATION_LAYER)
            extensions.append("VK_EXT_debug_utils")
        app_info = vk.VkApplicationInfo(pApplicationName="kernel-workbench", applicationVersion=1,
                                        pEngineName="workbench", engineVersion=1, apiVersion=API_VERSION)
        create_info = vk.VkInstanceCreateInfo(pApplicationInfo=app_info,
                                              enabledLayerCount=len(layers), ppEnabledLayerNames=layers,
                                              enabledExtensionCount=len(extensions),
                                              ppEnabledExtensionNames=extensions)
        self.handle = vk.vkCreateInstance(create_info, None)
        self._messenger = None
        if validation:
            self._callback = self._on_message  # keep the callback alive as long as the instance
            messenger_info = vk.VkDebugUtilsMessengerCreateInfoEXT(
                messageSeverity=vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT
                | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
                messageType=vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
                | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
                | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
                pfnUserCallback=self._callback)
            create = vk.vkGetInstanceProcAddr(self.handle, "vkCreateDebugUtilsMessengerEXT")
            self._messenger = create(self.handle, messenger_info, None)
        self.physical_devices = list(vk.vkEnumeratePhysicalDevices(self.handle))

    def _on_message(self, severity, types, data, user_data):
        message = vk.ffi.string(data.pMessage).decode(errors="replace")
        self.messages.append(message)
        log = os.environ.get("WORKBENCH_VALIDATION_LOG")
        if log:  # where no one can read `messages` (a kernel JupyterLab started), a file others can check
            try:
                with open(log, "a") as out:
                    out.write(f"[pid {os.getpid()}] {message}\n")
            except OSError:
                pass
        return 0

    def close(self):
        if self._messenger is not None:
            destroy = vk.vkGetInstanceProcAddr(self.handle, "vkDestroyDebugUtilsMessengerEXT")
            destroy(self.handle, self._messenger, None)
            self._messenger = None
        if self.handle is not None:
            vk.vkDestroyInstance(self.handle, None)
            self.handle = None


_instances: dict[bool, Instance] = {}
_instances_lock = threading.Lock()


def instance(validation: bool | None = None) -> Instance:
    """The process's instance; validation defaults to the WORKBENCH_VALIDATION environment variable."""
    if validation is None:
        validation = env_flag("WORKBENCH_VALIDATION")
    with _instances_lock:
        if validation not in _instances:
            _instances[validation] = Instance(validation)
        return _instances[validation]


def instances() -> list[Instance]:
    """The instances this process has made (at most one with validation and one without)."""
    with _instances_lock:
        return list(_instances.values())


def validation_messages() -> list[str]:
    """Every message the validation layer reported to any instance of this process, in a new list."""
    with _instances_lock:
        return [m for inst in _instances.values() for m in inst.messages]


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


def check_validation(inst: Instance, since: int = 0) -> None:
    if len(inst.messages) > since:
        raise ValidationError("validation layer reported:\n" + "\n".join(inst.messages[since:]))


__all__ = ["DeviceInfo", "Instance", "instance", "list_devices", "select_device", "validation_messages",
           "MissingFeatureError"]
