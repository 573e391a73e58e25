// The vocabulary of a tokenizer file a launch names, read from the file itself when it is on this machine: the one
// way to know the size of a SentencePiece model or a local Hugging Face tokenizer, whose path says nothing of it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

namespace headroom::calibrate {

// The pieces of a SentencePiece model file, which SentencePieceProcessor::GetPieceSize() returns and Megatron-LM's
// and NeMo's SentencePiece tokenizers take as their vocabulary when the run adds no special token
// (megatron/core/tokenizers/text/libraries/sentencepiece_tokenizer.py: vocab_size = get_piece_size()). The file is a
// serialized ModelProto (sentencepiece_model.proto: `repeated SentencePiece pieces = 1`, each with its `piece = 1`);
// nullopt for bytes that are not one with at least one piece.
[[nodiscard]] std::optional<std::int64_t> sentencepiece_pieces(std::string_view bytes);

// len(tokenizer) of a Hugging Face tokenizer.json: the ids of its model's vocabulary ("model": {"vocab": {token: id}}
// for BPE and WordPiece, [[piece, score], ...] for Unigram) and of its "added_tokens", each id counted once, which
// Megatron-LM's HuggingFaceTokenizer.vocab_size (huggingface_tokenizer.py: len(self.tokenizer)) returns; nullopt for
// text that is not one, malformed JSON or a key twice in one object (spec.hpp parse_json_strict) included.
[[nodiscard]] std::optional<std::int64_t> hugging_face_tokenizer_size(std::string_view json);

enum class TokenizerLibrary { sentencepiece, huggingface };

// The vocabulary of the tokenizer at `path` on this machine: a SentencePiece model file, or a Hugging Face
// tokenizer.json or the directory holding one. nullopt when there is no regular file there to read (a path of
// another machine, a shell variable left in it); an Error naming the path when the file is there and is not such a
// tokenizer (or is past read_file_bounded's bound).
[[nodiscard]] std::optional<std::int64_t> tokenizer_file_vocabulary(const std::filesystem::path& path,
                                                                    TokenizerLibrary library);

}  // namespace headroom::calibrate
