// weft::fs::watch: file-system events for coroutines.
#include <uv.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "test_support.hpp"
#include "weft/io/file.hpp"
#include "weft/io/fs.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
using weft_test::temporary_directory;

TEST(FsWatch, AWriteToAWatchedFileIsReported) {
  temporary_directory directory;
  run_clean([&] {
    const std::string path = directory / "watched.txt";
    weft::fs::write_file(path, "before");
    weft::fs::watcher watcher = weft::fs::watch(path);
    EXPECT_EQ(watcher.path(), path);
    weft::fs::write_file(path, "after");
    weft::fs::watch_event event = watcher.next(weft::timeout(10s));
    EXPECT_EQ(event.filename, "watched.txt");
    EXPECT_TRUE(event.changed || event.renamed);
    watcher.close();
    watcher.close();  // idempotent
    EXPECT_FALSE(watcher.is_open());
    EXPECT_THROW(watcher.next(), std::logic_error);
  });
}

TEST(FsWatch, ACreatedFileInAWatchedDirectoryIsReportedByName) {
  temporary_directory directory;
  run_clean([&] {
    weft::fs::watcher watcher = weft::fs::watch(directory.path());
    auto waiter = weft::spawn([&] { return watcher.next(weft::timeout(10s)); });
    weft::yield();  // the waiter is now inside next(): the event wakes it
    weft::fs::write_file(directory / "new.txt", "x");
    weft::fs::watch_event event = waiter.await();
    EXPECT_EQ(event.filename, "new.txt");
    EXPECT_TRUE(event.renamed) << "a creation is reported as a rename";
  });
}

TEST(FsWatch, EventsQueueWhileNobodyWaitsAndAnOverflowIsReported) {
  temporary_directory directory;
  run_clean([&] {
    weft::fs::watch_options options;
    options.queue_capacity = 2;
    weft::fs::watcher watcher = weft::fs::watch(directory.path(), options);
    // Distinct names: inotify merges only identical consecutive events.
    for (int index = 0; index < 10; ++index) {
      weft::fs::write_file(directory / ("file" + std::to_string(index)), "x");
    }
    EXPECT_FALSE(watcher.next(weft::timeout(10s)).filename.empty());
    EXPECT_FALSE(watcher.next(weft::timeout(10s)).filename.empty());
    try {
      watcher.next(weft::timeout(10s));
      ADD_FAILURE() << "the overflow must be reported";
    } catch (const weft::fs::watch_overflow_error& error) {
      EXPECT_GT(error.dropped(), 0u);
      EXPECT_NE(std::string(error.what()).find("capacity 2"), std::string::npos) << error.what();
    }
    // The watcher keeps working after the report.
    weft::fs::write_file(directory / "after", "x");
    bool seen = false;
    while (!seen) {
      seen = watcher.next(weft::timeout(10s)).filename == "after";
    }
  });
}

TEST(FsWatch, NextTimesOutWhenNothingChanges) {
  temporary_directory directory;
  run_clean([&] {
    weft::fs::watcher watcher = weft::fs::watch(directory.path());
    EXPECT_THROW(watcher.next(weft::timeout(20ms)), weft::timeout_error);
  });
}

TEST(FsWatch, ClosingWakesAWaiterWithAnError) {
  temporary_directory directory;
  run_clean([&] {
    weft::fs::watcher watcher = weft::fs::watch(directory.path());
    bool entered = false;
    auto waiter = weft::spawn([&] {
      entered = true;
      watcher.next();  // its only suspension point: once entered, it waits in there
    });
    ASSERT_TRUE(weft_test::yield_until([&] { return entered; }));
    watcher.close();
    EXPECT_THROW(waiter.await(), weft::error);
  });
}

TEST(FsWatch, AWaiterCanBeCancelled) {
  temporary_directory directory;
  run_clean([&] {
    weft::fs::watcher watcher = weft::fs::watch(directory.path());
    bool entered = false;
    auto waiter = weft::spawn([&] {
      entered = true;
      watcher.next();  // its only suspension point: once entered, it waits in there
    });
    ASSERT_TRUE(weft_test::yield_until([&] { return entered; }));
    waiter.cancel("not needed");
    EXPECT_THROW(waiter.await(), weft::cancelled_error);
  });
}

TEST(FsWatch, WatchingAMissingPathIsAnIoErrorNamingIt) {
  temporary_directory directory;
  run_clean([&] {
    const std::string missing = directory / "nope";
    try {
      weft::fs::watch(missing);
      ADD_FAILURE() << "watching a missing path must fail";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_ENOENT);
      EXPECT_EQ(std::string(error.what()), "watch " + missing + ": no such file or directory");
    }
  });
}

}  // namespace
