// The integer expression language of the spec's launch rule, constraints and cost: a
// recursive-descent parser to a small immutable tree, and a checked evaluator.
#include "kernelevolve/expr.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>
#include <string_view>
#include <utility>

#include "kernelevolve/error.hpp"

namespace kernelevolve {

enum class Op { add, sub, mul, div, mod, lt, le, gt, ge, eq, ne, logical_and, logical_or };
enum class Function { cdiv, min, max };

struct Expr::Node {
  enum class Kind { constant, name, negate, logical_not, binary, call } kind = Kind::constant;
  std::int64_t value = 0;  // constant
  std::string name;        // name
  Op op = Op::add;         // binary
  Function function = Function::min;
  std::vector<std::shared_ptr<const Node>> args;  // operands or call arguments
  int depth = 1;                                  // of the tree below and including this node
};

namespace {

using NodePtr = std::shared_ptr<const Expr::Node>;
using Kind = Expr::Node::Kind;

// The parser, eval(), names() and the tree's destructor all recurse over the nesting, so a deeper
// expression (from a spec written outside, "((((...1))))" or "1+1+...+1") is refused rather than allowed
// to overflow the stack. Real launch rules and costs are a few levels deep.
constexpr int kMaxDepth = 256;

NodePtr make_constant(std::int64_t value) {
  auto node = std::make_shared<Expr::Node>();
  node->kind = Kind::constant;
  node->value = value;
  return node;
}

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Grammar, loosest binding first (C's precedence):
//   or      := and ('||' and)*
//   and     := compare ('&&' compare)*
//   compare := relation (('==' | '!=') relation)*
//   relation:= sum (('<' | '<=' | '>' | '>=') sum)*
//   sum     := product (('+' | '-') product)*
//   product := unary (('*' | '/' | '%') unary)*
//   unary   := ('-' | '+' | '!') unary | primary
//   primary := integer | name | name '(' or (',' or)* ')' | '(' or ')'
class Parser {
 public:
  Parser(const std::string& text, const std::string& where) : text_(text), where_(where) {}

  NodePtr parse() {
    skip_space();
    if (pos_ == text_.size()) fail("empty expression");
    NodePtr root = parse_or();
    skip_space();
    if (pos_ != text_.size()) fail("unexpected '" + std::string(1, text_[pos_]) + "'");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const { fail_at(problem, pos_); }
  [[noreturn]] void fail_at(const std::string& problem, std::size_t pos) const {
    throw Error(ErrorCode::BadSpec,
                where_ + ": " + problem + " at column " + std::to_string(pos + 1) + " in \"" + text_ + "\"");
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  // Consumes `token` if it comes next. A one-character operator does not match the start of a
  // longer one ('<' is not taken from "<=", '!' not from "!=").
  bool accept(std::string_view token) {
    skip_space();
    if (text_.compare(pos_, token.size(), token) != 0) return false;
    if (token.size() == 1 && pos_ + 1 < text_.size() && text_[pos_ + 1] == '=' &&
        (token == "<" || token == ">" || token == "!" || token == "="))
      return false;
    pos_ += token.size();
    return true;
  }
  void expect(std::string_view token) {
    if (!accept(token)) {
      skip_space();
      fail("expected '" + std::string(token) + "'" + (pos_ == text_.size() ? std::string(" before the end") : ""));
    }
  }

  // Sets the node's depth from its children's; refuses a tree deeper than kMaxDepth.
  NodePtr deepen(std::shared_ptr<Expr::Node> node) const {
    for (const auto& arg : node->args) node->depth = std::max(node->depth, arg->depth + 1);
    if (node->depth > kMaxDepth) fail("nested too deeply (more than " + std::to_string(kMaxDepth) + " levels)");
    return node;
  }

  NodePtr binary(Op op, NodePtr lhs, NodePtr rhs) const {
    auto node = std::make_shared<Expr::Node>();
    node->kind = Kind::binary;
    node->op = op;
    node->args = {std::move(lhs), std::move(rhs)};
    return deepen(std::move(node));
  }

  NodePtr parse_or() {
    NodePtr lhs = parse_and();
    while (accept("||")) lhs = binary(Op::logical_or, lhs, parse_and());
    return lhs;
  }
  NodePtr parse_and() {
    NodePtr lhs = parse_compare();
    while (accept("&&")) lhs = binary(Op::logical_and, lhs, parse_compare());
    return lhs;
  }
  NodePtr parse_compare() {
    NodePtr lhs = parse_relation();
    for (;;) {
      if (accept("==")) lhs = binary(Op::eq, lhs, parse_relation());
      else if (accept("!=")) lhs = binary(Op::ne, lhs, parse_relation());
      else return lhs;
    }
  }
  NodePtr parse_relation() {
    NodePtr lhs = parse_sum();
    for (;;) {
      if (accept("<=")) lhs = binary(Op::le, lhs, parse_sum());
      else if (accept(">=")) lhs = binary(Op::ge, lhs, parse_sum());
      else if (accept("<")) lhs = binary(Op::lt, lhs, parse_sum());
      else if (accept(">")) lhs = binary(Op::gt, lhs, parse_sum());
      else return lhs;
    }
  }
  NodePtr parse_sum() {
    NodePtr lhs = parse_product();
    for (;;) {
      if (accept("+")) lhs = binary(Op::add, lhs, parse_product());
      else if (accept("-")) lhs = binary(Op::sub, lhs, parse_product());
      else return lhs;
    }
  }
  NodePtr parse_product() {
    NodePtr lhs = parse_unary();
    for (;;) {
      if (accept("*")) lhs = binary(Op::mul, lhs, parse_unary());
      else if (accept("/")) lhs = binary(Op::div, lhs, parse_unary());
      else if (accept("%")) lhs = binary(Op::mod, lhs, parse_unary());
      else return lhs;
    }
  }
  // Every nested parse (unary operators, parentheses, call arguments) recurses through here.
  NodePtr parse_unary() {
    if (++nesting_ > kMaxDepth) fail("nested too deeply (more than " + std::to_string(kMaxDepth) + " levels)");
    NodePtr node = parse_unary_operand();
    --nesting_;
    return node;
  }
  NodePtr parse_unary_operand() {
    if (accept("-")) {
      auto node = std::make_shared<Expr::Node>();
      node->kind = Kind::negate;
      node->args = {parse_unary()};
      return deepen(std::move(node));
    }
    if (accept("+")) return parse_unary();
    if (accept("!")) {
      auto node = std::make_shared<Expr::Node>();
      node->kind = Kind::logical_not;
      node->args = {parse_unary()};
      return deepen(std::move(node));
    }
    return parse_primary();
  }

  NodePtr parse_primary() {
    skip_space();
    if (pos_ == text_.size()) fail("expected a number, a name or '(' before the end");
    const std::size_t start = pos_;
    const char c = text_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      std::int64_t value = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        const int digit = text_[pos_] - '0';
        if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, digit, &value))
          fail_at("integer literal does not fit in 64 bits", start);
        ++pos_;
      }
      if (pos_ < text_.size() && (is_name_char(text_[pos_]) || text_[pos_] == '.'))
        fail("not an integer (only integers are allowed)");
      return make_constant(value);
    }
    if (is_name_start(c)) {
      while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
      std::string name = text_.substr(start, pos_ - start);
      if (accept("(")) return parse_call(name, start);
      auto node = std::make_shared<Expr::Node>();
      node->kind = Kind::name;
      node->name = std::move(name);
      return node;
    }
    if (accept("(")) {
      NodePtr inner = parse_or();
      expect(")");
      return inner;
    }
    fail("unexpected '" + std::string(1, c) + "'");
  }

