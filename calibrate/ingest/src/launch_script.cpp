// A launch script read as bash would run it up to its training command, for the part a launch script uses: variable
// and array assignments (NAME=value, NAME=(...), NAME+=(...), export), their expansions ($NAME, ${NAME},
// ${NAME:-default}, "${NAME[@]}", $((arithmetic))), quoting and word splitting, and if/elif/else blocks whose tests
// compare strings ([[ "$A" == b ]], -z, -n, !, || and &&) or integers (-eq, -ne, -lt, -le, -gt, -ge), and the files it
// writes with a here-document (cat <<EOF > FILE), and a while/until loop whose test fails as it is reached (an
// argument-parsing loop over $# of a script run without arguments). Nothing is guessed: a variable set in a block
// whose test is not a string comparison, or in a loop, case or function, is refused where the command uses it, naming
// it (launch_script_variants instead follows each outcome of such if tests, for check to compare what they price); a
// variable the script never sets (its arguments, the environment) reaches the command as "${NAME}(not set by the
// script)", which check refuses where the flag it is given to changes memory or time.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <optional>
#include <set>

#include "headroom/core/error.hpp"
#include "headroom/ingest/measured_runs.hpp"

namespace headroom::calibrate {
namespace {

// A word as written (quotes kept, expanded later), and whether it ends the array it is in: `)` outside quotes.
struct Lexer {
  const std::string& s;
  std::size_t i = 0;
  std::string where;

