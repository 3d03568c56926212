"""Errors of the Vulkan runtime: each names what was expected and what was given."""


class VulkanError(RuntimeError):
    """Base class of the runtime's errors."""


class DeviceNotFoundError(VulkanError):
    pass


class MissingFeatureError(VulkanError):
    pass


class BindingError(VulkanError):
    pass


class FenceTimeoutError(VulkanError):
    pass


class ClosedError(VulkanError):
    """A closed object (device, buffer, image, pipeline, recording) was used."""


class ValidationError(VulkanError):
    """The Khronos validation layer reported something."""
