// Written here for the check's tests, shaped like ET-VK's suffix helpers.
void add_dtype_suffix(std::string& kernel_name, const ScalarType dtype) {
  switch (dtype) {
    case kFloat:
      kernel_name += "_float";
      break;
    case kHalf:
      kernel_name += "_half";
      break;
  }
}

void add_storage_type_suffix(std::string& kernel_name, const StorageType storage) {
  if (storage == kBuffer) {
    kernel_name += "_buffer";
  } else {
    kernel_name += "_texture3d";
  }
}
