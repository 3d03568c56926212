#version 450
// int8x4 (any packed-int8 layout) -> fp32 buffer (any float buffer layout): x = float(q - zp) * scale.
// One thread per output element; each reads the word holding its element and extracts the lane.
// The first stage of the decomposed pixel-shuffle chain (dequantize -> float pixel shuffle -> quantize).
// Bindings: 0 output floats, 1 input words, 2 output BufferMetadata, 3 input BufferMetadata.
// Spec constants: 3 input layout (int8), 4 output layout (float).  Push constants: float scale, int zp.

#include "indexing.glslh"
#include "int8x4.glslh"

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(constant_id = 3) const int in_layout = 0x44023102;
layout(constant_id = 4) const int out_layout = 0x11103210;

layout(std430, set = 0, binding = 0) writeonly buffer Out { float t_out[]; };
layout(std430, set = 0, binding = 1) readonly buffer In { int t_in[]; };
layout(std140, set = 0, binding = 2) uniform OutMeta { BufferMetadata out_meta; };
layout(std140, set = 0, binding = 3) uniform InMeta { BufferMetadata in_meta; };

layout(push_constant) uniform Params {
  float scale;
  int zp;
} p;

void main() {
  const int i = int(gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x) + gl_GlobalInvocationID.x);
  if (i >= meta_numel(out_meta)) {
    return;
  }
  const ivec4 tidx = linear_idx_to_tidx(out_meta, i, out_layout);
  const int b = tidx_to_byte_idx(in_meta, tidx, in_layout);
  const int q = sext8(t_in[b >> 2], b & 3);
  precise float x = float(q - p.zp) * p.scale;
  t_out[i] = x;
}
