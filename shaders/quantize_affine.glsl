#version 450
// Block-wise affine quantize (torchao's quantize_affine, zero-point domain INT):
//   q = int(clamp(roundEven(x * inv_scale[b]) + float(zp[b]), float(quant_min), float(quant_max)))
// where b is the block of the element (include/affine_quant.glslh: W fastest, i.e. a torch scale tensor of shape
// [nbN, nbC, nbH, nbW] stored contiguous, ET-VK's block-id order).  inv_scale = 1.0f / max(scale, 1e-7f) is computed by the host in fp32
// (the same IEEE division the torch reference does), so the GPU's division precision never enters; x * inv_scale is
// one correctly rounded fp32 multiply, roundEven is round-half-to-even like torch.round, the zero point is added and
// the clamp done in fp32 exactly as torch does (then the cast).
//
// Variants (quantize_affine.yaml): TEXTURE (0: storage buffers, 1: 3-D storage images) x HALF (fp16 input:
// float16_t[] / rgba16f) x PACK8 (buffers only; 1: int8 / uint8 output packed 4 per int32 word, lane k = bits
// 8k..8k+7 = linear element 4*word + k; 0: one int32 per element).  Texture outputs are rgba32i, one int per
// component (any output dtype).
// Bindings: 0 output, 1 input, 2 inv_scale (float[], one per block), 3 zero_point (int[], one per block),
// 4 metadata (BufferMetadata / TextureMetadata; input and output share layout and sizes).
// Spec constants: 3 the hashed layout of both tensors.  Push constants: block geometry and the quant range.

#extension GL_EXT_control_flow_attributes : require

#include "dispatch.glslh"
#include "half.glslh"
#include "indexing.glslh"
#include "affine_quant.glslh"

layout(std430, set = 0, binding = 2) readonly buffer InvScales { float t_inv_scale[]; };

int quantize_one(float x, ivec4 tidx) {
  const int b = block_id(tidx);
  float v = roundEven(x * t_inv_scale[b]) + float(t_zero_point[b]);
  v = clamp(v, float(quant_min), float(quant_max));
  return int(v);
}

#if !TEXTURE  // buffers

BUFFER_IO(int, T)

void main() {
  const int i = int(dispatch_index());
  const int numel = meta_numel(meta);  // float buffers: no padding
#if PACK8
  // One thread per output word: linear elements 4i .. 4i+3 (the input's own dim order), padding lanes 0.
  if (4 * i >= numel) {
    return;
  }
  int word = 0;
  [[unroll]] for (int k = 0; k < 4; ++k) {
    const int e = 4 * i + k;
    if (e < numel) {
      const int q = quantize_one(float(t_in[e]), linear_idx_to_tidx(meta, e, hl));
      word |= (q & 0xFF) << (8 * k);
    }
  }
  t_out[i] = word;
#else
  if (i >= numel) {
    return;
  }
  t_out[i] = quantize_one(float(t_in[i]), linear_idx_to_tidx(meta, i, hl));
#endif
}

#else  // textures

layout(set = 0, binding = 0, rgba32i) uniform writeonly iimage3D t_out;
layout(set = 0, binding = 1, FLOAT_FORMAT) uniform readonly image3D t_in;

AFFINE_TEXTURE_MAIN(vec4, ivec4, quantize_one)

#endif
