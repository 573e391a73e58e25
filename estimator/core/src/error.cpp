#include "headroom/core/error.hpp"

#include <utility>

#include "headroom/core/knobs.hpp"

namespace headroom {
namespace {

constexpr char kOpen = '\x1e', kClose = '\x1f';  // ASCII record/unit separators: in no text headroom writes

std::string render(const std::string& marked, FieldNames names) {
  std::string out;
  out.reserve(marked.size());
  for (std::size_t i = 0; i < marked.size(); ++i) {
    const std::size_t end = marked[i] == kOpen ? marked.find(kClose, i) : std::string::npos;
    if (end == std::string::npos) {
      out += marked[i];
      continue;
    }
    const std::string_view name(marked.data() + i + 1, end - i - 1);
    out += names == FieldNames::flags ? flag_of_field(name) : std::string(name);
    i = end;
  }
  return out;
}

std::vector<std::string> fields_in(const std::string& marked) {
  std::vector<std::string> fields;
  for (std::size_t i = marked.find(kOpen); i != std::string::npos; i = marked.find(kOpen, i + 1)) {
    const std::size_t end = marked.find(kClose, i);
    if (end == std::string::npos) break;
    fields.emplace_back(marked, i + 1, end - i - 1);
  }
  return fields;
}

}  // namespace

std::string field(std::string_view name) { return kOpen + std::string(name) + kClose; }

std::string flag_of_field(std::string_view name) {
  if (const Knob* k = find_knob(name)) {  // the knob's first CLI spelling (a flag without one: its off spelling)
    const std::string_view flags = k->flags.empty() ? k->off_flags : k->flags;
    return std::string(flags.substr(0, flags.find(',')));
  }
  std::string flag = "--";
  for (const char c : name) flag += c == '_' ? '-' : c;
  return flag;
}

Error::Error(const std::string& message)
    : std::runtime_error(render(message, FieldNames::flags)),
      marked_(std::make_shared<const Marked>(Marked{message, fields_in(message)})) {}

const std::vector<std::string>& Error::fields() const { return marked_->fields; }

std::string Error::message(FieldNames names) const { return render(marked_->text, names); }

}  // namespace headroom
