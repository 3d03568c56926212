"""A Vulkan layer written here that hides device extensions from a program: ``VK_LAYER_WORKBENCH_hide_extensions``.

    from workbench.toolchain import hide_layer
    env = hide_layer.environment(["VK_KHR_push_descriptor"])   # VK_LAYER_PATH, VK_INSTANCE_LAYERS and the list
    subprocess.run(program, env={**os.environ, **env})          # the program sees no VK_KHR_push_descriptor

    python -m workbench.toolchain.hide_layer build               # compile it now (the first `environment` does)

Why
    GFXReconstruct 1.0.5's ``--dump-resources`` (and its main branch of August 2026) follows descriptor sets and
    ``vkCmdPushDescriptorSet*``, not pushes through a descriptor update template
    (``vkCmdPushDescriptorSetWithTemplate*``), which is how ncnn binds every dispatch on a device with
    ``VK_KHR_push_descriptor``. Without that extension ncnn writes descriptor sets through update templates and
    binds them, which the dumps follow. ``workbench capture run --hide-extension NAME`` runs the program under this
    layer (below the capture layer, which records the program's own calls); the capture's manifest keeps the names.

What it does
    ``vkEnumerateDeviceExtensionProperties`` (no layer name) returns the driver's list less the names in
    ``$WORKBENCH_HIDE_EXTENSIONS`` (comma-separated); ``vkCreateDevice`` drops those names from the enabled list; every
    other call goes straight down the chain (the layer's ``vkGetDeviceProcAddr`` returns the next one's pointers). It
    keeps per-instance and per-device state by dispatch key, so several instances and devices work.

The C source is this module's :data:`SOURCE`, compiled with ``cc`` once into ``~/.cache/workbench/hide-layer/<hash>/``
(``$WORKBENCH_HIDE_LAYER_DIR``) beside its manifest; it needs no Vulkan headers (the few types it uses are declared
in it, as the loader's interface defines them).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

LAYER_NAME = "VK_LAYER_WORKBENCH_hide_extensions"
LIST_VARIABLE = "WORKBENCH_HIDE_EXTENSIONS"
LIBRARY = "libVkLayer_workbench_hide_extensions.so"
MANIFEST = "VkLayer_workbench_hide_extensions.json"

SOURCE = r"""
/* VK_LAYER_WORKBENCH_hide_extensions: hides the device extensions named in $WORKBENCH_HIDE_EXTENSIONS. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

typedef int32_t VkResult;
typedef struct VkInstance_T *VkInstance;
typedef struct VkPhysicalDevice_T *VkPhysicalDevice;
typedef struct VkDevice_T *VkDevice;
typedef void (*PFN_vkVoidFunction)(void);
typedef PFN_vkVoidFunction (*PFN_vkGetInstanceProcAddr)(VkInstance, const char *);
typedef PFN_vkVoidFunction (*PFN_vkGetDeviceProcAddr)(VkDevice, const char *);
typedef PFN_vkVoidFunction (*PFN_GetPhysicalDeviceProcAddr)(VkInstance, const char *);
typedef struct { char extensionName[256]; uint32_t specVersion; } VkExtensionProperties;
typedef struct { int32_t sType; const void *pNext; } BaseIn;
typedef VkResult (*PFN_vkCreateInstance)(const void *, const void *, VkInstance *);
typedef void (*PFN_vkDestroyInstance)(VkInstance, const void *);
typedef VkResult (*PFN_vkCreateDevice)(VkPhysicalDevice, const void *, const void *, VkDevice *);
typedef void (*PFN_vkDestroyDevice)(VkDevice, const void *);
typedef VkResult (*PFN_vkEnumerateDeviceExtensionProperties)(VkPhysicalDevice, const char *, uint32_t *,
                                                              VkExtensionProperties *);
/* VkDeviceCreateInfo, as the API defines it (x86_64 / aarch64 layout) */
typedef struct {
  int32_t sType; const void *pNext; uint32_t flags; uint32_t queueCreateInfoCount; const void *pQueueCreateInfos;
  uint32_t enabledLayerCount; const char *const *ppEnabledLayerNames; uint32_t enabledExtensionCount;
  const char *const *ppEnabledExtensionNames; const void *pEnabledFeatures;
} DeviceCreateInfo;
/* vk_layer.h: VkLayerInstanceCreateInfo / VkLayerDeviceCreateInfo with function VK_LAYER_LINK_INFO */
enum { LOADER_INSTANCE_CREATE_INFO = 47, LOADER_DEVICE_CREATE_INFO = 48, LAYER_LINK_INFO = 0, VK_INCOMPLETE = 5,
       VK_ERROR_INITIALIZATION_FAILED = -3, VK_ERROR_OUT_OF_HOST_MEMORY = -1 };
