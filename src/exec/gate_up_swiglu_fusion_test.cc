#include "exec/gate_up_swiglu_fusion.h"

#include <gtest/gtest.h>

#include <vector>

#include "exec/tiny_step_graph.h"

namespace mosaic {
namespace {

std::vector<size_t> gate_products(const Graph& graph) {
  std::vector<size_t> found;
  for (size_t i = 0; i < graph.ops.size(); ++i)
    if (graph.ops[i].kind == OpKind::linear && graph.ops[i].weight == WeightRole::gate) found.push_back(i);
  return found;
}

TEST(GateUpSwigluFusion, FindsEveryLayersProductsAndSwiglu) {
  const Graph graph = tiny_step_graph({{300}, {40}});
  const std::vector<size_t> gates = gate_products(graph);
  ASSERT_EQ(gates.size(), 2u) << "tiny LLaDA: two layers, one FFN chunk each";
  for (size_t g : gates) EXPECT_TRUE(is_gate_up_swiglu(graph, g)) << "op " << g;
  size_t matches = 0;
  for (size_t i = 0; i < graph.ops.size(); ++i) matches += is_gate_up_swiglu(graph, i);
  EXPECT_EQ(matches, gates.size()) << "only at a gate product";
}

TEST(GateUpSwigluFusion, FindsEveryFfnChunk) {
  const Graph graph = tiny_step_graph({{300}, {40}}, {.ffn = 3});
  const std::vector<size_t> gates = gate_products(graph);
  ASSERT_GE(gates.size(), 5u) << "three chunks in the first layer, the last over its candidates";
  for (size_t g : gates) EXPECT_TRUE(is_gate_up_swiglu(graph, g)) << "op " << g;
}

TEST(GateUpSwigluFusion, LeavesOtherSequencesAlone) {
  const Graph original = tiny_step_graph({{300}, {40}});
  const size_t g = gate_products(original).front();
  auto matches_after = [&](auto change) {
    Graph graph = original;
    change(graph);
    return is_gate_up_swiglu(graph, g);
  };
  EXPECT_FALSE(matches_after([&](Graph& graph) { graph.ops[g].has_bias = true; }));
  EXPECT_FALSE(matches_after([&](Graph& graph) { graph.ops[g + 1].accumulate = true; }));
  EXPECT_FALSE(matches_after([&](Graph& graph) { graph.ops[g + 1].a.row += 1; }));    // other input rows
  EXPECT_FALSE(matches_after([&](Graph& graph) { graph.ops[g + 1].rows -= 1; }));
  EXPECT_FALSE(matches_after([&](Graph& graph) { graph.ops[g + 1].layer += 1; }));
  EXPECT_FALSE(matches_after([&](Graph& graph) { std::swap(graph.ops[g].weight, graph.ops[g + 1].weight); }));
  EXPECT_FALSE(matches_after([&](Graph& graph) { graph.ops[g + 2].kind = OpKind::rope; }));
  EXPECT_FALSE(matches_after([&](Graph& graph) { std::swap(graph.ops[g + 2].out, graph.ops[g + 2].b); }));
  // A later op that reads the up product, which the fused kernel leaves unwritten (the read
  // extends the tensor's lifetime, as the graph builder records it).
  EXPECT_FALSE(matches_after([&](Graph& graph) {
    graph.ops[g + 3].c = graph.ops[g + 1].out;
    graph.tensors[static_cast<size_t>(graph.ops[g + 1].out.tensor)].last_op = static_cast<int32_t>(g + 3);
  }));
  EXPECT_FALSE(is_gate_up_swiglu(original, g + 1));
  EXPECT_FALSE(is_gate_up_swiglu(original, original.ops.size() - 2));
}

}  // namespace
}  // namespace mosaic
