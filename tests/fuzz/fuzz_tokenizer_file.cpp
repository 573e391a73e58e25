// The tokenizer files `check` counts (tokenizer_file.hpp): the same bytes read as a SentencePiece model and as a
// Hugging Face tokenizer.json. Either is a size of at least one token or none; neither throws or reads past the input.
#include <cstdint>
#include <string_view>

#include "fuzz_support.hpp"
#include "headroom/ingest/tokenizer_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace headroom;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  fuzz::value_or_error([&] {
    if (const auto pieces = calibrate::sentencepiece_pieces(bytes))
      fuzz::require(*pieces >= 1 && static_cast<std::size_t>(*pieces) <= size / 4, "a piece takes 4 bytes at least");
    if (const auto tokens = calibrate::hugging_face_tokenizer_size(bytes))
      fuzz::require(*tokens >= 1, "a tokenizer has a token");
  });
  return 0;
}
