"""The Vulkan runtime: compile → pipeline → bind → dispatch → time, explicit and small.

Read in this order: discovery.py (instances, physical devices, DeviceInfo, selection), device.py (the logical Device),
memory.py (buffers, images), spirv.py (reflection), pipeline.py (compute pipelines, statistics), recording.py
(dispatch, timestamps), launch.py (the one launch path: a dispatch described as SPIR-V, constants, resources by
binding and size; its pipelines, recorded and run).
"""
from .device import Device, get_device, set_device
from .discovery import (DeviceInfo, LayerMessage, instance, instances, list_devices, select_device, validation_details,
                        validation_messages, validation_modes)
from .errors import (BindingError, ClosedError, DeviceNotFoundError, FenceTimeoutError, MissingFeatureError, ValidationError,
                     VulkanError)
from .launch import Launch, Launches
from .memory import Arena, Buffer, Image
from .pipeline import Pipeline
from .recording import Barrier, DispatchTiming, Recording, enum

__all__ = ["Arena", "Barrier", "enum", "Device", "get_device", "set_device", "DeviceInfo", "instance", "instances", "list_devices", "select_device",
           "validation_messages", "validation_details", "validation_modes", "LayerMessage",
           "BindingError", "ClosedError", "DeviceNotFoundError", "FenceTimeoutError", "MissingFeatureError", "ValidationError",
           "VulkanError", "Buffer", "Image", "Pipeline", "DispatchTiming", "Recording", "Launch", "Launches"]
