// Errors carry the fields they name: what() names them as the CLI's flags, message(keywords)
// as the Python API's keywords, fields() lists them.
#include <gtest/gtest.h>

#include "../test_support.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"

namespace headroom {
namespace {

TEST(Error, NamesItsFieldsAsFlagsOrKeywords) {
  const Error e(field("tp") + " 3 does not divide " + field("decoder_first_pipeline_num_layers") + " 5");
  EXPECT_STREQ(e.what(), "--tp 3 does not divide --decoder-first-pipeline-num-layers 5");
  EXPECT_EQ(e.message(FieldNames::flags), e.what());
  EXPECT_EQ(e.message(FieldNames::keywords), "tp 3 does not divide decoder_first_pipeline_num_layers 5");
  EXPECT_EQ(e.fields(), (std::vector<std::string>{"tp", "decoder_first_pipeline_num_layers"}));
}

TEST(Error, AMessageWithoutFieldsIsItsText) {
  const Error e("unknown model 'llama9'");
  EXPECT_STREQ(e.what(), "unknown model 'llama9'");
  EXPECT_EQ(e.message(FieldNames::keywords), "unknown model 'llama9'");
  EXPECT_TRUE(e.fields().empty());
}

TEST(Error, FlagOfAFieldIsMegatronsArgumentName) {
  EXPECT_EQ(flag_of_field("lora_rank"), "--lora-rank");
  EXPECT_EQ(flag_of_field("decoder_last_pipeline_num_layers"), "--decoder-last-pipeline-num-layers");
  EXPECT_EQ(flag_of_field("last_stage_layers"), "--decoder-last-pipeline-num-layers");  // an older name
  EXPECT_EQ(flag_of_field("overlap_p2p_comm"), "--no-overlap-p2p-communication");       // its only spelling
  EXPECT_EQ(flag_of_field("top"), "--top");                                             // not a knob
}

TEST(Error, BuildLayoutNamesTheFieldItRefuses) {
  const SpecLibrary lib = test::library();
  LayoutRequest r;
  r.tp = 3;
  r.gpus = 24;
  r.seq = 4096;
  try {
    (void)build_layout(lib.model("llama3.1-8b"), lib.framework("megatron"), r);
    FAIL() << "tp 3 of 32 heads was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.fields().front(), "tp");
    EXPECT_EQ(e.message(FieldNames::keywords).rfind("tp 3 does not divide the 32 attention heads", 0), 0u);
    EXPECT_EQ(std::string(e.what()).rfind("--tp 3 does not divide", 0), 0u);
  }
}

}  // namespace
}  // namespace headroom
