// The spec: loading the JSON file (DESIGN.md, "The spec file"), refusing each mistake a user can make
// with a message that names the file and the field, and a spec built in C++.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernelevolve/candidate.hpp"
#include "kernelevolve/error.hpp"
#include "kernelevolve/spec.hpp"

using namespace kernelevolve;

namespace {

const std::string fixtures = std::string(KE_FIXTURES) + "/spec";
// Inline specs are parsed as if they lived beside the fixture sources, so "file" paths resolve.
const std::string inline_path = fixtures + "/inline.json";

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A good CPU spec as top-level fields, in order; a test replaces, adds or (with "") removes fields.
using Fields = std::vector<std::pair<std::string, std::string>>;

Fields base_fields() {
  return {
      {"name", R"("vec_scale")"},
      {"language", R"("c")"},
      {"entry", R"("vec_scale")"},
      {"params", R"([
        {"name": "x", "dtype": "f32", "shape": ["N"], "role": "in"},
        {"name": "y", "dtype": "f32", "shape": ["N"], "role": "out"},
        {"name": "alpha", "dtype": "f32", "role": "scalar", "value": 2.5},
        {"name": "N", "dtype": "i64", "role": "size"}])"},
      {"workloads", R"([{"N": 1024}, {"N": 1000}])"},
      {"inputs", R"({"x": {"dist": "normal", "mean": 0.0, "std": 3.0}})"},
      {"tolerance", R"({"atol": 1e-5, "rtol": 1e-4})"},
      {"reference", R"({"file": "vec_scale_ref.c"})"},
      {"seed", R"({"file": "vec_scale_seed.c"})"},
      {"tunables", R"({"UNROLL": [1, 2, 4], "BLOCK": [64, 128]})"},
      {"constraints", R"(["UNROLL * BLOCK <= 256"])"},
      {"cost", R"({"flops": "N", "bytes": "8 * N"})"},
      {"notes", R"("y = alpha * x")"},
  };
}

std::string spec_json(const std::map<std::string, std::string>& changes = {}) {
  Fields fields = base_fields();
  for (const auto& [key, value] : changes) {
    bool found = false;
    for (auto& field : fields)
      if (field.first == key) field.second = value, found = true;
    if (!found) fields.emplace_back(key, value);
  }
  std::string json = "{";
  for (const auto& [key, value] : fields) {
    if (value.empty()) continue;
    json += (json.size() > 1 ? ",\n  \"" : "\n  \"") + key + "\": " + value;
  }
  return json + "\n}\n";
}

// The message of the BadSpec error that parsing `json` throws; checks that it names the file.
std::string bad_spec(const std::string& json) {
  try {
    parse_spec(json, inline_path);
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::BadSpec);
    CHECK(error.exit_code() == 2);
    const std::string message = error.what();
    CHECK(contains(message, inline_path + ": "));
    return message;
  }
  FAIL("expected Error(BadSpec) for:\n" << json);
  return {};
}

// The field named right after the file, as in "spec.json: params[1].dtype: ...".
void check_names_field(const std::string& message, const std::string& field) {
  CAPTURE(message);
  CHECK(contains(message, inline_path + ": " + field + ":"));
}

std::string bad_validate(const Spec& spec) {
  try {
    spec.validate();
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::BadSpec);
    return error.what();
  }
  FAIL("expected Error(BadSpec)");
  return {};
}

}  // namespace

TEST_CASE("enum names round-trip") {
  for (DType dtype : {DType::f16, DType::bf16, DType::f32, DType::f64, DType::i8, DType::u8, DType::i32, DType::i64})
    CHECK(parse_dtype(to_string(dtype)) == dtype);
  for (Role role : {Role::in, Role::out, Role::inout, Role::size, Role::scalar})
    CHECK(parse_role(to_string(role)) == role);
  for (Language language : {Language::c, Language::cpp, Language::cuda, Language::hip})
    CHECK(parse_language(to_string(language)) == language);
  CHECK_FALSE(parse_dtype("f33"));
  CHECK_FALSE(parse_dtype("F32"));
  CHECK_FALSE(parse_role(""));
  CHECK_FALSE(parse_language("rust"));
  CHECK(dtype_size(DType::f16) == 2);
  CHECK(dtype_size(DType::bf16) == 2);
  CHECK(dtype_size(DType::f32) == 4);
  CHECK(dtype_size(DType::f64) == 8);
  CHECK(dtype_size(DType::i8) == 1);
  CHECK(dtype_size(DType::u8) == 1);
  CHECK(dtype_size(DType::i32) == 4);
  CHECK(dtype_size(DType::i64) == 8);
  CHECK(is_float(DType::bf16));
  CHECK_FALSE(is_float(DType::i32));
  CHECK(is_cpu_language(Language::c));
  CHECK(is_cpu_language(Language::cpp));
  CHECK_FALSE(is_cpu_language(Language::cuda));
  CHECK_FALSE(is_cpu_language(Language::hip));
}