  NodePtr parse_call(const std::string& name, std::size_t start) {
    auto node = std::make_shared<Expr::Node>();
    node->kind = Kind::call;
    if (name == "cdiv") node->function = Function::cdiv;
    else if (name == "min") node->function = Function::min;
    else if (name == "max") node->function = Function::max;
    else fail_at("unknown function \"" + name + "\" (expected cdiv, min or max)", start);
    if (accept(")")) fail_at(name + "() needs arguments", start);
    node->args.push_back(parse_or());
    while (accept(",")) node->args.push_back(parse_or());
    expect(")");
    if (node->function == Function::cdiv && node->args.size() != 2)
      fail_at("cdiv takes 2 arguments, not " + std::to_string(node->args.size()), start);
    return deepen(std::move(node));
  }

  const std::string& text_;
  const std::string& where_;
  std::size_t pos_ = 0;
  int nesting_ = 0;  // parse_unary calls in progress
};

class Evaluator {
 public:
  Evaluator(const Bindings& names, const std::string& text, const std::string& where)
      : names_(names), text_(text), where_(where) {}

  std::int64_t eval(const Expr::Node& node) const {
    switch (node.kind) {
      case Kind::constant: return node.value;
      case Kind::name: {
        auto found = names_.find(node.name);
        if (found == names_.end()) fail("unknown name \"" + node.name + "\"");
        return found->second;
      }
      case Kind::negate: {
        const std::int64_t value = eval(*node.args[0]);
        if (value == std::numeric_limits<std::int64_t>::min()) fail("integer overflow");
        return -value;
      }
      case Kind::logical_not: return eval(*node.args[0]) == 0 ? 1 : 0;
      case Kind::binary: return eval_binary(node);
      case Kind::call: return eval_call(node);
    }
    fail("corrupt expression");
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    throw Error(ErrorCode::BadSpec, where_ + ": cannot evaluate \"" + text_ + "\": " + problem);
  }

