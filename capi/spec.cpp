// The C API: specs, loaded from a spec file or JSON text, or built field by field.
#include "internal.hpp"

#include <string>
#include <vector>

using namespace capi;

// ---------------------------------------------------------------------------------------------------
// Spec

KE_API ke_status ke_spec_load(ke_spec** out, const char* path) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const std::string file = need_nonempty(path, "path");
    // A file that is absent or unreadable is I/O (KE_ERROR_INTERNAL), not a bad spec as the loader says.
    need_readable_file(file, "the spec file");
    auto s = std::make_unique<ke_spec>();
    s->spec = ke::load_problem(file);  // a spec file, or a PyTorch problem (.py) derived for the CPU and C
    give(out, std::move(s));
  });
}

KE_API ke_status ke_spec_parse(ke_spec** out, const char* json, const char* path) {
  return guard(__func__, [&] {
    need_out(out, "out");
    auto s = std::make_unique<ke_spec>();
    s->spec = ke::parse_spec(need_string(json, "json"), path ? path : "");
    give(out, std::move(s));
  });
}

KE_API ke_status ke_spec_create(ke_spec** out, const char* name, const char* language, const char* entry) {
  return guard(__func__, [&] {
    need_out(out, "out");
    auto s = std::make_unique<ke_spec>();
    s->spec.name = need_nonempty(name, "name");
    const std::string lang = need_string(language, "language");
    const auto parsed = ke::parse_language(lang);
    if (!parsed) fail(KE_ERROR_BAD_SPEC, "language '" + lang + "' is not one of c, cpp, cuda, hip");
    s->spec.language = *parsed;
    s->spec.entry = need_nonempty(entry, "entry");
    give(out, std::move(s));
  });
}

KE_API ke_status ke_spec_destroy(ke_spec* spec) { return destroy(__func__, spec); }

namespace {

ke::DType need_dtype(const char* dtype) {
  const std::string text = need_string(dtype, "dtype");
  const auto parsed = ke::parse_dtype(text);
  if (!parsed) fail(KE_ERROR_BAD_SPEC, "dtype '" + text + "' is not one of f16, bf16, f32, f64, i8, u8, i32, i64");
  return *parsed;
}

// A param with its name and dtype checked, in the order a caller's mistakes are reported.
ke::Param named_param(const char* name, const char* dtype, ke::Role role) {
  ke::Param p;
  p.name = need_nonempty(name, "name");
  p.dtype = need_dtype(dtype);
  p.role = role;
  return p;
}

void add_param(ke_spec* spec, ke::Param param) {
  for (const ke::Param& p : spec->spec.params) {
    if (p.name == param.name) fail(KE_ERROR_BAD_SPEC, "params: '" + param.name + "' is already a param");
  }
  spec->spec.params.push_back(std::move(param));
  spec->changed();
}

}  // namespace

KE_API ke_status ke_spec_add_buffer(ke_spec* spec, const char* name, const char* dtype, const char* role,
                                    const char* const* shape, size_t rank) {
  return guard(__func__, [&] {
    need(spec, "spec");
    ke::Param p = named_param(name, dtype, ke::Role::in);
    const std::string role_text = need_string(role, "role");
    const auto parsed = ke::parse_role(role_text);
    if (!parsed || !(*parsed == ke::Role::in || *parsed == ke::Role::out || *parsed == ke::Role::inout)) {
      fail(KE_ERROR_BAD_SPEC, "params: '" + p.name + "': a buffer's role is in, out or inout, not '" + role_text + "'");
    }
    p.role = *parsed;
    need_array(shape, rank, "shape");
    if (rank == 0)
      fail(KE_ERROR_BAD_SPEC, "params: '" + p.name + "': a buffer needs a shape of at least one dimension");
    for (std::size_t i = 0; i < rank; ++i) p.shape.push_back(need_nonempty(shape[i], "shape[i]"));
    add_param(spec, std::move(p));
  });
}

KE_API ke_status ke_spec_add_size(ke_spec* spec, const char* name, const char* dtype) {
  return guard(__func__, [&] {
    need(spec, "spec");
    add_param(spec, named_param(name, dtype, ke::Role::size));
  });
}

