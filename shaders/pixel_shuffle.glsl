#version 450
// Float pixel shuffle, (N, C*r*r, H, W) -> (N, C, H*r, W*r):
//   output element (n, c, oh, ow) = input element (n, c*r*r + (oh % r)*r + (ow % r), oh / r, ow / r).
//
// Variants (shaders/pixel_shuffle.yaml): TEXTURE (0: storage buffers, 1: 3-D storage images) x HALF (0: fp32,
// 1: fp16).  The layouts of both tensors are specialization constants (hashed layouts from workbench.layouts) and
// their sizes come from metadata UBOs, so one binary serves every dim order / packed dim.
//   buffers:  one thread per output element (linear index in the output's own dim order), one strided load.
//   textures: one thread per output texel; each of its <= 4 components along the packed dim reads one input texel.
// Bindings: 0 output, 1 input, 2 output metadata, 3 input metadata.  Spec constants (ET-VK's order for this op):
// 3 output layout, 4 input layout, 5 upscale factor r.

#extension GL_EXT_control_flow_attributes : require

#include "dispatch.glslh"
#include "half.glslh"
#include "indexing.glslh"

layout(constant_id = 3) const int out_layout = 0x11103210;
layout(constant_id = 4) const int in_layout = 0x11103210;
layout(constant_id = 5) const int r = 2;

#if TEXTURE

layout(set = 0, binding = 0, FLOAT_FORMAT) uniform writeonly image3D t_out;
layout(set = 0, binding = 1, FLOAT_FORMAT) uniform readonly image3D t_in;
layout(std140, set = 0, binding = 2) uniform OutMeta { TextureMetadata out_meta; };
layout(std140, set = 0, binding = 3) uniform InMeta { TextureMetadata in_meta; };

float comp_of_vec4(vec4 v, int i) {
  if (i == 0) {
    return v.x;
  } else if (i == 1) {
    return v.y;
  } else if (i == 2) {
    return v.z;
  }
  return v.w;
}

void main() {
  const ivec3 pos = ivec3(gl_GlobalInvocationID);
  if (any(greaterThanEqual(pos, imageSize(t_out)))) {
    return;
  }
  const ivec4 out_sizes = out_meta.sizes;
  const ivec4 in_sizes = in_meta.sizes;
  vec4 texel = vec4(0.0);
  // The 4 components of an output texel are 4 consecutive elements along the output's packed dim; the padding
  // components (past the packed dim's size) stay 0.
  [[unroll]] for (int k = 0; k < 4; ++k) {
    const ivec4 o = texel_pos_to_tidx(pos, k, out_sizes, out_layout);
    if (tidx_in_bounds(o, out_sizes)) {
      const ivec4 src = ivec4(o.x / r, o.y / r, o.z * (r * r) + (o.y % r) * r + (o.x % r), o.w);
      const ivec4 at = tidx_to_texel_pos(src, in_sizes, in_layout);
      texel[k] = comp_of_vec4(imageLoad(t_in, at.xyz), at.w);
    }
  }
  imageStore(t_out, pos, texel);
}

#else  // buffers

BUFFER_IO(T, T)
BUFFER_IO_METADATA

void main() {
  const int i = int(dispatch_index());
  if (i >= meta_numel(out_meta)) {  // float buffers have no padding: numel = logical numel
    return;
  }
  const ivec4 o = linear_idx_to_tidx(out_meta, i, out_layout);
  const ivec4 src = ivec4(o.x / r, o.y / r, o.z * (r * r) + (o.y % r) * r + (o.x % r), o.w);
  t_out[i] = t_in[tidx_to_linear_idx(in_meta, src)];
}

#endif
