#version 450
// planted bug (a shared-memory race): each invocation writes its element to shared memory and reads the element of
// the invocation 32 lanes away (another subgroup on 32-wide hardware). out[i] = in[i ^ 32] whatever the local size
// (a multiple of 64). Without BARRIER the read may come before the other subgroup's write: a race whose outcome
// depends on scheduling, so some runs are wrong and others right.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0) buffer Out { float out_data[]; };
layout(set = 0, binding = 1) buffer In { float in_data[]; };
shared float tile[gl_WorkGroupSize.x];
void main() {
  uint i = gl_GlobalInvocationID.x;
  uint l = gl_LocalInvocationID.x;
  tile[l] = in_data[i];
#ifdef BARRIER
  barrier();
#endif
  out_data[i] = tile[l ^ 32u];
}
