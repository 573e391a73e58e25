// Python source read without running it (python_source.hpp).
#include "python_source.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdint>

#include "headroom/core/error.hpp"
#include "text.hpp"

namespace headroom::calibrate::python {

using text::at;

std::vector<Token> tokens(std::string_view s, std::string_view where) {
  std::vector<Token> out;
  int line = 1, depth = 0, indent = 0;
  bool at_line_start = true;
  std::size_t i = 0;
  while (i < s.size()) {
    if (at_line_start && depth == 0) {  // measure the indentation of a new logical line
      int col = 0;
      std::size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) col += s[j++] == '\t' ? 8 : 1;
      if (j < s.size() && s[j] != '\n' && s[j] != '#' && s[j] != '\r') indent = col;
      i = j;
      if (i >= s.size()) break;
      if (s[i] == '\n' || s[i] == '#' || s[i] == '\r') {
        at_line_start = s[i] != '#';
        if (s[i] == '#') {
          while (i < s.size() && s[i] != '\n') ++i;
          continue;
        }
        line += s[i] == '\n' ? 1 : 0;
        ++i;
        at_line_start = true;
        continue;
      }
    }
    const char c = s[i];
    const bool first = at_line_start && depth == 0;
    const auto push = [&](Tok k, std::string t) {
      out.push_back({k, std::move(t), line, indent, first});
      at_line_start = false;
    };
    if (c == '\n') {
      ++line, ++i;
      if (depth == 0) at_line_start = true;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
      ++i;
      continue;
    }
    if (c == '#') {
      while (i < s.size() && s[i] != '\n') ++i;
      continue;
    }
    if (c == '\\' && i + 1 < s.size() && s[i + 1] == '\n') {
      i += 2, ++line;
      continue;
    }
    // A string, with any of Python's prefixes (r, b, f, u and their pairs).
    std::size_t q = i;
    while (q < s.size() && q - i < 2 && std::string_view("rRbBfFuU").find(s[q]) != std::string_view::npos) ++q;
    if (q < s.size() && (s[q] == '"' || s[q] == '\'')) {
      const char quote = s[q];
      const bool triple = s.substr(q, 3) == std::string(3, quote);
      const bool raw = s.substr(i, q - i).find_first_of("rR") != std::string_view::npos;
      const int start = line;
      std::size_t j = q + (triple ? 3 : 1);
      std::string value;
      for (;;) {
        if (j >= s.size()) throw Error(at(where, start) + ": a string without its closing quote");
        if (triple ? s.substr(j, 3) == std::string(3, quote) : s[j] == quote) break;
        if (s[j] == '\n') {
          if (!triple) throw Error(at(where, line) + ": a string without its closing quote");
          ++line;
        }
        if (s[j] == '\\' && j + 1 < s.size()) {
          if (s[j + 1] == '\n') ++line;
          if (raw) value += s[j];
          value += s[j + 1];
          j += 2;
          continue;
        }
        value += s[j++];
      }
      i = j + (triple ? 3 : 1);
      out.push_back({Tok::string, std::move(value), start, indent, first});
      at_line_start = false;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_') {
      std::size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) != 0 || s[j] == '_')) ++j;
      push(Tok::name, std::string(s.substr(i, j - i)));
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) != 0 ||
        (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])) != 0)) {
      std::size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) != 0 || s[j] == '_' || s[j] == '.' ||
                              ((s[j] == '+' || s[j] == '-') && (s[j - 1] == 'e' || s[j - 1] == 'E'))))
        ++j;
      std::string number;
      for (const char x : s.substr(i, j - i))
        if (x != '_') number += x;
      push(Tok::number, number);
      i = j;
      continue;
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && --depth < 0) throw Error(at(where, line) + ": an unmatched '" + c + "'");
    static constexpr std::array<std::string_view, 12> kPairs = {"==", "!=", "<=", ">=", "->", "**",
                                                                "//", "+=", "-=", "*=", ":=", "/="};
    const auto two = s.substr(i, 2);
    if (std::find(kPairs.begin(), kPairs.end(), two) != kPairs.end()) {
      push(Tok::op, std::string(two));
      i += 2;
      continue;
    }
    push(Tok::op, std::string(1, c));
    ++i;
  }
  if (depth != 0) throw Error(std::string(where) + ": a bracket is not closed at the end of the file");
  return out;
}

