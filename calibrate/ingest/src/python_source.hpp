// Python source as the readers of Python job configs need it (internal to ingest/): tokens, expressions (literals,
// dotted names, calls with their arguments, lists; integer arithmetic of literals folded), and the top-level
// functions of a module with their parameters and statements. Nothing is run.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace headroom::calibrate::python {

enum class Tok { name, number, string, op };

struct Token {
  Tok kind;
  std::string text;
  int line;
  int indent;        // the indentation of the token's logical line
  bool starts_line;  // the first token of a logical line
};

// Python's tokens, as far as a config needs them: names, numbers, strings (any prefix, triple-quoted too), operators
// ('==', '->', '**' and the like as one token), comments dropped, lines inside brackets or after '\' joined.
[[nodiscard]] std::vector<Token> tokens(std::string_view s, std::string_view where);

// An expression as the recipe writes it: a literal, a (dotted) name, a call with its arguments; `other` for anything
// else (kept as its first line, refused only where a value is needed).
// The key of a method call's first argument, the value it is called on (python_source.cpp, Parser::primary).
inline constexpr std::string_view kReceiver = "(receiver)";

struct Expr {
  enum class Kind { name, number, string, call, list, other } kind = Kind::other;
  std::string text;  // the name, the number or string as written, the callee of a call
  std::vector<Expr> args;
  std::vector<Expr> kwargs;  // a call's keyword arguments, each with its `key`
  int line = 0;
  std::string key;  // the keyword an argument is passed under
  int file = 0;     // which module's text it was written in (the Evaluator's), -1 for the command line

  [[nodiscard]] const Expr* kwarg(std::string_view name) const {
    for (const Expr& v : kwargs)
      if (v.key == name) return &v;
    return nullptr;
  }
  [[nodiscard]] std::string shown() const {
    return kind == Kind::string ? "\"" + text + "\"" : kind == Kind::call ? text + "(...)" : text;
  }
};

// One top-level function: its parameters' defaults and its body's statements.
struct Function {
  int line = 0;
  std::vector<std::pair<std::string, std::optional<Expr>>> params;  // "*args" and "**kwargs" with their stars
  // The parameter `name` (its default, if it has one), nullptr when the function has none of that name.
  [[nodiscard]] const std::optional<Expr>* param(std::string_view name) const {
    for (const auto& [n, fallback] : params)
      if (n == name) return &fallback;
    return nullptr;
  }
  struct Statement {
    int line = 0, indent = 0;
    // "if", "return", "assert", "def", "from", ... (a block's or a simple statement's keyword), "=" (an assignment),
    // "" (an expression)
    std::string keyword;
    std::string target;                // an assignment's target; an if's condition as a name
    std::vector<std::string> targets;  // an unpacking assignment's names or fields (`a, b = f()`), target "a tuple"
    std::vector<std::string> chained;  // a chained assignment's further names or fields (`x = cfg.y = 1`: cfg.y)
    std::optional<Expr> value;
    // An if's or elif's condition: `value` alone ("") or negated ("not"), or compared with `rhs` ("==", "!=", "is",
    // "is not"); "?" for a condition of any other form (and, or, in, <, ...).
    std::string test;
    std::optional<Expr> rhs;
    std::string condition;      // an if's or elif's condition as written (its tokens, spaced), for messages
    bool inline_block = false;  // a block whose statements follow its ':' on the same line
  };
  std::vector<Statement> body;
};

// The module's top-level functions (`def` at column 0) by name.
[[nodiscard]] std::map<std::string, Function> top_level_functions(const std::vector<Token>& t, std::string_view where);

// A module as far as a config's functions need it: its functions, its constants (`NAME = "llama3_8b"` at column 0,
// a literal or a name) and what its imports bind (`from a.b import c as d`: d -> "a.b.c"; `import a.b as e`: e ->
// "a.b"). `file` tags every expression of it (Expr::file).
struct Module {
  std::map<std::string, Function> functions;
  std::map<std::string, Expr> constants;
  std::map<std::string, std::string> imports;
};
[[nodiscard]] Module read_module(std::string_view text, std::string_view where, int file = 0);
// A value as the configs outside Python write it (TOML, YAML, the layout's knobs): True/False as true/false, anything
// else (None, numbers, strings, a call's callee) as written.
[[nodiscard]] std::string plain_value(const Expr& e);
// A value given as text (a command-line override): True/False (or true/false), None and numbers (signed) as Python
// writes them, anything else a string.
[[nodiscard]] Expr value_of(std::string_view v, int line = 0);
// Every call inside an expression, or a function's statements, outermost first.
void calls_in(const Expr& e, std::vector<const Expr*>& out);
[[nodiscard]] std::vector<const Expr*> calls_in(const Function& f);

}  // namespace headroom::calibrate::python
