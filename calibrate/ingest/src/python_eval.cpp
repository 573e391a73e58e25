// Python config functions run without a Python (python_eval.hpp).
#include "python_eval.hpp"

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

#include "headroom/core/error.hpp"
#include "text.hpp"

namespace headroom::calibrate::python {
namespace {

// Bounds that keep a hostile module finite: calls nested 16 deep and 256 in all, 10^5 values evaluated, 64 modules.
constexpr int kMaxDepth = 16, kMaxCalls = 256, kMaxModules = 64;
constexpr std::size_t kMaxValues = 100'000;

bool literal(const Expr& e) {
  return e.kind == Expr::Kind::number || e.kind == Expr::Kind::string ||
         (e.kind == Expr::Kind::name && (e.text == "True" || e.text == "False" || e.text == "None"));
}

// isinstance(x, T) for a builtin type T: of a literal by its kind, false of an instance of a class (a call of a name
// that starts with a capital: `MixedPrecisionConfig(...)`); nullopt for another type or value (a function's result).
std::optional<bool> is_instance(const Expr& x, const Expr& type) {
  static constexpr std::array<std::string_view, 8> kTypes = {"str",  "int",   "float", "bool",
                                                             "list", "tuple", "dict",  "set"};
  const std::string& t = type.text;
  if (type.kind != Expr::Kind::name || std::find(kTypes.begin(), kTypes.end(), t) == kTypes.end()) return std::nullopt;
  switch (x.kind) {
    case Expr::Kind::string: return t == "str";
    case Expr::Kind::number: {  // a float has a point or an exponent (not a hexadecimal's digit e)
      const bool real = x.text.find('.') != std::string::npos || (x.text.find_first_of("eE") != std::string::npos &&
                                                                  x.text.find_first_of("xX") == std::string::npos);
      return t == (real ? "float" : "int");
    }
    case Expr::Kind::list: return t == (x.text.starts_with('(') ? "tuple" : "list");
    case Expr::Kind::name:
      if (x.text == "None") return false;
      if (x.text == "True" || x.text == "False") return t == "bool" || t == "int";
      return std::nullopt;
    case Expr::Kind::call: {
      const auto dot = x.text.rfind('.');
      const char first = x.text[dot == std::string::npos ? 0 : dot + 1];
      if (first >= 'A' && first <= 'Z') return false;
      return std::nullopt;
    }
    case Expr::Kind::other: return std::nullopt;
  }
  return std::nullopt;
}

// Python's truth of a value, nullopt for a name that stays unresolved (a module's attribute, a builtin).
std::optional<bool> truth(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::number: {
      const auto x = text::number(e.text.starts_with('-') ? e.text.substr(1) : e.text);
      return x ? std::optional<bool>(*x != 0) : std::nullopt;
    }
    case Expr::Kind::string: return !e.text.empty();
    case Expr::Kind::list: return !e.args.empty();
    case Expr::Kind::call: {  // an object (a config), unless a builtin's value, which stays unknown
      if (e.text == "isinstance" && e.args.size() == 2 && e.kwargs.empty()) return is_instance(e.args[0], e.args[1]);
      if (e.text == "hasattr" && e.args.size() == 2 && e.args[1].kind == Expr::Kind::string &&
          e.args[0].kind == Expr::Kind::call && e.args[0].kwarg(e.args[1].text) != nullptr)
        return true;  // a field the config was given; one it was not may be its class's
      static constexpr std::array<std::string_view, 12> kBuiltins = {"isinstance", "issubclass", "hasattr", "getattr",
                                                                     "callable",   "len",        "any",     "all",
                                                                     "bool",       "int",        "float",   "str"};
      if (std::find(kBuiltins.begin(), kBuiltins.end(), e.text) != kBuiltins.end()) return std::nullopt;
      return true;
    }
    case Expr::Kind::name:
      if (e.text == "True") return true;
      if (e.text == "False" || e.text == "None") return false;
      return std::nullopt;
    case Expr::Kind::other: return std::nullopt;
  }
  return std::nullopt;
}

bool same(const Expr& a, const Expr& b) {
  if (a.kind == Expr::Kind::number && b.kind == Expr::Kind::number) {
    const auto x = text::number(a.text), y = text::number(b.text);
    if (x && y) return *x == *y;
  }
  return a.kind == b.kind && a.text == b.text;
}

std::size_t size(const Expr& e) {
  std::size_t n = 1;
  for (const Expr& a : e.args) n += size(a);
  for (const Expr& a : e.kwargs) n += size(a);
  return n;
}

Expr* field(std::vector<Expr>& kwargs, std::string_view name) {
  const auto it = std::find_if(kwargs.begin(), kwargs.end(), [&](const Expr& v) { return v.key == name; });
  return it == kwargs.end() ? nullptr : &*it;
}

// Whether two values are the same, wherever each was written.
bool same_value(const Expr& a, const Expr& b) {
  if (a.kind != b.kind || a.text != b.text || a.key != b.key || a.args.size() != b.args.size() ||
      a.kwargs.size() != b.kwargs.size())
    return false;
  for (std::size_t i = 0; i < a.args.size(); ++i)
    if (!same_value(a.args[i], b.args[i])) return false;
  return std::all_of(a.kwargs.begin(), a.kwargs.end(), [&](const Expr& kw) {
    const Expr* other = b.kwarg(kw.key);
    return other != nullptr && same_value(kw, *other);
  });
}

// A value an if whose condition could not be told sets one way and not the other: unknown, naming the condition,
// written where the if is.
struct Untold {
  std::string why;  // "`if x == y` in f(): a condition headroom cannot tell"
  int line, file;
};
Expr untold_value(const Untold& u, const std::string& path, const std::string& key) {
  Expr out{Expr::Kind::other, path + " (set one way of " + u.why + ")", {}, {}, u.line, key};
  out.file = u.file;
  return out;
}

// What `path` holds after both ways of an untold if: the value where both agree, a config's fields merged one by one
// where both hold the same class, else unknown.
Expr merged(const Expr& a, const Expr& b, const std::string& path, const Untold& u) {
  if (same_value(a, b)) return a;
  const bool same_args =
      a.args.size() == b.args.size() && std::equal(a.args.begin(), a.args.end(), b.args.begin(), same_value);
  if (a.kind != Expr::Kind::call || b.kind != Expr::Kind::call || a.text != b.text || !same_args)
    return untold_value(u, path, a.key);
  const auto one_way = [&](const Expr& kw) {  // a field set one way only
    // A section added there (`cfg.rng.seed = 1` where the config gave no rng) is, the other way, one with no fields.
    if (!added_section(kw, kw.key)) return untold_value(u, path + "." + kw.key, kw.key);
    Expr none = kw;
    none.kwargs.clear();
    return merged(kw, none, path + "." + kw.key, u);
  };
  Expr out = a;
  for (Expr& kw : out.kwargs) {
    const Expr* other = b.kwarg(kw.key);
    kw = other != nullptr ? merged(kw, *other, path + "." + kw.key, u) : one_way(kw);
  }
  for (const Expr& kw : b.kwargs)
    if (a.kwarg(kw.key) == nullptr) out.kwargs.push_back(one_way(kw));
  return out;
}

// The end of the block statement k opens: the first statement after it at its indentation or less.
std::size_t block_end(const Function& fn, std::size_t k, std::size_t end) {
  std::size_t j = k + 1;
  while (j < end && fn.body[j].indent > fn.body[k].indent) ++j;
  return j;
}

// A dotted callee's last name (`mp.get_mixed_precision_config` → get_mixed_precision_config): what Intrinsics and
// Effects are keyed by.
std::string_view last_name(const std::string& callee) { return std::string_view(callee).substr(callee.rfind('.') + 1); }

}  // namespace