namespace {

class Parser {
 public:
  Parser(const std::vector<Token>& t, std::string_view where) : t_(t), where_(where) {}

  [[nodiscard]] bool is(std::size_t i, std::string_view op) const {
    return i < t_.size() && t_[i].kind == Tok::op && t_[i].text == op;
  }

  // The expression at i, ending before a ',' or a closing bracket or '=' or ':' of the same depth, or a new line.
  Expr expression(std::size_t& i) const {
    Expr e = primary(i);
    if (e.kind == Expr::Kind::number) fold_integers(i, e);
    // Anything else that continues the expression (an operator, a conditional) makes it `other`.
    if (i < t_.size() && !t_[i].starts_line && !ends_expression(i)) {
      e = Expr{Expr::Kind::other, "an expression", {}, {}, t_[i].line, {}};
      skip_to_end(i);
    }
    return e;
  }

  // An if's condition (Function::Statement::test): `[not] operand [(==|!=|is [not]) operand]`; "?" for another form,
  // the rest of its line left to the caller.
  void condition(std::size_t& i, Function::Statement& s) const {
    for (std::size_t j = i; !condition_ends(j) && s.condition.size() < 120; ++j) {  // spaced as Python is written
      const bool joined = j == i || is(j, ".") || is(j, ",") || is(j, "(") || is(j, ")") || is(j, "[") || is(j, "]") ||
                          is(j - 1, ".") || is(j - 1, "(") || is(j - 1, "[");
      s.condition += (joined ? "" : " ") + t_[j].text;
    }
    const bool negated = named(i, "not");
    if (negated) ++i;
    s.value = operand(i);
    if (condition_ends(i)) {
      s.test = negated ? "not" : "";
      return;
    }
    if (!negated && (is(i, "==") || is(i, "!="))) {
      s.test = t_[i++].text;
    } else if (!negated && named(i, "is")) {
      s.test = named(++i, "not") ? "is not" : "is";
      i += s.test == "is not" ? 1 : 0;
    }
    if (!s.test.empty()) {
      s.rhs = operand(i);
      if (condition_ends(i)) return;
    }
    s.test = "?";
  }

