// The size of a tokenizer a launch names, read from its file: a SentencePiece model's pieces and a Hugging Face
// tokenizer.json's len(tokenizer), against the files the libraries themselves wrote (tests/data/tokenizers).
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "headroom/core/error.hpp"
#include "headroom/core/read_file.hpp"
#include "headroom/ingest/tokenizer_file.hpp"

namespace headroom::calibrate {
namespace {

const std::filesystem::path kDir = std::filesystem::path(HEADROOM_TEST_SOURCE_DIR) / "data" / "tokenizers";

TEST(TokenizerFile, CountsTheSentencePiecePiecesTheLibraryReports) {
  EXPECT_EQ(sentencepiece_pieces(read_file_bounded(kDir / "sentencepiece-bpe-300.model")), 300);
  EXPECT_EQ(tokenizer_file_vocabulary(kDir / "sentencepiece-bpe-300.model", TokenizerLibrary::sentencepiece), 300);
}

TEST(TokenizerFile, CountsAHuggingFaceTokenizersIdsOnce) {
  // 200 tokens of the model's vocabulary, "<|pad|>" added, "<s>" added again under its own id.
  EXPECT_EQ(hugging_face_tokenizer_size(read_file_bounded(kDir / "hf-bpe-201" / "tokenizer.json")), 201);
  EXPECT_EQ(tokenizer_file_vocabulary(kDir / "hf-bpe-201", TokenizerLibrary::huggingface), 201);
  EXPECT_EQ(tokenizer_file_vocabulary(kDir / "hf-bpe-201" / "tokenizer.json", TokenizerLibrary::huggingface), 201);
  // Unigram's vocabulary is a list of [piece, score], each at its index.
  EXPECT_EQ(hugging_face_tokenizer_size(
                R"({"model": {"type": "Unigram", "vocab": [["<unk>", 0], ["a", -1.5], ["b", -2]]},
                    "added_tokens": [{"id": 3, "content": "<pad>"}, {"id": 0, "content": "<unk>"}]})"),
            4);
}

TEST(TokenizerFile, RefusesWhatIsNotSuchATokenizerAndSkipsWhatIsNotHere) {
  for (const std::string& bytes :
       {std::string(), std::string("hello world\n"), std::string("\x0a\x05", 2), std::string("\x0a\x00", 2),
        std::string("\x12\x02\x08\x01", 4), std::string("\x0b\x01", 2), std::string("\x0a\x02\x12\x00", 4),
        // a piece whose text has no length (found by fuzz_tokenizer_file), or a longer one than the piece
        std::string("\x0a\x01\x0a", 3), std::string("\x0a\x02\x0a\x05", 4)})
    EXPECT_FALSE(sentencepiece_pieces(bytes)) << bytes;
  // A piece (field 1) holding its text (field 1) with a score (field 2, 32-bit), beside a trainer_spec (field 2).
  EXPECT_EQ(sentencepiece_pieces(std::string("\x0a\x08\x0a\x01"
                                             "a\x15\x00\x00\x80\xbf\x12\x02\x20\x01",
                                             14)),
            1);
  for (const char* json :
       {"", "[]", R"({"model": {}})", R"({"model": {"vocab": {"a": -1}}})", R"({"model": {"vocab": {}}})",
        R"({"model": {"vocab": {"a": 0}}, "added_tokens": [{}]})", R"({"model": {"vocab": {"a": 0, "b": 1, "a": 2}}})"})
    EXPECT_FALSE(hugging_face_tokenizer_size(json)) << json;
  EXPECT_FALSE(tokenizer_file_vocabulary("/no/such/tokenizer.model", TokenizerLibrary::sentencepiece));
  EXPECT_FALSE(tokenizer_file_vocabulary("${DATA}/tokenizer.model", TokenizerLibrary::sentencepiece));
  EXPECT_FALSE(tokenizer_file_vocabulary(kDir, TokenizerLibrary::sentencepiece));         // a directory is not a model
  EXPECT_FALSE(tokenizer_file_vocabulary("/dev/zero", TokenizerLibrary::sentencepiece));  // nor a device
  try {
    (void)tokenizer_file_vocabulary(kDir / "README.md", TokenizerLibrary::sentencepiece);
    FAIL() << "a text file read as a SentencePiece model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("README.md is not a SentencePiece model"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace headroom::calibrate
