#version 450
// Copies a sampled image (read with texelFetch through a combined image sampler) into a storage image of the
// same size and format: 2-D or 3-D, float or int texels, chosen by the defines DIMS, SAMPLER_T, IMAGE_T, FORMAT.
layout(local_size_x = 4, local_size_y = 4, local_size_z = 1) in;
layout(set = 0, binding = 0, FORMAT) uniform writeonly IMAGE_T out_image;
layout(set = 0, binding = 1) uniform SAMPLER_T in_texture;
void main() {
#if DIMS == 3
  const ivec3 pos = ivec3(gl_GlobalInvocationID);
  if (any(greaterThanEqual(pos, textureSize(in_texture, 0)))) return;
#else
  const ivec2 pos = ivec2(gl_GlobalInvocationID.xy);
  if (any(greaterThanEqual(pos, textureSize(in_texture, 0)))) return;
#endif
  imageStore(out_image, pos, texelFetch(in_texture, pos, 0));
}
