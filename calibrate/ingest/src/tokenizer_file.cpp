#include "headroom/ingest/tokenizer_file.hpp"

#include <cstddef>
#include <set>
#include <string>
#include <system_error>

#include <nlohmann/json.hpp>

#include "headroom/core/error.hpp"
#include "headroom/core/read_file.hpp"
#include "headroom/estimator/spec.hpp"

namespace headroom::calibrate {
namespace {

// Protocol Buffers' wire format (protobuf.dev/programming-guides/encoding): a base-128 varint, at most 10 bytes.
std::optional<std::uint64_t> varint(std::string_view b, std::size_t& at) {
  std::uint64_t value = 0;
  for (int shift = 0; shift < 64 && at < b.size(); shift += 7) {
    const auto byte = static_cast<unsigned char>(b[at++]);
    value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return value;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::int64_t> sentencepiece_pieces(std::string_view b) {
  std::int64_t pieces = 0;
  for (std::size_t at = 0; at < b.size();) {
    const auto key = varint(b, at);
    if (!key || (*key >> 3) == 0) return std::nullopt;
    switch (*key & 7) {
      case 0:  // varint
        if (!varint(b, at)) return std::nullopt;
        break;
      case 1:  // 64-bit
        if (b.size() - at < 8) return std::nullopt;
        at += 8;
        break;
      case 2: {  // length-delimited: a piece is field 1, a message whose own field 1 (the piece's text) comes first
        const auto length = varint(b, at);
        if (!length || *length > b.size() - at) return std::nullopt;
        if ((*key >> 3) == 1) {  // the piece's text: its key (field 1, length-delimited), length and bytes inside it
          const std::string_view piece = b.substr(at, static_cast<std::size_t>(*length));
          std::size_t in = 1;
          if (piece.empty() || piece[0] != '\x0a') return std::nullopt;
          if (const auto text = varint(piece, in); !text || *text > piece.size() - in) return std::nullopt;
          ++pieces;
        }
        at += static_cast<std::size_t>(*length);
        break;
      }
      case 5:  // 32-bit
        if (b.size() - at < 4) return std::nullopt;
        at += 4;
        break;
      default: return std::nullopt;  // groups (3, 4) are not in ModelProto; 6 and 7 are not wire types
    }
  }
  if (pieces == 0) return std::nullopt;
  return pieces;
}

std::optional<std::int64_t> hugging_face_tokenizer_size(std::string_view json) {
  // Parsed as every JSON file headroom reads (spec.hpp parse_json_strict): a token twice in one vocab object would
  // leave the size to whichever copy the parser keeps, so it is no tokenizer here, as is malformed JSON.
  nlohmann::json j;
  try {
    j = parse_json_strict(json, "tokenizer.json");
  } catch (const Error&) {
    return std::nullopt;
  }
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object() || !j["model"].contains("vocab"))
    return std::nullopt;
  std::set<std::int64_t> ids;
  const nlohmann::json& vocab = j["model"]["vocab"];
  if (vocab.is_object()) {  // BPE, WordPiece, WordLevel: token -> id
    for (const auto& id : vocab) {
      if (!id.is_number_integer() || id.get<std::int64_t>() < 0) return std::nullopt;
      ids.insert(id.get<std::int64_t>());
    }
  } else if (vocab.is_array()) {  // Unigram: [piece, score] at its id
    for (std::size_t i = 0; i < vocab.size(); ++i) ids.insert(static_cast<std::int64_t>(i));
  } else {
    return std::nullopt;
  }
  if (j.contains("added_tokens")) {
    if (!j["added_tokens"].is_array()) return std::nullopt;
    for (const auto& t : j["added_tokens"]) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || t["id"].get<std::int64_t>() < 0)
        return std::nullopt;
      ids.insert(t["id"].get<std::int64_t>());
    }
  }
  if (ids.empty()) return std::nullopt;
  return static_cast<std::int64_t>(ids.size());
}

std::optional<std::int64_t> tokenizer_file_vocabulary(const std::filesystem::path& path, TokenizerLibrary library) {
  std::error_code ec;
  std::filesystem::path file = path;
  if (library == TokenizerLibrary::huggingface && std::filesystem::is_directory(path, ec))
    file = path / "tokenizer.json";
  if (!std::filesystem::is_regular_file(file, ec)) return std::nullopt;
  const std::string bytes = read_file_bounded(file);
  const auto size =
      library == TokenizerLibrary::sentencepiece ? sentencepiece_pieces(bytes) : hugging_face_tokenizer_size(bytes);
  if (!size)
    throw Error("tokenizer " + file.string() + " is not " +
                (library == TokenizerLibrary::sentencepiece ? "a SentencePiece model (a ModelProto with pieces)"
                                                            : "a Hugging Face tokenizer.json (a model with a vocab)"));
  return size;
}

}  // namespace headroom::calibrate
