// JSON text written by hand: a string quoted as a JSON literal and a name -> integer map as an object. Every
// writer of JSON uses them (reports, the worker protocol, specs, the store, the C API and the command-line tool).
#pragma once
#include <string>

#include "kernelevolve/expr.hpp"

namespace kernelevolve {

// JSON string literal for `text`, quotes included; bytes that are not UTF-8 become U+FFFD.
std::string json_quote(const std::string& text);
// A JSON object of name -> integer (tunables, workload sizes, resources).
std::string json_object(const Bindings& values);

}  // namespace kernelevolve
