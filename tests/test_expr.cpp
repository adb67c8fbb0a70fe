// The integer expression language of the spec's launch rule, constraints and cost.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "kernelevolve/error.hpp"
#include "kernelevolve/expr.hpp"

using kernelevolve::Bindings;
using kernelevolve::Error;
using kernelevolve::ErrorCode;
using kernelevolve::Expr;

namespace {

std::int64_t eval(const std::string& text, const Bindings& names = {}) { return Expr::parse(text).eval(names); }

// The message of the BadSpec error that `action` throws; fails the test if it throws anything else.
template <typename Action>
std::string bad_spec_message(Action action) {
  try {
    action();
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::BadSpec);
    CHECK(error.exit_code() == 2);
    return error.what();
  }
  FAIL("expected Error(BadSpec)");
  return {};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("integers, names and whitespace") {
  CHECK(eval("42") == 42);
  CHECK(eval("  7 ") == 7);
  CHECK(eval("M", {{"M", 4096}}) == 4096);
  CHECK(eval("_tile_2", {{"_tile_2", 3}}) == 3);
  CHECK(eval("9223372036854775807") == std::numeric_limits<std::int64_t>::max());
  CHECK(Expr::constant(-5).eval({}) == -5);
  CHECK(Expr::constant(12).text() == "12");
  CHECK(Expr::parse("M * 2").text() == "M * 2");
}

TEST_CASE("precedence and associativity follow C") {
  CHECK(eval("2 + 3 * 4") == 14);
  CHECK(eval("(2 + 3) * 4") == 20);
  CHECK(eval("10 - 4 - 3") == 3);    // left-associative
  CHECK(eval("100 / 10 / 5") == 2);  // left-associative
  CHECK(eval("7 % 4 * 3") == 9);     // same level as *, left to right
  CHECK(eval("2 * 3 % 4") == 2);
  CHECK(eval("1 + 2 < 4") == 1);    // arithmetic binds tighter than comparison
  CHECK(eval("3 < 4 == 1") == 1);   // relational binds tighter than equality
  CHECK(eval("1 || 0 && 0") == 1);  // && binds tighter than ||
  CHECK(eval("(1 || 0) && 0") == 0);
  CHECK(eval("((((1))))") == 1);
}

TEST_CASE("comparisons and logic give 0 or 1") {
  CHECK(eval("3 < 4") == 1);
  CHECK(eval("4 < 4") == 0);
  CHECK(eval("4 <= 4") == 1);
  CHECK(eval("5 > 4") == 1);
  CHECK(eval("4 >= 5") == 0);
  CHECK(eval("4 == 4") == 1);
  CHECK(eval("4 != 4") == 0);
  CHECK(eval("7 && 3") == 1);
  CHECK(eval("0 || 0") == 0);
  CHECK(eval("!0") == 1);
  CHECK(eval("!5") == 0);
  CHECK(eval("THREADS * ROWS <= 4096", {{"THREADS", 1024}, {"ROWS", 4}}) == 1);
  CHECK(eval("THREADS * ROWS <= 4096", {{"THREADS", 1024}, {"ROWS", 8}}) == 0);
  CHECK(eval("THREADS % 32 == 0 && THREADS <= 1024", {{"THREADS", 96}}) == 1);
}

TEST_CASE("&& and || short-circuit") {
  CHECK(eval("N > 0 && M / N > 2", {{"M", 10}, {"N", 0}}) == 0);
  CHECK(eval("N == 0 || M / N > 2", {{"M", 10}, {"N", 0}}) == 1);
}

TEST_CASE("division and modulo truncate toward zero like C") {
  CHECK(eval("7 / 2") == 3);
  CHECK(eval("-7 / 2") == -3);
  CHECK(eval("7 / -2") == -3);
  CHECK(eval("-7 / -2") == 3);
  CHECK(eval("7 % 3") == 1);
  CHECK(eval("-7 % 3") == -1);
  CHECK(eval("7 % -3") == 1);
  CHECK(eval("-9223372036854775807 - 1") == std::numeric_limits<std::int64_t>::min());
  CHECK(eval("(-9223372036854775807 - 1) % -1") == 0);
}

TEST_CASE("unary minus") {
  CHECK(eval("-3") == -3);
  CHECK(eval("--3") == 3);
  CHECK(eval("-(2 + 3)") == -5);
  CHECK(eval("-2 * 3") == -6);
  CHECK(eval("4 - -2") == 6);
  CHECK(eval("-M", {{"M", 8}}) == -8);
  CHECK(eval("+5") == 5);
}

TEST_CASE("cdiv, min and max") {
  CHECK(eval("cdiv(10, 3)") == 4);
  CHECK(eval("cdiv(9, 3)") == 3);
  CHECK(eval("cdiv(1, 1024)") == 1);
  CHECK(eval("cdiv(0, 7)") == 0);
  CHECK(eval("cdiv(-7, 2)") == -3);  // ceiling, also for negatives
  CHECK(eval("cdiv(-7, -2)") == 4);
  CHECK(eval("cdiv(M, ROWS)", {{"M", 1000}, {"ROWS", 4}}) == 250);
  CHECK(eval("cdiv(M, ROWS)", {{"M", 1001}, {"ROWS", 4}}) == 251);
  CHECK(eval("min(3, 1, 2)") == 1);
  CHECK(eval("max(3, 1, 2)") == 3);
  CHECK(eval("min(7)") == 7);
  CHECK(eval("max(-1, -5)") == -1);
  CHECK(eval("min(N, max(64, cdiv(N, 8)))", {{"N", 1000}}) == 125);
  CHECK(eval("cdiv( M , 2 ) * 2", {{"M", 5}}) == 6);
}

TEST_CASE("names() lists each name once, sorted, without function names") {
  CHECK(Expr::parse("cdiv(M, ROWS) * ROWS + min(N, 4) - M").names() == std::vector<std::string>{"M", "N", "ROWS"});
  CHECK(Expr::parse("1 + 2").names().empty());
  CHECK(Expr::constant(3).names().empty());
}

TEST_CASE("syntax errors throw BadSpec naming where and the position") {
  const std::string where = "problems/x/spec.json: launch.grid[0]";
  struct Case {
    const char* text;
    const char* problem;
  };
  for (const Case& c :
       {Case{"", "empty expression"}, Case{"   ", "empty expression"}, Case{"1 +", "before the end"},
        Case{"(1 + 2", "expected ')'"}, Case{"1 + 2)", "unexpected ')'"}, Case{"M N", "unexpected 'N'"},
        Case{"2 $ 3", "unexpected '$'"}, Case{"pow(2, 3)", "unknown function \"pow\""},
        Case{"cdiv(1)", "cdiv takes 2 arguments"}, Case{"cdiv(1, 2, 3)", "cdiv takes 2 arguments"},
        Case{"min()", "needs arguments"}, Case{"max(1, )", "unexpected ')'"}, Case{"1.5 * N", "only integers"},
        Case{"12abc", "only integers"}, Case{"99999999999999999999", "does not fit in 64 bits"},
        Case{"a = 3", "unexpected '='"}, Case{"a & b", "unexpected '&'"}}) {
    CAPTURE(c.text);
    const std::string message = bad_spec_message([&] { Expr::parse(c.text, where); });
    CHECK(contains(message, where));
    CHECK(contains(message, c.problem));
    CHECK(contains(message, "column"));
  }
  // The column points at the problem.
  CHECK(contains(bad_spec_message([] { Expr::parse("(1 + 2", "e"); }), "column 7"));
  CHECK(contains(bad_spec_message([] { Expr::parse("M N", "e"); }), "column 3"));
  // Without a `where`, the message still says what it is.
  CHECK(contains(bad_spec_message([] { Expr::parse("1 +"); }), "expression"));
}

TEST_CASE("evaluation errors throw BadSpec naming the expression") {
  const std::string where = "spec.json: cost.flops";
  auto eval_message = [&](const std::string& text, const Bindings& names = {}) {
    return bad_spec_message([&] { Expr::parse(text, where).eval(names); });
  };
  std::string message = eval_message("M * K", {{"M", 3}});
  CHECK(contains(message, where));
  CHECK(contains(message, "\"M * K\""));
  CHECK(contains(message, "unknown name \"K\""));

  CHECK(contains(eval_message("N / 0", {{"N", 1}}), "division by zero"));
  CHECK(contains(eval_message("N / (M - M)", {{"N", 1}, {"M", 2}}), "division by zero"));
  CHECK(contains(eval_message("N % 0", {{"N", 1}}), "modulo by zero"));
  CHECK(contains(eval_message("cdiv(N, 0)", {{"N", 1}}), "division by zero"));
  CHECK(contains(eval_message("9223372036854775807 + 1"), "overflow"));
  CHECK(contains(eval_message("-9223372036854775807 - 2"), "overflow"));
  CHECK(contains(eval_message("M * M * M", {{"M", 1 << 22}}), "overflow"));
  CHECK(contains(eval_message("-(-9223372036854775807 - 1)"), "overflow"));
  CHECK(contains(eval_message("(-9223372036854775807 - 1) / -1"), "overflow"));
  // An unknown name in a branch that short-circuits is never read.
  CHECK(Expr::parse("0 && K").eval({}) == 0);
}

TEST_CASE("Expr is a value: copies share the parsed tree and evaluate alike") {
  Expr a = Expr::parse("cdiv(M, 4)");
  Expr b = a;
  a = Expr::constant(1);
  CHECK(b.eval({{"M", 9}}) == 3);
  CHECK(a.eval({}) == 1);
  Expr empty;
  CHECK(empty.eval({}) == 0);
  CHECK(empty.names().empty());
}

// Found by tests/fuzz/fuzz_expr: a deep expression overflowed the stack of the parser, eval() or names()
// (the tool died with SIGSEGV on such a spec). Now it is a BadSpec error naming the depth.
TEST_CASE("an expression nested too deeply is an error, not a stack overflow") {
  const std::size_t n = 100000;
  for (const std::string& text :
       {std::string(n, '(') + "1" + std::string(n, ')'), std::string(n, '-') + "1", std::string(n, '!') + "1", [&] {
          std::string sum = "1";
          for (std::size_t i = 0; i < n; ++i) sum += "+1";
          return sum;
        }()}) {
    CHECK(contains(bad_spec_message([&] { Expr::parse(text, "deep"); }), "nested too deeply"));
  }
  // What real specs write stays well inside the limit.
  std::string sum = "N";
  for (int i = 0; i < 100; ++i) sum += " + N";
  CHECK(eval(sum, {{"N", 2}}) == 202);
  CHECK(eval(std::string(100, '(') + "7" + std::string(100, ')')) == 7);
  CHECK(eval(std::string(100, '-') + "7") == 7);
}
