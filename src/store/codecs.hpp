// Column codecs: how the store writes values into its columns (JSON objects and arrays, numbers that
// survive infinities and NaNs) and reads them back.
#pragma once
#include <simdjson.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernelevolve/fitness.hpp"
#include "kernelevolve/mutator.hpp"

namespace kernelevolve::store {

// %.17g; an infinity as +-1e308 and a NaN as null, so that the JSON stays JSON.
std::string number(double x);
std::string int_map_json(const std::map<std::string, std::int64_t>& m);
std::string ids_json(const std::vector<std::int64_t>& ids);
std::string mismatch_json(const Mismatch& m);
// A run's prices as stored: {"model": [input, output], ...}, US dollars per million tokens.
std::string prices_json(const std::map<std::string, LlmPrice>& prices);

// A number, integer or not; NaN for null.
double json_double(simdjson::dom::element e);
// The readers answer what they can make of the text: an empty map, list or none for text that is not theirs.
std::map<std::string, std::int64_t> parse_int_map(simdjson::dom::parser& parser, const std::string& json);
std::map<std::string, LlmPrice> parse_prices(const std::string& json);
std::vector<std::int64_t> parse_ids(simdjson::dom::parser& parser, const std::string& json);
std::optional<Mismatch> parse_mismatch(simdjson::dom::parser& parser, const std::string& json);

}  // namespace kernelevolve::store
