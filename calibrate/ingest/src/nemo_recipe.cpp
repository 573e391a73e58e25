// A NeMo 2.0 pre-training recipe (NVIDIA/NeMo nemo/collections/llm/recipes/<model>.py, the factories
// `nemo llm pretrain --factory <model>` runs) read without running it. The Llama recipes share one form: model()
// returns run.Config(LlamaModel, config=run.Config(<Config class>)); trainer(<parallelism with defaults>) builds
// run.Config(nl.MegatronStrategy, ...) with its DistributedDataParallelConfig and run.Config(nl.Trainer, ...);
// pretrain_recipe(num_nodes, num_gpus_per_node, performance_mode, ...) calls trainer(...) and sets
// data=run.Config(MockDataModule, seq_length, global_batch_size, micro_batch_size) and
// optim=distributed_fused_adam_with_cosine_annealing(...). The file's Python is tokenized and those calls are read as
// expressions (literals, names of the functions' parameters, calls); anything the recipe does that this does not
// follow (another `if`, an assignment to the recipe, a trainer from another module) is refused naming its line.
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "headroom/core/error.hpp"
#include "headroom/estimator/launch_args.hpp"
#include "headroom/estimator/layout.hpp"
#include "headroom/ingest/measured_runs.hpp"
#include "text.hpp"

namespace headroom::calibrate {
namespace {

using text::at;

enum class Tok { name, number, string, op };

struct Token {
  Tok kind;
  std::string text;
  int line;
  int indent;        // the indentation of the token's logical line
  bool starts_line;  // the first token of a logical line
};

// Python's tokens, as far as a recipe needs them: names, numbers, strings (any prefix, triple-quoted too), operators
// ('==', '->', '**' and the like as one token), comments dropped, lines inside brackets or after '\' joined.
std::vector<Token> python_tokens(std::string_view s, std::string_view where) {
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

// An expression as the recipe writes it: a literal, a (dotted) name, a call with its arguments; `other` for anything
// else (kept as its first line, refused only where a value is needed).
struct Expr {
  enum class Kind { name, number, string, call, list, other } kind = Kind::other;
  std::string text;  // the name, the number or string as written, the callee of a call
  std::vector<Expr> args;
  std::vector<Expr> kwargs;  // a call's keyword arguments, each with its `key`
  int line = 0;
  std::string key;  // the keyword an argument is passed under

  [[nodiscard]] const Expr* kwarg(std::string_view name) const {
    for (const Expr& v : kwargs)
      if (v.key == name) return &v;
    return nullptr;
  }
  [[nodiscard]] std::string shown() const {
    return kind == Kind::string ? "\"" + text + "\"" : kind == Kind::call ? text + "(...)" : text;
  }
};

class Parser {
 public:
  Parser(const std::vector<Token>& t, std::string_view where) : t_(t), where_(where) {}

  [[nodiscard]] bool is(std::size_t i, std::string_view op) const {
    return i < t_.size() && t_[i].kind == Tok::op && t_[i].text == op;
  }

  // The expression at i, ending before a ',' or a closing bracket or '=' or ':' of the same depth, or a new line.
  Expr expression(std::size_t& i) const {
    Expr e = primary(i);
    // Anything that continues the expression (an operator, a conditional) makes it `other`.
    if (i < t_.size() && !t_[i].starts_line && !ends_expression(i)) {
      e = Expr{Expr::Kind::other, "an expression", {}, {}, t_[i].line, {}};
      skip_to_end(i);
    }
    return e;
  }

 private:
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
      while (!is(i, close)) {
        e.args.push_back(expression(i));
        if (is(i, ",") || is(i, ":"))
          ++i;
        else if (!is(i, close))
          fail(i, "expected ',' or '" + close + "'");
      }
      ++i;
    } else {
      e.text = "an expression";
      skip_to_end(i);
      return e;
    }
    while (is(i, "(") && e.kind == Expr::Kind::name) {  // a call: positional, keyword, *args and **kwargs
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
    }
    return e;
  }

