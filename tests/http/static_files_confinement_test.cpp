// weft-test: driver-independent
// static_files never serves outside its root: "..", encoded dots and slashes, NUL, backslashes,
// absolute paths and symlinks that leave the root are 404, symlinks that stay inside are
// followed; each case runs through openat2 and through the O_NOFOLLOW walk kept for kernels
// without it. Also what is refused for other reasons: dotfiles, FIFOs, unreadable files,
// malformed escapes, other methods.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "http/static_tree.hpp"
#include "weft/error.hpp"
#include "weft/http/detail/static_confine.hpp"
#include "weft/http/static_files.hpp"

// gtest prints a parameter with this (found by ADL), so ctest names the mode instead of bytes.
namespace weft::http::detail {
inline void PrintTo(confine_mode mode, std::ostream* out) {
  *out << (mode == confine_mode::automatic ? "openat2" : "walk");
}
}  // namespace weft::http::detail

namespace fs = std::filesystem;
namespace http = weft::http;
using http::detail::confine_mode;
using weft_static_test::field;
using weft_static_test::open_descriptors;
using weft_static_test::request_for;
using weft_static_test::sent_bytes;

namespace {

class StaticConfinement : public ::testing::TestWithParam<confine_mode> {
 protected:
  void SetUp() override {
    descriptors_ = open_descriptors();
    http::detail::set_confine_mode(GetParam());
    tree_.file("hello.txt", "hello\n");
    tree_.file("sub/file.txt", "in sub\n");
    tree_.file("sub/deeper/leaf.txt", "leaf\n");
  }
  void TearDown() override {
    http::detail::set_confine_mode(confine_mode::automatic);
    EXPECT_EQ(open_descriptors(), descriptors_) << "a descriptor was left open";
  }

  http::static_files files(bool dotfiles = false) const {
    http::static_options options;
    options.root = tree_.root().string();
    options.cache_valid = std::chrono::milliseconds(0);  // each resolve looks afresh
    options.dotfiles = dotfiles;
    return http::static_files(options);
  }
  // resolve() of path_in_root, with the request's target "/static/" + path.
  http::static_reply get(const http::static_files& server, const std::string& path) const {
    return server.resolve(request_for("/static/" + path), path);
  }
  void expect_not_found(const http::static_files& server, const std::vector<std::string>& paths) {
    for (const std::string& path : paths) {
      http::static_reply reply = get(server, path);
      EXPECT_EQ(reply.head.status, http::status::not_found) << path;
      EXPECT_FALSE(reply.has_file()) << path;
      EXPECT_EQ(reply.head.body, "Not Found\n") << path;
    }
  }

