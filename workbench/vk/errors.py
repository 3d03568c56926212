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


class Closable:
    """An object that holds driver objects until close(); leaving a `with` block closes it."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class ValidationError(VulkanError):
    """The Khronos validation layer reported something."""


def driver_errors() -> tuple[type[Exception], ...]:
    """What a call into the driver can raise: the runtime's own errors and the binding's VkError (a driver that
    refuses a pipeline, for instance), for callers that carry on past a variant the driver refuses."""
    import vulkan
    return (VulkanError, vulkan.VkError)
