// Written here for the check's tests: the planted miss -- no template generates gadget_*.
void add_gadget_node(ComputeGraph& graph, const ValueRef out, const bool fast) {
  std::string kernel_name = "gadget";
  if (fast) {
    kernel_name += "_fast";
  }
  add_dtype_suffix(kernel_name, graph.dtype_of(out));
  graph.add(VK_KERNEL_FROM_STR(kernel_name));
}
