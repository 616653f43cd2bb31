// weft::tty over a pseudo-terminal pair (openpty): raw mode, window size, reads and writes.
#include <pty.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>

#include "test_support.hpp"

namespace {

using weft_test::run_clean;

class pty_pair : public ::testing::Test {
 protected:
  void SetUp() override {
    winsize size{};
    size.ws_col = 100;
    size.ws_row = 40;
    if (openpty(&master_, &slave_, nullptr, nullptr, &size) != 0) {
      GTEST_SKIP() << "openpty failed (no /dev/ptmx here?): " << std::strerror(errno);
    }
  }
  void TearDown() override {
    if (master_ >= 0) {
      ::close(master_);
      ::close(slave_);
    }
  }
  bool canonical() const {
    termios mode{};
    tcgetattr(slave_, &mode);
    return (mode.c_lflag & ICANON) != 0;
  }

  int master_ = -1;
  int slave_ = -1;
};

using Tty = pty_pair;

TEST_F(Tty, WindowSize) {
  run_clean([&] {
    weft::tty terminal = weft::tty::open(slave_);
    auto size = terminal.size();
    EXPECT_EQ(size.columns, 100);
    EXPECT_EQ(size.rows, 40);
  });
}

TEST_F(Tty, RawModeReadsAndWritesAndIsRestoredOnClose) {
  ASSERT_TRUE(canonical());
  run_clean([&] {
    weft::tty terminal = weft::tty::open(slave_);
    terminal.set_raw(true);
    EXPECT_TRUE(terminal.raw());
    EXPECT_FALSE(canonical());
    // Raw: bytes arrive without waiting for a newline.
    ASSERT_EQ(::write(master_, "abc", 3), 3);
    std::array<char, 3> input;
    terminal.read_exactly(input);
    EXPECT_EQ(std::string_view(input.data(), 3), "abc");
    terminal.write_all("out");
    std::array<char, 3> output;
    ASSERT_EQ(::read(master_, output.data(), 3), 3);  // already written: does not block
    EXPECT_EQ(std::string_view(output.data(), 3), "out");
  });  // the tty is destroyed here: its mode must be back
  EXPECT_TRUE(canonical()) << "closing the tty restores the mode it had";
}

TEST_F(Tty, RawModeOffRestoresLineMode) {
  run_clean([&] {
    weft::tty terminal = weft::tty::open(slave_);
    terminal.set_raw(true);
    terminal.set_raw(false);
    EXPECT_TRUE(canonical());
    ASSERT_EQ(::write(master_, "line\n", 5), 5);
    std::string line;
    terminal.read_until(line, "\n");
    EXPECT_EQ(line, "line\n");
  });
}

TEST(TtyOpen, ANonTerminalIsAnIoError) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  run_clean([&] {
    try {
      weft::tty::open(fds[0]);
      ADD_FAILURE() << "a pipe is not a terminal";
    } catch (const weft::io_error& error) {
      EXPECT_NE(std::string(error.what()).find("open tty fd "), std::string::npos);
    }
  });
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
