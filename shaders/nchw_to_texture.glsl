#version 450
// Move a float NCHW buffer into a 3-D texture layout: one thread per texel, up to 4 elements along the packed dim.
#include "dispatch.glslh"
#include "indexing.glslh"

#ifndef IMAGE_FORMAT
#define IMAGE_FORMAT rgba32f
#endif

layout(set = 0, binding = 0, IMAGE_FORMAT) uniform writeonly image3D texels;
layout(set = 0, binding = 1) readonly buffer Nchw { float nchw[]; };
layout(set = 0, binding = 2) uniform TexMeta { TextureMetadata meta; };
layout(constant_id = 3) const int texture_layout = 0;

void main() {
  const ivec3 pos = ivec3(gl_GlobalInvocationID);
  if (any(greaterThanEqual(pos, imageSize(texels)))) {
    return;
  }
  const ivec4 sizes = meta.sizes;
  vec4 texel = vec4(0.0);
  for (int comp = 0; comp < 4; ++comp) {
    const ivec4 tidx = texel_pos_to_tidx(pos, comp, sizes, texture_layout);
    if (tidx_in_bounds(tidx, sizes)) {
      texel[comp] = nchw[((tidx.w * sizes.z + tidx.z) * sizes.y + tidx.y) * sizes.x + tidx.x];
    }
  }
  imageStore(texels, pos, texel);
}
