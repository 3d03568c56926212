#version 450 core
// Written here for the check's tests: nothing in the C++ requests this template (its body does not matter).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
void main() {}
