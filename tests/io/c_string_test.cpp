// weft-test: driver-independent
// Text with a NUL byte inside, handed to a call that passes it on as a C string (a path, a host,
// a program's argument): refused with io_error(UV_EINVAL) naming what held it and where, and
// nothing done, instead of the call acting on the text before the NUL (src/io/c_string.hpp).
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <filesystem>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "weft/io/dns.hpp"
#include "weft/io/file.hpp"
#include "weft/io/fs.hpp"
#include "weft/io/pipe.hpp"
#include "weft/io/subprocess.hpp"
#include "weft/io/tcp.hpp"
#include "weft/io/udp.hpp"

namespace {

using weft_test::run_clean;
using weft_test::temporary_directory;

// Runs call, which must throw io_error UV_EINVAL whose operation is `operation` and whose
// message names `what` and the NUL's offset.
template <typename Call>
void expect_refused(Call&& call, const std::string& operation, const std::string& what,
                    std::size_t offset) {
  try {
    call();
    ADD_FAILURE() << operation << ": text with a NUL inside was accepted";
  } catch (const weft::io_error& failure) {
    EXPECT_EQ(failure.uv_code(), UV_EINVAL) << failure.what();
    EXPECT_EQ(failure.operation(), operation) << failure.what();
    const std::string message = failure.what();
    EXPECT_NE(
        message.find("the " + what + " contains a NUL byte at offset " + std::to_string(offset)),
        std::string::npos)
        << message;
    EXPECT_EQ(message.find('\0'), std::string::npos) << "the NUL is shown as \\0";
    EXPECT_NE(failure.subject().find("\\0"), std::string::npos) << failure.subject();
  }
}

std::string with_nul(const std::string& before, const std::string& after) {
  return before + std::string(1, '\0') + after;
}

TEST(IoCString, PathsWithANulAreRefusedAndNothingIsTouched) {
  temporary_directory directory;
  const std::string kept = directory / "kept";
  const std::string cut = directory / "a";  // what a C string would have made of each path
  run_clean([&] {
    weft::fs::write_file(kept, "kept");
    const std::string bad = with_nul(cut, "b");
    expect_refused([&] { weft::file::open(bad, O_WRONLY | O_CREAT, 0644); }, "open", "path",
                   cut.size());
    expect_refused([&] { weft::fs::write_file(bad, "lost"); }, "open", "path", cut.size());
    expect_refused([&] { weft::fs::mkdir(bad); }, "mkdir", "path", cut.size());
    expect_refused([&] { weft::fs::stat(with_nul(kept, "x")); }, "stat", "path", kept.size());
    expect_refused([&] { weft::fs::read_file(with_nul(kept, "x")); }, "open", "path", kept.size());
    expect_refused([&] { weft::fs::unlink(with_nul(kept, "x")); }, "unlink", "path", kept.size());
    expect_refused([&] { weft::fs::rename(with_nul(kept, "x"), cut); }, "rename", "source path",
                   kept.size());
    expect_refused([&] { weft::fs::rename(kept, bad); }, "rename", "target path", cut.size());
    expect_refused([&] { weft::fs::readdir(with_nul(directory.path(), "/x")); }, "readdir", "path",
                   directory.path().size());
    expect_refused([&] { weft::fs::rmdir(with_nul(directory.path(), "/x")); }, "rmdir", "path",
                   directory.path().size());
    expect_refused([&] { weft::fs::watch(with_nul(kept, "x")); }, "watch", "path", kept.size());
    // Nothing was created, removed or renamed.
    EXPECT_EQ(weft::fs::read_file(kept), "kept");
    EXPECT_FALSE(std::filesystem::exists(cut));
    EXPECT_EQ(weft::fs::readdir(directory.path()).size(), 1u);
  });
}

TEST(IoCString, AHostWithANulIsRefusedNotConnectedToItsPrefix) {
  run_clean([] {
    auto listener = weft::tcp::listener::listen("127.0.0.1", 0);
    const std::uint16_t port = listener.port();
    expect_refused([&] { weft::tcp::connect(with_nul("127.0.0.1", "junk"), port); }, "connect",
                   "host", 9);
    expect_refused([&] { weft::tcp::connect(with_nul("localhost", ".evil"), port); }, "connect",
                   "host", 9);
    expect_refused([&] { weft::tcp::listener::listen(with_nul("127.0.0.1", ""), 0); }, "listen",
                   "host", 9);
    expect_refused([&] { weft::udp::socket::bind(with_nul("::1", "x"), 0); }, "bind", "host", 3);
    expect_refused([&] { weft::dns::resolve(with_nul("localhost", "x")); }, "getaddrinfo", "host",
                   9);
    expect_refused([&] { weft::dns::resolve("localhost", with_nul("80", "")); }, "getaddrinfo",
                   "service", 2);
    expect_refused([&] { weft::dns::reverse(with_nul("127.0.0.1", "")); }, "reverse", "address", 9);
    // No connection reached the listener: an accept with a short limit times out.
    EXPECT_THROW(listener.accept(weft::timeout(std::chrono::milliseconds(50))),
                 weft::timeout_error);
    // The same host without the NUL still connects.
    auto stream = weft::tcp::connect("127.0.0.1", port);
    auto accepted = listener.accept();
    stream.close();
    accepted.close();
    listener.close();
  });
}

TEST(IoCString, ASocketPathWithANulIsRefused) {
  temporary_directory directory;
  const std::string cut = directory / "s";
  run_clean([&] {
    expect_refused([&] { weft::pipe::listener::listen(with_nul(cut, "ock")); }, "listen",
                   "socket path", cut.size());
    expect_refused([&] { weft::pipe::connect(with_nul(cut, "ock")); }, "connect", "socket path",
                   cut.size());
  });
  EXPECT_FALSE(std::filesystem::exists(cut));
}

TEST(IoCString, AProgramsArgumentEnvironmentOrDirectoryWithANulIsRefused) {
  temporary_directory directory;
  const std::string marker = directory / "ran";
  run_clean([&] {
    // Each command would create the marker if it ran.
    const std::string script = "touch '" + marker + "'";
    expect_refused(
        [&] {
          weft::subprocess::exec({"/bin/sh", "-c", with_nul(script, "x")});
        },
        "spawn", "argument", script.size());
    weft::subprocess::options environment;
    environment.env = std::vector<std::string>{"A=1", with_nul("B=2", "C=3")};
    expect_refused(
        [&] {
          weft::subprocess::exec({"/bin/sh", "-c", script}, environment);
        },
        "spawn", "environment entry", 3);
    weft::subprocess::options place;
    place.cwd = with_nul(directory.path(), "/x");
    expect_refused(
        [&] {
          weft::subprocess::exec({"/bin/sh", "-c", script}, place);
        },
        "spawn", "working directory", directory.path().size());
    EXPECT_FALSE(std::filesystem::exists(marker)) << "a refused command ran";
    // The same command without a NUL runs.
    auto done = weft::subprocess::exec({"/bin/sh", "-c", script});
    EXPECT_EQ(done.exit_status, 0);
  });
  EXPECT_TRUE(std::filesystem::exists(marker));
}

}  // namespace
