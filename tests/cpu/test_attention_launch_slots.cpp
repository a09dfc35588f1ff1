// Slots of the attention kernels' counters (attention/launch_slots.hpp): a stream keeps its
// slot, streams never share one, the per-thread default stream is a stream per thread, every
// captured launch gets a slot of its own, and a full table answers -1 (no counters).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "attention/launch_slots.hpp"

namespace ws = tessera::attn;

namespace {

cudaStream_t fake_stream(uintptr_t i) { return reinterpret_cast<cudaStream_t>(0x1000 + 16 * i); }

TEST(AttnLaunchSlots, StreamsKeepTheirOwnSlots) {
  ws::LaunchSlots slots;
  const int a = slots.slot(fake_stream(1), 7, false), b = slots.slot(fake_stream(2), 7, false);
  EXPECT_GE(a, 0);
  EXPECT_GE(b, 0);
  EXPECT_NE(a, b);
  EXPECT_EQ(slots.slot(fake_stream(1), 9, false), a);  // another thread, the same stream
  EXPECT_LT(a, ws::kStreamSlots);
  EXPECT_LT(b, ws::kStreamSlots);
  // The legacy default stream is one stream; the per-thread one is one per thread.
  const int legacy = slots.slot(nullptr, 1, false);
  EXPECT_EQ(slots.slot(nullptr, 2, false), legacy);
  const int pt1 = slots.slot(cudaStreamPerThread, 1, false), pt2 = slots.slot(cudaStreamPerThread, 2, false);
  EXPECT_NE(pt1, pt2);
  EXPECT_EQ(slots.slot(cudaStreamPerThread, 1, false), pt1);
  EXPECT_EQ(std::set<int>({a, b, legacy, pt1, pt2}).size(), 5u);
}

TEST(AttnLaunchSlots, CapturedLaunchesNeverShare) {
  ws::LaunchSlots slots;
  const int eager = slots.slot(fake_stream(1), 0, false);
  std::set<int> seen;
  for (int i = 0; i < ws::kCapturedSlots; ++i) {
    const int s = slots.slot(fake_stream(1), 0, true);
    ASSERT_GE(s, ws::kStreamSlots);
    ASSERT_LT(s, ws::kLaunchSlots);
    ASSERT_TRUE(seen.insert(s).second) << "slot " << s << " handed out twice";
  }
  EXPECT_EQ(slots.slot(fake_stream(1), 0, true), -1);      // the captured slots are spent
  EXPECT_EQ(slots.slot(fake_stream(1), 0, false), eager);  // the stream's own is still there
}

TEST(AttnLaunchSlots, FullPoolFallsBack) {
  ws::LaunchSlots slots;
  std::set<int> seen;
  int fifth = -1;
  for (int i = 0; i < ws::kStreamSlots; ++i) {
    const int s = slots.slot(fake_stream(i), 0, false);
    ASSERT_GE(s, 0);
    ASSERT_TRUE(seen.insert(s).second);
    if (i == 5) fifth = s;
  }
  EXPECT_EQ(slots.slot(fake_stream(ws::kStreamSlots), 0, false), -1);
  EXPECT_EQ(slots.slot(fake_stream(5), 0, false), fifth);  // known streams keep theirs
}

TEST(AttnLaunchSlots, PerDeviceLookupIsStable) {
  const int a = ws::launch_slot(3, fake_stream(100), false);
  EXPECT_GE(a, 0);
  EXPECT_EQ(ws::launch_slot(3, fake_stream(100), false), a);  // the thread's cache
  EXPECT_NE(ws::launch_slot(3, fake_stream(101), false), a);
  EXPECT_EQ(ws::launch_slot(3, fake_stream(100), false), a);  // the table, after the cache moved on
  EXPECT_EQ(ws::launch_slot(-1, fake_stream(100), false), -1);
  EXPECT_EQ(ws::launch_slot(64, fake_stream(100), false), -1);
}

}  // namespace
