"""Shader compilers the workbench builds itself, cached outside the repository.

``workbench.compilers.glslang``: glslc (shaderc), glslangValidator, spirv-val and spirv-dis from Debian 13's source
packages, for ET-VK's whole GLSL dialect (GL_EXT_integer_dot_product, GL_KHR_cooperative_matrix), which Debian 12's
glslc lacks. ``workbench.shaders`` uses them when they are set up.

``workbench.compilers.mesa`` (+ ``mesa_worker``): Mesa 25.0.7's Turnip (Adreno), PanVK (Mali) and RADV (AMD) built
once and run on no-op kernel drivers: every statistic those compilers report, no GPU needed (`workbench compilers`).

``workbench.compilers.debian_source``: what those builds share -- Debian
13's source packages fetched (temporary apt configuration), checked and unpacked, the build steps logged into a
cache folder with a lock and a stamp.
"""
