#include "csrc/runtime/AddressRanges.h"

#include <gtest/gtest.h>

namespace tpu::runtime {

TEST(AddressRangesTest, FindsTheRangeHoldingAnAddress) {
  AddressRanges<int> r;
  r.insert(1000, 100, 1);
  r.insert(1100, 50, 2);
  EXPECT_FALSE(r.find(999));
  EXPECT_EQ(r.find(1000)->value, 1);
  EXPECT_EQ(r.find(1099)->value, 1);
  EXPECT_EQ(r.find(1100)->value, 2);
  EXPECT_EQ(r.find(1120)->start, 1100u);
  EXPECT_FALSE(r.find(1150));
}

TEST(AddressRangesTest, EraseReturnsTheRange) {
  AddressRanges<int> r;
  r.insert(64, 8, 7);
  EXPECT_FALSE(r.erase(65));
  auto gone = r.erase(64);
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->size, 8u);
  EXPECT_EQ(gone->value, 7);
  EXPECT_FALSE(r.find(64));
  EXPECT_FALSE(r.erase(64));
}

}  // namespace tpu::runtime
