// Unit tests of the layout plan (schedule/layout_plan.h): which inputs of a graph with
// convolutions are converted to channels-last. Graph text in, input positions out.
#include <gtest/gtest.h>

#include "ir/aten_graph.h"
#include "schedule/layout_plan.h"

using namespace kiln;

namespace {

std::vector<int> plan(const char* text) { return schedule::channels_last_inputs(ir::AtenGraph::parse(text)); }

// Two 3x3 convolutions with a relu between them, the image scaled first; `dev` is "@device"
// (CUDA) or "" (CPU).
std::string conv_chain(const std::string& dev) {
  return "%0 = input 0 : f32[2, 3, 8, 8]{192, 64, 8, 1}" + dev + "\n" +
         "%1 = input 1 : f32[4, 3, 3, 3]{27, 9, 3, 1}" + dev + "\n" +
         "%2 = input 2 : f32[4, 4, 3, 3]{36, 9, 3, 1}" + dev + "\n" +
         "%3 = input 3 : f32[4]{1}" + dev + "\n" +
         "%4 = aten::mul.Scalar(%0, other=2) : f32[2, 3, 8, 8]{192, 64, 8, 1}" + dev + "\n" +
         "%5 = aten::convolution(%4, weight=%1, bias=None, stride=[1, 1], padding=[1, 1], dilation=[1, 1], transposed=False, "
         "output_padding=[0, 0], groups=1) : f32[2, 4, 8, 8]{256, 64, 8, 1}" + dev + "\n" +
         "%6 = aten::relu(%5) : f32[2, 4, 8, 8]{256, 64, 8, 1}" + dev + "\n" +
         "%7 = aten::convolution(%6, weight=%2, bias=%3, stride=[1, 1], padding=[1, 1], dilation=[1, 1], transposed=False, "
         "output_padding=[0, 0], groups=1) : f32[2, 4, 8, 8]{256, 64, 8, 1}" + dev + "\n" +
         "return %7\n";
}

}  // namespace

TEST(LayoutPlan, CudaConvolutionsTakeTheImageAndWeightsChannelsLast) {
  // The image through the scaling that feeds the first convolution, both 4-D weights; not the
  // bias (1-D).
  EXPECT_EQ(plan(conv_chain("@device").c_str()), (std::vector<int>{0, 1, 2}));
}

TEST(LayoutPlan, CpuGraphsKeepTheirLayouts) { EXPECT_TRUE(plan(conv_chain("").c_str()).empty()); }

TEST(LayoutPlan, ChannelsLastInputsStay) {
  const char* g = R"(%0 = input 0 : f32[2, 3, 8, 8]{192, 1, 24, 3}@device
%1 = input 1 : f32[4, 3, 3, 3]{27, 9, 3, 1}@device
%2 = aten::convolution(%0, weight=%1, bias=None, stride=[1, 1], padding=[1, 1], dilation=[1, 1], transposed=False, output_padding=[0, 0], groups=1) : f32[2, 4, 8, 8]{256, 1, 32, 4}@device
return %2
)";
  EXPECT_TRUE(plan(g).empty());
  EXPECT_TRUE(schedule::is_channels_last(ir::AtenGraph::parse(g).values[0].meta));
}

TEST(LayoutPlan, GraphsReturningAnInputKeepTheirLayouts) {
  // Eager returns the input itself: a converted copy would not be it.
  const char* g = R"(%0 = input 0 : f32[2, 3, 8, 8]{192, 64, 8, 1}@device
%1 = input 1 : f32[4, 3, 3, 3]{27, 9, 3, 1}@device
%2 = aten::convolution(%0, weight=%1, bias=None, stride=[1, 1], padding=[1, 1], dilation=[1, 1], transposed=False, output_padding=[0, 0], groups=1) : f32[2, 4, 8, 8]{256, 64, 8, 1}@device
return %2, %0
)";
  EXPECT_TRUE(plan(g).empty());
}