TEST_CASE("a good CPU spec file loads") {
  const Spec spec = load_spec(fixtures + "/vec_scale.json");
  CHECK(spec.name == "vec_scale");
  CHECK(spec.language == Language::c);
  CHECK(spec.entry == "vec_scale");
  CHECK(spec.path == fixtures + "/vec_scale.json");
  REQUIRE(spec.params.size() == 4);
  CHECK(spec.params[0].name == "x");
  CHECK(spec.params[0].dtype == DType::f32);
  CHECK(spec.params[0].role == Role::in);
  CHECK(spec.params[0].shape == std::vector<std::string>{"N"});
  CHECK(spec.params[1].role == Role::out);
  CHECK(spec.params[2].role == Role::scalar);
  CHECK(spec.params[2].value == doctest::Approx(2.5));
  CHECK(spec.params[3].role == Role::size);
  CHECK(spec.params[3].dtype == DType::i64);
  REQUIRE(spec.workloads.size() == 2);
  CHECK(spec.workloads[0].at("N") == 1024);
  CHECK(spec.workloads[1].at("N") == 1000);
  REQUIRE(spec.inputs.count("x") == 1);
  CHECK(spec.inputs.at("x").kind == InputDist::Kind::laplace);
  CHECK(spec.inputs.at("x").a == doctest::Approx(0.5));
  CHECK(spec.inputs.at("x").b == doctest::Approx(2.0));
  CHECK(spec.tolerance.atol == doctest::Approx(1e-6));
  CHECK(spec.tolerance.rtol == doctest::Approx(1e-5));
  // Source paths are relative to the spec file; the text is read, the path kept.
  CHECK(contains(spec.reference.source, "void vec_scale("));
  CHECK(spec.reference.file == fixtures + "/vec_scale_ref.c");
  CHECK(contains(spec.seed.source, "#define UNROLL"));
  CHECK(spec.seed.file == fixtures + "/vec_scale_seed.c");
  CHECK_FALSE(spec.reference.language);
  CHECK_FALSE(spec.launch);
  CHECK(spec.tunables.at("UNROLL") == std::vector<std::int64_t>{1, 2, 4, 8});
  CHECK(spec.tunables.at("BLOCK") == std::vector<std::int64_t>{64, 128, 256});
  REQUIRE(spec.constraints.size() == 1);
  CHECK(spec.constraints[0].text() == "UNROLL * BLOCK <= 1024");
  REQUIRE(spec.cost_flops);
  REQUIRE(spec.cost_bytes);
  CHECK(spec.notes == "y = alpha * x, element-wise.");

  CHECK(spec.seed_tunables() == Bindings{{"BLOCK", 64}, {"UNROLL", 1}});
  CHECK(spec.satisfies_constraints(spec.seed_tunables()));
  CHECK(spec.satisfies_constraints({{"BLOCK", 256}, {"UNROLL", 4}}));
  CHECK_FALSE(spec.satisfies_constraints({{"BLOCK", 256}, {"UNROLL", 8}}));
  CHECK_FALSE(spec.satisfies_constraints({{"BLOCK", 256}}));  // cannot be evaluated: not a valid point

  const Param* x = spec.find_param("x");
  REQUIRE(x != nullptr);
  CHECK(x->name == "x");
  CHECK(x->is_buffer());
  CHECK(spec.find_param("nope") == nullptr);
  CHECK(spec.element_count(*x, spec.workloads[1]) == 1000);

  const Bindings names = spec.bindings(spec.workloads[0], spec.seed_tunables());
  CHECK(names == Bindings{{"BLOCK", 64}, {"N", 1024}, {"UNROLL", 1}, {"alpha", 2}});  // 2.5 truncates to 2
  CHECK(spec.cost_bytes->eval(names) == 8 * 1024);
}