KE_API ke_status ke_spec_add_scalar(ke_spec* spec, const char* name, const char* dtype, double value) {
  return guard(__func__, [&] {
    need(spec, "spec");
    ke::Param p = named_param(name, dtype, ke::Role::scalar);
    need_finite(value, "value");
    p.value = value;
    add_param(spec, std::move(p));
  });
}

KE_API ke_status ke_spec_add_workload(ke_spec* spec, const char* const* names, const int64_t* values, size_t count) {
  return guard(__func__, [&] {
    need(spec, "spec");
    need_array(names, count, "names");
    need_array(values, count, "values");
    ke::Bindings workload;
    for (std::size_t i = 0; i < count; ++i) {
      const std::string name = need_nonempty(names[i], "names[i]");
      if (!workload.emplace(name, values[i]).second) {
        fail(KE_ERROR_BAD_SPEC,
             "workloads[" + std::to_string(spec->spec.workloads.size()) + "]: '" + name + "' is given twice");
      }
    }
    spec->spec.workloads.push_back(std::move(workload));
    spec->changed();
  });
}

KE_API ke_status ke_spec_set_input(ke_spec* spec, const char* buffer, const char* distribution, double a, double b) {
  return guard(__func__, [&] {
    need(spec, "spec");
    const std::string name = need_nonempty(buffer, "buffer");
    const std::string dist = need_string(distribution, "distribution");
    ke::InputDist d;
    if (dist == "uniform") {
      d.kind = ke::InputDist::Kind::uniform;
    } else if (dist == "normal") {
      d.kind = ke::InputDist::Kind::normal;
    } else if (dist == "laplace") {
      d.kind = ke::InputDist::Kind::laplace;
    } else {
      fail(KE_ERROR_BAD_SPEC,
           "inputs." + name + ": distribution '" + dist + "' is not one of uniform, normal, laplace");
    }
    need_finite(a, "a");
    need_finite(b, "b");
    d.a = a;
    d.b = b;
    spec->spec.inputs[name] = d;
    spec->changed();
  });
}

KE_API ke_status ke_spec_set_tolerance(ke_spec* spec, double atol, double rtol) {
  return guard(__func__, [&] {
    need(spec, "spec");
    need_finite(atol, "atol");
    need_finite(rtol, "rtol");
    if (atol < 0 || rtol < 0) fail(KE_ERROR_BAD_SPEC, "tolerance: atol and rtol must not be negative");
    spec->spec.tolerance = ke::Tolerance{atol, rtol};
    spec->changed();
  });
}

namespace {

ke::SourceRef& source_of(ke_spec* spec, ke_source_kind kind) {
  switch (kind) {
    case KE_SOURCE_REFERENCE: return spec->spec.reference;
    case KE_SOURCE_SEED: return spec->spec.seed;
    case KE_SOURCE_MAX_ENUM: break;
  }
  fail(KE_ERROR_INVALID_ARGUMENT, "'kind' is not a ke_source_kind (" + std::to_string(static_cast<int>(kind)) + ")");
}

void set_source(ke_spec* spec, ke_source_kind kind, std::string text, std::string file, const char* language,
                const char* device) {
  ke::SourceRef& target = source_of(spec, kind);
  ke::SourceRef ref;
  ref.source = std::move(text);
  ref.file = std::move(file);
  if (language) {
    const auto parsed = ke::parse_language(language);
    if (!parsed) fail(KE_ERROR_BAD_SPEC, std::string("language '") + language + "' is not one of c, cpp, cuda, hip");
    ref.language = *parsed;
  }
  if (device) ref.device = need_nonempty(device, "device");
  target = std::move(ref);
  spec->changed();
}

}  // namespace

KE_API ke_status ke_spec_set_source(ke_spec* spec, ke_source_kind kind, const char* source, const char* language,
                                    const char* device) {
  return guard(__func__, [&] {
    need(spec, "spec");
    set_source(spec, kind, need_string(source, "source"), "", language, device);
  });
}

