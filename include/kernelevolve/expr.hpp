// Integer expressions over sizes and tunables, used by the spec's launch rule, constraints and cost:
// integers, names, + - * / %, unary minus, comparisons (< <= > >= == !=), && ||, parentheses, and the
// functions cdiv(a, b), min(a, b, ...), max(a, b, ...). Division truncates toward zero like C.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kernelevolve {

using Bindings = std::map<std::string, std::int64_t>;

class Expr {
 public:
  // Parses `text`; throws Error(BadSpec) naming `where` (e.g. "spec.json: launch.grid[0]") on a syntax error.
  static Expr parse(const std::string& text, const std::string& where = "expression");
  // A constant expression.
  static Expr constant(std::int64_t value);

  // Evaluates under `names`; throws Error(BadSpec) on an unknown name, division by zero or overflow.
  std::int64_t eval(const Bindings& names) const;
  // The names the expression reads, for validation against the spec's sizes and tunables.
  std::vector<std::string> names() const;
  const std::string& text() const { return text_; }

  struct Node;

 private:
  std::shared_ptr<const Node> root_;
  std::string text_;
  std::string where_;
};

}  // namespace kernelevolve