  weft_static_test::tree tree_;
  std::size_t descriptors_ = 0;
};

TEST_P(StaticConfinement, ServesAFileUnderTheRootWithItsBytes) {
  auto server = files();
  http::static_reply reply = get(server, "hello.txt");
  ASSERT_EQ(reply.head.status, http::status::ok);
  EXPECT_EQ(field(reply, "Content-Type"), "text/plain; charset=utf-8");
  EXPECT_EQ(field(reply, "Content-Length"), "6");
  EXPECT_EQ(field(reply, "Accept-Ranges"), "bytes");
  EXPECT_TRUE(reply.head.body.empty());
  ASSERT_TRUE(reply.has_file());
  EXPECT_EQ(reply.offset, 0u);
  EXPECT_EQ(reply.length, 6u);
  EXPECT_EQ(sent_bytes(reply), "hello\n");
  EXPECT_EQ(sent_bytes(get(server, "sub/deeper/leaf.txt")), "leaf\n");
  // One leading '/' on path_in_root is the same path.
  EXPECT_EQ(sent_bytes(server.resolve(request_for("/hello.txt"), "/hello.txt")), "hello\n");
}

TEST_P(StaticConfinement, DotDotSegmentsRawOrEncodedAre404) {
  auto server = files();
  expect_not_found(
      server, {"../outside/secret.txt", "sub/../../outside/secret.txt", "%2e%2e/outside/secret.txt",
               "%2E%2E/outside/secret.txt", ".%2e/outside/secret.txt", "sub/%2e%2e/hello.txt", "..",
               "sub/..", "./hello.txt", "sub/./file.txt", "%2e/hello.txt"});
}

TEST_P(StaticConfinement, EncodedSlashesNeverBecomeSeparators) {
  auto server = files();
  expect_not_found(server, {"..%2F..%2Foutside%2Fsecret.txt", "..%2foutside%2fsecret.txt",
                            // Even a path that would exist inside the root, had %2F split it.
                            "sub%2Ffile.txt"});
  EXPECT_EQ(get(server, "sub/file.txt").head.status, http::status::ok);
}

TEST_P(StaticConfinement, NulBackslashAndEmptySegmentsAre404) {
  auto server = files();
  expect_not_found(server, {"hello.txt%00", "hello.txt%00.png", "sub%5Cfile.txt", "sub\\file.txt",
                            "..\\outside\\secret.txt", "%5C..%5Coutside%5Csecret.txt",
                            "sub//file.txt", "sub/file.txt//"});
}

TEST_P(StaticConfinement, AbsolutePathsAre404) {
  auto server = files();
  std::string secret = (tree_.base() / "outside" / "secret.txt").string();
  expect_not_found(server, {"//etc/passwd", "%2Fetc%2Fpasswd", "/%2Fetc/passwd",
                            "%2F" + secret.substr(1), "/" + secret});
}

TEST_P(StaticConfinement, SymlinksLeavingTheRootAre404) {
  tree_.symlink("escape.txt", "../outside/secret.txt");
  tree_.symlink("outdir", "../outside");
  tree_.symlink("sub/up2", "../../outside/secret.txt");
  tree_.symlink("absolute.txt", (tree_.base() / "outside" / "secret.txt").string());
  tree_.symlink("etc", "/etc");
  tree_.symlink("proc", "/proc/self/root/etc");
  // A chain: inside, then out.
  tree_.symlink("chain1", "chain2");
  tree_.symlink("chain2", "sub/up2");
  auto server = files();
  expect_not_found(server, {"escape.txt", "outdir/secret.txt", "sub/up2", "absolute.txt",
                            "etc/passwd", "proc/passwd", "chain1"});
}

TEST_P(StaticConfinement, SymlinksStayingInsideTheRootAreFollowed) {
  tree_.symlink("alias.txt", "hello.txt");
  tree_.symlink("sublink", "sub");
  tree_.symlink("sub/up.txt", "../hello.txt");
  tree_.symlink("sub/deeper/around.txt", "../../sub/./file.txt");
  tree_.symlink("twice", "alias.txt");
  auto server = files();
  EXPECT_EQ(sent_bytes(get(server, "alias.txt")), "hello\n");
  EXPECT_EQ(sent_bytes(get(server, "sublink/file.txt")), "in sub\n");
  EXPECT_EQ(sent_bytes(get(server, "sublink/deeper/leaf.txt")), "leaf\n");
  EXPECT_EQ(sent_bytes(get(server, "sub/up.txt")), "hello\n");
  EXPECT_EQ(sent_bytes(get(server, "sub/deeper/around.txt")), "in sub\n");
  EXPECT_EQ(sent_bytes(get(server, "twice")), "hello\n");
  // The type comes from the name asked for, not the link's target.
  EXPECT_EQ(field(get(server, "alias.txt"), "Content-Type"), "text/plain; charset=utf-8");
}

TEST_P(StaticConfinement, AbsoluteSymlinkIntoTheRootIsRefusedToo) {
  // RESOLVE_BENEATH judges an absolute target as leaving, wherever it lands (documented).
  tree_.symlink("inside-absolute.txt", (tree_.root() / "hello.txt").string());
  auto server = files();
  expect_not_found(server, {"inside-absolute.txt"});
}

TEST_P(StaticConfinement, SymlinkLoopsAre404) {
  tree_.symlink("loop1", "loop2");
  tree_.symlink("loop2", "loop1");
  tree_.symlink("self", "self");
  auto server = files();
  expect_not_found(server, {"loop1", "loop2/x", "self"});
}

TEST_P(StaticConfinement, DotfilesAre404UnlessAllowed) {
  tree_.file(".env", "SECRET=1\n");
  tree_.file("sub/.git/config", "[core]\n");
  auto server = files();
  expect_not_found(server, {".env", "sub/.git/config", "%2eenv"});
  auto open_server = files(true);
  EXPECT_EQ(sent_bytes(get(open_server, ".env")), "SECRET=1\n");
  EXPECT_EQ(sent_bytes(get(open_server, "sub/.git/config")), "[core]\n");
  // "." and ".." stay refused when dotfiles are served.
  expect_not_found(open_server, {"../outside/secret.txt", "./hello.txt"});
}

TEST_P(StaticConfinement, FifoIs404WithoutBlocking) {
  ASSERT_EQ(::mkfifo((tree_.root() / "pipe").c_str(), 0644), 0);
  auto server = files();
  // Opened O_NONBLOCK: without it, this open would wait for a writer forever.
  expect_not_found(server, {"pipe"});
}

TEST_P(StaticConfinement, UnreadableFilesAndDirectoriesAre404) {
  auto locked_file = tree_.file("locked.txt", "locked\n");
  auto locked_dir = tree_.directory("private");
  tree_.file("private/inner.txt", "inner\n");
  fs::permissions(locked_file, fs::perms::none);
  fs::permissions(locked_dir, fs::perms::none);
  auto server = files();
  {
    weft_static_test::permission_bits_enforced enforced;
    expect_not_found(server, {"locked.txt", "private/inner.txt", "private/"});
  }
  // The same files are there: the 404 was the permission, which the client is not told.
  fs::permissions(locked_file, fs::perms::owner_read);
  fs::permissions(locked_dir, fs::perms::owner_all);
  EXPECT_EQ(sent_bytes(get(server, "private/inner.txt")), "inner\n");
}

TEST_P(StaticConfinement, MalformedEscapeIs400) {
  auto server = files();
  for (std::string path : {"hello%2", "hello%zz.txt", "%", "sub/%g1"}) {
    http::static_reply reply = get(server, path);
    EXPECT_EQ(reply.head.status, http::status::bad_request) << path;
    EXPECT_FALSE(reply.has_file()) << path;
    EXPECT_NE(reply.head.body.find("two hex digits"), std::string::npos) << path;
  }
}

TEST_P(StaticConfinement, MethodsOtherThanGetAndHeadAre405WithAllow) {
  auto server = files();
  for (http::method m : {http::method::post, http::method::put, http::method::delete_,
                         http::method::options, http::method::patch}) {
    http::static_reply reply = server.resolve(request_for("/static/hello.txt", m), "hello.txt");
    EXPECT_EQ(reply.head.status, http::status::method_not_allowed);
    EXPECT_EQ(field(reply, "Allow"), "GET, HEAD");
    EXPECT_FALSE(reply.has_file());
  }
}

TEST_P(StaticConfinement, ExhaustedDescriptorsThrowIoErrorNamingThePath) {
#if defined(WEFT_SANITIZE_ADDRESS)
  // UBSan checks the vptr of the io_error being built by probing its memory through a pipe(2),
  // which cannot be made with no descriptor left: it reports an "invalid vptr" of its own.
  GTEST_SKIP() << "needs a free descriptor for UBSan's vptr probe";
#endif
  auto server = files();
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  // The lowest free descriptor number becomes the limit: the next open fails with EMFILE.
  int probe = ::dup(0);
  ASSERT_GE(probe, 0);
  ::close(probe);
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(probe);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
  std::string message;
  int code = 0;
  try {
    static_cast<void>(get(server, "sub/file.txt"));
  } catch (const weft::io_error& failure) {
    message = failure.what();
    code = failure.error_code().value();
  }
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_EQ(code, EMFILE) << message;
  EXPECT_NE(message.find((tree_.root() / "sub" / "file.txt").string()), std::string::npos)
      << message;
}

INSTANTIATE_TEST_SUITE_P(Confine, StaticConfinement,
                         ::testing::Values(confine_mode::automatic, confine_mode::walk),
                         [](const ::testing::TestParamInfo<confine_mode>& info) {
                           return info.param == confine_mode::automatic ? std::string("Openat2")
                                                                        : std::string("Walk");
                         });

TEST(StaticConfine, KernelsWithOpenat2UseItByDefault) {
  utsname name{};
  ASSERT_EQ(::uname(&name), 0);
  int major = 0, minor = 0;
  ASSERT_EQ(std::sscanf(name.release, "%d.%d", &major, &minor), 2) << name.release;
  if (major < 5 || (major == 5 && minor < 6)) GTEST_SKIP() << "kernel " << name.release;
  int dir = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dir, 0);
  EXPECT_TRUE(http::detail::openat2_works(dir)) << "openat2 refused on " << name.release;
  ::close(dir);
  EXPECT_EQ(http::detail::get_confine_mode(), confine_mode::automatic);
}

}  // namespace
