"""The newer Mesa's recipe: what `workbench.vendors.mesa_newer` builds (constants only, so that
`workbench.vendors.mesa` can tell a complete newer build from its stamp without importing the builder). Why each
piece is there: see mesa_newer's docstring."""
from __future__ import annotations

from ..toolchain import debian_source

TESTED = "26.2.0-rc1"
SOURCE_ENV = "WORKBENCH_MESA_SOURCE"
# What a build may hold: Turnip alone (no LLVM needed, ~700 ninja steps) or Turnip + PanVK (PanVK needs mesa_clc,
# so LLVM and SPIRV-Tools, ~1,230 steps plus SPIRV-Tools); `setup(drivers=...)`, `--mesa-drivers`.
DRIVER_SETS = (("turnip",), ("turnip", "panvk"))
DRIVERS_BUILT = ("turnip", "panvk")  # the default
LLVM = "15"  # Debian 12's newest LLVM with libclc and LLVMSPIRVLib packages; Mesa's CLC needs >= 15
APT_EXTRA = ("cmake", f"llvm-{LLVM}-dev", f"libclang-{LLVM}-dev", f"clang-{LLVM}", f"libclc-{LLVM}-dev",
             f"libllvmspirvlib-{LLVM}-dev")  # PanVK only (needs_clc)
# Debian 13's, as workbench.toolchain.glslang builds them (SPIRV-Tools 2025.1 >= Mesa's 2024.1)
SPIRV_PACKAGES = {"spirv-headers": "1.6.1+1.4.309.0", "spirv-tools": "2025.1~rc1"}
SPIRV_CMAKE_OPTIONS = ("-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_INSTALL_LIBDIR=lib", "-DSPIRV_SKIP_TESTS=ON",
                       "-DSPIRV_SKIP_EXECUTABLES=ON", "-DSPIRV_WERROR=OFF", "-DBUILD_SHARED_LIBS=OFF",
                       "-DCMAKE_POSITION_INDEPENDENT_CODE=ON")
# Mesa's CLC links the validator, the optimizer and the linker (SPIRV-Tools.pc: -lSPIRV-Tools-opt -lSPIRV-Tools
# -lSPIRV-Tools-link)
SPIRV_TARGETS = ("SPIRV-Tools-static", "SPIRV-Tools-opt", "SPIRV-Tools-link", "spirv-tools-pkg-config")
_COMMON_OPTIONS = (
    "--wrap-mode=nodownload", "-Doptimization=2", "-Ddebug=false", "-Db_ndebug=true", "{vulkan}",
    "-Dfreedreno-kmds=msm", "-Dgallium-drivers=", "-Dtools=drm-shim", "-Dplatforms=", "{llvm}", "-Dglx=disabled",
    "-Degl=disabled", "-Dgbm=disabled", "-Dgles1=disabled", "-Dgles2=disabled", "-Dvalgrind=disabled",
    "-Dlibunwind=disabled", "-Dxmlconfig=disabled", "-Dvideo-codecs=",
)
_VULKAN = {"turnip": "freedreno", "panvk": "panfrost"}


def needs_clc(drivers) -> bool:
    """PanVK's precompiled kernels need Mesa's OpenCL C compiler: LLVM, libclc, LLVMSPIRVLib, SPIRV-Tools."""
    return "panvk" in drivers


def meson_options(drivers=DRIVERS_BUILT) -> tuple:
    out = []
    for option in _COMMON_OPTIONS:
        if option == "{vulkan}":
            out.append("-Dvulkan-drivers=" + ",".join(_VULKAN[d] for d in drivers))
        elif option == "{llvm}":
            # mesa_clc looks for Clang's OpenCL headers under clang/<major>/ at run time, where Debian 12's LLVM 15
            # keeps them under clang/15.0.6/: bundled into mesa_clc at build time instead (meson's path for < 16)
            out += ["-Dllvm=enabled", "-Dshared-llvm=enabled", "-Dmesa-clc-bundle-headers=enabled"] \
                if needs_clc(drivers) else ["-Dllvm=disabled"]
        else:
            out.append(option)
    return tuple(out)


MESON_OPTIONS = meson_options()
_A840 = ("   {\n      .gpu_id = 840,\n      .chip_id = 0x44050a31,\n      .gmem_size = 12 * 1024 * 1024,\n   },\n")
# (file, anchor, replacement): the anchor must occur once; an edit already made is left as it is.
SOURCE_EDITS = (
    ("src/freedreno/drm-shim/freedreno_noop.c",
     "      .gpu_id = 830,\n      .chip_id = 0x44050000,\n      .gmem_size = 12 * 1024 * 1024,\n   },\n",
     "      .gpu_id = 830,\n      .chip_id = 0x44050000,\n      .gmem_size = 12 * 1024 * 1024,\n   },\n" + _A840),
)
# the same ninja targets as the stable build's DRIVERS (workbench.vendors.mesa checks they agree)
_TARGETS = {"turnip": ("src/freedreno/vulkan/libvulkan_freedreno.so",
                       "src/freedreno/drm-shim/libfreedreno_noop_drm_shim.so"),
            "panvk": ("src/panfrost/vulkan/libvulkan_panfrost.so",
                      "src/panfrost/drm-shim/libpanfrost_noop_drm_shim.so")}


def targets(drivers=DRIVERS_BUILT) -> tuple:
    return tuple(t for d in drivers for t in _TARGETS[d])


def recipe_id(drivers=DRIVERS_BUILT) -> str:
    recipe = {"options": meson_options(drivers), "edits": SOURCE_EDITS, "targets": sorted(targets(drivers)),
              "layout": 1}
    if needs_clc(drivers):
        recipe.update(spirv=SPIRV_PACKAGES, spirv_targets=SPIRV_TARGETS, llvm=LLVM)
    return debian_source.recipe_id(recipe)


TARGETS = targets()
RECIPE_ID = recipe_id()
VARIANTS = {recipe_id(d): d for d in DRIVER_SETS}  # a stamp's recipe -> the drivers that build holds
TITLE = "the newer Mesa (Turnip + PanVK for Adreno 8xx and 5th-gen Mali)"
ENV_VAR = "WORKBENCH_MESA_NEWER_DIR"
FOLDER = "mesa-newer"
HOW = (f"Run `workbench compilers setup --mesa SOURCE` (or `./setup.sh compilers --mesa=SOURCE`) with a Mesa >= 26.2 "
       f"checkout, release tarball or git directory[@commit] (tested: {TESTED}); about 15 minutes on 2 cores")