Evaluator::Evaluator(std::string_view text, std::string where, Loader loader, Intrinsics intrinsics, Effects effects)
    : loader_(std::move(loader)), intrinsics_(std::move(intrinsics)), effects_(std::move(effects)) {
  Module first = read_module(text, where, 0);
  modules_.push_back({"", std::move(where), std::move(first)});
}

std::string Evaluator::at_line(int file, int line) const {
  if (file < 0 || static_cast<std::size_t>(file) >= modules_.size()) return "the command line";
  return text::at(modules_[static_cast<std::size_t>(file)].where, line);
}

std::string Evaluator::where(const Expr& e) const { return at_line(e.file, e.line); }

std::vector<std::string> Evaluator::followed() const {
  std::vector<std::string> out;
  for (std::size_t i = 1; i < modules_.size(); ++i) out.push_back(modules_[i].name);
  return out;
}

Expr Evaluator::call(const std::string& name, const std::vector<Expr>& kwargs) {
  if (!main().functions.contains(name)) throw Error(modules_.front().where + ": no function " + name + "()");
  Expr at;
  at.file = -1;
  return invoke(0, name, {}, kwargs, at);
}

std::optional<int> Evaluator::load(const std::string& module) {
  if (const auto it = by_name_.find(module); it != by_name_.end()) return it->second;
  std::optional<int> index;
  if (loader_ && modules_.size() < static_cast<std::size_t>(kMaxModules))
    if (const std::optional<std::string> text = loader_(module)) {
      index = static_cast<int>(modules_.size());
      const std::string file = module.substr(module.rfind('.') + 1) + ".py";
      modules_.push_back({module, file, read_module(*text, file, *index)});
    }
  by_name_[module] = index;
  return index;
}

