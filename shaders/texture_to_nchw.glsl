#version 450
// Move a 3-D texture layout back to a float NCHW buffer: one thread per element.
#include "dispatch.glslh"
#include "indexing.glslh"

#ifndef IMAGE_FORMAT
#define IMAGE_FORMAT rgba32f
#endif

layout(set = 0, binding = 0) writeonly buffer Nchw { float nchw[]; };
layout(set = 0, binding = 1, IMAGE_FORMAT) uniform readonly image3D texels;
layout(set = 0, binding = 2) uniform TexMeta { TextureMetadata meta; };
layout(constant_id = 3) const int texture_layout = 0;

void main() {
  const int i = int(dispatch_index());
  const ivec4 sizes = meta.sizes;
  if (i >= sizes.x * sizes.y * sizes.z * sizes.w) {
    return;
  }
  const ivec4 tidx = ivec4(i % sizes.x, (i / sizes.x) % sizes.y, (i / (sizes.x * sizes.y)) % sizes.z,
                           i / (sizes.x * sizes.y * sizes.z));
  const ivec4 where = tidx_to_texel_pos(tidx, sizes, texture_layout);
  const vec4 texel = imageLoad(texels, where.xyz);
  nchw[i] = where.w == 0 ? texel.x : (where.w == 1 ? texel.y : (where.w == 2 ? texel.z : texel.w));
}
