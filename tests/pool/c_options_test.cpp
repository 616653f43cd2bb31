// weft::pool built from plain function pointers and a void* context (the C-compatible path):
// every hook is called with the context, and resources are created and destroyed as with
// callables.
#include <gtest/gtest.h>

#include <vector>

#include "test_support.hpp"
#include "weft/pool/pool.hpp"

namespace {

struct c_backend {
  int next_handle = 100;
  int alive = 0;
  int before_acquire_calls = 0;
  int before_release_calls = 0;
  std::vector<int> destroyed;
};

int open_handle(void* context) {
  auto* server = static_cast<c_backend*>(context);
  ++server->alive;
  return server->next_handle++;
}

void close_handle(void* context, int* handle) {
  auto* server = static_cast<c_backend*>(context);
  --server->alive;
  server->destroyed.push_back(*handle);
}

bool check_before_acquire(void* context, int*) {
  ++static_cast<c_backend*>(context)->before_acquire_calls;
  return true;
}

bool check_before_release(void* context, int* handle) {
  ++static_cast<c_backend*>(context)->before_release_calls;
  return *handle != 101;  // 101 is "dirty": destroyed on release
}

TEST(PoolCOptions, FunctionPointersWithAContextDriveTheWholeLifecycle) {
  c_backend server;
  weft_test::run_clean([&] {
    weft::pool_c_options<int> options;
    options.max = 2;
    options.context = &server;
    options.factory = &open_handle;
    options.destructor = &close_handle;
    options.before_acquire = &check_before_acquire;
    options.before_release = &check_before_release;
    weft::pool<int> handles(options);
    {
      weft::lease<int> first = handles.acquire();
      weft::lease<int> second = handles.acquire();
      EXPECT_EQ(*first, 100);
      EXPECT_EQ(*second, 101);
    }
    EXPECT_EQ(server.before_release_calls, 2);
    EXPECT_EQ(server.destroyed, (std::vector<int>{101}));
    weft::lease<int> again = handles.acquire();
    EXPECT_EQ(*again, 100);
    EXPECT_EQ(server.before_acquire_calls, 1) << "only reused resources are vetted";
    EXPECT_EQ(handles.stats().count(), 1u);
  });
  EXPECT_EQ(server.alive, 0);
  EXPECT_EQ(server.destroyed, (std::vector<int>{101, 100}));
}

TEST(PoolCOptions, AMissingFactoryIsRejected) {
  weft_test::run_clean([] {
    weft::pool_c_options<int> options;
    EXPECT_THROW(weft::pool<int>{options}, std::invalid_argument);
  });
}

}  // namespace