KE_API ke_status ke_spec_set_source_file(ke_spec* spec, ke_source_kind kind, const char* path, const char* language,
                                         const char* device) {
  return guard(__func__, [&] {
    need(spec, "spec");
    source_of(spec, kind);  // the kind is checked before the file is read
    const std::string file = need_nonempty(path, "path");
    set_source(spec, kind, read_file(file), file, language, device);
  });
}

KE_API ke_status ke_spec_add_tunable(ke_spec* spec, const char* name, const int64_t* values, size_t count) {
  return guard(__func__, [&] {
    need(spec, "spec");
    const std::string tunable = need_nonempty(name, "name");
    need_array(values, count, "values");
    if (count == 0) fail(KE_ERROR_BAD_SPEC, "tunables." + tunable + ": needs at least one value");
    if (spec->spec.tunables.count(tunable)) fail(KE_ERROR_BAD_SPEC, "tunables." + tunable + ": is already defined");
    spec->spec.tunables[tunable] = std::vector<std::int64_t>(values, values + count);
    spec->changed();
  });
}

KE_API ke_status ke_spec_add_constraint(ke_spec* spec, const char* expression) {
  return guard(__func__, [&] {
    need(spec, "spec");
    const std::string where = "constraints[" + std::to_string(spec->spec.constraints.size()) + "]";
    spec->spec.constraints.push_back(ke::Expr::parse(need_nonempty(expression, "expression"), where));
    spec->changed();
  });
}

KE_API ke_status ke_spec_set_launch(ke_spec* spec, const char* const grid[3], const char* const block[3],
                                    const char* shared_bytes) {
  return guard(__func__, [&] {
    need(spec, "spec");
    need_array(grid, 3, "grid");
    need_array(block, 3, "block");
    ke::LaunchRule rule;
    for (int i = 0; i < 3; ++i) {
      const std::string index = "[" + std::to_string(i) + "]";
      rule.grid[i] = ke::Expr::parse(need_nonempty(grid[i], "grid[i]"), "launch.grid" + index);
      rule.block[i] = ke::Expr::parse(need_nonempty(block[i], "block[i]"), "launch.block" + index);
    }
    rule.shared_bytes = ke::Expr::parse(shared_bytes ? shared_bytes : "0", "launch.shared_bytes");
    spec->spec.launch = std::move(rule);
    spec->changed();
  });
}

KE_API ke_status ke_spec_set_cost(ke_spec* spec, const char* flops, const char* bytes) {
  return guard(__func__, [&] {
    need(spec, "spec");
    std::optional<ke::Expr> f, b;
    if (flops) f = ke::Expr::parse(flops, "cost.flops");
    if (bytes) b = ke::Expr::parse(bytes, "cost.bytes");
    spec->spec.cost_flops = std::move(f);
    spec->spec.cost_bytes = std::move(b);
    spec->changed();
  });
}

KE_API ke_status ke_spec_set_notes(ke_spec* spec, const char* notes) {
  return guard(__func__, [&] {
    need(spec, "spec");
    spec->spec.notes = need_string(notes, "notes");
    spec->changed();
  });
}

KE_API ke_status ke_spec_validate(const ke_spec* spec) {
  return guard(__func__, [&] { need(spec, "spec")->spec.validate(); });
}

KE_API ke_status ke_spec_name(const char** out, const ke_spec* spec) {
  return get_field(__func__, out, spec, "spec", [](const ke_spec& s) { return s.spec.name.c_str(); });
}

KE_API ke_status ke_spec_workload_count(size_t* out, const ke_spec* spec) {
  return get_field(__func__, out, spec, "spec", [](const ke_spec& s) { return s.spec.workloads.size(); });
}

KE_API ke_status ke_spec_to_json(const char** out, const ke_spec* spec) {
  return guard(__func__, [&] {
    need_out(out, "out");
    need(spec, "spec");
    std::lock_guard lock(spec->mutex);
    if (!spec->json) spec->json = ke::to_json(spec->spec);
    *out = spec->json->c_str();
  });
}
