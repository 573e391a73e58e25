// What the estimator's tests of Megatron-LM features share: the shipped specs, Llama 3.1 8B on DGX H100 under the
// megatron framework, and the datasheet coefficients.
#pragma once

#include <gtest/gtest.h>

#include "../test_support.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom::test {

class MegatronOnH100 : public ::testing::Test {
 protected:
  SpecLibrary lib = library();
  ModelSpec llama8b = lib.model("llama3.1-8b");
  ClusterSpec h100 = lib.cluster("dgx-h100");
  FrameworkProfile megatron = lib.framework("megatron");
  PerfCoefficients datasheet;
};

}  // namespace headroom::test
