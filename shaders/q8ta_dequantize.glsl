#version 450
// int8x4 (any packed-int8 layout) -> fp32 buffer (any float buffer layout): x = float(q - zp) * scale.
// One thread per output element; each reads the word holding its element and extracts the lane.
// The first stage of the decomposed pixel-shuffle chain (dequantize -> float pixel shuffle -> quantize).
// Bindings: 0 output floats, 1 input words, 2 output BufferMetadata, 3 input BufferMetadata.
// Spec constants: 3 input layout (int8), 4 output layout (float).  Push constants: float scale, int zp.

#include "dispatch.glslh"
#include "indexing.glslh"
#include "int8x4.glslh"

layout(constant_id = 3) const int in_layout = 0x44023102;
layout(constant_id = 4) const int out_layout = 0x11103210;

BUFFER_IO(float, int)
BUFFER_IO_METADATA

layout(push_constant) uniform Params {
  float scale;
  int zp;
} p;

void main() {
  const int i = int(dispatch_index());
  if (i >= meta_numel(out_meta)) {
    return;
  }
  const ivec4 tidx = linear_idx_to_tidx(out_meta, i, out_layout);
  const int b = tidx_to_byte_idx(in_meta, tidx, in_layout);
  const int q = sext8(t_in[b >> 2], b & 3);
  precise float x = float(q - p.zp) * p.scale;
  t_out[i] = x;
}
