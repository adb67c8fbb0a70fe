// The C API: a stored program as a call (ke::CallableProgram): load, the signature, shapes, calls on the
// caller's buffers and stream, provenance.
#include <cstring>
#include <string>
#include <vector>

#include "internal.hpp"

using namespace capi;

namespace {

// The caller's arguments, checked to be one per param: read in place (a call is on the caller's hot path).
void* const* arguments(const ke_program& p, void* const* args, std::size_t count) {
  const std::size_t params = p.program->spec().params.size();
  if (count != params) {
    fail(KE_ERROR_INVALID_ARGUMENT, "'count' is " + std::to_string(count) + ", but the program takes " +
                                        std::to_string(params) + " arguments (ke_program_param_count)");
  }
  return need_array(args, count, "args");
}

}  // namespace

KE_API ke_status ke_program_options_init(ke_program_options* options, unsigned int version) {
  return init_options(__func__, options, version, KE_PROGRAM_OPTIONS_VERSION,
                      ke_program_options KE_PROGRAM_OPTIONS_INIT, "ke_program_options");
}

KE_API ke_status ke_program_load(ke_program** out, const char* database, const ke_program_options* options) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const std::string path = need_nonempty(database, "database");
    ke_program_options o = KE_PROGRAM_OPTIONS_INIT;
    if (options) {
      need_version(options->version, KE_PROGRAM_OPTIONS_VERSION, "ke_program_options");
      o = *options;
    }
    if (o.run < 0)
      fail(KE_ERROR_INVALID_ARGUMENT, "'run' is " + std::to_string(o.run) + ": a run's id, or 0 for the latest");
    if (o.node < -1)
      fail(KE_ERROR_INVALID_ARGUMENT, "'node' is " + std::to_string(o.node) + ": a node's id, or -1 for the best");
    ke::CallableChoice choice;
    if (o.run > 0) choice.run = o.run;
    if (o.node >= 0) choice.node = o.node;
    std::shared_ptr<ke::Device> device = o.device ? ke::open_device(need_nonempty(o.device, "device")) : nullptr;
    auto p = std::make_unique<ke_program>();
    p->program = ke::CallableProgram::load(path, device, choice);
    const ke::Provenance& v = p->program->provenance();
    p->provenance_json = "{\"database\": " + ke::json_quote(v.database) + ", \"run\": " + std::to_string(v.run) +
                         ", \"node\": " + std::to_string(v.node) + ", \"problem\": " + ke::json_quote(v.problem) +
                         ", \"device_class\": " + ke::json_quote(v.device_class) +
                         ", \"speedup\": " + std::to_string(v.speedup) + "}";
    p->spec_json = ke::to_json(p->program->spec());
    give(out, std::move(p));
  });
}

KE_API ke_status ke_program_destroy(ke_program* program) { return destroy(__func__, program); }

KE_API ke_status ke_program_param_count(size_t* out, const ke_program* program) {
  return get_field(__func__, out, program, "program",
                   [](const ke_program& p) { return p.program->spec().params.size(); });
}

KE_API ke_status ke_program_param(const char** name, const char** dtype, const char** role, const ke_program* program,
                                  size_t index) {
  return guard(__func__, [&] {
    need_out(name, "name"), need_out(dtype, "dtype"), need_out(role, "role");
    const auto& params = need(program, "program")->program->spec().params;
    if (index >= params.size()) {
      fail(KE_ERROR_NOT_FOUND, "param index " + std::to_string(index) + " is out of range (there are " +
                                   std::to_string(params.size()) + ")");
    }
    *name = params[index].name.c_str();
    *dtype = ke::to_string(params[index].dtype);
    *role = ke::to_string(params[index].role);
  });
}

KE_API ke_status ke_program_shape(int64_t* dims, size_t capacity, size_t* ndim, const ke_program* program, size_t index,
                                  const int64_t* sizes, size_t count) {
  return guard(__func__, [&] {
    need_out(ndim, "ndim");
    const ke::Spec& spec = need(program, "program")->program->spec();
    need_array(sizes, count, "sizes");
    ke::Bindings bound;
    std::size_t k = 0;
    for (const ke::Param& p : spec.params) {
      if (p.role != ke::Role::size) continue;
      if (k < count) bound[p.name] = sizes[k];
      ++k;
    }
    if (count != k) {
      fail(KE_ERROR_INVALID_ARGUMENT,
           "'count' is " + std::to_string(count) + ", but the program has " + std::to_string(k) + " size params");
    }
    const std::vector<std::int64_t> shape = program->program->shape(index, bound);
    if (shape.size() > capacity) {
      *ndim = shape.size();
      fail(KE_ERROR_INVALID_ARGUMENT, "'dims' holds " + std::to_string(capacity) + ", but the shape has " +
                                          std::to_string(shape.size()) + " dimensions");
    }
    need_array(dims, shape.size(), "dims");
    std::copy(shape.begin(), shape.end(), dims);
    *ndim = shape.size();
  });
}

KE_API ke_status ke_program_call(ke_program* program, void* const* args, size_t count, void* stream,
                                 unsigned int flags) {
  return guard(__func__, [&] {
    ke_program& p = *need(program, "program");
    if (flags & ~(KE_PROGRAM_ANY_SHAPE | KE_PROGRAM_WAIT))
      fail(KE_ERROR_INVALID_ARGUMENT, "'flags' has bits no KE_PROGRAM_ flag names: " + std::to_string(flags));
    if ((flags & KE_PROGRAM_WAIT) && stream)
      fail(KE_ERROR_INVALID_ARGUMENT, "KE_PROGRAM_WAIT runs on the library's own stream: 'stream' must be NULL");
    void* const* a = arguments(p, args, count);
    const bool any_shape = flags & KE_PROGRAM_ANY_SHAPE;
    if (flags & KE_PROGRAM_WAIT) p.program->call(a, any_shape);
    else p.program->enqueue(a, stream, any_shape);
    ++p.calls;
  });
}

KE_API ke_status ke_program_verified(int* out, const ke_program* program, void* const* args, size_t count) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const ke_program& p = *need(program, "program");
    ke::Bindings sizes;
    std::string why;
    *out = p.program->verified(arguments(p, args, count), sizes, why) ? 1 : 0;
  });
}

KE_API ke_status ke_program_calls(int64_t* out, const ke_program* program) {
  return get_field(__func__, out, program, "program", [](const ke_program& p) { return p.calls.load(); });
}

KE_API ke_status ke_program_provenance_json(const char** out, const ke_program* program) {
  return get_field(__func__, out, program, "program", [](const ke_program& p) { return p.provenance_json.c_str(); });
}

KE_API ke_status ke_program_spec_json(const char** out, const ke_program* program) {
  return get_field(__func__, out, program, "program", [](const ke_program& p) { return p.spec_json.c_str(); });
}
