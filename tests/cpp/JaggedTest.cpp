// The jagged lowerings (csrc/lowering/Jagged.cpp) on the plugin alone (no torch): the segment of each position
// with empty segments in the middle and at the end, positions within their segments, and permute_pooled_embs'
// "not a permutation" flag; the sharded path's block bucketization (csrc/lowering/ShardedEmbedding.cpp).
#include "TestPlugin.h"
#include "csrc/hlo/Builder.h"
#include "csrc/lowering/Jagged.h"
#include "csrc/lowering/ShardedEmbedding.h"

using namespace tpu;
using hlo::DType;

namespace {

// Runs `build` over one S64 [n] parameter holding `in`; returns the first result (S64, `outN` elements) and, when
// the rule returns a second (pred) value, whether it was set.
template <class F>
std::pair<std::vector<int64_t>, bool> runS64(const std::vector<int64_t>& in, int64_t outN, F build) {
  hlo::Builder b;
  auto x = b.parameter(hlo::Type{DType::S64, {static_cast<int64_t>(in.size())}});
  std::vector<hlo::Value> outs = build(b, x);
  b.ret(outs);
  auto& client = testRuntime().client();
  auto exe = client.compile(b.module(), pjrt::CompileOptions{});
  auto buf = client.bufferFromHost(in.data(), pjrt::ElementType::S64, {static_cast<int64_t>(in.size())}, 0);
  auto res = exe->execute({buf->raw()}, client.devices()[0]);
  bool flag = outs.size() > 1 && toHost<uint8_t>(*res[1], 1)[0] != 0;  // pred: one byte
  return {toHost<int64_t>(*res[0], outN), flag};
}

}  // namespace

TEST(Jagged, SegmentOfSkipsEmptySegments) {
  // Segments [0,0) [0,2) [2,5) [5,5) [5,6) [6,6): positions 0..5 belong to 1, 1, 2, 2, 2, 4.
  auto [seg, unused] = runS64({0, 0, 2, 5, 5, 6}, 6, [](hlo::Builder& b, hlo::Value starts) {
    return std::vector<hlo::Value>{lowering::segmentOf(b, starts, 6)};
  });
  EXPECT_EQ(seg, (std::vector<int64_t>{1, 1, 2, 2, 2, 4}));
}

TEST(Jagged, OffsetsRange) {
  auto [r, unused] = runS64({0, 2, 2, 5}, 7, [](hlo::Builder& b, hlo::Value offsets) {
    return std::vector<hlo::Value>{lowering::offsetsRange(b, offsets, 7)};
  });
  EXPECT_EQ(r, (std::vector<int64_t>{0, 1, 0, 1, 2, 0, 1}));
}

TEST(Jagged, PermutePooledEmbsFlagsANonPermutation) {
  // Columns 0..4 in pieces [0,2) [2,3) [3,5) (offsets 0, 2, 3, 5).
  auto permuted = [](std::vector<int64_t> permute) {
    return runS64(permute, 5, [](hlo::Builder& b, hlo::Value perm) {
      hlo::Type row{DType::S64, {1, 5}};
      hlo::Value pooled = b.iota(row, 1);
      hlo::Value offsets = b.iota(hlo::Type{DType::S64, {4}}, 0);  // 0 1 2 3, made 0 2 3 5 below
      std::vector<hlo::Value> parts{b.slice(offsets, {0}, {1}, {1}), b.add(b.slice(offsets, {1}, {3}, {1}),
                                                                           b.full({DType::S64, {2}}, 1)),
                                    b.full({DType::S64, {1}}, 5)};
      auto [r, failed] = lowering::permutePooledEmbs(b, pooled, b.concatenate(parts, 0), perm);
      return std::vector<hlo::Value>{b.reshape(r, {5}), failed};
    });
  };
  auto [good, goodFailed] = permuted({2, 0, 1});
  EXPECT_EQ(good, (std::vector<int64_t>{3, 4, 0, 1, 2}));
  EXPECT_FALSE(goodFailed);
  EXPECT_TRUE(permuted({0, 0, 1}).second);  // a piece twice, one never
  EXPECT_TRUE(permuted({0, 3, 1}).second);  // out of range
}

TEST(ShardedEmbedding, BlockBucketizeMatchesFbgemmCpu) {
  // 2 features x 3 samples, block sizes 5 and 6, 2 buckets; expected values from fbgemm's CPU kernel. Feature 1's id
  // 12 (>= 6 * 2) takes the modulo path: bucket 12 % 2, id 12 / 2.
  std::vector<int64_t> in{2, 0, 3, 1, 2, 1,          // lengths
                          1, 7, 3, 9, 4, 12, 0, 5, 8,  // indices
                          5, 6};                      // block sizes
  auto run = [&](std::vector<int64_t> data) {
    return runS64(data, 39, [](hlo::Builder& b, hlo::Value x) {
      auto part = [&](int64_t lo, int64_t hi) { return b.slice(x, {lo}, {hi}, {1}); };
      lowering::BlockBucketized r = lowering::blockBucketize(b, part(0, 6), part(6, 15), nullptr, part(15, 17), 2, 2,
                                                             false, true, true);
      std::vector<hlo::Value> all{r.lengths, r.indices, r.pos, r.unbucketizePermute};
      return std::vector<hlo::Value>{b.concatenate(all, 0), r.outOfRange};
    });
  };
  auto [out, bad] = run(in);
  EXPECT_EQ(out, (std::vector<int64_t>{1, 0, 2, 1, 2, 0, 1, 0, 1, 0, 0, 1,  // lengths, bucket-major
                                       1, 3, 4, 6, 0, 5, 2, 4, 2,           // indices
                                       0, 0, 2, 0, 0, 1, 1, 1, 0,           // position in the bag
                                       0, 6, 1, 7, 2, 3, 4, 5, 8}));        // new position of each id
  EXPECT_FALSE(bad);
  in[0] = 3;  // the lengths promise 10 ids, there are 9
  EXPECT_TRUE(run(in).second);
  in[0] = 2;
  in[7] = -7;  // a negative id
  EXPECT_TRUE(run(in).second);
}