std::optional<std::pair<int, std::string>> Evaluator::resolve(const std::string& callee, int module, int hops) {
  const Module& m = modules_[static_cast<std::size_t>(module)].module;
  if (callee.find('.') == std::string::npos && m.functions.contains(callee)) return std::pair{module, callee};
  const std::string head = callee.substr(0, callee.find('.'));
  const auto it = m.imports.find(head);
  if (it == m.imports.end()) return std::nullopt;
  const std::string full = it->second + callee.substr(head.size());
  const auto dot = full.rfind('.');
  if (dot == std::string::npos) return std::nullopt;
  const std::optional<int> other = load(full.substr(0, dot));
  if (!other) return std::nullopt;
  const std::string name = full.substr(dot + 1);
  const Module& there = modules_[static_cast<std::size_t>(*other)].module;
  if (there.functions.contains(name)) return std::pair{*other, name};
  // A name that module imports (a package's re-export: `from .common import llama3_8b_pretrain_config`), followed
  // there, as deep as the modules loaded allow.
  if (there.imports.contains(name) && *other != module && ++hops < kMaxModules) return resolve(name, *other, hops);
  return std::nullopt;
}

Expr Evaluator::value(const Expr& e, Frame& f) {
  if (++values_ > kMaxValues) throw Error(where(e) + ": the configs evaluate to more than 10^5 values");
  switch (e.kind) {
    case Expr::Kind::call: return call_value(e, f);
    case Expr::Kind::list: {
      Expr out = e;
      for (Expr& a : out.args) a = value(a, f);
      return out;
    }
    case Expr::Kind::name: {
      const std::string head = e.text.substr(0, e.text.find('.'));
      if (const auto local = f.locals.find(head); local != f.locals.end()) {
        const Expr* v = &local->second;
        for (std::size_t from = head.size(); from < e.text.size();) {  // its fields: `recipe.trainer.strategy`
          const std::size_t next = std::min(e.text.find('.', from + 1), e.text.size());
          const Expr* x = v->kind == Expr::Kind::call ? v->kwarg(e.text.substr(from + 1, next - from - 1)) : nullptr;
          if (x == nullptr) {
            // A field the recipe does not set (its class's default, or the Hugging Face config's through
            // AutoBridge): a value headroom does not know, refused only where a setting it reads needs it.
            if (v->kind != Expr::Kind::call)
              throw Error(where(e) + ": " + e.text.substr(0, next) + ": " + e.text.substr(0, from) + " is " +
                          v->shown() + ", not a config");
            Expr unknown{Expr::Kind::other,
                         e.text.substr(0, next) + " (a field the recipe does not set)",
                         {},
                         {},
                         e.line,
                         e.key};
            unknown.file = e.file;
            return unknown;
          }
          v = x;
          from = next;
        }
        if ((values_ += size(*v)) > kMaxValues)  // the copy counts as the values it holds
          throw Error(where(e) + ": the configs evaluate to more than 10^5 values");
        Expr out = *v;
        out.key = e.key;
        return out;
      }
      const Module& m = modules_[static_cast<std::size_t>(f.module)].module;
      if (const auto constant = m.constants.find(e.text); constant != m.constants.end()) {
        Expr v = constant->second;
        v.key = e.key;
        return v;
      }
      return e;
    }
    case Expr::Kind::number:
    case Expr::Kind::string:
    case Expr::Kind::other: return e;
  }
  return e;
}

