// weft::file and weft::fs: files and paths from coroutines.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "weft/io/file.hpp"
#include "weft/io/fs.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
using weft_test::temporary_directory;

TEST(File, WrittenReadBackStatedRenamedAndUnlinked) {
  temporary_directory directory;
  run_clean([&] {
    const std::string path = directory / "data.txt";
    {
      weft::file output = weft::file::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0640);
      output.write("hello ");
      output.write("world");
      EXPECT_EQ(output.position(), 11u);
      output.write_at(0, "H");
      output.sync();
      output.close();
      output.close();  // idempotent
      EXPECT_FALSE(output.is_open());
    }
    weft::file input = weft::file::open(path);
    char buffer[64];
    std::size_t count = input.read(buffer);
    EXPECT_EQ(std::string(buffer, count), "Hello world");
    EXPECT_EQ(input.read(buffer), 0u) << "end of file";
    count = input.read_at(6, std::span<char>(buffer, 3));
    EXPECT_EQ(std::string(buffer, count), "wor");
    weft::fs::file_status by_handle = input.stat();
    input.close();
    EXPECT_EQ(by_handle.size, 11u);
    EXPECT_EQ(by_handle.type, weft::fs::entry_type::file);
    EXPECT_EQ(
        by_handle.mode & 0777, 0640u & ~[] {
          mode_t mask = ::umask(0);
          ::umask(mask);
          return mask;
        }());
    auto age = std::chrono::system_clock::now() - by_handle.modified;
    EXPECT_LT(age, 1h) << "mtime is recent";
    EXPECT_GT(age, -1h);

    const std::string renamed = directory / "renamed.txt";
    weft::fs::rename(path, renamed);
    EXPECT_THROW(weft::fs::stat(path), weft::io_error);
    EXPECT_EQ(weft::fs::stat(renamed).size, 11u);
    EXPECT_EQ(weft::fs::read_file(renamed), "Hello world");
    weft::fs::unlink(renamed);
    EXPECT_THROW(weft::fs::stat(renamed), weft::io_error);
  });
}

TEST(File, ReadFileOfAMissingPathNamesIt) {
  temporary_directory directory;
  run_clean([&] {
    const std::string missing = directory / "nope/x";
    try {
      weft::fs::read_file(missing);
      ADD_FAILURE() << "reading a missing file must fail";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_ENOENT);
      EXPECT_EQ(error.operation(), "open");
      EXPECT_EQ(error.subject(), missing);
      EXPECT_EQ(std::string(error.what()), "open " + missing + ": no such file or directory");
    }
  });
}

TEST(File, WholeFileHelpersRoundTripBigContent) {
  temporary_directory directory;
  run_clean([&] {
    std::string content;
    for (int index = 0; content.size() < 3'000'000; ++index) {
      content += std::to_string(index) + '\n';
    }
    weft::fs::write_file(directory / "big", content);
    EXPECT_EQ(weft::fs::stat(directory / "big").size, content.size());
    EXPECT_EQ(weft::fs::read_file(directory / "big"), content);
    weft::fs::write_file(directory / "big", "short");  // truncates
    EXPECT_EQ(weft::fs::read_file(directory / "big"), "short");
  });
}

TEST(File, DirectoriesAreMadeListedAndRemoved) {
  temporary_directory directory;
  run_clean([&] {
    weft::fs::mkdir(directory / "sub");
    weft::fs::write_file(directory / "a.txt", "a");
    auto entries = weft::fs::readdir(directory.path());
    std::sort(entries.begin(), entries.end(),
              [](const auto& left, const auto& right) { return left.name < right.name; });
    ASSERT_EQ(entries.size(), 2u);
    EXPECT_EQ(entries[0].name, "a.txt");
    EXPECT_EQ(entries[0].type, weft::fs::entry_type::file);
    EXPECT_EQ(entries[1].name, "sub");
    EXPECT_EQ(entries[1].type, weft::fs::entry_type::directory);
    EXPECT_EQ(weft::fs::stat(directory / "sub").type, weft::fs::entry_type::directory);
    try {
      weft::fs::mkdir(directory / "sub");
      ADD_FAILURE() << "mkdir of an existing directory must fail";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_EEXIST);
      EXPECT_EQ(std::string(error.what()),
                "mkdir " + (directory / "sub") + ": file already exists");
    }
    weft::fs::rmdir(directory / "sub");
    EXPECT_THROW(weft::fs::rmdir(directory / "sub"), weft::io_error);
    EXPECT_EQ(weft::fs::readdir(directory.path()).size(), 1u);
  });
}

