// Tensor names: what a tensor is for, and which block it belongs to.
#include "models/tensor_role.h"

#include <gtest/gtest.h>

namespace epq::models {
namespace {

TEST(TensorRole, ClassifiesLlamaCppNames) {
  EXPECT_EQ(classify_tensor("blk.3.ffn_down_exps.weight"), TensorRole::kRoutedExpert);
  EXPECT_EQ(classify_tensor("blk.3.ffn_up_shexp.weight"), TensorRole::kSharedExpert);
  EXPECT_EQ(classify_tensor("blk.3.ffn_gate_inp.weight"), TensorRole::kRouter);
  EXPECT_EQ(classify_tensor("blk.3.attn_q_norm.weight"), TensorRole::kNorm);
  EXPECT_EQ(classify_tensor("blk.3.attn_output.weight"), TensorRole::kAttention);
  EXPECT_EQ(classify_tensor("token_embd.weight"), TensorRole::kEmbedding);
  EXPECT_EQ(classify_tensor("output.weight"), TensorRole::kOutput);
}

TEST(TensorRole, BlockOfANameIsItsNumberOrMinusOne) {
  EXPECT_EQ(tensor_block("blk.0.attn_q.weight"), 0);
  EXPECT_EQ(tensor_block("blk.47.ffn_down_exps.weight"), 47);
  EXPECT_EQ(tensor_block("token_embd.weight"), -1);
  EXPECT_EQ(tensor_block("output_norm.weight"), -1);
  EXPECT_EQ(tensor_block("blk.x.attn_q.weight"), -1);
  EXPECT_EQ(tensor_block("blk.12"), -1);
  EXPECT_EQ(tensor_block("blk.12x.attn_q.weight"), -1);
  EXPECT_EQ(tensor_block("blk.99999999999.attn_q.weight"), -1);  // out of range
}

}  // namespace
}  // namespace epq::models