  static constexpr int kMaxNesting = 64;
  const std::vector<Token>& t_;
  std::string_view where_;
  mutable int depth_ = 0;
};

// One top-level function: its parameters' defaults and its body's statements.
struct Function {
  int line = 0;
  std::vector<std::pair<std::string, std::optional<Expr>>> params;
  // The parameter `name` (its default, if it has one), nullptr when the function has none of that name.
  [[nodiscard]] const std::optional<Expr>* param(std::string_view name) const {
    for (const auto& [n, fallback] : params)
      if (n == name) return &fallback;
    return nullptr;
  }
  struct Statement {
    int line = 0, indent = 0;
    std::string keyword;  // "if", "return", "=" (an assignment), "" (an expression)
    std::string target;   // an assignment's target; an if's condition as a name
    std::optional<Expr> value;
  };
  std::vector<Statement> body;
};

std::map<std::string, Function> top_level_functions(const std::vector<Token>& t, std::string_view where) {
  std::map<std::string, Function> out;
  const Parser p(t, where);
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
      if (p.is(i, "*") || p.is(i, "**") || p.is(i, "/")) ++i;
      if (p.is(i, ",")) {
        ++i;
        continue;
      }
      if (i >= t.size() || t[i].kind != Tok::name) throw Error(at(where, f.line) + ": a parameter of " + name);
      std::string param = t[i++].text;
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
    // The body: every logical line until the next one at column 0.
    while (i < t.size() && !(t[i].starts_line && t[i].indent == 0)) {
      const std::size_t start = i;
      Function::Statement s;
      s.line = t[i].line, s.indent = t[i].indent;
      if (t[i].kind == Tok::name && (t[i].text == "if" || t[i].text == "elif" || t[i].text == "while" ||
                                     t[i].text == "for" || t[i].text == "with" || t[i].text == "try" ||
                                     t[i].text == "else" || t[i].text == "except" || t[i].text == "return")) {
        s.keyword = t[i++].text;
        if (s.keyword != "else" && s.keyword != "try" && i < t.size() && !t[i].starts_line && !p.is(i, ":")) {
          s.value = p.expression(i);
          if (s.value->kind == Expr::Kind::name) s.target = s.value->text;
        }
      } else {
        Expr e = p.expression(i);
        if (p.is(i, "=")) {
          s.keyword = "=";
          s.target = e.kind == Expr::Kind::name ? e.text : "an expression";
          s.value = p.expression(++i);
        } else {
          s.value = std::move(e);
        }
      }
      if (i == start) ++i;  // a line that starts with no expression (an operator): its first token
      while (i < t.size() && !t[i].starts_line) ++i;  // the rest of the line (a block's ':', a docstring, ...)
      f.body.push_back(std::move(s));
    }
    out[name] = std::move(f);
  }
  return out;
}

// Every call inside an expression, outermost first.
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
// The run.Config(<class>, ...) call of a class (its last dotted part), nullptr when the function has none.
const Expr* config_of(const Function& f, std::string_view cls) {
  for (const Expr* c : calls_in(f))
    if ((c->text == "run.Config" || c->text == "run.Partial") && !c->args.empty() &&
        c->args.front().kind == Expr::Kind::name &&
        (c->args.front().text == cls || c->args.front().text.ends_with("." + std::string(cls))))
      return c;
  return nullptr;
}

// NeMo 2.0's Llama configs (nemo/collections/llm/gpt/model/llama.py) and the shipped model of their shape: Llama 3
// and 3.1 differ only in RoPE's scaling and the context the class names, neither priced (the data's sequence is).
constexpr std::array<std::pair<std::string_view, std::string_view>, 8> kRecipeModels = {{
    {"Llama2Config7B", "llama2-7b"},
    {"Llama2Config13B", "llama2-13b"},
    {"Llama2Config70B", "llama2-70b"},
    {"Llama3Config8B", "llama3.1-8b"},
    {"Llama3Config70B", "llama3.1-70b"},
    {"Llama31Config8B", "llama3.1-8b"},
    {"Llama31Config70B", "llama3.1-70b"},
    {"Llama31Config405B", "llama3.1-405b"},
}};