TEST(File, ACancelledReaderLeavesTheRunClean) {
  // The request may still be on a worker when its caller leaves: it must free itself later,
  // touching only its own buffer (ASan checks that).
  temporary_directory directory;
  run_clean([&] {
    weft::fs::write_file(directory / "f", std::string(1 << 20, 'x'));
    std::vector<weft::task<void>> readers;
    for (int index = 0; index < 8; ++index) {
      readers.push_back(weft::spawn([&] {
        std::vector<char> buffer(1 << 20);
        weft::file input = weft::file::open(directory / "f");
        for (;;) {
          input.read_at(0, buffer);
        }
      }));
    }
    weft::yield();
    weft::yield();
    for (auto& reader : readers) {
      reader.cancel("test over");
    }
    for (auto& reader : readers) {
      EXPECT_THROW(reader.await(), weft::cancelled_error);
    }
  });
}

// A read abandoned while a worker runs it still uses the descriptor: closing the file then must
// not close(2) it (the number could go to the next open and the late read would hit that file).
// It is closed when the read is done.
TEST(File, ClosingWhileAnAbandonedReadRunsKeepsTheDescriptorUntilItEnds) {
  temporary_directory directory;
  const std::string fifo = directory / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  run_clean([&] {
    // O_RDWR: opening a FIFO so does not wait for a writer, and a read blocks its worker.
    weft::file reader = weft::file::open(fifo, O_RDWR);
    const int fd = reader.fd();
    char buffer[16];
    EXPECT_THROW(reader.read(buffer, weft::timeout(20ms)), weft::timeout_error);
    reader.close();
    EXPECT_FALSE(reader.is_open());
    EXPECT_NE(::fcntl(fd, F_GETFD), -1) << "closed while the abandoned read still used it";
    // End the read: it completes on its worker, and then the descriptor is closed.
    int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    ASSERT_GE(writer, 0);
    ASSERT_EQ(::write(writer, "x", 1), 1);
    ::close(writer);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (::fcntl(fd, F_GETFD) != -1 && std::chrono::steady_clock::now() < deadline) {
      weft::sleep_for(1ms);  // bounded wait for the worker and its callback
    }
    EXPECT_EQ(::fcntl(fd, F_GETFD), -1) << "the last holder closes the descriptor";
  });
}

TEST(File, MisuseOfAClosedFileIsALogicError) {
  run_clean([] {
    weft::file closed;
    char buffer[4];
    EXPECT_THROW(closed.read(buffer), std::logic_error);
    EXPECT_NO_THROW(closed.close());
  });
  EXPECT_THROW(weft::fs::stat("/"), std::logic_error) << "outside a coroutine";
}

}  // namespace

namespace {

TEST(File, ARequestStuckBehindABusyPoolTimesOutAndNamesThePath) {
  constexpr int workers = 4;  // libuv's default pool size
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> started{0};
  temporary_directory directory;
  run_clean([&] {
    std::vector<weft::task<void>> blockers;
    for (int index = 0; index < workers; ++index) {
      blockers.push_back(weft::spawn([&] {
        weft::thread_pool::run([&] {
          ++started;
          released.wait();
        });
      }));
    }
    ASSERT_TRUE(weft_test::yield_until([&] { return started.load() == workers; }));
    const std::string path = directory / "never";
    try {
      weft::file::open(path, O_WRONLY | O_CREAT, 0666, weft::timeout(20ms));
      ADD_FAILURE() << "the open cannot run while the pool is busy";
    } catch (const weft::timeout_error& error) {
      EXPECT_EQ(std::string(error.what()), "weft: open " + path + " timed out after 20 ms");
    }
    release.set_value();
    for (auto& blocker : blockers) {
      blocker.await();
    }
  });
  EXPECT_FALSE(std::filesystem::exists(directory / "never")) << "the cancelled open never ran";
}

}  // namespace