typedef struct InstanceLink { struct InstanceLink *pNext; PFN_vkGetInstanceProcAddr gipa;
                              PFN_GetPhysicalDeviceProcAddr gpdpa; } InstanceLink;
typedef struct { int32_t sType; const void *pNext; int32_t function; InstanceLink *link; } InstanceChain;
typedef struct DeviceLink { struct DeviceLink *pNext; PFN_vkGetInstanceProcAddr gipa;
                            PFN_vkGetDeviceProcAddr gdpa; } DeviceLink;
typedef struct { int32_t sType; const void *pNext; int32_t function; DeviceLink *link; } DeviceChain;
typedef struct { int32_t sType; void *pNext; uint32_t version; PFN_vkGetInstanceProcAddr gipa;
                 PFN_vkGetDeviceProcAddr gdpa; PFN_GetPhysicalDeviceProcAddr gpdpa; } Negotiate;

#define SLOTS 64
/* the next layer's functions are looked up while vkCreateInstance runs: afterwards the loader's terminator answers
   from the instance's dispatch table, whose entries are then this layer's own */
typedef struct { void *key; VkInstance instance; PFN_vkGetInstanceProcAddr gipa; PFN_vkCreateDevice create_device;
                 PFN_vkDestroyInstance destroy; PFN_vkEnumerateDeviceExtensionProperties enumerate; } InstanceSlot;