  [[nodiscard]] bool done() const { return i >= s.size(); }
  // Skips blanks and backslash-newlines; stops at a newline, ';' or a comment's end of line.
  void skip_blanks() {
    while (i < s.size()) {
      if (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')
        ++i;
      else if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == '\n')
        i += 2;
      else if (s[i] == '#') {
        while (i < s.size() && s[i] != '\n') ++i;
      } else
        break;
    }
  }
  // The next raw word; empty at a separator (newline or ';', consumed) or the end.
  std::string word(bool in_array) {
    skip_blanks();
    if (done()) return {};
    if (s[i] == '\n' || s[i] == ';') {
      ++i;
      return {};
    }
    std::string w;
    char quote = 0;
    int parens = 0;  // $( ... ) and $(( ... )) kept whole
    while (i < s.size()) {
      const char c = s[i];
      if (quote != 0) {
        if (c == '\\' && quote == '"' && i + 1 < s.size()) {
          w += c, w += s[i + 1], i += 2;
          continue;
        }
        if (c == quote) quote = 0;
        w += c, ++i;
        continue;
      }
      if (c == '\\' && i + 1 < s.size()) {
        if (s[i + 1] == '\n') {
          i += 2;
          continue;
        }
        w += c, w += s[i + 1], i += 2;
        continue;
      }
      if (c == '\'' || c == '"') {
        quote = c, w += c, ++i;
        continue;
      }
      if (c == '$' && i + 1 < s.size() && s[i + 1] == '(') {
        w += "$(", i += 2, ++parens;
        continue;
      }
      if (parens > 0) {
        if (c == '(') ++parens;
        if (c == ')') --parens;
        w += c, ++i;
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ';') break;
      if (in_array && c == ')') break;
      if (!in_array && c == '(' && !w.empty() && w.back() == '=') {  // NAME=( opens an array: the caller reads it
        w += c, ++i;
        break;
      }
      w += c, ++i;
    }
    if (quote != 0) throw Error(where + ": an unclosed quote");
    if (parens != 0) throw Error(where + ": an unclosed $(");
    return w;
  }
};

struct Variable {
  std::vector<std::string> values;  // a scalar is one value
  std::string unknown_because;      // set where its value depends on what the script cannot tell
};

bool all_digits(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool valid_name(std::string_view n) {
  if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
  return std::all_of(n.begin(), n.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

class Shell {
 public:
  explicit Shell(std::string where) : where_(std::move(where)) {}

  std::map<std::string, Variable> vars;

  // Expands a raw word into words (quote removal, expansions, word splitting of unquoted expansions).
  [[nodiscard]] std::vector<std::string> expand(const std::string& raw, int nesting = 0) const {
    if (nesting > 16) throw Error(where_ + ": expansions nested more than 16 deep");
    std::vector<std::string> out;
    std::string cur;
    bool have = false;         // a quoted empty string is still a word
    bool empty_array = false;  // the word is "${A[@]}" or "$@" of no elements, which bash drops
    const auto split_into = [&](const std::string& text) {
      for (const char c : text) {
        if (c == ' ' || c == '\t' || c == '\n') {
          if (have || !cur.empty()) out.push_back(cur), cur.clear(), have = false;
        } else {
          cur += c, have = true;
        }
      }
    };
    char quote = 0;
    for (std::size_t i = 0; i < raw.size();) {
      const char c = raw[i];
      if (quote == '\'') {
        if (c == '\'')
          quote = 0;
        else
          cur += c;
        ++i;
        continue;
      }
      if (c == '\'' && quote == 0) {
        quote = '\'', have = true, ++i;
        continue;
      }
      if (c == '"') {
        quote = quote == '"' ? 0 : '"', have = true, ++i;
        continue;
      }
      if (c == '\\' && i + 1 < raw.size()) {
        cur += raw[i + 1], have = true, i += 2;
        continue;
      }
      if (c != '$' || i + 1 >= raw.size()) {
        cur += c, have = true, ++i;
        continue;
      }
      // An expansion.
      std::size_t end = i + 1;
      std::vector<std::string> values;
      bool array_all = false;
      if (raw.compare(i, 3, "$((") == 0) {
        end = raw.find("))", i);
        if (end == std::string::npos) throw Error(where_ + ": an unclosed $((");
        values = {arithmetic(raw.substr(i + 3, end - i - 3))};
        end += 2;
      } else if (raw[i + 1] == '(') {
        int depth = 0;
        for (end = i + 1; end < raw.size(); ++end) {
          if (raw[end] == '(') ++depth;
          if (raw[end] == ')' && --depth == 0) break;
        }
        values = {"$(" + raw.substr(i + 2, end - i - 2) + ")(not-run-by-headroom)"};
        ++end;
      } else if (raw[i + 1] == '{') {
        int depth = 0;
        for (end = i + 1; end < raw.size(); ++end) {
          if (raw[end] == '{') ++depth;
          if (raw[end] == '}' && --depth == 0) break;
        }
        if (end >= raw.size()) throw Error(where_ + ": an unclosed ${");
        std::string body = raw.substr(i + 2, end - i - 2);
        ++end;
        std::string fallback;
        bool has_fallback = false;
        if (const auto d = body.find(":-"); d != std::string::npos) {
          const std::vector<std::string> f = expand(body.substr(d + 2), nesting + 1);
          for (std::size_t k = 0; k < f.size(); ++k) fallback += (k ? " " : "") + f[k];
          body.resize(d), has_fallback = true;
        }
        std::string index;
        if (const auto b = body.find('['); b != std::string::npos && body.back() == ']')
          index = body.substr(b + 1, body.size() - b - 2), body.resize(b);
        array_all = index == "@" || index == "*";
        values = lookup(body, has_fallback ? std::optional<std::string>(fallback) : std::nullopt);
        if (!array_all && !index.empty()) {  // ${A[k]}: the k-th element, none past the end
          if (index.size() > 9 || !all_digits(index))
            throw Error(where_ + ": ${" + body + "[" + index + "]}: only numeric or @ indices are read");
          const std::size_t k = std::stoul(index);
          values = k < values.size() ? std::vector<std::string>{values[k]} : std::vector<std::string>{};
        } else if (!array_all && values.size() > 1) {
          values.resize(1);  // ${A} is its first element
        }
      } else if (raw[i + 1] == '@' || raw[i + 1] == '*') {
        // $@ and $*: the script's arguments, those --set 1=... 2=... gives (none: run without arguments).
        for (int k = 1; vars.contains(std::to_string(k)); ++k) {
          const std::vector<std::string> a = lookup(std::to_string(k), std::nullopt);
          values.insert(values.end(), a.begin(), a.end());
        }
        array_all = raw[i + 1] == '@';
        end = i + 2;
      } else if (raw[i + 1] == '#') {  // $#: how many arguments the script has (those --set gives; none: 0)
        int n = 0;
        while (vars.contains(std::to_string(n + 1))) ++n;
        values = {std::to_string(n)};
        end = i + 2;
      } else {
        while (end < raw.size() && (std::isalnum(static_cast<unsigned char>(raw[end])) || raw[end] == '_')) {
          ++end;
          if (std::isdigit(static_cast<unsigned char>(raw[i + 1]))) break;  // $1 is one digit
        }
        if (end == i + 1) {  // a lone $
          cur += c, have = true, ++i;
          continue;
        }
        values = lookup(raw.substr(i + 1, end - i - 1), std::nullopt);
        if (values.size() > 1) values.resize(1);  // $ARRAY is its first element
      }
      i = end;
      if (quote == '"') {
        // "${A[@]}": one word per element; otherwise the values joined by a space, in this word.
        if (array_all) {
          for (std::size_t k = 0; k < values.size(); ++k) {
            cur += values[k];
            if (k + 1 < values.size()) out.push_back(cur), cur.clear();
          }
          have = have || !values.empty();
          empty_array = values.empty() && cur.empty();  // "$@" with no arguments: no word (unless more follows)
        } else {
          for (std::size_t k = 0; k < values.size(); ++k) cur += (k ? " " : "") + values[k];
          have = true;
        }
      } else {
        for (std::size_t k = 0; k < values.size(); ++k) split_into((k ? " " : "") + values[k]);
      }
    }
    if (quote != 0) throw Error(where_ + ": an unclosed quote");
    if ((have && !(empty_array && cur.empty())) || !cur.empty()) out.push_back(cur);
    return out;
  }

  // A test of an if or elif: true or false, or nullopt where it is not a comparison of strings or integers, or reads a
  // variable of unknown value.
  [[nodiscard]] std::optional<bool> test(const std::vector<std::string>& words) const {
    std::optional<bool> result;
    std::string op;  // "&&" or "||" before this test
    for (std::size_t i = 0; i < words.size();) {
      if (words[i] == "&&" || words[i] == "||") {
        op = words[i++];
        continue;
      }
      const bool double_bracket = words[i] == "[[";
      if (words[i] != "[[" && words[i] != "[") return std::nullopt;
      const std::string close = double_bracket ? "]]" : "]";
      std::size_t j = i + 1;
      while (j < words.size() && words[j] != close) ++j;
      if (j == words.size()) return std::nullopt;
      std::vector<std::string> t(words.begin() + static_cast<std::ptrdiff_t>(i + 1),
                                 words.begin() + static_cast<std::ptrdiff_t>(j));
      i = j + 1;
      bool negate = false;
      if (!t.empty() && t.front() == "!") negate = true, t.erase(t.begin());
      const auto value = [&](const std::string& raw) -> std::optional<std::string> {
        std::vector<std::string> w;
        try {
          w = expand(raw);
        } catch (const Error&) {  // a variable of unknown value: so is the test
          return std::nullopt;
        }
        std::string joined;
        for (std::size_t k = 0; k < w.size(); ++k) joined += (k ? " " : "") + w[k];
        if (joined.find("(not-set-by-the-script)") != std::string::npos ||
            joined.find("(not-run-by-headroom)") != std::string::npos)
          return std::nullopt;
        return joined;
      };
      std::optional<bool> r;
      if (t.size() == 2 && (t[0] == "-z" || t[0] == "-n")) {
        const auto v = value(t[1]);
        if (!v) return std::nullopt;
        r = (t[0] == "-z") == v->empty();
      } else if (t.size() == 3 && (t[1] == "==" || t[1] == "=" || t[1] == "!=")) {
        const auto a = value(t[0]), b = value(t[2]);
        if (!a || !b) return std::nullopt;
        r = (*a == *b) == (t[1] != "!=");
      } else if (t.size() == 3 &&
                 (t[1] == "-eq" || t[1] == "-ne" || t[1] == "-lt" || t[1] == "-le" || t[1] == "-gt" || t[1] == "-ge")) {
        const auto integer = [&](const std::string& raw) -> std::optional<long long> {
          const auto v = value(raw);
          long long x = 0;
          if (!v || v->empty()) return std::nullopt;
          const auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), x);
          if (ec != std::errc() || p != v->data() + v->size()) return std::nullopt;  // bash: not an integer
          return x;
        };
        const auto a = integer(t[0]), b = integer(t[2]);
        if (!a || !b) return std::nullopt;
        const std::string& o = t[1];
        r = o == "-eq"   ? *a == *b
            : o == "-ne" ? *a != *b
            : o == "-lt" ? *a < *b
            : o == "-le" ? *a <= *b
            : o == "-gt" ? *a > *b
                         : *a >= *b;
      } else {
        return std::nullopt;  // file tests, numbers, patterns, commands: the machine's to answer
      }
      if (negate) r = !*r;
      result = !result ? r : op == "||" ? (*result || *r) : (*result && *r);
    }
    return result;
  }

 private:
  std::string where_;

  [[nodiscard]] std::vector<std::string> lookup(const std::string& name,
                                                const std::optional<std::string>& fallback) const {
    const auto it = vars.find(name);
    if (it == vars.end() || (it->second.values.empty() && it->second.unknown_because.empty() && fallback)) {
      if (fallback) return {*fallback};
      if (it != vars.end()) return {};
      return {"${" + name + "}(not-set-by-the-script)"};
    }
    if (!it->second.unknown_because.empty())
      throw Error(where_ + ": $" + name + " is set " + it->second.unknown_because +
                  ", so its value is the shell's to give: give the command as it runs, after --, or the values the "
                  "test reads with --set NAME=VALUE");
    return it->second.values;
  }

  // $((...)): integers and variables with + - * / (left to right, * and / first); otherwise not evaluated.
  [[nodiscard]] std::string arithmetic(const std::string& expr) const {
    std::vector<long long> terms;
    std::vector<char> ops;
    std::size_t i = 0;
    const auto operand = [&]() -> std::optional<long long> {
      while (i < expr.size() && expr[i] == ' ') ++i;
      std::size_t j = i;
      if (j < expr.size() && expr[j] == '$') ++j;
      if (j < expr.size() && expr[j] == '{') ++j;
      std::size_t k = j;
      while (k < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[k])) || expr[k] == '_')) ++k;
      if (k == j) return std::nullopt;
      std::string token = expr.substr(j, k - j);
      i = k;
      if (i < expr.size() && expr[i] == '}') ++i;
      if (!all_digits(token)) {
        const auto it = vars.find(token);
        if (it == vars.end() || it->second.values.size() != 1 || !it->second.unknown_because.empty())
          return std::nullopt;
        token = it->second.values[0];
        if (token.empty() || token.size() > 15 || !all_digits(token)) return std::nullopt;
      }
      if (token.size() > 15) return std::nullopt;
      return std::stoll(token);
    };
    std::string unevaluated = "$((" + expr + "))(not-run-by-headroom)";
    auto first = operand();
    if (!first) return unevaluated;
    terms.push_back(*first);
    while (true) {
      while (i < expr.size() && expr[i] == ' ') ++i;
      if (i >= expr.size()) break;
      const char op = expr[i++];
      if (op != '+' && op != '-' && op != '*' && op != '/') return unevaluated;
      const auto next = operand();
      if (!next) return unevaluated;
      if (op == '*' || op == '/') {
        if (op == '/' && *next == 0) return unevaluated;
        terms.back() = op == '*' ? terms.back() * *next : terms.back() / *next;
        if (std::llabs(terms.back()) > 1'000'000'000'000LL) return unevaluated;
      } else {
        ops.push_back(op), terms.push_back(*next);
      }
    }
    long long v = terms[0];
    for (std::size_t k = 0; k < ops.size(); ++k) v = ops[k] == '+' ? v + terms[k + 1] : v - terms[k + 1];
    return std::to_string(v);
  }
};

