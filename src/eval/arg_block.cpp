#include "eval/arg_block.hpp"

#include <algorithm>
#include <cstring>

#include "eval/buffer_ops.hpp"
#include "eval/buffers.hpp"

namespace kernelevolve::eval {

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = a + 0x9e3779b97f4a7c15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

ArgBlock::ArgBlock(Device& device, const Spec& spec, const Bindings& workload) {
  const std::size_t n = spec.params.size();
  buffers.resize(n);
  values.resize(n);
  pointers.resize(n);
  args.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Param& p = spec.params[i];
    values[i].fill(0);
    if (p.is_buffer()) {
      const auto count = static_cast<std::size_t>(spec.element_count(p, workload));
      buffers[i] = device.allocate(std::max<std::size_t>(1, count) * dtype_size(p.dtype));
      pointers[i] = buffers[i]->data();
      args[i] = &pointers[i];
      continue;
    }
    const double v = p.role == Role::size ? static_cast<double>(workload.at(p.name)) : p.value;
    switch (p.dtype) {
      case DType::f32: {
        float f = static_cast<float>(v);
        std::memcpy(values[i].data(), &f, 4);
        break;
      }
      case DType::f64: std::memcpy(values[i].data(), &v, 8); break;
      case DType::i32: {
        auto x = static_cast<std::int32_t>(v);
        std::memcpy(values[i].data(), &x, 4);
        break;
      }
      case DType::i8: {
        auto x = static_cast<std::int8_t>(v);
        std::memcpy(values[i].data(), &x, 1);
        break;
      }
      case DType::u8: {
        auto x = static_cast<std::uint8_t>(v);
        std::memcpy(values[i].data(), &x, 1);
        break;
      }
      case DType::f16: {
        auto x = eval::float_to_half(static_cast<float>(v));
        std::memcpy(values[i].data(), &x, 2);
        break;
      }
      case DType::bf16: {
        auto x = eval::float_to_bf16(static_cast<float>(v));
        std::memcpy(values[i].data(), &x, 2);
        break;
      }
      default: {
        auto x = static_cast<std::int64_t>(v);
        std::memcpy(values[i].data(), &x, 8);
      }
    }
    args[i] = values[i].data();
  }
}

void ArgBlock::poison(std::size_t i, DType dtype) { eval::poison(*buffers[i], dtype); }

LaunchDims launch_dims(const Spec& spec, const Bindings& workload, const Bindings& tunables) {
  LaunchDims dims;
  if (!spec.launch) return dims;
  const Bindings names = spec.bindings(workload, tunables);
  for (int d = 0; d < 3; ++d) {
    dims.grid[d] = spec.launch->grid[d].eval(names);
    dims.block[d] = spec.launch->block[d].eval(names);
  }
  dims.shared_bytes = spec.launch->shared_bytes.eval(names);
  return dims;
}

}  // namespace kernelevolve::eval