Expr Evaluator::call_value(const Expr& e, Frame& f) {
  std::vector<Expr> args, kwargs;
  for (const Expr& a : e.args) args.push_back(value(a, f));
  for (const Expr& a : e.kwargs) kwargs.push_back(value(a, f));
  if (const auto it = intrinsics_.find(last_name(e.text)); it != intrinsics_.end()) {
    Expr given = e;
    given.args = args;
    given.kwargs = kwargs;
    if (std::optional<Expr> out = it->second(given)) {
      out->key = e.key;
      return *out;
    }
  }
  if (const auto target = resolve(e.text, f.module)) {
    // The arguments that name a local or a field of one, with their values as given: what the function sets on them
    // is set on the caller's (Python passes objects). Only these are kept, to compare after the call.
    const Function& fn = modules_[static_cast<std::size_t>(target->first)].module.functions.at(target->second);
    struct Passed {
      const std::string* path;
      std::string param;
      Expr given;
    };
    std::vector<Passed> passed;
    const auto names_local = [&](const Expr& x) {
      return x.kind == Expr::Kind::name && f.locals.contains(x.text.substr(0, x.text.find('.')));
    };
    for (std::size_t i = 0; i < e.args.size() && i < fn.params.size(); ++i)
      if (names_local(e.args[i])) passed.push_back({&e.args[i].text, fn.params[i].first, args[i]});
    for (std::size_t i = 0; i < e.kwargs.size(); ++i)
      if (names_local(e.kwargs[i])) passed.push_back({&e.kwargs[i].text, e.kwargs[i].key, kwargs[i]});
    std::map<std::string, Expr> after;
    Expr out = invoke(target->first, target->second, std::move(args), std::move(kwargs), e, &after);
    out.key = e.key;
    for (const Passed& x : passed) {
      const auto it = after.find(x.param);
      if (it == after.end() || same_value(it->second, x.given)) continue;
      Function::Statement at;
      at.line = e.line;
      Expr& to = place(*x.path, at, f);
      it->second.key = to.key;
      to = std::move(it->second);
    }
    return out;
  }
  Expr out = e;
  out.args = std::move(args);
  out.kwargs = std::move(kwargs);
  return out;
}