// A block of the script: taken (its commands run), or of unknown outcome (its assignments are unknown).
struct Frame {
  bool is_if = false;         // an if block (else a loop, case, function or { } group)
  bool parent_active = true;  // the enclosing blocks run
  bool active = true;         // this branch runs
  bool any_taken = false;     // an earlier branch of this if ran
  std::string unknown;        // why its outcome is unknown; empty: known
};

// The script followed to its command. `choices`, where given, decides the if tests it cannot evaluate, in the order
// the script meets them (a test past its end is taken as true), and `tests` receives each such test as met; without
// them a variable set in such a block is of unknown value.
std::vector<std::string> follow_script(const std::string& text, std::string_view script_name, std::string_view where,
                                       const std::map<std::string, std::string>& environment,
                                       std::map<std::string, std::string>* files, const std::vector<bool>* choices,
                                       std::vector<std::string>* tests) {
  const std::string w(where);
  std::string source = text;  // the script, and what it runs as a script spliced in where it runs it
  Lexer lex{source, 0, w};
  int spliced = 0;
  // Text the script runs as a script (sbatch's here-document, `bash -c "..."`): read next, as the commands that run
  // there, with the variables as they are (sbatch exports the environment); 16 at most, so that a string that runs
  // itself stays finite.
  const auto run_next = [&](const std::string& script) {
    if (++spliced > 16) throw Error(w + ": more than 16 scripts run from the script (sbatch <<EOF, bash -c)");
    source.insert(lex.i, script + "\n");
  };
  Shell sh(w);
  for (const auto& [name, value] : environment) sh.vars[name] = Variable{{value}, ""};
  std::vector<Frame> frames;
  const auto active = [&] { return frames.empty() || (frames.back().parent_active && frames.back().active); };
  const auto unknown = [&]() -> std::string {
    for (std::size_t k = frames.size(); k-- > 0;)  // the innermost block that makes it unknown
      if (!frames[k].unknown.empty()) return frames[k].unknown;
    return {};
  };
  std::size_t commands = 0;
  while (!lex.done()) {
    if (++commands > 100000) throw Error(w + ": more than 100,000 commands");
    // One command's raw words; an array assignment's elements are read whole.
    std::vector<std::string> words;
    std::vector<std::vector<std::string>> arrays;  // the raw elements of each NAME=( ... ) word, in order
    while (true) {
      std::string word = lex.word(false);
      if (word.empty()) break;
      if (word.size() >= 2 && word.substr(word.size() - 2) == "=(") {
        std::vector<std::string> elements;
        while (true) {
          lex.skip_blanks();
          if (lex.done()) throw Error(w + ": an array " + word + " is not closed");
          if (lex.s[lex.i] == '\n') {
            ++lex.i;
            continue;
          }
          if (lex.s[lex.i] == ')') {
            ++lex.i;
            break;
          }
          std::string e = lex.word(true);
          if (!e.empty()) elements.push_back(e);
        }
        arrays.push_back(std::move(elements));
      }
      words.push_back(std::move(word));
      if (words.size() > 100000) throw Error(w + ": a command of more than 100,000 words");
    }
    // A here-document (cat <<EOF > FILE): its lines up to the delimiter are the body, not commands; with an unquoted
    // delimiter its $NAME and ${NAME} expand. What a command the script runs writes with one is kept as FILE's text.
    if (const auto doc =
            std::find_if(words.begin(), words.end(), [](const std::string& x) { return x.starts_with("<<"); });
        doc != words.end()) {
      std::string delimiter = doc->substr(2);
      if (delimiter == "<") throw Error(w + ": a here-string (<<<) in a command headroom reads");
      const bool strip_tabs = delimiter.starts_with("-");
      if (strip_tabs) delimiter.erase(0, 1);
      if (delimiter.empty() && doc + 1 != words.end()) delimiter = *(doc + 1);
      const bool literal = delimiter.find_first_of("'\"") != std::string::npos;
      std::erase_if(delimiter, [](char c) { return c == '\'' || c == '"'; });
      std::string body;
      bool closed = false;
      while (!lex.done()) {
        const std::size_t eol = std::min(lex.s.find('\n', lex.i), lex.s.size());
        std::string line = lex.s.substr(lex.i, eol - lex.i);
        lex.i = eol + 1;
        if (strip_tabs)
          line.erase(0, line.find_first_not_of('\t') == std::string::npos ? line.size() : line.find_first_not_of('\t'));
        if (line == delimiter) {
          closed = true;
          break;
        }
        // Unquoted, a backslash-newline joins the next line (bash removes both): `srun \` over several lines; `\\`
        // at the end is an escaped backslash.
        const auto continued = [](const std::string& x) {
          const std::size_t last = x.find_last_not_of('\\');
          return (x.size() - (last == std::string::npos ? 0 : last + 1)) % 2 == 1;
        };
        while (!literal && continued(line) && !lex.done()) {
          const std::size_t next = std::min(lex.s.find('\n', lex.i), lex.s.size());
          line.pop_back();
          line += lex.s.substr(lex.i, next - lex.i);
          lex.i = next + 1;
        }
        if (!literal) {  // expanded as inside double quotes: no word splitting
          std::string quoted = "\"";
          for (const char c : line) quoted += c == '"' ? std::string("\\\"") : std::string(1, c);
          const std::vector<std::string> x = sh.expand(quoted + "\"");
          line = x.empty() ? std::string() : x.front();
        }
        body += line + "\n";
      }
      if (!closed) throw Error(w + ": a here-document without its closing " + delimiter);
      // A batch script given to sbatch on its standard input runs as a script: its commands are read next.
      if (words.front() == "sbatch" && active() && unknown().empty()) run_next(body);
      const auto to = std::find_if(words.begin(), words.end(), [](const std::string& x) { return x.starts_with(">"); });
      if (files != nullptr && to != words.end() && active() && unknown().empty()) {
        const std::string raw = *to == ">" ? (to + 1 == words.end() ? "" : *(to + 1)) : to->substr(1);
        const std::vector<std::string> target = raw.empty() ? std::vector<std::string>{} : sh.expand(raw);
        if (target.size() == 1) (*files)[target.front()] = body;
      }
      continue;
    }
    // `then X=1`, `else X=2`, `do ...`: the keyword opens the branch, the rest is a command of it.
    while (!words.empty() && (words.front() == "then" || words.front() == "do" || words.front() == "else")) {
      if (words.front() == "else") {
        if (frames.empty() || !frames.back().is_if) throw Error(w + ": else without if");
        frames.back().active = !frames.back().any_taken;
      }
      words.erase(words.begin());
    }
    if (words.empty()) continue;
    const std::string& head = words.front();
    // Blocks.
    if (head == "if" || head == "elif") {
      std::vector<std::string> cond(words.begin() + 1, words.end());
      if (!cond.empty() && cond.back() == "then") cond.pop_back();
      if (head == "if") frames.push_back({true, active(), false, false, ""});
      if (frames.empty() || !frames.back().is_if) throw Error(w + ": elif without if");
      Frame& f = frames.back();
      // A test in a branch that does not run, or after a branch taken, is not evaluated by bash either.
      std::optional<bool> r = f.any_taken || !f.parent_active ? std::optional<bool>(false) : sh.test(cond);
      if (!r) {
        std::string shown;
        for (const auto& c : cond) shown += (shown.empty() ? "" : " ") + c;
        if (choices != nullptr) {
          const std::size_t n = tests->size();
          r = n < choices->size() ? (*choices)[n] : true;
          tests->push_back(shown);
        } else {
          f.unknown = "in a block whose test (" + shown +
                      ") headroom cannot evaluate (a test of strings or integers reading variables the script sets)";
        }
      }
      f.active = r.value_or(true);
      f.any_taken = f.any_taken || r.value_or(false);
      continue;
    }
    const bool function_head =
        head == "function" || head.find("()") != std::string::npos || (words.size() >= 2 && words[1].starts_with("()"));
    if (!function_head && (head == "{" || words.back() == "{")) {  // a { ...; } group: run as the list before it
      const bool conditional =
          std::any_of(words.begin(), words.end(), [](const std::string& x) { return x == "&&" || x == "||"; });
      frames.push_back({false, active(), true, false, conditional ? "in a { } group run after && or ||" : ""});
      continue;
    }
    if (head == "fi" || head == "done" || head == "esac" || head == "}") {
      if (frames.empty()) throw Error(w + ": " + head + " closes no block");
      frames.pop_back();
      continue;
    }
    // A while (until) loop whose test is false (true) as it is reached runs nothing: an argument-parsing loop
    // (`while [[ $# -gt 0 ]]; do case $1 in ...`) of a script run without arguments.
    if (head == "while" || head == "until") {
      const std::optional<bool> entered = active() && unknown().empty()
                                              ? sh.test(std::vector<std::string>(words.begin() + 1, words.end()))
                                              : std::nullopt;
      if (entered && *entered == (head == "until")) {
        frames.push_back({false, active(), false, false, ""});
        continue;
      }
    }
    if (head == "for" || head == "while" || head == "until" || head == "case" || head == "function" ||
        (words.size() >= 2 && (words[1] == "()" || words[1] == "(){" || words[1] == "{")) ||
        head.find("()") != std::string::npos) {
      const std::string kind = head == "case"                                          ? "case"
                               : (head == "for" || head == "while" || head == "until") ? "loop"
                                                                                       : "function";
      // Inside a block that does not run, what it sets is not set: nothing is unknown there.
      frames.push_back({false, active(), true, false, active() ? "in a " + kind : std::string()});
      if (kind == "function") frames.back().active = false;  // a function runs when called: its commands are not these
      continue;
    }
    if (!active() && unknown().empty()) continue;
    if (const std::string why = unknown(); !why.empty()) {
      // A block the script cannot be followed into (a case's patterns, a loop): any NAME= word in it sets NAME.
      for (const std::string& a : words) {
        const auto eq = a.find('=');
        if (eq == std::string::npos || eq == 0) continue;
        const std::string name = a.substr(0, a[eq - 1] == '+' ? eq - 1 : eq);
        if (valid_name(name)) sh.vars[name] = Variable{{}, why};
      }
    }
    // Assignments (export/declare/local NAME=value ... or a bare run of them).
    std::size_t first = 0;
    if (head == "export" || head == "declare" || head == "local" || head == "readonly") {
      first = 1;
      while (first < words.size() && words[first].rfind('-', 0) == 0) ++first;
    }
    bool assigned = false;
    std::size_t array_index = 0;
    std::size_t k = first;
    for (; k < words.size(); ++k) {
      const std::string& a = words[k];
      const auto eq = a.find('=');
      if (eq == std::string::npos || eq == 0) break;
      const bool append = a[eq - 1] == '+';
      const std::string name = a.substr(0, append ? eq - 1 : eq);
      if (!valid_name(name)) break;
      Variable v;
      const std::string why = unknown();
      if (a.size() >= 2 && a.substr(a.size() - 2) == "=(") {
        if (array_index >= arrays.size()) throw Error(w + ": an array " + name + " is not closed");
        if (why.empty())
          for (const std::string& e : arrays[array_index]) {
            const std::vector<std::string> x = sh.expand(e);
            v.values.insert(v.values.end(), x.begin(), x.end());
          }
        ++array_index;
      } else if (why.empty()) {
        const std::vector<std::string> x = sh.expand(a.substr(eq + 1));
        std::string joined;
        for (std::size_t j = 0; j < x.size(); ++j) joined += (j ? " " : "") + x[j];
        v.values = {joined};
      }
      v.unknown_because = why;
      if (!active() && why.empty()) continue;
      Variable& target = sh.vars[name];
      if (append && why.empty())
        target.values.insert(target.values.end(), v.values.begin(), v.values.end());
      else
        target = v;
      assigned = true;
    }
    if (k == words.size() && (assigned || first > 0)) continue;  // only assignments (an env prefix runs no command)
    if (!active() && unknown().empty()) continue;
    // A command: the training command if one of its words (expanded) is the script.
    const auto is_script = [&](const std::string& e) {
      return e == script_name ||
             (e.size() > script_name.size() && e.ends_with(script_name) && e[e.size() - script_name.size() - 1] == '/');
    };
    std::vector<std::string> expanded;
    bool runs_script = false;
    for (std::size_t j = k; j < words.size(); ++j) {
      const std::vector<std::string> x = sh.expand(words[j]);
      runs_script = runs_script || std::any_of(x.begin(), x.end(), is_script);
      expanded.insert(expanded.end(), x.begin(), x.end());
    }
    // `bash -c "<commands>"` (srun ... bash -x -c "$CMD", as SLURM launchers write it): the string runs as a script.
    if (!runs_script && unknown().empty()) {
      const auto shell = std::find_if(expanded.begin(), expanded.end(), [](const std::string& x) {
        return x == "bash" || x == "sh" || x.ends_with("/bash") || x.ends_with("/sh");
      });
      // -c alone or among single-letter options (-xc, -lc); the commands are the word after it.
      const auto dash_c = [](const std::string& x) {
        return x.size() > 1 && x[0] == '-' && x[1] != '-' && x.find('c') != std::string::npos;
      };
      auto c = shell == expanded.end() ? shell : shell + 1;
      while (c != expanded.end() && c->starts_with('-') && !dash_c(*c)) ++c;
      if (c != expanded.end() && dash_c(*c) && c + 1 != expanded.end() &&
          c[1].find(std::string(script_name)) != std::string::npos) {
        run_next(c[1]);
        continue;
      }
    }
    if (!runs_script) continue;
    if (const std::string why = unknown(); !why.empty())
      throw Error(w + ": the command that runs " + std::string(script_name) + " is " + why +
                  ": give the command as it runs, after --");
    // Its part of a list (cd dir && torchrun ...): from after the operator before the script to the one after.
    const auto script = std::find_if(expanded.begin(), expanded.end(), is_script);
    auto begin = script, end = script;
    while (begin != expanded.begin() && *(begin - 1) != "&&" && *(begin - 1) != "||" && *(begin - 1) != "|") --begin;
    while (end != expanded.end() && *end != "&&" && *end != "||" && *end != "|" && *end != "&") ++end;
    // Redirections (> log, 2>&1, >> log) are the shell's, not the command's.
    std::vector<std::string> command;
    for (auto x = begin; x != end; ++x) {
      const bool redirect = x->starts_with(">") || x->starts_with("<") || x->starts_with("2>") ||
                            x->starts_with("1>") || x->starts_with("&>");
      if (!redirect) {
        command.push_back(*x);
        continue;
      }
      const bool target_follows = *x == ">" || *x == ">>" || *x == "<" || *x == "2>" || *x == "1>" || *x == "&>" ||
                                  *x == "2>>" || *x == "1>>" || *x == "&>>";
      if (target_follows && x + 1 != end) ++x;
    }
    return command;
  }
  // NeMo-Framework-Launcher's scripts run its main.py on a config it names (training=gpt3/175b) with Hydra overrides.
  if (text.find("main.py") != std::string::npos && text.find("training=") != std::string::npos)
    throw Error(w + ": no command runs " + std::string(script_name) +
                "; it runs NeMo-Framework-Launcher's main.py: give the training config its training= names "
                "(launcher_scripts/conf/training/<name>.yaml) and its training.* overrides");
  throw Error(w + ": no command runs " + std::string(script_name));
}

}  // namespace