 private:
  [[nodiscard]] bool named(std::size_t i, std::string_view name) const {
    return i < t_.size() && t_[i].kind == Tok::name && t_[i].text == name;
  }
  [[nodiscard]] bool condition_ends(std::size_t i) const { return i >= t_.size() || t_[i].starts_line || is(i, ":"); }
  Expr operand(std::size_t& i) const {
    if (i >= t_.size() || t_[i].starts_line) fail(i, "a condition without its operand");
    Expr e = primary(i);
    if (e.kind == Expr::Kind::number) fold_integers(i, e);
    return e;
  }
  [[nodiscard]] bool ends_expression(std::size_t i) const {
    return is(i, ",") || is(i, ")") || is(i, "]") || is(i, "}") || is(i, "=") || is(i, ":");
  }
  void skip_to_end(std::size_t& i) const {
    int depth = 0;
    while (i < t_.size() && !(depth == 0 && (ends_expression(i) || t_[i].starts_line))) {
      if (is(i, "(") || is(i, "[") || is(i, "{")) ++depth;
      if (is(i, ")") || is(i, "]") || is(i, "}")) --depth;
      ++i;
    }
  }
  // An integer literal followed by integer arithmetic of literals (`8 * 8192`, `2 * 1024 + 512`, `-1`): +, -, * and
  // // with Python's precedence, folded into one number while every value stays within 10^18; anything else (a name,
  // a float, a bracket, an overflow) leaves `e` and `i` as they were.
  void fold_integers(std::size_t& i, Expr& e) const {
    const auto integer = [](const std::string& text, std::int64_t& x) {
      const char* end = text.data() + text.size();
      const auto [p, ec] = std::from_chars(text.data(), end, x);
      return ec == std::errc() && p == end;
    };
    constexpr std::int64_t kBound = 1'000'000'000'000'000'000;
    std::int64_t sum = 0, product = 0;
    if (!integer(e.text, product)) return;
    std::size_t j = i;
    int sign = 1;
    bool folded = false;
    while (is(j, "*") || is(j, "//") || is(j, "+") || is(j, "-")) {
      const std::string op = t_[j].text;
      std::int64_t x = 0;
      if (j + 1 >= t_.size() || t_[j + 1].kind != Tok::number || !integer(t_[j + 1].text, x)) return;
      if (op == "*" || op == "//") {
        if (op == "//" && x == 0) return;
        if (x > kBound || (op == "*" && __builtin_mul_overflow(product, x, &product))) return;
        if (op == "//") product = product >= 0 ? product / x : -((-product + x - 1) / x);  // Python floors
        if (product > kBound || product < -kBound) return;
      } else {
        sum += sign * product, sign = op == "+" ? 1 : -1, product = x;
        if (sum > kBound || sum < -kBound || x > kBound) return;
      }
      j += 2, folded = true;
    }
    if (!folded) return;
    e.text = std::to_string(sum + sign * product);
    i = j;
  }
  [[noreturn]] void fail(std::size_t i, const std::string& what) const {
    throw Error(at(where_, i < t_.size() ? t_[i].line : t_.empty() ? 1 : t_.back().line) + ": " + what);
  }
  Expr primary(std::size_t& i) const {
    if (i >= t_.size()) fail(i, "the file ends inside an expression");
    struct Nesting {  // brackets and calls inside one another, bounded: the recursion follows them
      int& depth;
      explicit Nesting(int& d) : depth(++d) {}
      ~Nesting() { --depth; }
      Nesting(const Nesting&) = delete;
      Nesting& operator=(const Nesting&) = delete;
      Nesting(Nesting&&) = delete;
      Nesting& operator=(Nesting&&) = delete;
    } nesting(depth_);
    if (depth_ > kMaxNesting) fail(i, "expressions nested deeper than " + std::to_string(kMaxNesting));
    const Token& tk = t_[i];
    Expr e;
    e.line = tk.line;
    if (tk.kind == Tok::number || (is(i, "-") && i + 1 < t_.size() && t_[i + 1].kind == Tok::number)) {
      e.kind = Expr::Kind::number;
      e.text = is(i, "-") ? "-" + t_[++i].text : tk.text;
      ++i;
    } else if (tk.kind == Tok::string) {
      e.kind = Expr::Kind::string;
      while (i < t_.size() && t_[i].kind == Tok::string) e.text += t_[i++].text;  // adjacent literals join
    } else if (tk.kind == Tok::name) {
      e.kind = Expr::Kind::name;
      e.text = t_[i++].text;
      while (is(i, ".") && i + 1 < t_.size() && t_[i + 1].kind == Tok::name) e.text += "." + t_[i + 1].text, i += 2;
    } else if (is(i, "[") || is(i, "(") || is(i, "{")) {
      const std::string close = is(i, "[") ? "]" : is(i, "(") ? ")" : "}";
      e.kind = Expr::Kind::list;
      e.text = tk.text + "..." + close;
      ++i;
      bool comma = false;
      while (!is(i, close)) {
        e.args.push_back(expression(i));
        if (is(i, ",") || is(i, ":")) {
          if (is(i, ",")) comma = true;
          ++i;
        } else if (!is(i, close))
          fail(i, "expected ',' or '" + close + "'");
      }
      ++i;
      // `(x)`, one expression in brackets and no comma, is x, not a tuple (`cfg.x = (\n    True  # why\n)`).
      if (close == ")" && e.args.size() == 1 && !comma) {
        Expr inner = std::move(e.args.front());
        e = std::move(inner);
      }
    } else {
      e.text = "an expression";
      skip_to_end(i);
      return e;
    }
    // A call: positional, keyword, *args and **kwargs. A method called on a call's value
    // (`AutoBridge.from_hf_pretrained(id).get_model_config()`) is the call `<callee>(...).<method>` whose first
    // argument, keyed kReceiver, is that value.
    std::string method;  // `.method(` after a call, which the next round makes the call
    while (is(i, "(") && (e.kind == Expr::Kind::name || (e.kind == Expr::Kind::call && !method.empty()))) {
      if (e.kind == Expr::Kind::call) {
        Expr receiver = std::move(e);
        receiver.key = kReceiver;
        e = Expr{Expr::Kind::name, receiver.text + "(...)." + method, {}, {}, receiver.line, {}};
        e.args.push_back(std::move(receiver));
        method.clear();
      }
      e.kind = Expr::Kind::call;
      ++i;
      while (!is(i, ")")) {
        if (i + 1 < t_.size() && t_[i].kind == Tok::name && is(i + 1, "=")) {
          const std::string key = t_[i].text;
          i += 2;
          e.kwargs.push_back(expression(i));
          e.kwargs.back().key = key;
        } else {
          if (is(i, "*") || is(i, "**")) ++i;
          e.args.push_back(expression(i));
        }
        if (is(i, ","))
          ++i;
        else if (!is(i, ")"))
          fail(i, "expected ',' or ')' in the arguments of " + e.text);
      }
      ++i;
      if (is(i, ".") && i + 2 < t_.size() && t_[i + 1].kind == Tok::name && is(i + 2, "(")) {
        method = t_[i + 1].text;
        i += 2;
      }
    }
    return e;
  }

