// Written here for the check's tests: names assembled as ET-VK's C++ assembles them.
void add_widget_node(ComputeGraph& graph, const ValueRef out, const Mode mode) {
  std::string kernel_name;
  kernel_name.reserve(64);
  switch (mode) {
    case Mode::kPlain:
      kernel_name = "widget";
      break;
    case Mode::kOther:
      kernel_name = "widget";  // the same family by another road
      break;
  }
  add_dtype_suffix(kernel_name, graph.dtype_of(out));
  add_storage_type_suffix(kernel_name, graph.storage_type_of(out));
  graph.add(VK_KERNEL_FROM_STR(kernel_name));
}

void add_unary_like_node(ComputeGraph& graph, const ValueRef out, const std::string& op_name) {
  std::string kernel_name(op_name);  // known at run time only
  add_dtype_suffix(kernel_name, graph.dtype_of(out));
  graph.add(VK_KERNEL_FROM_STR(kernel_name));
}