std::vector<std::string> launch_script_command(const std::string& text, std::string_view script_name,
                                               std::string_view where,
                                               const std::map<std::string, std::string>& environment,
                                               std::map<std::string, std::string>* files) {
  return follow_script(text, script_name, where, environment, files, nullptr, nullptr);
}

std::vector<LaunchScriptVariant> launch_script_variants(const std::string& text, std::string_view script_name,
                                                        std::string_view where,
                                                        const std::map<std::string, std::string>& environment) {
  // Too many outcomes to follow, or one under which the script runs no training command or fails to be read: as
  // launch_script_command reads it (its refusal names the first block it cannot follow into).
  const auto as_one = [&] {
    LaunchScriptVariant only;
    only.command = launch_script_command(text, script_name, where, environment, &only.files);
    return std::vector<LaunchScriptVariant>{only};
  };
  std::vector<LaunchScriptVariant> out;
  // Depth first over the tests' outcomes: each run takes the tests past its prefix as true, then each of those is
  // tried false in turn (a test met only on one branch is decided only there).
  std::vector<std::vector<bool>> pending{{}};
  while (!pending.empty()) {
    const std::vector<bool> prefix = std::move(pending.back());
    pending.pop_back();
    if (out.size() == kMaxLaunchScriptVariants) return as_one();
    LaunchScriptVariant v;
    std::vector<std::string> tests;
    try {
      v.command = follow_script(text, script_name, where, environment, &v.files, &prefix, &tests);
    } catch (const Error&) {
      return as_one();
    }
    for (std::size_t i = 0; i < tests.size(); ++i) {
      const bool taken = i < prefix.size() ? prefix[i] : true;
      v.assumed.push_back(tests[i] + (taken ? " true" : " false"));
      if (i >= prefix.size()) {
        std::vector<bool> other(prefix);
        other.resize(i, true);
        other.push_back(false);
        pending.push_back(std::move(other));
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace headroom::calibrate