Expr Evaluator::invoke(int module, const std::string& name, std::vector<Expr> args, std::vector<Expr> kwargs,
                       const Expr& at, std::map<std::string, Expr>* after) {
  const Function& fn = modules_[static_cast<std::size_t>(module)].module.functions.at(name);
  if (depth_ >= kMaxDepth || ++calls_ > kMaxCalls)
    throw Error(where(at) + ": " + name + "() calls functions more than 16 deep or 256 in all");
  Frame frame{module, name, {}, {}};
  // Positional arguments bind the parameters before a star, keywords any named one; *args and **kwargs take nothing
  // (what they would pass on is not followed).
  std::size_t positional = 0;
  while (positional < fn.params.size() && !fn.params[positional].first.starts_with('*')) ++positional;
  if (args.size() > positional)
    throw Error(where(at) + ": " + name + "() takes " + std::to_string(positional) +
                " positional arguments headroom follows, given " + std::to_string(args.size()));
  for (std::size_t i = 0; i < args.size(); ++i) frame.locals[fn.params[i].first] = std::move(args[i]);
  for (Expr& kw : kwargs) {
    if (fn.param(kw.key) == nullptr)
      throw Error(
          where(at) + ": " + name + "() has no argument " + kw.key +
          (fn.param("**kwargs") != nullptr ? " (its **kwargs pass it on, which headroom does not follow)" : ""));
    const std::string key = kw.key;
    frame.locals[key] = std::move(kw);
  }
  for (const auto& [param, fallback] : fn.params) {
    if (frame.locals.contains(param) || param.starts_with('*')) continue;
    if (!fallback) throw Error(where(at) + ": " + name + "() is called without its argument " + param);
    Frame defaults{module, name, {}, {}};  // a default is evaluated in its module, not the function
    frame.locals[param] = value(*fallback, defaults);
  }
  ++depth_;
  std::optional<Expr> out = run(fn, 0, fn.body.size(), frame);
  --depth_;
  if (after != nullptr)
    for (auto& [param, v] : frame.locals)
      if (fn.param(param) != nullptr && !frame.rebound.contains(param)) (*after)[param] = std::move(v);
  if (!out) {
    out = Expr{Expr::Kind::name, "None", {}, {}, fn.line, {}};
    out->file = module;
  }
  return *out;
}

std::optional<bool> Evaluator::holds(const Function::Statement& s, Frame& f) {
  if (s.test == "?" || !s.value) return std::nullopt;  // of another form: and, or, in, <, ...
  const Expr lhs = value(*s.value, f);
  if (s.test.empty() || s.test == "not") {
    const std::optional<bool> t = truth(lhs);
    if (!t) return std::nullopt;
    return s.test.empty() ? *t : !*t;
  }
  const Expr rhs = value(*s.rhs, f);
  // A value known to be something (a config, a string, a number, a list) is not None.
  const auto something = [](const Expr& e) { return e.kind != Expr::Kind::name && e.kind != Expr::Kind::other; };
  const auto none = [](const Expr& e) { return e.kind == Expr::Kind::name && e.text == "None"; };
  if ((s.test == "is" || s.test == "is not") && ((none(rhs) && something(lhs)) || (none(lhs) && something(rhs))))
    return s.test == "is not";
  if (!literal(lhs) || !literal(rhs)) return std::nullopt;
  const bool equal = same(lhs, rhs);
  return s.test == "==" || s.test == "is" ? equal : !equal;
}

Expr& Evaluator::place(const std::string& path, const Function::Statement& s, Frame& f) {
  const auto not_followed = [&](const std::string& what) {
    return Error(at_line(f.module, s.line) + ": " + what + " in " + f.function +
                 "(): a statement headroom does not follow");
  };
  const std::string head = path.substr(0, path.find('.'));
  if (head.size() == path.size()) return f.locals[head];
  const auto local = f.locals.find(head);
  if (local == f.locals.end()) throw not_followed(path + ", of a name not bound in the function");
  Expr* node = &local->second;
  for (std::size_t from = head.size(); from < path.size();) {
    const std::size_t next = std::min(path.find('.', from + 1), path.size());
    const std::string name = path.substr(from + 1, next - from - 1);
    if (node->kind != Expr::Kind::call)
      throw not_followed(path + ": " + path.substr(0, from) + " is " + node->shown() + ", not a config");
    Expr* x = field(node->kwargs, name);
    if (x == nullptr) {  // a field the config did not give: added (a section of it as an empty config, added_section)
      const bool last = next == path.size();
      node->kwargs.push_back(
          Expr{last ? Expr::Kind::name : Expr::Kind::call, last ? "None" : path.substr(0, next), {}, {}, s.line, name});
      node->kwargs.back().file = f.module;
      x = &node->kwargs.back();
    }
    node = x;
    from = next;
  }
  return *node;
}

