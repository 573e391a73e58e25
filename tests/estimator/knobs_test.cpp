// The knob table (knobs.hpp): one name per knob, one grammar per type, and a request built from it.
#include <gtest/gtest.h>

#include <set>

#include "../test_support.hpp"
#include "headroom/core/error.hpp"
#include "headroom/core/knobs.hpp"
#include "headroom/estimator/framework.hpp"

namespace headroom {
namespace {

using test::error_of;

TEST(Knobs, EveryNameAndSpellingIsOneKnobs) {
  std::set<std::string_view> names, flags;
  for (const Knob& k : knobs()) {
    EXPECT_TRUE(names.insert(k.name).second) << k.name;
    EXPECT_EQ(find_knob(k.name), &k);
    EXPECT_FALSE(k.flags.empty() && k.off_flags.empty()) << k.name << " has no CLI spelling";
    EXPECT_EQ(k.type == KnobType::choice, !k.choices.empty()) << k.name;
    EXPECT_EQ(!k.off_flags.empty() && k.type != KnobType::flag, false) << k.name << ": only flags turn off";
    for (const std::string_view list : {k.flags, k.off_flags, k.aliases}) {
      std::string_view rest = list;
      while (!rest.empty()) {
        const auto cut = rest.find(',');
        const std::string_view one = rest.substr(0, cut);
        EXPECT_TRUE(flags.insert(one).second) << one << " spells two knobs";
        if (list == k.aliases) {
          EXPECT_EQ(find_knob(one), &k) << one;
        }
        if (cut == std::string_view::npos) break;
        rest.remove_prefix(cut + 1);
      }
    }
  }
}

TEST(Knobs, OneIntegerGrammar) {
  const Knob& tp = knob(KnobId::tp);
  EXPECT_EQ(std::get<std::int64_t>(parse_knob(tp, "8")), 8);
  EXPECT_EQ(std::get<std::int64_t>(parse_knob(tp, "+8")), 8);
  for (const char* bad : {"8.0", "8e0", "1e1", "2.0000000000000001", "0x8", " 8", "8 ", "", "-8", "0"})
    EXPECT_NE(error_of([&] { (void)parse_knob(tp, bad); }), "(no error)") << bad;
  EXPECT_NE(error_of([&] { (void)parse_knob(tp, "1000000000001"); }).find("too large"), std::string::npos);
  EXPECT_EQ(std::get<std::int64_t>(parse_knob(knob(KnobId::cpu_offloading_num_layers), "0")), 0);  // whole
  EXPECT_EQ(error_of([&] { (void)parse_knob(tp, "2.5"); }),
            "--tp '2.5' is not an integer (expected a positive integer up to 10^12)");
}

TEST(Knobs, FlagsNumbersAndChoices) {
  const Knob& sp = knob(KnobId::sequence_parallel);
  EXPECT_TRUE(std::get<bool>(parse_knob(sp, "True")));
  EXPECT_FALSE(std::get<bool>(parse_knob(sp, "0")));
  EXPECT_NE(error_of([&] { (void)parse_knob(sp, "yes"); }).find("--sp 'yes' is not true or false"), std::string::npos);
  const Knob& factor = knob(KnobId::moe_expert_capacity_factor);
  EXPECT_DOUBLE_EQ(std::get<double>(parse_knob(factor, "1.5")), 1.5);
  for (const char* bad : {"0.5", "nan", "inf", "1e7", "1.5x"})
    EXPECT_NE(error_of([&] { (void)parse_knob(factor, bad); }), "(no error)") << bad;
  EXPECT_EQ(std::get<std::string>(parse_knob(knob(KnobId::recompute), "FULL")), "full");
  EXPECT_NE(error_of([&] { (void)parse_knob(knob(KnobId::recompute), "most"); }).find("valid: none|selective|full|op"),
            std::string::npos);
}

TEST(Knobs, TypedValuesAreCheckedAsTextIs) {
  EXPECT_NE(
      error_of([&] { (void)check_knob(knob(KnobId::tp), std::int64_t{0}); }).find("--tp 0 must be a positive integer"),
      std::string::npos);
  EXPECT_NE(error_of([&] { (void)check_knob(knob(KnobId::tp), std::string("2")); }).find("wrong kind"),
            std::string::npos);
  EXPECT_EQ(std::get<std::string>(check_knob(knob(KnobId::precision), std::string("FP8"))), "fp8");
}

// A request of the knobs equals the one of the same values given as text, and the rules that join knobs hold.
TEST(Knobs, TheRequestJoinsKnobsByMegatronsRules) {
  const SpecLibrary lib = test::library();
  const FrameworkProfile megatron = lib.framework("megatron");
  KnobSettings k;
  k.set(KnobId::fp8_format, std::string("hybrid"));
  EXPECT_EQ(layout_request(k, megatron).fp8, Fp8Recipe::delayed);  // FP8 on, the framework's first recipe
  k.set(KnobId::precision, std::string("bf16"));
  EXPECT_NE(error_of([&] { (void)layout_request(k, megatron); }).find("contradict"), std::string::npos);
  KnobSettings offload;
  offload.set(KnobId::optimizer_offload_fraction, 0.5);
  EXPECT_EQ(error_of([&] { (void)layout_request(offload, megatron); }),
            "--optimizer-offload-fraction needs --optimizer-cpu-offload");
  offload.set(KnobId::optimizer_cpu_offload, true);
  EXPECT_DOUBLE_EQ(layout_request(offload, megatron).optimizer_offload, 0.5);
  KnobSettings all;
  all.set(KnobId::optimizer_cpu_offload, true);
  EXPECT_DOUBLE_EQ(layout_request(all, megatron).optimizer_offload, 1.0);  // arguments.py's default fraction
  // Every integer knob lands in its own field of the request.
  std::set<std::int64_t*> fields;
  LayoutRequest r;
  for (const Knob& x : knobs()) {
    const bool integer = x.type == KnobType::count || x.type == KnobType::whole;
    EXPECT_EQ(integer_field(r, x.id) != nullptr, integer) << x.name;
    if (integer) {
      EXPECT_TRUE(fields.insert(integer_field(r, x.id)).second) << x.name;
    }
  }
}

}  // namespace
}  // namespace headroom