// The largest count a recipe's setting may give (nodes, devices, parallel sizes, batches, tokens): 10^9, so that
// products of two stay exact.
constexpr std::int64_t kMaxRecipeInteger = 1'000'000'000;

// What each setting of the recipe is: the layout knob it gives (knobs.hpp), or why it is ignored. A setting not here
// is refused naming it. Paths as NeMo-Run's overrides write them (`trainer.strategy.tensor_model_parallel_size=4`).
struct RecipeKey {
  std::string_view key, knob, why;
};
constexpr auto kRecipeKeys = std::to_array<RecipeKey>({
    {"trainer.strategy.tensor_model_parallel_size", "tp", ""},
    {"trainer.strategy.pipeline_model_parallel_size", "pp", ""},
    {"trainer.strategy.virtual_pipeline_model_parallel_size", "vpp", ""},
    {"trainer.strategy.context_parallel_size", "cp", ""},
    {"trainer.strategy.sequence_parallel", "sequence_parallel", ""},
    {"trainer.strategy.account_for_embedding_in_pipeline_split", "account_for_embedding_in_pipeline_split", ""},
    {"trainer.strategy.account_for_loss_in_pipeline_split", "account_for_loss_in_pipeline_split", ""},
    {"trainer.strategy.ddp.grad_reduce_in_fp32", "grad_reduce_in_bf16", ""},
    {"trainer.num_nodes", "", ""},  // the world, with trainer.devices
    {"trainer.devices", "", ""},
    {"data.seq_length", "seq", ""},
    {"data.global_batch_size", "gbs", ""},
    {"data.micro_batch_size", "mbs", ""},
    {"trainer.strategy.pipeline_dtype", "", "the dtype of the pipeline's sends, the activations' own"},
    {"trainer.strategy.gradient_as_bucket_view", "", "gradients viewed in the DDP buckets: no copy, as priced"},
    {"trainer.strategy.ckpt_*", "", "checkpointing"},
    {"trainer.strategy.fsdp", "", ""},  // None: Megatron's DDP and distributed optimizer (checked below)
    {"trainer.strategy.ddp.overlap_grad_reduce", "", ""},
    {"trainer.strategy.ddp.overlap_param_gather", "", ""},
    {"trainer.strategy.ddp.check_for_nan_in_grad", "", "a check of the reduced gradients"},
    {"trainer.strategy.ddp.average_in_collective", "", "where the gradients are averaged, not how much moves"},
    {"trainer.strategy.ddp.data_parallel_sharding_strategy", "", "Megatron-FSDP's only, and fsdp is None"},
    {"trainer.accelerator", "", "GPUs"},
    {"trainer.accumulate_grad_batches", "", ""},  // 1: Megatron-core accumulates the global batch (checked below)
    {"trainer.callbacks", "", "timing and logging callbacks"},
    {"trainer.limit_*", "", "evaluation"},
    {"trainer.log_every_n_steps", "", "logging"},
    {"trainer.max_steps", "", "the run's length"},
    {"trainer.val_check_interval", "", "evaluation"},
    {"trainer.use_distributed_sampler", "", "data loading"},
    {"trainer.plugins", "", ""},  // bf16_mixed() (checked below)
    {"optim", "", ""},            // distributed_fused_adam_with_cosine_annealing (checked below)
    {"model.config", "", ""},     // the model (kRecipeModels)
    {"model.config.seq_length", "", "the model config's context; the data's sequence is the one trained"},
    // Overrides only: Megatron-core's TransformerConfig recompute fields and the optimizer's sharding.
    {"model.config.recompute_granularity", "recompute", ""},
    {"model.config.recompute_method", "recompute_method", ""},
    {"model.config.recompute_num_layers", "recompute_num_layers", ""},
    {"optim.config.use_distributed_optimizer", "", ""},
});

