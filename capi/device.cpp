// The C API: the devices present and their properties.
#include "internal.hpp"

#include <string>

using namespace capi;

// ---------------------------------------------------------------------------------------------------
// Devices

KE_API ke_status ke_device_list_create(ke_device_list** out) {
  return guard(__func__, [&] {
    need_out(out, "out");
    auto list = std::make_unique<ke_device_list>();
    for (ke::DeviceInfo& info : ke::list_devices()) {
      auto view = std::make_unique<ke_device_info>();
      view->info = std::move(info);
      list->devices.push_back(std::move(view));
    }
    give(out, std::move(list));
  });
}

KE_API ke_status ke_device_list_destroy(ke_device_list* list) {
  if (list && list->tag == Tag::device_list) {
    for (auto& d : list->devices) d->tag = Tag::dead;
  }
  return destroy(__func__, list);
}

KE_API ke_status ke_device_list_count(size_t* out, const ke_device_list* list) {
  return get_field(__func__, out, list, "list", [](const ke_device_list& l) { return l.devices.size(); });
}

KE_API ke_status ke_device_list_get(const ke_device_info** out, const ke_device_list* list, size_t index) {
  return guard(__func__, [&] {
    need_out(out, "out");
    *out = nth(need(list, "list")->devices, index, "device")->get();
  });
}

namespace {

template <class T, class F>
ke_status device_field(const char* function, T* out, const ke_device_info* info, F field) {
  return get_field(function, out, info, "info", [&](const ke_device_info& d) { return field(d.info); });
}

}  // namespace

KE_API ke_status ke_device_info_id(const char** out, const ke_device_info* info) {
  return device_field(__func__, out, info, [](const ke::DeviceInfo& d) { return d.id.c_str(); });
}
KE_API ke_status ke_device_info_kind(const char** out, const ke_device_info* info) {
  return device_field(__func__, out, info, [](const ke::DeviceInfo& d) { return d.kind.c_str(); });
}
KE_API ke_status ke_device_info_name(const char** out, const ke_device_info* info) {
  return device_field(__func__, out, info, [](const ke::DeviceInfo& d) { return d.name.c_str(); });
}
KE_API ke_status ke_device_info_compute_units(int* out, const ke_device_info* info) {
  return device_field(__func__, out, info, [](const ke::DeviceInfo& d) { return d.compute_units; });
}
KE_API ke_status ke_device_info_vector_bits(int* out, const ke_device_info* info) {
  return device_field(__func__, out, info, [](const ke::DeviceInfo& d) { return d.vector_bits; });
}
KE_API ke_status ke_device_info_peak_bytes_per_s(double* out, const ke_device_info* info) {
  return device_field(__func__, out, info, [](const ke::DeviceInfo& d) { return d.peak_bytes_per_s; });
}
KE_API ke_status ke_device_info_peak_flops_per_s(double* out, const ke_device_info* info) {
  return device_field(__func__, out, info, [](const ke::DeviceInfo& d) { return d.peak_flops_per_s; });
}
KE_API ke_status ke_device_info_property_count(size_t* out, const ke_device_info* info) {
  return device_field(__func__, out, info, [](const ke::DeviceInfo& d) { return d.properties.size(); });
}

KE_API ke_status ke_device_info_property(const char** key, const char** value, const ke_device_info* info,
                                         size_t index) {
  return guard(__func__, [&] {
    need_out(key, "key");
    need_out(value, "value");
    const auto it = nth(need(info, "info")->info.properties, index, "property");
    *key = it->first.c_str();
    *value = it->second.c_str();
  });
}
