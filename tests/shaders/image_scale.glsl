#version 450
// out texel = in texel * 2, on rgba32f storage images.
layout(local_size_x = 4, local_size_y = 4, local_size_z = 1) in;
layout(set = 0, binding = 0, rgba32f) uniform writeonly image3D out_image;
layout(set = 0, binding = 1, rgba32f) uniform readonly image3D in_image;
void main() {
  const ivec3 pos = ivec3(gl_GlobalInvocationID);
  if (any(greaterThanEqual(pos, imageSize(in_image)))) return;
  imageStore(out_image, pos, imageLoad(in_image, pos) * 2.0);
}