std::string python_value(const Expr& e) {
  if (e.kind == Expr::Kind::name && (e.text == "True" || e.text == "False")) return e.text == "True" ? "true" : "false";
  if (e.kind == Expr::Kind::name && e.text == "None") return "None";
  return e.text;
}

// An override's value as an expression: True/False/None and numbers as Python writes them, else a string.
Expr override_value(std::string_view v, int line) {
  Expr e;
  e.line = line;
  e.text = std::string(v);
  e.kind = v == "True" || v == "False" || v == "None" || v == "true" || v == "false" ? Expr::Kind::name
           : text::number(v)                                                         ? Expr::Kind::number
                                                                                     : Expr::Kind::string;
  if (e.text == "true" || e.text == "false") e.text = e.text == "true" ? "True" : "False";
  return e;
}

}  // namespace

MegatronCommand read_nemo_recipe(std::string_view text, std::int64_t gpus, std::string_view where,
                                 const std::vector<std::string>& overrides) {
  const std::vector<Token> tokens = python_tokens(text, where);
  const std::map<std::string, Function> fns = top_level_functions(tokens, where);
  const auto function = [&](const std::string& name) -> const Function& {
    const auto it = fns.find(name);
    if (it == fns.end())
      throw Error(std::string(where) + ": no " + name +
                  "(): a NeMo 2.0 pre-training recipe (nemo/collections/llm/recipes/<model>.py) defines model(), "
                  "trainer() and pretrain_recipe()");
    return it->second;
  };
  const Function& recipe = function("pretrain_recipe");
  const Function& trainer_fn = function("trainer");
  const Function& model_fn = function("model");
  // trainer() and model() build their configs: assignments to names, a return, a docstring; model() may also set its
  // config's fields (`conf.seq_length = 8192`, read below). Anything else in them is refused.
  for (const auto& [fn, name] : {std::pair{&trainer_fn, "trainer"}, std::pair{&model_fn, "model"}})
    for (const auto& st : fn->body) {
      const bool plain = st.keyword == "return" ||
                         (st.keyword.empty() && st.value && st.value->kind == Expr::Kind::string) ||
                         (st.keyword == "=" && (st.target.find('.') == std::string::npos || fn == &model_fn));
      if (!plain || st.indent != fn->body.front().indent)
        throw Error(at(where, st.line) + ": " +
                    (st.keyword.empty() || st.keyword == "=" ? "a statement" : "`" + st.keyword + "`") + " in " + name +
                    "() that headroom does not follow");
    }
  MegatronCommand out;

  // The factory's arguments (`num_nodes=2`) and the recipe's settings (`trainer.strategy.x=y`), NeMo-Run's overrides.
  std::map<std::string, Expr> factory_args, settings_given;
  for (const std::string& o : overrides) {
    const auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("override " + o + ": expected key=value (a pretrain_recipe argument or a setting's path)");
    const std::string key = o.substr(0, eq);
    if (key.find('.') == std::string::npos) {
      if (recipe.param(key) == nullptr) throw Error("override " + o + ": pretrain_recipe() has no argument " + key);
      factory_args[key] = override_value(o.substr(eq + 1), 0);
    } else {
      settings_given[key] = override_value(o.substr(eq + 1), 0);
    }
  }
  // A name inside pretrain_recipe: its argument as given, else its default.
  const auto recipe_value = [&](const Expr& e) -> Expr {
    if (e.kind != Expr::Kind::name) return e;
    if (const auto it = factory_args.find(e.text); it != factory_args.end()) return it->second;
    const std::optional<Expr>* fallback = recipe.param(e.text);
    return fallback != nullptr && *fallback ? **fallback : e;
  };
  if (recipe.param("performance_mode") != nullptr) {
    const Expr mode = recipe_value(Expr{Expr::Kind::name, "performance_mode", {}, {}, recipe.line, {}});
    if (python_value(mode) != "false")
      throw Error(std::string(where) + ": performance_mode " + mode.shown() +
                  ": pretrain_performance_optimizations (communication-overlap and garbage-collection callbacks) is "
                  "not read; check the recipe without it");
  }
  // pretrain_recipe's statements: the run.Partial it returns and `if performance_mode:` (off); a statement that could
  // change the job otherwise is refused.
  const int body_indent = recipe.body.empty() ? 0 : recipe.body.front().indent;
  for (std::size_t i = 0; i < recipe.body.size(); ++i) {
    const auto& s = recipe.body[i];
    const auto not_followed = [&](const std::string& what) {
      return Error(at(where, s.line) + ": " + what + " in pretrain_recipe(): a statement headroom does not follow");
    };
    if (s.keyword == "if" && s.target == "performance_mode") {  // its block stays off
      while (i + 1 < recipe.body.size() && recipe.body[i + 1].indent > s.indent) ++i;
      continue;
    }
    if (s.indent != body_indent) throw not_followed("an indented block");
    if (s.keyword == "return") continue;
    if (s.keyword == "=") {
      if (s.target.find('.') != std::string::npos)
        throw Error(at(where, s.line) + ": " + s.target + " = ...: give " + s.target.substr(s.target.find('.') + 1) +
                    "=VALUE as an override instead (headroom reads the recipe's calls)");
      if (s.value && s.value->kind == Expr::Kind::call && s.value->text != "run.Partial")
        throw not_followed(s.target + " = " + s.value->shown());
      continue;
    }
    if (s.keyword.empty() && s.value && s.value->kind == Expr::Kind::string) continue;  // the docstring
    throw not_followed(s.keyword.empty() ? (s.value ? s.value->shown() : std::string("a statement"))
                                         : "`" + s.keyword + "`");
  }

  // The settings: trainer(...)'s strategy and Trainer, the data module, the optimizer and the model.
  std::map<std::string, std::pair<Expr, std::string>> settings;  // path -> value, where it was set
  const Expr* partial = nullptr;
  for (const Expr* c : calls_in(recipe))
    if (c->text == "run.Partial") partial = c;
  if (partial == nullptr) throw Error(std::string(where) + ": pretrain_recipe() builds no run.Partial");
  const Expr* trainer_call = partial->kwarg("trainer");
  if (trainer_call == nullptr || trainer_call->kind != Expr::Kind::call || trainer_call->text != "trainer")
    throw Error(at(where, partial->line) + ": the recipe's trainer is " +
                (trainer_call ? trainer_call->shown() : std::string("not given")) +
                ", not this file's trainer(): headroom reads the trainer this file defines");
  // A name inside trainer(): the argument pretrain_recipe passes it, else trainer()'s default.
  const auto trainer_value = [&](const Expr& e) -> Expr {
    if (e.kind != Expr::Kind::name) return e;
    if (const Expr* given = trainer_call->kwarg(e.text)) return recipe_value(*given);
    const std::optional<Expr>* fallback = trainer_fn.param(e.text);
    if (fallback == nullptr) return e;
    if (!*fallback) throw Error(at(where, trainer_fn.line) + ": trainer() has no default for " + e.text);
    return **fallback;
  };
  const auto set_from = [&](const std::string& prefix, const Expr& call, const auto& resolve) {
    for (const Expr& value : call.kwargs) {
      if ((value.key == "ddp" && value.kind == Expr::Kind::call) || (prefix == "trainer." && value.key == "strategy"))
        continue;  // read as their own calls
      settings[prefix + value.key] = {resolve(value), at(where, value.line)};
    }
  };
  const Expr* strategy = config_of(trainer_fn, "MegatronStrategy");
  const Expr* trainer_cfg = config_of(trainer_fn, "Trainer");
  if (strategy == nullptr || trainer_cfg == nullptr)
    throw Error(at(where, trainer_fn.line) +
                ": trainer() builds no run.Config(nl.MegatronStrategy, ...) and "
                "run.Config(nl.Trainer, ...)");
  set_from("trainer.strategy.", *strategy, trainer_value);
  if (const Expr* ddp = strategy->kwarg("ddp"); ddp != nullptr && ddp->kind == Expr::Kind::call) {
    if (ddp->args.empty() || !ddp->args.front().text.ends_with("DistributedDataParallelConfig"))
      throw Error(at(where, ddp->line) + ": ddp " + ddp->shown() + ": not a DistributedDataParallelConfig");
    set_from("trainer.strategy.ddp.", *ddp, trainer_value);
  }
  set_from("trainer.", *trainer_cfg, trainer_value);
  const Expr* data = partial->kwarg("data");
  if (data == nullptr || data->kind != Expr::Kind::call || data->text != "run.Config")
    throw Error(at(where, partial->line) + ": the recipe's data is not a run.Config of a data module");
  set_from("data.", *data, recipe_value);
  if (const Expr* optim = partial->kwarg("optim")) settings["optim"] = {*optim, at(where, optim->line)};
  // model(): run.Config(LlamaModel, config=run.Config(<class>)), or config=<name> of `<name> = run.Config(<class>)`
  // with its fields set as `<name>.field = value`.
  std::map<std::string, const Expr*> model_configs;  // a name of model() -> the run.Config it holds
  for (const auto& st : model_fn.body) {
    if (st.keyword == "=" && st.value && st.value->kind == Expr::Kind::call && st.target.find('.') == std::string::npos)
      model_configs[st.target] = &*st.value;
    if (st.keyword == "=" && st.target.find('.') != std::string::npos) {
      const std::string member = st.target.substr(st.target.find('.') + 1);
      if (!model_configs.contains(st.target.substr(0, st.target.find('.'))) || !st.value)
        throw Error(at(where, st.line) + ": " + st.target + " = ...: model() sets what headroom does not follow");
      settings["model.config." + member] = {*st.value, at(where, st.line)};
    }
  }
  for (const Expr* c : calls_in(model_fn))
    if (const Expr* config = c->kwarg("config")) {
      const Expr* cls = config;
      if (config->kind == Expr::Kind::name && model_configs.contains(config->text))
        cls = model_configs.at(config->text);
      if (cls->kind == Expr::Kind::call && !cls->args.empty())
        settings["model.config"] = {cls->args.front(), at(where, cls->line)};
    }
  for (auto& [key, value] : settings_given) settings[key] = {value, "override " + key};

  // Each setting read, ignored with why, or refused.
  std::map<std::string, std::string>& layout = out.run.layout;
  std::int64_t nodes = 1, devices = 8;
  for (const auto& setting : settings) {  // named, not bound: clang 14's lambdas cannot capture bindings
    const std::string& key = setting.first;
    const Expr& value = setting.second.first;
    const std::string& from = setting.second.second;
    const RecipeKey* rule = text::key_rule(kRecipeKeys, key);
    const std::string v = python_value(value);
    const auto refuse = [&](const std::string& why) -> Error {
      return Error(from + ": " + key + " " + value.shown() + ": " + why);
    };
    if (rule == nullptr) {
      if (key.starts_with("data.") && key != "data.seq_length") {
        out.ignored.push_back(key + " (data)");
        continue;
      }
      throw refuse("not a setting headroom reads or knows to be harmless");
    }
    if (!rule->why.empty()) {
      out.ignored.push_back(key + " (" + std::string(rule->why) + ")");
      continue;
    }
    const auto integer = [&]() -> std::int64_t {
      const auto x = text::number(v);
      if (value.kind != Expr::Kind::number || !x || *x < 1 || *x > static_cast<double>(kMaxRecipeInteger) ||
          *x != std::floor(*x))
        throw refuse("expected a positive integer (at most 10^9)");
      return static_cast<std::int64_t>(*x);
    };
    const auto boolean = [&]() {
      if (v != "true" && v != "false") throw refuse("expected True or False");
      return v == "true";
    };
    out.read.push_back(key);
    if (key == "trainer.num_nodes") {
      nodes = integer();
    } else if (key == "trainer.devices") {
      devices = integer();
    } else if (key == "trainer.strategy.virtual_pipeline_model_parallel_size") {
      layout["vpp"] = v == "None" ? "1" : std::to_string(integer());
    } else if (key == "trainer.strategy.sequence_parallel" ||
               key == "trainer.strategy.account_for_embedding_in_pipeline_split" ||
               key == "trainer.strategy.account_for_loss_in_pipeline_split") {
      layout[std::string(rule->knob)] = boolean() ? "true" : "false";
    } else if (key == "trainer.strategy.ddp.grad_reduce_in_fp32") {
      layout["grad_reduce_in_bf16"] = boolean() ? "false" : "true";
    } else if (key == "trainer.strategy.ddp.overlap_grad_reduce" ||
               key == "trainer.strategy.ddp.overlap_param_gather") {
      if (!boolean())
        throw refuse("the framework's coefficients (dp_overlap) price the reduction and gather overlapped");
    } else if (key == "trainer.strategy.fsdp") {
      if (v != "None") throw refuse("Megatron-FSDP and PyTorch FSDP under NeMo are not priced (valid: None)");
    } else if (key == "trainer.accumulate_grad_batches") {
      if (integer() != 1) throw refuse("Megatron-core accumulates the global batch itself (valid: 1)");
    } else if (key == "trainer.plugins") {
      if (!(value.kind == Expr::Kind::call && value.text == "bf16_mixed" && value.args.empty() && value.kwargs.empty()))
        throw refuse("headroom prices the recipes' bf16_mixed() precision (valid: bf16_mixed())");
    } else if (key == "optim") {
      // nemo/collections/llm/recipes/optim/adam.py: OptimizerConfig(optimizer="adam", bf16=precision ==
      // "bf16-mixed", use_distributed_optimizer=True): Megatron-core's distributed optimizer, FP32 states.
      const Expr* precision = value.kwarg("precision");
      if (value.kind != Expr::Kind::call || value.text != "distributed_fused_adam_with_cosine_annealing" ||
          (precision != nullptr && precision->text != "bf16-mixed"))
        throw refuse("headroom reads the recipes' distributed_fused_adam_with_cosine_annealing(), BF16");
      layout["sharding"] = "NNG";
    } else if (key == "model.config.recompute_granularity") {
      if (v != "None" && v != "full" && v != "selective") throw refuse("valid: full, selective, None");
      layout["recompute"] = v == "None" ? "none" : v;
    } else if (key == "model.config.recompute_method") {
      if (v != "None" && v != "uniform" && v != "block") throw refuse("valid: uniform, block, None");
      if (v != "None") layout["recompute_method"] = v;
    } else if (key == "model.config.recompute_num_layers") {
      if (v != "None") layout["recompute_num_layers"] = std::to_string(integer());
    } else if (key == "optim.config.use_distributed_optimizer") {
      layout["sharding"] = boolean() ? "NNG" : "NNN";
    } else if (key == "model.config") {
      const std::string cls = value.text.substr(value.text.rfind('.') + 1);
      const auto it =
          std::find_if(kRecipeModels.begin(), kRecipeModels.end(), [&](const auto& m) { return m.first == cls; });
      if (it == kRecipeModels.end())
        throw refuse("no shipped model of this NeMo config's shape (read: the Llama 2, 3 and 3.1 configs)");
      layout["model"] = std::string(it->second);
      out.notes.push_back("the model is " + cls + ", " + std::string(it->second) + "'s shape");
    } else {
      layout[std::string(rule->knob)] = std::to_string(integer());
    }
  }
  for (const char* required : {"model.config", "data.seq_length", "data.global_batch_size", "data.micro_batch_size"})
    if (!settings.contains(required)) throw Error(std::string(where) + ": the recipe gives no " + required);
  if (!layout.contains("sharding"))
    throw Error(std::string(where) +
                ": the recipe gives no optim (headroom reads distributed_fused_adam_with_cosine_annealing)");
  const std::int64_t world = nodes * devices;
  std::int64_t model_gpus = 1, rest = world;  // world divided by tp, cp and pp in turn: no product overflows
  bool divides = true;
  for (const char* k : {"tp", "cp", "pp"})
    if (layout.contains(k)) {
      const std::int64_t x = std::stoll(layout.at(k));
      divides = divides && rest % x == 0;
      rest = divides ? rest / x : rest;
      model_gpus = model_gpus <= kMaxRecipeInteger ? model_gpus * x : model_gpus;
    }
  if (!divides)
    throw Error(std::string(where) + ": trainer.num_nodes " + std::to_string(nodes) + " x trainer.devices " +
                std::to_string(devices) + " = " + std::to_string(world) +
                " GPUs, not a multiple of the strategy's tensor x context x pipeline parallel sizes (" +
                std::to_string(model_gpus) + "): give num_nodes=N (NeMo's `--factory \"<recipe>(num_nodes=N)\"`)");
  if (gpus > 0 && gpus != world)
    throw Error("--gpus " + std::to_string(gpus) +
                ": the recipe runs on trainer.num_nodes x trainer.devices = " + std::to_string(world) + " GPUs");
  layout["gpus"] = std::to_string(world);
  if (!layout.contains("grad_reduce_in_bf16")) layout["grad_reduce_in_bf16"] = "false";  // DDP config's default
  out.notes.insert(out.notes.begin(), "read as NeMo 2.0 recipe settings (pretrain_recipe, trainer, model), " +
                                          std::to_string(nodes) + " node(s) x " + std::to_string(devices) + " GPUs");
  return out;
}