  static constexpr int kMaxNesting = 64;
  const std::vector<Token>& t_;
  std::string_view where_;
  mutable int depth_ = 0;
};

}  // namespace

std::map<std::string, Function> top_level_functions(const std::vector<Token>& t, std::string_view where) {
  std::map<std::string, Function> out;
  const Parser p(t, where);
  // A statement's value ends its line: a tuple without brackets (`return a, b`, `x = a, b`) is read as the list
  // "(...)" that `(a, b)` is; a value followed by anything else (`x = a if c else b`) is not one value, named `what`.
  const auto line_ends = [&](std::size_t i) { return i >= t.size() || t[i].starts_line; };
  const auto more_than_one = [](const Expr& first, const char* what) {
    return Expr{Expr::Kind::other, what, {}, {}, first.line, {}};
  };
  const auto rest_of_tuple = [&](std::size_t& i, Expr first) {
    if (!p.is(i, ",")) return first;
    Expr tuple{Expr::Kind::list, "(...)", {}, {}, first.line, {}};
    tuple.args.push_back(std::move(first));
    while (p.is(i, ",") && !line_ends(i + 1)) tuple.args.push_back(p.expression(++i));
    if (p.is(i, ",")) ++i;  // `a, b,`
    return tuple;
  };
  std::size_t i = 0;
  while (i < t.size()) {
    if (!(t[i].starts_line && t[i].indent == 0 && t[i].kind == Tok::name && t[i].text == "def")) {
      ++i;
      continue;
    }
    if (i + 2 >= t.size() || t[i + 1].kind != Tok::name || !p.is(i + 2, "("))
      throw Error(at(where, t[i].line) + ": expected 'def name('");
    Function f;
    f.line = t[i].line;
    const std::string name = t[i + 1].text;
    i += 3;
    while (!p.is(i, ")")) {
      std::string star;  // "*args" and "**kwargs" keep their stars
      if (p.is(i, "*") || p.is(i, "**") || p.is(i, "/")) star = t[i++].text == "/" ? "" : t[i - 1].text;
      if (p.is(i, ",")) {
        ++i;
        continue;
      }
      if (i >= t.size() || t[i].kind != Tok::name) throw Error(at(where, f.line) + ": a parameter of " + name);
      std::string param = star + t[i++].text;
      if (p.is(i, ":")) (void)p.expression(++i);  // the annotation
      std::optional<Expr> fallback;
      if (p.is(i, "=")) fallback = p.expression(++i);
      f.params.emplace_back(std::move(param), std::move(fallback));
      if (p.is(i, ","))
        ++i;
      else if (!p.is(i, ")"))
        throw Error(at(where, f.line) + ": expected ',' or ')' in the parameters of " + name);
    }
    ++i;
    if (p.is(i, "->")) (void)p.expression(++i);
    if (!p.is(i, ":")) throw Error(at(where, f.line) + ": expected ':' after the parameters of " + name);
    ++i;
    // The body: every logical line until the next one at column 0. A line the parser cannot read is kept as a
    // statement of that name, refused only where the function runs it (a file's other functions stay readable).
    while (i < t.size() && !(t[i].starts_line && t[i].indent == 0)) {
      const std::size_t start = i;
      Function::Statement s;
      s.line = t[i].line, s.indent = t[i].indent;
      try {
        if (t[i].kind == Tok::name && t[i].text == "def" && i + 1 < t.size() && t[i + 1].kind == Tok::name) {
          s.keyword = "def";  // a nested function: its name; its parameters and body are not read
          s.target = t[i + 1].text;
          i += 2;
        } else if (t[i].kind == Tok::name &&
                   (t[i].text == "if" || t[i].text == "elif" || t[i].text == "while" || t[i].text == "for" ||
                    t[i].text == "with" || t[i].text == "try" || t[i].text == "else" || t[i].text == "except" ||
                    t[i].text == "return" || t[i].text == "assert" || t[i].text == "def" || t[i].text == "from" ||
                    t[i].text == "import" || t[i].text == "raise" || t[i].text == "pass")) {
          s.keyword = t[i++].text;
          if ((s.keyword == "if" || s.keyword == "elif") && i < t.size() && !t[i].starts_line) {
            p.condition(i, s);
            if (s.test.empty() && s.value->kind == Expr::Kind::name) s.target = s.value->text;
          } else if (s.keyword != "else" && s.keyword != "try" && i < t.size() && !t[i].starts_line && !p.is(i, ":")) {
            s.value = p.expression(i);
            if (s.value->kind == Expr::Kind::name) s.target = s.value->text;
            if (s.keyword == "return") s.value = rest_of_tuple(i, std::move(*s.value));  // `return a, b`
            if (s.keyword == "return" && !line_ends(i)) s.value = more_than_one(*s.value, "an expression list");
          }
          if (s.test != "?" && p.is(i, ":") && i + 1 < t.size() && !t[i + 1].starts_line) s.inline_block = true;
        } else {
          Expr e = p.expression(i);
          // `a, b = f()`, `cfg.optimizer, cfg.scheduler = f()`: the names or fields unpacked (any other target list is
          // an expression's).
          std::vector<std::string> names;
          if (e.kind == Expr::Kind::name && p.is(i, ",")) {
            std::size_t j = i;
            names.push_back(e.text);
            while (p.is(j, ",") && j + 1 < t.size() && t[j + 1].kind == Tok::name && !t[j + 1].starts_line) {
              std::size_t k = j + 1;
              const Expr next = p.expression(k);
              if (next.kind != Expr::Kind::name) break;
              names.push_back(next.text), j = k;
            }
            if (p.is(j, "=") && names.size() > 1)
              i = j;
            else
              names.clear();
          }
          if (p.is(i, "=")) {
            s.keyword = "=";
            s.target = !names.empty() ? "a tuple" : e.kind == Expr::Kind::name ? e.text : "an expression";
            s.targets = std::move(names);
            Expr first = p.expression(++i);
            while (p.is(i, "=")) {  // `x = cfg.y = 1`: each further target a name or field, given the same value
              if (first.kind != Expr::Kind::name || !s.targets.empty()) s.target = "an expression";
              s.chained.push_back(first.text);
              first = p.expression(++i);
            }
            s.value = rest_of_tuple(i, std::move(first));
            if (!line_ends(i)) s.value = more_than_one(*s.value, "an expression");
          } else {
            s.value = line_ends(i) ? std::move(e) : more_than_one(e, "an expression list");  // `f(), g()`
          }
        }
      } catch (const Error& e) {
        s = Function::Statement{};
        s.line = t[start].line, s.indent = t[start].indent;
        const std::string why = e.what();
        s.value = Expr{Expr::Kind::other,
                       "a line headroom cannot read (" + why.substr(why.find(": ") + 2) + ")",
                       {},
                       {},
                       s.line,
                       {}};
      }
      if (i == start) ++i;  // a line that starts with no expression (an operator): its first token
      while (i < t.size() && !t[i].starts_line) ++i;  // the rest of the line (a block's ':', a docstring, ...)
      f.body.push_back(std::move(s));
    }
    out[name] = std::move(f);
  }
  return out;
}

