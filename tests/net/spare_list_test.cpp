// weft-test: driver-independent
// spare_list (src/net/spare_list.hpp): the bounded LIFO behind the thread's input buffers, the
// callback style's messages and the HTTP request spaces: the last given back is taken first,
// nothing past the bound is kept, and a kept object is the very one given (its storage warm).
#include "net/spare_list.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace {

using weft::net::detail::spare_list;

TEST(NetSpareList, TheLastGivenBackIsTakenFirstAndEmptyGivesNothing) {
  spare_list<std::unique_ptr<int>, 4> spares;
  EXPECT_FALSE(spares.take().has_value());
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(spares.give(std::make_unique<int>(i)));
  }
  EXPECT_EQ(spares.size(), 3u);
  for (int expected = 2; expected >= 0; --expected) {
    auto taken = spares.take();
    ASSERT_TRUE(taken.has_value());
    EXPECT_EQ(**taken, expected);
  }
  EXPECT_FALSE(spares.take().has_value());
}

TEST(NetSpareList, NothingPastTheBoundIsKept) {
  spare_list<std::unique_ptr<int>, 2> spares;
  EXPECT_TRUE(spares.give(std::make_unique<int>(1)));
  EXPECT_TRUE(spares.has_room());
  EXPECT_TRUE(spares.give(std::make_unique<int>(2)));
  EXPECT_FALSE(spares.has_room());
  EXPECT_FALSE(spares.give(std::make_unique<int>(3)));  // dropped: freed, not kept
  EXPECT_EQ(spares.size(), 2u);
  EXPECT_EQ(**spares.take(), 2);
  EXPECT_TRUE(spares.has_room());
}

TEST(NetSpareList, AKeptObjectKeepsItsStorage) {
  spare_list<std::string> spares;
  std::string grown(4096, 'x');
  const char* storage = grown.data();
  grown.clear();  // emptied, its capacity kept
  EXPECT_TRUE(spares.give(std::move(grown)));
  auto taken = spares.take();
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->data(), storage);
  EXPECT_GE(taken->capacity(), 4096u);
}

}  // namespace