// NeMo 1.x's layout keys (nemo_layout_keys) under the paths NeMo 2.0 gives the same Megatron-core settings.
constexpr std::array<std::pair<std::string_view, std::string_view>, 10> kRecipePaths = {{
    {"model.micro_batch_size", "data.micro_batch_size"},
    {"model.global_batch_size", "data.global_batch_size"},
    {"model.tensor_model_parallel_size", "trainer.strategy.tensor_model_parallel_size"},
    {"model.pipeline_model_parallel_size", "trainer.strategy.pipeline_model_parallel_size"},
    {"model.virtual_pipeline_model_parallel_size", "trainer.strategy.virtual_pipeline_model_parallel_size"},
    {"model.context_parallel_size", "trainer.strategy.context_parallel_size"},
    {"model.sequence_parallel", "trainer.strategy.sequence_parallel"},
    {"model.activations_checkpoint_granularity", "model.config.recompute_granularity"},
    {"model.activations_checkpoint_method", "model.config.recompute_method"},
    {"model.activations_checkpoint_num_layers", "model.config.recompute_num_layers"},
}};

std::vector<std::pair<std::string, std::string>> nemo_recipe_layout_keys(const Layout& l) {
  const auto python = [](const std::string& yaml) -> std::string {  // YAML's spellings as Python's
    return yaml == "null" ? "None" : yaml == "true" ? "True" : yaml == "false" ? "False" : yaml;
  };
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, value] : nemo_layout_keys(l))
    for (const auto& [nemo1, recipe] : kRecipePaths)
      if (key == nemo1) out.emplace_back(recipe, python(value));
  out.emplace_back("optim.config.use_distributed_optimizer", l.sharding.optimizer != Shard::none ? "True" : "False");
  return out;
}

std::vector<std::string> nemo_recipe_changes(const Layout& from, const Layout& to) {
  std::vector<std::string> out;
  const auto a = nemo_recipe_layout_keys(from), b = nemo_recipe_layout_keys(to);
  for (std::size_t i = 0; i < b.size(); ++i)
    if (a[i].second != b[i].second) out.push_back(b[i].first + "=" + b[i].second + " (was " + a[i].second + ")");
  return out;
}

}  // namespace headroom::calibrate