TEST_CASE("a good CUDA spec file loads with its launch rule") {
  const Spec spec = load_spec(fixtures + "/softmax_rows.json");
  CHECK(spec.language == Language::cuda);
  CHECK_FALSE(is_cpu_language(spec.language));
  REQUIRE(spec.launch);
  const Bindings names = spec.bindings(spec.workloads[1], {{"THREADS", 256}, {"ROWS", 4}});
  CHECK(spec.launch->grid[0].eval(names) == 250);
  CHECK(spec.launch->grid[1].eval(names) == 1);
  CHECK(spec.launch->grid[2].eval(names) == 1);
  CHECK(spec.launch->block[0].eval(names) == 256);
  CHECK(spec.launch->shared_bytes.eval(names) == 0);
  CHECK(spec.cost_flops->eval(names) == 5LL * 1000 * 1531);
  CHECK(spec.element_count(spec.params[0], spec.workloads[0]) == 4096LL * 4096);
  CHECK(spec.seed_tunables() == Bindings{{"ROWS", 1}, {"THREADS", 64}});
  CHECK_FALSE(spec.satisfies_constraints({{"THREADS", 1024}, {"ROWS", 8}}));
  CHECK(contains(spec.seed.source, "extern \"C\" __global__"));
}

TEST_CASE("the inline base spec is good, and its optional parts may be left out") {
  const Spec spec = parse_spec(spec_json(), inline_path);
  CHECK(spec.name == "vec_scale");
  CHECK(spec.inputs.at("x").kind == InputDist::Kind::normal);
  const Spec minimal = parse_spec(
      spec_json(
          {{"inputs", ""}, {"tolerance", ""}, {"tunables", ""}, {"constraints", ""}, {"cost", ""}, {"notes", ""}}),
      inline_path);
  CHECK(minimal.tunables.empty());
  CHECK(minimal.tolerance.atol == doctest::Approx(Tolerance{}.atol));
  CHECK_FALSE(minimal.cost_flops);
  CHECK(minimal.satisfies_constraints({}));
}

TEST_CASE("other accepted forms: inline source, integer shapes, numeric strings, uniform inputs, 1e6 sizes") {
  const Spec spec = parse_spec(
      spec_json({{"params", R"([
        {"name": "x", "dtype": "f32", "shape": ["N", 4], "role": "in"},
        {"name": "y", "dtype": "f32", "shape": ["N", "4"], "role": "inout"},
        {"name": "N", "dtype": "i32", "role": "size"}])"},
                 {"workloads", R"([{"N": 1e6}])"},
                 {"inputs", R"({"x": {"dist": "uniform", "low": -2, "high": 2}})"},
                 {"reference", R"({"source": "void vec_scale(void) {}", "language": "cpp", "device": "cpu"})"}}),
      inline_path);
  CHECK(spec.params[0].shape == std::vector<std::string>{"N", "4"});
  CHECK(spec.params[1].shape == std::vector<std::string>{"N", "4"});
  CHECK(spec.element_count(spec.params[0], spec.workloads[0]) == 4000000);
  CHECK(spec.inputs.at("x").kind == InputDist::Kind::uniform);
  CHECK(spec.inputs.at("x").a == doctest::Approx(-2));
  CHECK(spec.reference.source == "void vec_scale(void) {}");
  CHECK(spec.reference.file.empty());
  CHECK(spec.reference.language == Language::cpp);
  CHECK(spec.reference.device == "cpu");
}

