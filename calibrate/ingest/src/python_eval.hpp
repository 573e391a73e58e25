// Functions of Python config modules run on their arguments without a Python (internal to ingest/), as far as the
// factories of job configs are written: assignments (chained too), fields of configs set (`recipe.trainer.strategy.x
// = 4`), lists they hold grown (`recipe.trainer.callbacks.append(...)`), if/elif/else on a name's value (`if version
// == "qwen3_8b":`, `if performance_mode:`, `if x is None:`, `if isinstance(x, str):`; one it cannot tell runs both
// ways, run_clauses), `try:` of assignments with `except ...: pass` handlers (a body that raises or is not followed
// leaves what it assigns unknown, run_try), returns, and calls of the module's own functions and of the modules the
// loader gives (a recipe's siblings), as values or as statements that set fields on the configs they are given. A call
// of anything else (`run.Config(...)`, a class) is a value: its arguments evaluated, kept as the call. Any other
// statement is an Error naming its file, line and function.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "python_source.hpp"

namespace headroom::calibrate::python {

// Whether a config's field `name` is a section an assignment added (Evaluator place: `cfg.checkpoint.enable = True`
// where the config gave no checkpoint), holding only the fields set, rather than a config class of the source.
[[nodiscard]] inline bool added_section(const Expr& e, std::string_view name) {
  return e.kind == Expr::Kind::call && e.args.empty() && e.text.size() > name.size() && e.text.ends_with(name) &&
         e.text[e.text.size() - name.size() - 1] == '.';
}

class Evaluator {
 public:
  // The text of a module by its dotted name (`nemo.collections.llm.recipes.llama3_8b`); nullopt where it is not
  // followed, and its functions' calls stay calls.
  using Loader = std::function<std::optional<std::string>(const std::string& module)>;

  // What a reader knows a function returns where its body is not followed (a registry lookup, a try block), by the
  // function's name (the callee's last dotted part): given the call with its arguments' values, the value, or nullopt
  // to follow or keep the call as any other.
  using Intrinsic = std::function<std::optional<Expr>(const Expr& call)>;
  using Intrinsics = std::map<std::string, Intrinsic, std::less<>>;
  // What a reader knows a call statement does to the config its first argument names (a helper that sets fields by
  // what it finds at run time): given the call with its arguments' values, the fields it sets on that config and
  // their values, or nullopt where the call is not one it knows (then refused as any other).
  using Effect = std::function<std::optional<std::vector<Expr>>(const Expr& call)>;
  using Effects = std::map<std::string, Effect, std::less<>>;

  Evaluator(std::string_view text, std::string where, Loader loader = {}, Intrinsics intrinsics = {},
            Effects effects = {});

  [[nodiscard]] const Module& main() const { return modules_.front().module; }
  // The value the main module's function `name` returns, given these keyword arguments (Expr::key), or an Error.
  [[nodiscard]] Expr call(const std::string& name, const std::vector<Expr>& kwargs);
  // "file:line" of a value, "the command line" for one given there (Expr::file -1).
  [[nodiscard]] std::string where(const Expr& e) const;
  // The modules the functions called were in besides the main one, by dotted name.
  [[nodiscard]] std::vector<std::string> followed() const;
  // The call statements passed over as reaching none of the configs ("warn_deprecated_model(...) at file:line").
  [[nodiscard]] const std::vector<std::string>& passed_over() const { return passed_over_; }
  // The call statements applied as their known effects ("apply_flex_dispatcher_backend(...) at file:line").
  [[nodiscard]] const std::vector<std::string>& effects_applied() const { return effects_applied_; }

 private:
  struct Loaded {
    std::string name, where;
    Module module;
  };
  struct Frame {
    int module;
    std::string function;
    std::map<std::string, Expr> locals;
    std::set<std::string> rebound;  // names assigned whole: a parameter's caller no longer sees what is set on it
  };

  Expr value(const Expr& e, Frame& f);
  // A call's value; a function followed sets on the configs the caller passed what it set on its parameters (Python
  // passes objects), unless it bound that parameter to another value first.
  Expr call_value(const Expr& e, Frame& f);
  // `after`, where given, takes the parameters' values at the return, but those bound to another value.
  Expr invoke(int module, const std::string& name, std::vector<Expr> args, std::vector<Expr> kwargs, const Expr& at,
              std::map<std::string, Expr>* after = nullptr);
  std::optional<Expr> run(const Function& fn, std::size_t begin, std::size_t end, Frame& f);
  // A `try:` of assignments whose handlers only `pass`, at fn.body[k]; returns the index after its handlers.
  std::size_t run_try(const Function& fn, std::size_t k, std::size_t end, Frame& f);
  // The if/elif/else chain from its clause k to `end`. A condition that cannot be told runs both ways on copies of
  // the frame, and a value set one way and not the other (or to another value) becomes unknown, naming the
  // condition: refused where a reader needs it. A way that returns is refused.
  std::optional<Expr> run_clauses(const Function& fn, std::size_t k, std::size_t end, Frame& f);
  // Whether a condition holds; nullopt where it cannot be told.
  std::optional<bool> holds(const Function::Statement& s, Frame& f);
  void assign(const Function::Statement& s, Frame& f);
  // The field a dotted path names in the function's values, added (None, its sections empty configs) where missing.
  Expr& place(const std::string& path, const Function::Statement& s, Frame& f);
  // `x.append(v)` and `x.extend([...])` of a list x holds; false for a statement of another form.
  bool grow_list(const Function::Statement& s, Frame& f);
  // A call statement of a known effect (Effects) on a config its first argument names; false for any other.
  bool apply_effect(const Function::Statement& s, Frame& f);
  // Whether an expression names (or holds a name of) a value the function or its module holds: a local, or a module
  // constant other than a number, string or True/False/None. A call given none of them, and whose callee is none,
  // cannot change a config the function builds.
  [[nodiscard]] bool reaches_state(const Expr& e, const Frame& f) const;
  // The module and function a callee names, where it is one to follow.
  std::optional<std::pair<int, std::string>> resolve(const std::string& callee, int module, int hops = 0);
  std::optional<int> load(const std::string& module);
  [[nodiscard]] std::string at_line(int file, int line) const;

  std::deque<Loaded> modules_;
  std::map<std::string, std::optional<int>> by_name_;
  std::vector<std::string> passed_over_, effects_applied_;
  Loader loader_;
  Intrinsics intrinsics_;
  Effects effects_;
  int depth_ = 0, calls_ = 0;
  std::size_t values_ = 0;
};

}  // namespace headroom::calibrate::python
