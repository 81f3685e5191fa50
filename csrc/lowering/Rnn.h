#pragma once
// Fused recurrent cells (what nn.LSTM / nn.GRU / nn.LSTMCell / nn.GRUCell call on an accelerator):
// CUDA's _thnn_fused_{lstm,gru}_cell contract. The gate matmuls are separate ops; a cell adds the
// gates and biases, applies the nonlinearities and returns the next state plus a workspace that its
// backward reads. Inputs arrive in the compute dtype; gates are (B, kH), biases (kH).
#include <vector>

#include "csrc/hlo/Builder.h"

namespace tpu::lowering {

// {hy, cy, workspace}: workspace = [i, f, g, o] after their activations, (B, 4H).
std::vector<hlo::Value> lstmCell(hlo::Builder& b, hlo::Value ig, hlo::Value hg, hlo::Value cx,
                                 const hlo::Value* bi, const hlo::Value* bh);
// {grad_gates (B, 4H), grad_cx}; a missing grad_hy / grad_cy is null (zero).
std::vector<hlo::Value> lstmCellBackward(hlo::Builder& b, const hlo::Value* ghy, const hlo::Value* gcy,
                                         hlo::Value cx, hlo::Value cy, hlo::Value ws);

// {hy, workspace}: workspace = [r, z, n, hn + b_hn, hx], (B, 5H).
std::vector<hlo::Value> gruCell(hlo::Builder& b, hlo::Value ig, hlo::Value hg, hlo::Value hx,
                                const hlo::Value* bi, const hlo::Value* bh);
// {grad_input_gates (B, 3H), grad_hidden_gates (B, 3H), grad_hx}.
std::vector<hlo::Value> gruCellBackward(hlo::Builder& b, hlo::Value ghy, hlo::Value ws);

}  // namespace tpu::lowering