TEST_CASE("a dimension may be an integer expression over the sizes, evaluated per workload") {
  // What a PyTorch problem's derived signature gives: a convolution's output, H - K + 1; flattened features.
  const Spec spec = parse_spec(spec_json({{"params", R"([
        {"name": "x", "dtype": "f32", "shape": ["N", "H"], "role": "in"},
        {"name": "y", "dtype": "f32", "shape": ["N", "H - K + 1", "cdiv(H, 2) * 3", "(H + 1) / 4"], "role": "out"},
        {"name": "N", "dtype": "i64", "role": "size"},
        {"name": "H", "dtype": "i64", "role": "size"},
        {"name": "K", "dtype": "i64", "role": "size"}])"},
                                          {"workloads", R"([{"N": 2, "H": 10, "K": 3}, {"N": 1, "H": 7, "K": 7}])"},
                                          {"constraints", ""},
                                          {"tunables", ""}}),
                               inline_path);
  CHECK(spec.params[1].shape == std::vector<std::string>{"N", "H - K + 1", "cdiv(H, 2) * 3", "(H + 1) / 4"});
  CHECK(spec.element_count(spec.params[1], spec.workloads[0]) == 2 * 8 * 15 * 2);
  CHECK(spec.element_count(spec.params[1], spec.workloads[1]) == 1 * 1 * 12 * 2);
  // The spec file writes the expressions back as they were, and reads them again.
  const Spec again = parse_spec(to_json(spec), inline_path);
  CHECK(again.params[1].shape == spec.params[1].shape);
}