void Evaluator::assign(const Function::Statement& s, Frame& f) {
  if (s.target == "an expression")
    throw Error(at_line(f.module, s.line) + ": an assignment to an expression in " + f.function +
                "(): a statement headroom does not follow");
  Expr v = value(*s.value, f);
  if (!s.targets.empty()) {  // `a, b = f()`: a tuple (or list) of as many values
    if (v.kind != Expr::Kind::list || v.args.size() != s.targets.size())
      throw Error(at_line(f.module, s.line) + ": " + std::to_string(s.targets.size()) + " names unpacked from " +
                  v.shown() + " in " + f.function + "(): not a tuple of as many values headroom can read");
    for (std::size_t k = 0; k < s.targets.size(); ++k) {  // names, or fields of configs (`cfg.optimizer, ... = f()`)
      if (s.targets[k].find('.') == std::string::npos) f.rebound.insert(s.targets[k]);
      Expr& to = place(s.targets[k], s, f);
      v.args[k].key = s.targets[k].find('.') == std::string::npos ? std::string() : to.key;
      to = std::move(v.args[k]);
    }
    return;
  }
  std::vector<std::string> targets = {s.target};  // the target, then a chain's others, in Python's order
  targets.insert(targets.end(), s.chained.begin(), s.chained.end());
  for (const std::string& target : targets) {
    if (target.find('.') == std::string::npos) f.rebound.insert(target);
    Expr& to = place(target, s, f);
    Expr x = v;
    x.key = to.key;
    to = std::move(x);
  }
}

bool Evaluator::reaches_state(const Expr& e, const Frame& f) const {
  if (e.kind == Expr::Kind::name || e.kind == Expr::Kind::call) {
    const std::string head = e.text.substr(0, e.text.find_first_of(".("));
    if (f.locals.contains(head)) return true;
    // A constant that is a number, a string or True/False/None cannot be changed by what it is passed to.
    const auto& constants = modules_[static_cast<std::size_t>(f.module)].module.constants;
    if (const auto c = constants.find(head); c != constants.end() && !(head == e.text && literal(c->second)))
      return true;
  }
  const auto any = [&](const std::vector<Expr>& xs) {
    return std::any_of(xs.begin(), xs.end(), [&](const Expr& x) { return reaches_state(x, f); });
  };
  return any(e.args) || any(e.kwargs);
}

bool Evaluator::grow_list(const Function::Statement& s, Frame& f) {
  const Expr& method = *s.value;
  const bool append = method.text.ends_with(".append"), extend = method.text.ends_with(".extend");
  if (method.kind != Expr::Kind::call || (!append && !extend) || method.args.size() != 1 || !method.kwargs.empty())
    return false;
  const std::string path = method.text.substr(0, method.text.rfind('.'));
  if (!f.locals.contains(path.substr(0, path.find('.')))) return false;
  Expr v = value(method.args.front(), f);
  Expr& list = place(path, s, f);
  if (list.kind != Expr::Kind::list || (extend && v.kind != Expr::Kind::list))
    throw Error(at_line(f.module, s.line) + ": " + method.text + "(" + v.shown() + ") in " + f.function +
                "(): " + path + " is " + list.shown() + ", not a list headroom can grow");
  if (append) {
    v.key.clear();
    list.args.push_back(std::move(v));
  } else {
    for (Expr& x : v.args) list.args.push_back(std::move(x));
  }
  return true;
}

bool Evaluator::apply_effect(const Function::Statement& s, Frame& f) {
  const Expr& statement = *s.value;
  const auto it = effects_.find(last_name(statement.text));
  if (it == effects_.end() || statement.args.empty() || statement.args.front().kind != Expr::Kind::name) return false;
  Expr given = statement;
  for (Expr& a : given.args) a = value(a, f);
  for (Expr& a : given.kwargs) a = value(a, f);
  std::optional<std::vector<Expr>> fields = it->second(given);
  if (!fields) return false;
  const std::string& target = statement.args.front().text;
  for (Expr& x : *fields) {
    const std::string key = x.key;
    Expr& to = place(target + "." + key, s, f);
    x.line = s.line;
    x.file = f.module;
    to = std::move(x);
    to.key = key;
  }
  return true;
}