  std::int64_t eval_binary(const Expr::Node& node) const {
    const std::int64_t lhs = eval(*node.args[0]);
    // && and || short-circuit like C, so "N > 0 && M / N > 2" is safe.
    if (node.op == Op::logical_and) return lhs != 0 && eval(*node.args[1]) != 0 ? 1 : 0;
    if (node.op == Op::logical_or) return lhs != 0 || eval(*node.args[1]) != 0 ? 1 : 0;
    const std::int64_t rhs = eval(*node.args[1]);
    std::int64_t result = 0;
    switch (node.op) {
      case Op::add:
        if (__builtin_add_overflow(lhs, rhs, &result)) fail("integer overflow");
        return result;
      case Op::sub:
        if (__builtin_sub_overflow(lhs, rhs, &result)) fail("integer overflow");
        return result;
      case Op::mul:
        if (__builtin_mul_overflow(lhs, rhs, &result)) fail("integer overflow");
        return result;
      case Op::div: return divide(lhs, rhs);
      case Op::mod:
        if (rhs == 0) fail("modulo by zero");
        if (rhs == -1) return 0;  // INT64_MIN % -1 traps in C; the answer is 0 for every lhs
        return lhs % rhs;
      case Op::lt: return lhs < rhs;
      case Op::le: return lhs <= rhs;
      case Op::gt: return lhs > rhs;
      case Op::ge: return lhs >= rhs;
      case Op::eq: return lhs == rhs;
      case Op::ne: return lhs != rhs;
      default: fail("corrupt expression");
    }
  }

  std::int64_t divide(std::int64_t lhs, std::int64_t rhs) const {
    if (rhs == 0) fail("division by zero");
    if (lhs == std::numeric_limits<std::int64_t>::min() && rhs == -1) fail("integer overflow");
    return lhs / rhs;  // truncates toward zero, as in C
  }

  std::int64_t eval_call(const Expr::Node& node) const {
    switch (node.function) {
      case Function::cdiv: {
        const std::int64_t lhs = eval(*node.args[0]);
        const std::int64_t rhs = eval(*node.args[1]);
        if (rhs == 0) fail("division by zero in cdiv");
        std::int64_t quotient = divide(lhs, rhs);
        // Round toward +infinity: bump the truncated quotient when it was rounded down.
        if (lhs % rhs != 0 && ((lhs < 0) == (rhs < 0))) ++quotient;
        return quotient;
      }
      case Function::min:
      case Function::max: {
        std::int64_t best = eval(*node.args[0]);
        for (std::size_t i = 1; i < node.args.size(); ++i) {
          const std::int64_t value = eval(*node.args[i]);
          best = node.function == Function::min ? std::min(best, value) : std::max(best, value);
        }
        return best;
      }
    }
    fail("corrupt expression");
  }

  const Bindings& names_;
  const std::string& text_;
  const std::string& where_;
};

void collect_names(const Expr::Node& node, std::set<std::string>& out) {
  if (node.kind == Kind::name) out.insert(node.name);
  for (const auto& arg : node.args) collect_names(*arg, out);
}

}  // namespace

Expr Expr::parse(const std::string& text, const std::string& where) {
  Expr expr;
  expr.text_ = text;
  expr.where_ = where;
  expr.root_ = Parser(expr.text_, expr.where_).parse();
  return expr;
}

Expr Expr::constant(std::int64_t value) {
  Expr expr;
  expr.text_ = std::to_string(value);
  expr.where_ = "constant";
  expr.root_ = make_constant(value);
  return expr;
}

std::int64_t Expr::eval(const Bindings& names) const {
  if (!root_) return 0;  // a default-constructed Expr reads as the constant 0
  return Evaluator(names, text_, where_.empty() ? std::string("expression") : where_).eval(*root_);
}

std::vector<std::string> Expr::names() const {
  std::set<std::string> names;
  if (root_) collect_names(*root_, names);
  return {names.begin(), names.end()};
}

}  // namespace kernelevolve