TEST_CASE("an expression dimension: only sizes, well formed, and positive in every workload") {
  std::string message = bad_spec(spec_json({{"params", R"([
      {"name": "x", "dtype": "f32", "shape": ["N - K"], "role": "in"},
      {"name": "N", "dtype": "i64", "role": "size"}])"}}));
  check_names_field(message, "params[0].shape[0]");
  CHECK(contains(message, "\"K\" in \"N - K\" is not a size param"));
  message = bad_spec(spec_json({{"params", R"([
      {"name": "x", "dtype": "f32", "shape": ["N - alpha"], "role": "in"},
      {"name": "alpha", "dtype": "f32", "role": "scalar", "value": 2},
      {"name": "N", "dtype": "i64", "role": "size"}])"}}));
  CHECK(contains(message, "\"alpha\" in \"N - alpha\" is not a size param"));
  message = bad_spec(spec_json({{"params", R"([
      {"name": "x", "dtype": "f32", "shape": ["N +* 2"], "role": "in"},
      {"name": "N", "dtype": "i64", "role": "size"}])"}}));
  check_names_field(message, "params[0].shape[0]");
  CHECK(contains(message, "neither an integer, a size param nor an integer expression"));
  // 1000 - 1000 is no dimension: the workload that makes it so is named.
  message = bad_spec(spec_json({{"params", R"([
      {"name": "x", "dtype": "f32", "shape": ["N - 1000"], "role": "in"},
      {"name": "N", "dtype": "i64", "role": "size"}])"},
                                {"workloads", R"([{"N": 1024}, {"N": 1000}])"}}));
  check_names_field(message, "workloads[1]");
  CHECK(contains(message, "dimension 0 \"N - 1000\" is 0 here: a dimension must be positive"));
}

// One case per mistake: each names the file and the field.

TEST_CASE("unknown fields are refused at every level, naming the field") {
  std::string message = bad_spec(spec_json({{"nmae", R"("typo")"}}));
  check_names_field(message, "nmae");
  CHECK(contains(message, "unknown field"));
  CHECK(contains(message, "did you mean \"name\""));

  message = bad_spec(spec_json({{"params", R"([{"name": "x", "dtpye": "f32", "shape": ["N"], "role": "in"}])"}}));
  check_names_field(message, "params[0].dtpye");
  CHECK(contains(message, "unknown field"));

  check_names_field(bad_spec(spec_json({{"tolerance", R"({"atl": 1e-5})"}})), "tolerance.atl");
  check_names_field(bad_spec(spec_json({{"seed", R"({"file": "vec_scale_seed.c", "lang": "c"})"}})), "seed.lang");
  check_names_field(bad_spec(spec_json({{"inputs", R"({"x": {"dist": "normal", "sd": 1}})"}})), "inputs.x.sd");
  check_names_field(bad_spec(spec_json({{"inputs", R"({"x": {"dist": "normal", "low": 1}})"}})), "inputs.x.low");
  check_names_field(bad_spec(spec_json({{"cost", R"({"flop": "N"})"}})), "cost.flop");
  check_names_field(
      bad_spec(spec_json({{"language", R"("cuda")"}, {"launch", R"({"grd": [1, 1, 1], "block": [1, 1, 1]})"}})),
      "launch.grd");
  // A field given twice is as much a mistake as an unknown one.
  check_names_field(bad_spec(spec_json({{"notes", R"("a", "notes": "b")"}})), "notes");
}

TEST_CASE("missing required fields are named") {
  for (const char* field : {"name", "language", "entry", "params", "workloads", "reference", "seed"}) {
    CAPTURE(field);
    const std::string message = bad_spec(spec_json({{field, ""}}));
    check_names_field(message, field);
    CHECK(contains(message, "missing"));
  }
  check_names_field(bad_spec(spec_json({{"params", R"([{"name": "x", "shape": ["N"], "role": "in"}])"}})),
                    "params[0].dtype");
  check_names_field(bad_spec(spec_json({{"params", R"([{"name": "x", "dtype": "f32", "role": "in"},
      {"name": "N", "dtype": "i64", "role": "size"}])"}})),
                    "params[0].shape");
  check_names_field(bad_spec(spec_json({{"seed", "{}"}})), "seed.file");
}

TEST_CASE("launch is required for cuda and hip") {
  for (const char* language : {"cuda", "hip"}) {
    CAPTURE(language);
    const std::string message = bad_spec(spec_json({{"language", std::string("\"") + language + "\""}}));
    check_names_field(message, "launch");
    CHECK(contains(message, "missing"));
  }
}

TEST_CASE("a shape naming an unknown size") {
  const std::string message = bad_spec(spec_json({{"params", R"([
      {"name": "x", "dtype": "f32", "shape": ["N", "K"], "role": "in"},
      {"name": "N", "dtype": "i64", "role": "size"}])"}}));
  check_names_field(message, "params[0].shape[1]");
  CHECK(contains(message, "\"K\""));
}

TEST_CASE("a workload missing a size") {
  const std::string message = bad_spec(spec_json({{"workloads", R"([{"N": 1024}, {}])"}}));
  check_names_field(message, "workloads[1]");
  CHECK(contains(message, "missing size \"N\""));
}

TEST_CASE("a workload binding an unknown name") {
  const std::string message = bad_spec(spec_json({{"workloads", R"([{"N": 1024, "K": 3}])"}}));
  check_names_field(message, "workloads[0].K");
  CHECK(contains(message, "not a size"));
}

TEST_CASE("a bad dtype") {
  const std::string message = bad_spec(spec_json({{"params", R"([
      {"name": "x", "dtype": "f32", "shape": ["N"], "role": "in"},
      {"name": "y", "dtype": "f33", "shape": ["N"], "role": "out"},
      {"name": "N", "dtype": "i64", "role": "size"}])"}}));
  CHECK(message ==
        inline_path + ": params[1].dtype: unknown dtype \"f33\" (expected one of f16 bf16 f32 f64 i8 u8 i32 i64)");
}

TEST_CASE("a bad language") {
  const std::string message = bad_spec(spec_json({{"language", R"("rust")"}}));
  check_names_field(message, "language");
  CHECK(contains(message, "unknown language \"rust\""));
  check_names_field(bad_spec(spec_json({{"seed", R"({"file": "vec_scale_seed.c", "language": "fortran"})"}})),
                    "seed.language");
}

TEST_CASE("a bad role") {
  const std::string message = bad_spec(spec_json({{"params", R"([
      {"name": "x", "dtype": "f32", "shape": ["N"], "role": "input"},
      {"name": "N", "dtype": "i64", "role": "size"}])"}}));
  check_names_field(message, "params[0].role");
  CHECK(contains(message, "unknown role \"input\""));
}

TEST_CASE("a missing source file") {
  const std::string message = bad_spec(spec_json({{"reference", R"({"file": "no_such_ref.c"})"}}));
  check_names_field(message, "reference.file");
  CHECK(contains(message, "no_such_ref.c"));
  CHECK(contains(message, "cannot read"));
}

TEST_CASE("an unreadable source file") {
  // A directory cannot be read as a file, even by root (a chmod 000 file can).
  const std::string message = bad_spec(spec_json({{"seed", R"({"file": "."})"}}));
  check_names_field(message, "seed.file");
  CHECK(contains(message, "cannot read"));
}

TEST_CASE("an empty source file") {
  check_names_field(bad_spec(spec_json({{"seed", R"({"file": "empty.c"})"}})), "seed.file");
}

TEST_CASE("an empty tunable list") {
  const std::string message = bad_spec(spec_json({{"tunables", R"({"UNROLL": [1, 2], "BLOCK": []})"}}));
  check_names_field(message, "tunables.BLOCK");
  CHECK(contains(message, "empty"));
}

TEST_CASE("a negative size in a workload") {
  const std::string message = bad_spec(spec_json({{"workloads", R"([{"N": 1024}, {"N": -5}])"}}));
  check_names_field(message, "workloads[1].N");
  CHECK(contains(message, "positive"));
}

TEST_CASE("a zero size in a workload") {
  check_names_field(bad_spec(spec_json({{"workloads", R"([{"N": 0}])"}})), "workloads[0].N");
}

TEST_CASE("a non-integer size in a workload") {
  check_names_field(bad_spec(spec_json({{"workloads", R"([{"N": 10.5}])"}})), "workloads[0].N");
  check_names_field(bad_spec(spec_json({{"workloads", R"([{"N": "10"}])"}})), "workloads[0].N");
}

TEST_CASE("JSON that does not parse") {
  std::string message = bad_spec("{\"name\": \"x\",, }");
  CHECK(contains(message, "not valid JSON"));
  CHECK(contains(message, "line 1, column 14"));  // where the second comma is
  message = bad_spec("{\n  \"name\": \"x\",\n  \"params\": [1, 2,]\n}");
  CHECK(contains(message, "line 3, column 19"));
  message = bad_spec(spec_json().substr(0, 60));  // truncated
  CHECK(contains(message, "not valid JSON"));
  message = bad_spec("[1, 2]");
  CHECK(contains(message, "expected an object"));
}

TEST_CASE("a spec file that does not exist") {
  const std::string path = fixtures + "/no_such_spec.json";
  try {
    load_spec(path);
    FAIL("expected Error(BadSpec)");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::BadSpec);
    CHECK(contains(error.what(), path));
  }
}

TEST_CASE("duplicate param names") {
  const std::string message = bad_spec(spec_json({{"params", R"([
      {"name": "x", "dtype": "f32", "shape": ["N"], "role": "in"},
      {"name": "x", "dtype": "f32", "shape": ["N"], "role": "out"},
      {"name": "N", "dtype": "i64", "role": "size"}])"}}));
  check_names_field(message, "params[1].name");
  CHECK(contains(message, "duplicate"));
}

TEST_CASE("a scalar without value") {
  const std::string message = bad_spec(spec_json({{"params", R"([
      {"name": "x", "dtype": "f32", "shape": ["N"], "role": "in"},
      {"name": "y", "dtype": "f32", "shape": ["N"], "role": "out"},
      {"name": "alpha", "dtype": "f32", "role": "scalar"},
      {"name": "N", "dtype": "i64", "role": "size"}])"}}));
  check_names_field(message, "params[2].value");
  CHECK(contains(message, "missing"));
}

TEST_CASE("an expression that does not parse") {
  std::string message = bad_spec(spec_json({{"constraints", R"(["UNROLL * <= 256"])"}}));
  check_names_field(message, "constraints[0]");
  CHECK(contains(message, "column"));
  message = bad_spec(spec_json({{"cost", R"({"flops": "N +", "bytes": "8 * N"})"}}));
  check_names_field(message, "cost.flops");
  message = bad_spec(spec_json(
      {{"language", R"("cuda")"}, {"launch", R"({"grid": ["cdiv(N, BLOCK", 1, 1], "block": ["BLOCK", 1, 1]})"}}));
  check_names_field(message, "launch.grid[0]");
}

TEST_CASE("an expression naming an unknown identifier") {
  std::string message = bad_spec(spec_json({{"cost", R"({"flops": "2 * N * K", "bytes": "8 * N"})"}}));
  check_names_field(message, "cost.flops");
  CHECK(contains(message, "unknown name \"K\""));
  message = bad_spec(spec_json({{"constraints", R"(["UNROLL * TILE <= 256"])"}}));
  check_names_field(message, "constraints[0]");
  CHECK(contains(message, "\"TILE\""));
  message = bad_spec(spec_json(
      {{"language", R"("hip")"}, {"launch", R"j({"grid": ["cdiv(N, BLOCK)", 1, 1], "block": ["THREADS", 1, 1]})j"}}));
  check_names_field(message, "launch.block[0]");
  // Sizes, scalars and tunables may all be read.
  CHECK_NOTHROW(parse_spec(spec_json({{"cost", R"({"flops": "alpha * N * UNROLL", "bytes": "8 * N"})"}}), inline_path));
}

TEST_CASE("a seed point that violates the constraints") {
  const std::string message = bad_spec(spec_json({{"tunables", R"({"UNROLL": [8, 1], "BLOCK": [64, 128]})"}}));
  check_names_field(message, "constraints[0]");
  CHECK(contains(message, "seed"));
}

TEST_CASE("no workloads") {
  const std::string message = bad_spec(spec_json({{"workloads", "[]"}}));
  check_names_field(message, "workloads");
  CHECK(contains(message, "empty"));
}

TEST_CASE("a negative tolerance") {
  check_names_field(bad_spec(spec_json({{"tolerance", R"({"atol": -1e-5, "rtol": 1e-4})"}})), "tolerance.atol");
  check_names_field(bad_spec(spec_json({{"tolerance", R"({"atol": 1e-5, "rtol": -1})"}})), "tolerance.rtol");
}

TEST_CASE("a field of the wrong type") {
  check_names_field(bad_spec(spec_json({{"name", "42"}})), "name");
  check_names_field(bad_spec(spec_json({{"params", R"({"x": 1})"}})), "params");
  check_names_field(bad_spec(spec_json({{"tunables", R"({"UNROLL": [1, 2.5]})"}})), "tunables.UNROLL[1]");
  check_names_field(bad_spec(spec_json({{"constraints", R"([true])"}})), "constraints[0]");
}

// A spec built in C++ goes through the same checks.

namespace {

Spec cpp_spec() {
  Spec spec;
  spec.name = "axpy";
  spec.language = Language::c;
  spec.entry = "axpy";
  spec.params = {{"x", DType::f32, Role::in, {"N"}},
                 {"y", DType::f32, Role::inout, {"N"}},
                 {"a", DType::f32, Role::scalar, {}, 3.0},
                 {"N", DType::i64, Role::size, {}}};
  spec.workloads = {{{"N", 4096}}, {{"N", 77}}};
  spec.reference.source = "void axpy(const float* x, float* y, float a, long N) {}";
  spec.seed.source = spec.reference.source;
  spec.tunables = {{"VEC", {4, 8}}};
  spec.constraints = {Expr::parse("VEC <= 8 && N % 1 == 0")};
  spec.cost_flops = Expr::parse("2 * N");
  return spec;
}

}  // namespace

TEST_CASE("a spec built in C++ validates") {
  const Spec spec = cpp_spec();
  CHECK_NOTHROW(spec.validate());
  CHECK(spec.bindings(spec.workloads[1], spec.seed_tunables()) == Bindings{{"N", 77}, {"VEC", 4}, {"a", 3}});
  CHECK(spec.element_count(*spec.find_param("y"), spec.workloads[0]) == 4096);
}

TEST_CASE("a spec built in C++ names itself and the field in errors") {
  Spec spec = cpp_spec();
  spec.workloads[1] = {{"N", -1}};
  std::string message = bad_validate(spec);
  CHECK(contains(message, "axpy: workloads[1].N:"));

  spec = cpp_spec();
  spec.name.clear();
  message = bad_validate(spec);
  CHECK(contains(message, "<spec>: name:"));

  spec = cpp_spec();
  spec.language = Language::cuda;
  CHECK(contains(bad_validate(spec), "axpy: launch:"));
  spec.launch = LaunchRule{};
  spec.launch->grid[0] = Expr::parse("cdiv(N, 256)");
  CHECK_NOTHROW(spec.validate());
  spec.launch->block[0] = Expr::parse("VEC - 4");  // the seed's block would be 0
  CHECK(contains(bad_validate(spec), "axpy: launch.block[0]:"));

  spec = cpp_spec();
  spec.params[0].shape = {"M"};
  CHECK(contains(bad_validate(spec), "axpy: params[0].shape[0]:"));

  spec = cpp_spec();
  spec.tolerance.rtol = -0.5;
  CHECK(contains(bad_validate(spec), "axpy: tolerance.rtol:"));

  spec = cpp_spec();
  spec.seed.source.clear();
  CHECK(contains(bad_validate(spec), "axpy: seed:"));

  spec = cpp_spec();
  spec.inputs["y"] = InputDist{};  // y is inout: an input too
  CHECK_NOTHROW(spec.validate());
  spec.inputs["z"] = InputDist{};
  CHECK(contains(bad_validate(spec), "axpy: inputs.z:"));

  spec = cpp_spec();
  spec.tunables["N"] = {1};
  CHECK(contains(bad_validate(spec), "axpy: tunables.N:"));

  spec = cpp_spec();
  spec.constraints = {Expr::parse("VEC > 4")};
  CHECK(contains(bad_validate(spec), "axpy: constraints[0]:"));

  spec = cpp_spec();
  spec.cost_bytes = Expr::parse("N / (VEC - 4)");  // division by zero at the seed point
  CHECK(contains(bad_validate(spec), "axpy: cost.bytes:"));
}

TEST_CASE("Candidate::key identifies source and tunables") {
  Candidate a{"int f() { return 1; }", Language::c, {{"B", 2}, {"A", 1}}};
  Candidate b = a;
  CHECK(a.key() == b.key());
  b.tunables["A"] = 3;
  CHECK(a.key() != b.key());
  b = a;
  b.source += " ";
  CHECK(a.key() != b.key());
  b = a;
  b.language = Language::cpp;
  CHECK(a.key() != b.key());
  CHECK(contains(a.key(), "A=1;B=2;"));  // sorted by name, whatever order they were given in
  // Tunables cannot be confused with each other by concatenation.
  Candidate c{"s", Language::c, {{"A", 12}}};
  Candidate d{"s", Language::c, {{"A1", 2}}};
  CHECK(c.key() != d.key());
}

TEST_CASE("cost.flops_floor: a boolean, written back only when false") {
  CHECK(parse_spec(spec_json(), inline_path).cost_flops_floor);
  const Spec rates_only =
      parse_spec(spec_json({{"cost", R"({"flops": "N", "bytes": "8 * N", "flops_floor": false})"}}), inline_path);
  CHECK_FALSE(rates_only.cost_flops_floor);
  CHECK_FALSE(parse_spec(to_json(rates_only), inline_path).cost_flops_floor);
  CHECK(contains(bad_spec(spec_json({{"cost", R"({"flops": "N", "flops_floor": "no"})"}})), "cost.flops_floor"));
}

// Issue 50: a spec may state its precision policy; a run stores it (to_json) and reads it back.
TEST_CASE("precision: a policy, or the state a run stored; the default by the problem's kind; errors name the field") {
  const Spec plain = parse_spec(spec_json(), inline_path);
  CHECK_FALSE(plain.precision.has_value());
  CHECK(plain.precision_in_effect().policy == PrecisionPolicy::strict);  // a kernel reference: fp32
  const Spec as_run = parse_spec(spec_json({{"precision", R"("as-run")"}}), inline_path);
  REQUIRE(as_run.precision);
  CHECK(*as_run.precision == Precision::as_run_defaults());
  CHECK(as_run.precision->cudnn_tf32);
  CHECK_FALSE(as_run.precision->matmul_tf32);
  const Spec stored = parse_spec(
      spec_json(
          {{"precision",
            R"({"policy": "as-run", "cudnn_tf32": false, "matmul_tf32": true, "float32_matmul_precision": "high"})"}}),
      inline_path);
  REQUIRE(stored.precision);
  CHECK_FALSE(stored.precision->cudnn_tf32);
  CHECK(stored.precision->matmul_tf32);
  CHECK(stored.precision->float32_matmul_precision == "high");
  CHECK(contains(stored.precision->text(), "matmul TF32 on"));
  const Spec again = parse_spec(to_json(stored), inline_path);  // what a run stores, read back
  REQUIRE(again.precision);
  CHECK(*again.precision == *stored.precision);
  CHECK(contains(to_json(plain), "precision") == false);  // unset stays unset: the measurement hash of old runs holds
  check_names_field(bad_spec(spec_json({{"precision", R"("tf32")"}})), "precision");
  check_names_field(bad_spec(spec_json({{"precision", R"({"policy": "fast"})"}})), "precision.policy");
  check_names_field(bad_spec(spec_json({{"precision", R"({"policy": "as-run", "cudnn": true})"}})), "precision.cudnn");
  check_names_field(bad_spec(spec_json({{"precision", R"({"policy": "as-run", "matmul_tf32": 1})"}})),
                    "precision.matmul_tf32");
  check_names_field(bad_spec(spec_json({{"precision", R"({"policy": "strict", "cudnn_tf32": true})"}})), "precision");
}
