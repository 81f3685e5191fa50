// runtime::BufferReaper: references retired to its thread are dropped there, donated handles in batches;
// drain() waits for them; a buffer referenced elsewhere lives on with its value.
#include "TestPlugin.h"
#include "csrc/runtime/BufferReaper.h"

using namespace tpu;

namespace {

std::shared_ptr<pjrt::Buffer> upload(float value) {
  std::vector<float> host(1024, value);
  return testRuntime().client().bufferFromHost(host.data(), pjrt::ElementType::F32, {1024}, 0);
}

}  // namespace

TEST(BufferReaper, DrainReturnsOnceRetiredBuffersAreDropped) {
  std::vector<std::shared_ptr<pjrt::Buffer>> batch;
  std::vector<std::weak_ptr<pjrt::Buffer>> watch;
  for (int i = 0; i < 3; ++i) {
    batch.push_back(upload(static_cast<float>(i)));
    watch.push_back(batch.back());
  }
  auto& reaper = runtime::BufferReaper::get();
  reaper.retire(batch);
  EXPECT_TRUE(batch.empty());  // the references moved to the reaper
  reaper.drain();
  for (const auto& w : watch) EXPECT_TRUE(w.expired());
}

TEST(BufferReaper, ABufferReferencedElsewhereKeepsItsValue) {
  std::shared_ptr<pjrt::Buffer> kept = upload(2.5f);
  std::vector<std::shared_ptr<pjrt::Buffer>> batch{kept, upload(1.0f)};
  std::weak_ptr<pjrt::Buffer> other = batch[1];
  auto& reaper = runtime::BufferReaper::get();
  reaper.retire(batch);
  reaper.retire(batch);  // nothing left to retire: a no-op
  reaper.drain();
  EXPECT_TRUE(other.expired());
  EXPECT_EQ(kept.use_count(), 1);
  EXPECT_EQ(toHost<float>(*kept, 1024), std::vector<float>(1024, 2.5f));
}

TEST(BufferReaper, ATakenHandleOutlivesItsBufferUntilDrained) {
  std::shared_ptr<pjrt::Buffer> buffer = upload(4.0f);
  std::weak_ptr<pjrt::Buffer> watch = buffer;
  std::vector<std::unique_ptr<pjrt::Buffer>> handles;
  handles.push_back(buffer->takeHandle());
  EXPECT_EQ(buffer->raw(), nullptr);
  buffer.reset();  // the emptied Buffer destroys nothing; weak references expire at once
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(toHost<float>(*handles[0], 1024), std::vector<float>(1024, 4.0f));
  auto& reaper = runtime::BufferReaper::get();
  reaper.retireDonated(handles);  // one handle: below the batch, it waits for a drain
  EXPECT_TRUE(handles.empty());
  reaper.drain();
}
