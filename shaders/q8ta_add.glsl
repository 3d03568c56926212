#version 450
// Quantized add (ET-VK's q8ta_add): out = quantize(dequantize(a) + dequantize(b)), per-tensor parameters.
// a, b and out share one int8x4 layout and sizes, so the op is word-wise: one thread per int32 word, 4 lanes each
// (padding lanes compute a value too; readers of the layout never look at them).
// fp32 order, bit-exact with torch: da = float(a - za) * sa, db = float(b - zb) * sb, s = da + db (each rounded:
// `precise` keeps the compiler from fusing them), q = clamp(roundEven(fma(s, 1/so, zo)), -128, 127).
//
// Bindings: 0 output words, 1 a words, 2 b words.  Push constants below (28 bytes).

#extension GL_EXT_control_flow_attributes : require

#include "dispatch.glslh"
#include "int8x4.glslh"

layout(std430, set = 0, binding = 0) writeonly buffer Out { int t_out[]; };
layout(std430, set = 0, binding = 1) readonly buffer A { int t_a[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { int t_b[]; };

layout(push_constant) uniform Params {
  float a_scale;
  int a_zp;
  float b_scale;
  int b_zp;
  float inv_out_scale;
  int out_zp;
  int num_words;
};

void main() {
  const int w = int(dispatch_index());
  if (w >= num_words) {
    return;
  }
  const int wa = t_a[w];
  const int wb = t_b[w];
  ivec4 q;
  [[unroll]] for (int k = 0; k < 4; ++k) {
    precise float da = float(sext8(wa, k) - a_zp) * a_scale;
    precise float db = float(sext8(wb, k) - b_zp) * b_scale;
    precise float s = da + db;
    precise float v = fma(s, inv_out_scale, float(out_zp));
    q[k] = clamp(int(roundEven(v)), -128, 127);
  }
  t_out[w] = pack4x8(q);
}