std::optional<Expr> Evaluator::run_clauses(const Function& fn, std::size_t k, std::size_t end, Frame& f) {
  if (k >= end) return std::nullopt;
  const Function::Statement& c = fn.body[k];
  const std::size_t e = block_end(fn, k, end);
  const std::optional<bool> taken = c.keyword == "else" ? std::optional<bool>(true) : holds(c, f);
  if (taken) return *taken ? run(fn, k + 1, e, f) : run_clauses(fn, e, end, f);
  const Untold u{"`" + c.keyword + " " + c.condition + "` in " + f.function + "(): a condition headroom cannot tell",
                 c.line, f.module};
  std::size_t held = 0;  // the two copies count as the values they hold: a hostile module stays finite
  for (const auto& local : f.locals) held += size(local.second);
  if ((values_ += 2 * held) > kMaxValues)
    throw Error(at_line(f.module, c.line) + ": " + u.why + ", and running both ways takes more than 10^5 values");
  Frame yes = f, no = f;
  bool returns = false;
  try {
    returns = run(fn, k + 1, e, yes).has_value() || run_clauses(fn, e, end, no).has_value();
  } catch (const Error& error) {  // one way raises, or does what is not followed: said with why it was run
    const std::string what = error.what();
    if (what.find(" (run both ways of ") != std::string::npos) throw;  // an inner untold if's, said once
    throw Error(what + " (run both ways of " + u.why + ", at " + at_line(f.module, c.line) + ")");
  }
  if (returns) throw Error(at_line(f.module, c.line) + ": " + u.why + ", and one way returns");
  for (auto& [name, v] : yes.locals) {
    const auto other = no.locals.find(name);
    v = other != no.locals.end() ? merged(v, other->second, name, u) : untold_value(u, name, v.key);
  }
  for (auto& [name, v] : no.locals)
    if (!yes.locals.contains(name)) yes.locals[name] = untold_value(u, name, v.key);
  yes.rebound.insert(no.rebound.begin(), no.rebound.end());
  f = std::move(yes);
  return std::nullopt;
}

// `try:` whose body only assigns and whose handlers only `pass` (Megatron-Bridge's
// set_deepseek_v3_pipeline_model_parallel_layout: a layout from a table, or none where the table has no entry): the
// body runs; where it raises or does what is not followed, whether it finished is not known, so each field or name it
// assigns holds an untold value, refused only where a setting reads it (a later assignment replaces it).
std::size_t Evaluator::run_try(const Function& fn, std::size_t k, std::size_t end, Frame& f) {
  const Function::Statement& s = fn.body[k];
  const auto not_followed = [&](const std::string& what) {
    return Error(at_line(f.module, s.line) + ": " + what + " in " + f.function +
                 "(): a statement headroom does not follow");
  };
  const std::size_t body = block_end(fn, k, end);
  std::size_t after = body;
  while (after < end && fn.body[after].indent == s.indent && fn.body[after].keyword == "except") {
    const std::size_t e = block_end(fn, after, end);
    if (fn.body[after].inline_block || e != after + 2 || fn.body[after + 1].keyword != "pass")
      throw not_followed("`try` with an `except` that does more than `pass`");
    after = e;
  }
  const bool finally =
      after < end && fn.body[after].indent == s.indent &&
      (fn.body[after].keyword == "else" || (fn.body[after].value && fn.body[after].value->text == "finally"));
  if (after == body || finally || s.inline_block) throw not_followed("`try` without `except ...: pass` handlers alone");
  for (std::size_t j = k + 1; j < body; ++j)
    if (fn.body[j].keyword != "=" || fn.body[j].target == "an expression" || fn.body[j].indent != fn.body[k + 1].indent)
      throw not_followed("`try` of more than assignments");
  Frame attempt = f;
  std::optional<std::string> failed;
  try {
    (void)run(fn, k + 1, body, attempt);  // assignments only: nothing returns
  } catch (const Error& error) {
    failed = error.what();
  }
  if (!failed) {
    f = std::move(attempt);
    return after;
  }
  const Untold u{"`try` in " + f.function + "(): its body raises or is not followed (" + failed->substr(0, 200) + ")",
                 s.line, f.module};
  for (std::size_t j = k + 1; j < body; ++j) {
    const Function::Statement& a = fn.body[j];
    std::vector<std::string> targets = a.targets.empty() ? std::vector<std::string>{a.target} : a.targets;
    targets.insert(targets.end(), a.chained.begin(), a.chained.end());
    for (const std::string& target : targets) {
      if (target.find('.') == std::string::npos) f.rebound.insert(target);
      Expr& to = place(target, a, f);
      to = untold_value(u, target, to.key);
    }
  }
  return after;
}