typedef struct { void *key; PFN_vkGetDeviceProcAddr gdpa; } DeviceSlot;
static InstanceSlot instances[SLOTS];
static DeviceSlot devices[SLOTS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *key_of(const void *dispatchable) { return dispatchable ? *(void *const *)dispatchable : NULL; }

static InstanceSlot *instance_slot(void *key) {
  for (int i = 0; i < SLOTS; i++) if (instances[i].key && instances[i].key == key) return &instances[i];
  return NULL;
}
static DeviceSlot *device_slot(void *key) {
  for (int i = 0; i < SLOTS; i++) if (devices[i].key && devices[i].key == key) return &devices[i];
  return NULL;
}

static int hidden(const char *name) {
  const char *list = getenv("WORKBENCH_HIDE_EXTENSIONS");
  size_t n = strlen(name);
  while (list && *list) {
    const char *end = strchr(list, ',');
    size_t len = end ? (size_t)(end - list) : strlen(list);
    if (len == n && strncmp(list, name, n) == 0) return 1;
    list = end ? end + 1 : NULL;
  }
  return 0;
}

static VkResult hide_CreateInstance(const void *info, const void *alloc, VkInstance *out) {
  const InstanceChain *chain = (const InstanceChain *)((const BaseIn *)info)->pNext;
  while (chain && !(chain->sType == LOADER_INSTANCE_CREATE_INFO && chain->function == LAYER_LINK_INFO))
    chain = (const InstanceChain *)chain->pNext;
  if (!chain || !chain->link) return VK_ERROR_INITIALIZATION_FAILED;
  PFN_vkGetInstanceProcAddr gipa = chain->link->gipa;
  ((InstanceChain *)chain)->link = chain->link->pNext;
  PFN_vkCreateInstance next = (PFN_vkCreateInstance)gipa(NULL, "vkCreateInstance");
  if (!next) return VK_ERROR_INITIALIZATION_FAILED;
  VkResult result = next(info, alloc, out);
  if (result != 0) return result;
  pthread_mutex_lock(&lock);
  InstanceSlot *slot = instance_slot(NULL);
  for (int i = 0; !slot && i < SLOTS; i++) if (!instances[i].key) slot = &instances[i];
  if (slot) {
    slot->key = key_of(*out); slot->instance = *out; slot->gipa = gipa;
    slot->create_device = (PFN_vkCreateDevice)gipa(*out, "vkCreateDevice");
    slot->destroy = (PFN_vkDestroyInstance)gipa(*out, "vkDestroyInstance");
    slot->enumerate = (PFN_vkEnumerateDeviceExtensionProperties)gipa(*out, "vkEnumerateDeviceExtensionProperties");
  }
  pthread_mutex_unlock(&lock);
  return slot ? 0 : VK_ERROR_OUT_OF_HOST_MEMORY;
}

static void hide_DestroyInstance(VkInstance instance, const void *alloc) {
  pthread_mutex_lock(&lock);
  InstanceSlot *slot = instance_slot(key_of(instance));
  PFN_vkDestroyInstance next = slot ? slot->destroy : NULL;
  if (slot) memset(slot, 0, sizeof *slot);
  pthread_mutex_unlock(&lock);
  if (next) next(instance, alloc);
}

static VkResult hide_CreateDevice(VkPhysicalDevice gpu, const void *info, const void *alloc, VkDevice *out) {
  const DeviceChain *chain = (const DeviceChain *)((const BaseIn *)info)->pNext;
  while (chain && !(chain->sType == LOADER_DEVICE_CREATE_INFO && chain->function == LAYER_LINK_INFO))
    chain = (const DeviceChain *)chain->pNext;
  if (!chain || !chain->link) return VK_ERROR_INITIALIZATION_FAILED;
  PFN_vkGetDeviceProcAddr gdpa = chain->link->gdpa;
  ((DeviceChain *)chain)->link = chain->link->pNext;
  pthread_mutex_lock(&lock);
  InstanceSlot *islot = instance_slot(key_of(gpu));
  PFN_vkCreateDevice next = islot ? islot->create_device : NULL;
  pthread_mutex_unlock(&lock);
  if (!next) return VK_ERROR_INITIALIZATION_FAILED;
  /* the enabled extensions less the hidden ones (a program that asks for one anyway gets a device without it) */
  DeviceCreateInfo copy = *(const DeviceCreateInfo *)info;
  const char **names = calloc(copy.enabledExtensionCount + 1, sizeof *names);
  if (!names) return VK_ERROR_OUT_OF_HOST_MEMORY;
  uint32_t kept = 0;
  for (uint32_t i = 0; i < copy.enabledExtensionCount; i++)
    if (!hidden(copy.ppEnabledExtensionNames[i])) names[kept++] = copy.ppEnabledExtensionNames[i];
  copy.enabledExtensionCount = kept;
  copy.ppEnabledExtensionNames = names;
  VkResult result = next(gpu, &copy, alloc, out);
  free(names);
  if (result != 0) return result;
  pthread_mutex_lock(&lock);
  DeviceSlot *slot = NULL;
  for (int i = 0; !slot && i < SLOTS; i++) if (!devices[i].key) slot = &devices[i];
  if (slot) { slot->key = key_of(*out); slot->gdpa = gdpa; }
  pthread_mutex_unlock(&lock);
  return slot ? 0 : VK_ERROR_OUT_OF_HOST_MEMORY;
}

static void hide_DestroyDevice(VkDevice device, const void *alloc) {
  pthread_mutex_lock(&lock);
  DeviceSlot *slot = device_slot(key_of(device));
  PFN_vkGetDeviceProcAddr gdpa = slot ? slot->gdpa : NULL;
  if (slot) memset(slot, 0, sizeof *slot);
  pthread_mutex_unlock(&lock);
  PFN_vkDestroyDevice next = gdpa ? (PFN_vkDestroyDevice)gdpa(device, "vkDestroyDevice") : NULL;
  if (next) next(device, alloc);
}

static VkResult hide_EnumerateDeviceExtensionProperties(VkPhysicalDevice gpu, const char *layer, uint32_t *count,
                                                        VkExtensionProperties *props) {
  pthread_mutex_lock(&lock);
  InstanceSlot *slot = instance_slot(key_of(gpu));
  PFN_vkEnumerateDeviceExtensionProperties next = slot ? slot->enumerate : NULL;
  pthread_mutex_unlock(&lock);
  if (layer && strcmp(layer, "VK_LAYER_WORKBENCH_hide_extensions") == 0) { *count = 0; return 0; }
  if (!next) return VK_ERROR_INITIALIZATION_FAILED;
  if (layer) return next(gpu, layer, count, props);
  uint32_t all = 0;
  VkResult result = next(gpu, NULL, &all, NULL);
  if (result != 0) return result;
  VkExtensionProperties *found = calloc(all ? all : 1, sizeof *found);
  if (!found) return VK_ERROR_OUT_OF_HOST_MEMORY;
  result = next(gpu, NULL, &all, found);
  if (result != 0 && result != VK_INCOMPLETE) { free(found); return result; }
  uint32_t kept = 0;
  for (uint32_t i = 0; i < all; i++)
    if (!hidden(found[i].extensionName)) found[kept++] = found[i];
  if (!props) { *count = kept; free(found); return 0; }
  uint32_t n = *count < kept ? *count : kept;
  memcpy(props, found, n * sizeof *found);
  *count = n;
  free(found);
  return n < kept ? VK_INCOMPLETE : 0;
}

static PFN_vkVoidFunction hide_GetDeviceProcAddr(VkDevice device, const char *name);

static PFN_vkVoidFunction hide_GetInstanceProcAddr(VkInstance instance, const char *name) {
  if (!strcmp(name, "vkGetInstanceProcAddr")) return (PFN_vkVoidFunction)hide_GetInstanceProcAddr;
  if (!strcmp(name, "vkCreateInstance")) return (PFN_vkVoidFunction)hide_CreateInstance;
  if (!strcmp(name, "vkDestroyInstance")) return (PFN_vkVoidFunction)hide_DestroyInstance;
  if (!strcmp(name, "vkCreateDevice")) return (PFN_vkVoidFunction)hide_CreateDevice;
  if (!strcmp(name, "vkGetDeviceProcAddr")) return (PFN_vkVoidFunction)hide_GetDeviceProcAddr;
  if (!strcmp(name, "vkDestroyDevice")) return (PFN_vkVoidFunction)hide_DestroyDevice;
  if (!strcmp(name, "vkEnumerateDeviceExtensionProperties"))
    return (PFN_vkVoidFunction)hide_EnumerateDeviceExtensionProperties;
  if (!instance) return NULL;
  pthread_mutex_lock(&lock);
  InstanceSlot *slot = instance_slot(key_of(instance));
  PFN_vkGetInstanceProcAddr gipa = slot ? slot->gipa : NULL;
  pthread_mutex_unlock(&lock);
  return gipa ? gipa(instance, name) : NULL;
}

static PFN_vkVoidFunction hide_GetDeviceProcAddr(VkDevice device, const char *name) {
  if (!strcmp(name, "vkGetDeviceProcAddr")) return (PFN_vkVoidFunction)hide_GetDeviceProcAddr;
  if (!strcmp(name, "vkDestroyDevice")) return (PFN_vkVoidFunction)hide_DestroyDevice;
  if (!device) return NULL;
  pthread_mutex_lock(&lock);
  DeviceSlot *slot = device_slot(key_of(device));
  PFN_vkGetDeviceProcAddr gdpa = slot ? slot->gdpa : NULL;
  pthread_mutex_unlock(&lock);
  return gdpa ? gdpa(device, name) : NULL;
}

__attribute__((visibility("default"))) VkResult vkNegotiateLoaderLayerInterfaceVersion(Negotiate *n) {
  if (!n) return VK_ERROR_INITIALIZATION_FAILED;
  if (n->version > 2) n->version = 2;
  n->gipa = hide_GetInstanceProcAddr;
  n->gdpa = hide_GetDeviceProcAddr;
  n->gpdpa = NULL;
  return 0;
}
"""


class HideLayerError(RuntimeError):
    """The layer could not be built: one line saying what was expected and what happened."""


def cache_dir() -> Path:
    digest = hashlib.sha256(SOURCE.encode()).hexdigest()[:12]
    root = os.environ.get("WORKBENCH_HIDE_LAYER_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "workbench" / "hide-layer") / digest


def build() -> Path:
    """Compile the layer once; returns the folder holding it and its manifest (VK_LAYER_PATH)."""
    folder = cache_dir()
    if (folder / LIBRARY).is_file() and (folder / MANIFEST).is_file():
        return folder
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        raise HideLayerError("expected a C compiler (cc, or $CC) to build the extension-hiding layer, found none "
                             "(apt-get install gcc)")
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "hide_extensions.c"
    source.write_text(SOURCE)
    partial = folder / (LIBRARY + ".part")
    result = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-o", str(partial),
                             str(source), "-lpthread"], capture_output=True, text=True)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise HideLayerError(f"expected {compiler} to compile the extension-hiding layer, it failed: {last}")
    partial.replace(folder / LIBRARY)
    (folder / MANIFEST).write_text(json.dumps({
        "file_format_version": "1.1.2",
        "layer": {"name": LAYER_NAME, "type": "GLOBAL", "library_path": f"./{LIBRARY}", "api_version": "1.3.0",
                  "implementation_version": "1",
                  "description": "the workbench's layer hiding the device extensions in $WORKBENCH_HIDE_EXTENSIONS"},
    }, indent=2) + "\n")
    return folder


def check_names(names) -> list[str]:
    """Extension names as given (a list, or comma-separated strings) → a list; a one-line error for a bad one."""
    found = []
    for name in names or ():
        for part in str(name).split(","):
            part = part.strip()
            if not part:
                continue
            if not part.startswith("VK_") or not part.replace("_", "").isalnum():
                raise HideLayerError(f"expected a Vulkan extension name such as VK_KHR_push_descriptor, got {part!r}")
            found.append(part)
    return list(dict.fromkeys(found))


def environment(names, base: dict | None = None) -> dict:
    """The variables that put the layer first in every instance the program makes, hiding `names`: VK_LAYER_PATH
    (the layer's folder first), VK_INSTANCE_LAYERS (the layer first) and the list. Builds the layer on first use."""
    names = check_names(names)
    base = dict(os.environ if base is None else base)
    folder = build()
    paths = [str(folder)] + [p for p in base.get("VK_LAYER_PATH", "").split(os.pathsep) if p and p != str(folder)]
    layers = [LAYER_NAME] + [l for l in base.get("VK_INSTANCE_LAYERS", "").split(os.pathsep) if l and l != LAYER_NAME]
    return {"VK_LAYER_PATH": os.pathsep.join(paths), "VK_INSTANCE_LAYERS": os.pathsep.join(layers),
            LIST_VARIABLE: ",".join(names)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.toolchain.hide_layer", description=__doc__.split("\n")[0])
    parser.add_argument("verb", choices=["build"])
    parser.parse_args(argv)
    try:
        print(build())
    except HideLayerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
