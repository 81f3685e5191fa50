// The in-memory program cache's bound: the least recently used half goes first.
#include <gtest/gtest.h>

#include <string>

#include "csrc/runtime/BoundedCache.h"

using tpu::runtime::BoundedCache;

TEST(BoundedCache, EvictsTheLeastRecentlyUsedHalfAtTheBound) {
  BoundedCache<int, std::string> cache(4);
  for (int k = 0; k < 4; ++k) cache.insert(k, "v" + std::to_string(k));
  ASSERT_NE(cache.find(0), nullptr);  // 0 and 1 are now the most recent
  ASSERT_NE(cache.find(1), nullptr);
  cache.insert(4, "v4");  // full: 2 and 3 (least recently used) go
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.evictions(), 2);
  EXPECT_EQ(cache.find(2), nullptr);
  EXPECT_EQ(cache.find(3), nullptr);
  ASSERT_NE(cache.find(0), nullptr);
  EXPECT_EQ(*cache.find(0), "v0");
  EXPECT_EQ(*cache.find(4), "v4");
}

TEST(BoundedCache, NeverGrowsPastItsBound) {
  BoundedCache<int, int> cache(8);
  for (int k = 0; k < 1000; ++k) {
    cache.insert(k, k);
    EXPECT_LE(cache.size(), 8u);
    EXPECT_EQ(*cache.find(k), k);  // the newest entry is always there
  }
  EXPECT_GT(cache.evictions(), 0);
}