std::optional<Expr> Evaluator::run(const Function& fn, std::size_t begin, std::size_t end, Frame& f) {
  for (std::size_t i = begin; i < end;) {
    const Function::Statement& s = fn.body[i];
    const auto not_followed = [&](const std::string& what) {
      return Error(at_line(f.module, s.line) + ": " + what + " in " + f.function +
                   "(): a statement headroom does not follow");
    };
    if (s.inline_block) throw not_followed("a block written on its `" + s.keyword + "` line");
    if (s.indent != fn.body[begin].indent) throw not_followed("an indented block");
    if (s.keyword == "if") {
      std::size_t k = i;  // the end of the chain: its last elif's or else's block
      do k = block_end(fn, k, end);
      while (k < end && fn.body[k].indent == s.indent &&
             (fn.body[k].keyword == "elif" || fn.body[k].keyword == "else"));
      if (std::optional<Expr> r = run_clauses(fn, i, k, f)) return r;
      i = k;
      continue;
    }
    if (s.keyword == "try") {
      i = run_try(fn, i, end, f);
      continue;
    }
    if (s.keyword == "return") {
      if (s.value) return value(*s.value, f);
      Expr none{Expr::Kind::name, "None", {}, {}, s.line, {}};
      none.file = f.module;
      return none;
    }
    // Nothing to follow in a docstring, an assertion or an import (its names' calls stay calls); a list a config
    // holds grown (`recipe.trainer.callbacks.append(...)`) is followed by grow_list.
    const bool nothing = s.keyword == "pass" || s.keyword == "assert" || s.keyword == "from" || s.keyword == "import" ||
                         (s.keyword.empty() && s.value && s.value->kind == Expr::Kind::string);
    // A call statement given nothing the function holds (`warn_deprecated_model("llama3_8b")`) reaches no config
    // of it: passed over, and said so.
    const bool calls = s.keyword.empty() && s.value && s.value->kind == Expr::Kind::call;
    const bool unreachable = calls && !reaches_state(*s.value, f);
    if (s.keyword == "=" && s.value) {
      assign(s, f);
    } else if (calls && apply_effect(s, f)) {
      effects_applied_.push_back(s.value->shown() + " at " + at_line(f.module, s.line));
    } else if (unreachable) {
      passed_over_.push_back(s.value->shown() + " at " + at_line(f.module, s.line));
    } else if (calls && resolve(s.value->text, f.module)) {  // a function that sets fields on the configs given it
      (void)value(*s.value, f);
    } else if (!nothing && !(s.keyword.empty() && s.value && s.value->kind == Expr::Kind::call && grow_list(s, f))) {
      std::string what = s.keyword.empty()    ? (s.value ? s.value->shown() : std::string("a statement"))
                         : s.keyword == "def" ? "`def " + s.target + "`"
                                              : "`" + s.keyword + "`";
      if (s.keyword == "raise" && s.value)  // the exception and its message: why the factory refuses to run
        what += " " + s.value->text +
                (!s.value->args.empty() && s.value->args.front().kind == Expr::Kind::string
                     ? "(\"" + s.value->args.front().text.substr(0, 200) + "\")"
                     : std::string());
      throw not_followed(what);
    }
    ++i;
  }
  return std::nullopt;
}

}  // namespace headroom::calibrate::python