namespace {
void tag(Expr& e, int file) {
  e.file = file;
  for (Expr& a : e.args) tag(a, file);
  for (Expr& a : e.kwargs) tag(a, file);
}
}  // namespace

Module read_module(std::string_view text, std::string_view where, int file) {
  const std::vector<Token> t = tokens(text, where);
  Module m;
  m.functions = top_level_functions(t, where);
  const Parser p(t, where);
  const auto name = [&](std::size_t i) { return i < t.size() && t[i].kind == Tok::name && !t[i].starts_line; };
  const auto word = [&](std::size_t i, std::string_view w) { return name(i) && t[i].text == w; };
  const auto dotted = [&](std::size_t& i) {  // a.b.c, or a relative module's leading dots
    std::string out;
    while (i < t.size() && !t[i].starts_line && p.is(i, ".")) out += t[i++].text;
    while (name(i)) {
      out += t[i++].text;
      if (!(p.is(i, ".") && name(i + 1))) break;
      out += t[i++].text;
    }
    return out;
  };
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (!t[i].starts_line || t[i].indent != 0) continue;
    if (t[i].kind == Tok::name && t[i].text == "from") {
      std::size_t j = i + 1;
      const std::string module = dotted(j);
      if (!word(j, "import")) continue;
      for (++j; j < t.size() && !t[j].starts_line; ++j) {
        if (!name(j)) continue;  // '(', ',', ')' and '*'
        const std::string n = t[j].text;
        const bool alias = word(j + 1, "as") && name(j + 2);
        m.imports[alias ? t[j + 2].text : n] = module + "." + n;
        j += alias ? 2 : 0;
      }
    } else if (t[i].kind == Tok::name && t[i].text == "import") {
      for (std::size_t j = i + 1; j < t.size() && !t[j].starts_line; ++j) {
        const std::string module = dotted(j);
        if (word(j, "as") && name(j + 1)) {
          m.imports[t[j + 1].text] = module;
          j += 2;
        } else if (!module.empty()) {
          m.imports[module.substr(0, module.find('.'))] = module.substr(0, module.find('.'));
        }
        if (j >= t.size() || t[j].starts_line) break;
      }
    } else if (t[i].kind == Tok::name && i + 1 < t.size() && (p.is(i + 1, "=") || p.is(i + 1, ":"))) {
      std::size_t j = i + 1;
      if (p.is(j, ":")) {  // `NAME: int = 16384`: the annotation, then its value
        if (++j >= t.size() || t[j].starts_line) continue;
        (void)p.expression(j);
        if (!p.is(j, "=")) continue;
      }
      if (++j >= t.size() || t[j].starts_line) continue;
      Expr e = p.expression(j);
      if (e.kind == Expr::Kind::string || e.kind == Expr::Kind::number || e.kind == Expr::Kind::name)
        m.constants[t[i].text] = std::move(e);
    }
  }
  for (auto& [n, f] : m.functions) {
    for (auto& [param, fallback] : f.params)
      if (fallback) tag(*fallback, file);
    for (Function::Statement& st : f.body)
      for (std::optional<Expr>* e : {&st.value, &st.rhs})
        if (e->has_value()) tag(e->value(), file);
  }
  for (auto& [n, e] : m.constants) tag(e, file);
  return m;
}

std::string plain_value(const Expr& e) {
  if (e.kind == Expr::Kind::name && (e.text == "True" || e.text == "False")) return e.text == "True" ? "true" : "false";
  return e.text;
}

Expr value_of(std::string_view v, int line) {
  Expr e;
  e.line = line;
  e.text = v == "true" ? "True" : v == "false" ? "False" : std::string(v);
  e.kind = e.text == "True" || e.text == "False" || e.text == "None"                       ? Expr::Kind::name
           : text::number(v) || (v.size() > 1 && v[0] == '-' && text::number(v.substr(1))) ? Expr::Kind::number
                                                                                           : Expr::Kind::string;
  return e;
}

void calls_in(const Expr& e, std::vector<const Expr*>& out) {
  if (e.kind == Expr::Kind::call) out.push_back(&e);
  for (const Expr& a : e.args) calls_in(a, out);
  for (const Expr& a : e.kwargs) calls_in(a, out);
}
std::vector<const Expr*> calls_in(const Function& f) {
  std::vector<const Expr*> out;
  for (const auto& s : f.body)
    if (s.value) calls_in(*s.value, out);
  return out;
}
}  // namespace headroom::calibrate::python
