// weft::io_error's std::error_code: errno values in std::system_category() (comparable with
// std::errc), libuv's own codes in weft::libuv_category(), the raw libuv code kept as uv_code().
#include <uv.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "refusing_port.hpp"
#include "test_support.hpp"
#include "weft/io/fs.hpp"

namespace {

using weft_test::run_clean;
using weft_test::temporary_directory;

TEST(IoError, ARefusedConnectIsConnectionRefusedInTheSystemCategory) {
  run_clean([] {
    weft_test::refusing_port closed;  // bound, never listening
    try {
      weft::tcp::connect("127.0.0.1", closed.port());
      ADD_FAILURE() << "connect to a closed port should have been refused";
    } catch (const weft::io_error& error) {
      const std::error_code code = error.error_code();
      EXPECT_TRUE(code == std::errc::connection_refused)
          << code.category().name() << " " << code.value();
      EXPECT_EQ(&code.category(), &std::system_category());
      EXPECT_EQ(code.value(), ECONNREFUSED);
      EXPECT_EQ(code.message(), std::strerror(ECONNREFUSED));
      EXPECT_EQ(error.uv_code(), UV_ECONNREFUSED);
      // A std::system_error made from it reads as the standard library's own would.
      EXPECT_TRUE(std::system_error(code).code() == std::errc::connection_refused);
    }
  });
}

TEST(IoError, EndOfStreamIsInTheLibuvCategoryWithLibuvsMessage) {
  run_clean([] {
    auto server = weft::tcp::listener::listen("127.0.0.1", 0);
    auto client = weft::tcp::connect("127.0.0.1", server.port());
    {
      auto accepted = server.accept();
      accepted.write_all("abc");
      accepted.shutdown();
    }  // closed after three bytes
    std::array<char, 5> five;
    try {
      client.read_exactly(five);
      ADD_FAILURE() << "the stream ends after 3 of 5 bytes";
    } catch (const weft::io_error& error) {
      const std::error_code code = error.error_code();
      EXPECT_EQ(&code.category(), &weft::libuv_category());
      EXPECT_STREQ(code.category().name(), "libuv");
      EXPECT_EQ(code.value(), UV_EOF);
      EXPECT_EQ(code.message(), uv_strerror(UV_EOF));
      EXPECT_EQ(code.message(), "end of file");
      EXPECT_TRUE(code);  // an error, not success
      EXPECT_EQ(error.uv_code(), UV_EOF);
      EXPECT_FALSE(code == std::errc::io_error) << "no errno stands behind UV_EOF";
    }
  });
}

TEST(IoError, OpeningAMissingFileIsNoSuchFileOrDirectory) {
  temporary_directory directory;
  run_clean([&] {
    const std::string missing = directory / "missing";
    try {
      weft::fs::read_file(missing);
      ADD_FAILURE() << "reading a missing file must fail";
    } catch (const weft::io_error& error) {
      EXPECT_TRUE(error.error_code() == std::errc::no_such_file_or_directory);
      EXPECT_EQ(&error.error_code().category(), &std::system_category());
      EXPECT_EQ(error.error_code().value(), ENOENT);
      EXPECT_EQ(error.uv_code(), UV_ENOENT);
      EXPECT_EQ(error.operation(), "open");
      EXPECT_EQ(error.subject(), missing);
    }
  });
}

// Every libuv-only code (DNS's UV_EAI_* among them) goes to libuv_category, every errno code to
// the system category, whatever layer threw it.
TEST(IoError, LibuvOnlyCodesAndErrnoCodesMapToTheirCategories) {
  for (int code : {UV_EOF, UV_UNKNOWN, UV_EAI_NONAME, UV_EAI_AGAIN, UV_EAI_ADDRFAMILY,
                   UV_EAI_PROTOCOL, UV_ECHARSET, UV_EFTYPE}) {
    const weft::io_error error(code, "op", "subject", uv_strerror(code));
    EXPECT_EQ(&error.error_code().category(), &weft::libuv_category()) << uv_err_name(code);
    EXPECT_EQ(error.error_code().value(), code) << uv_err_name(code);
    EXPECT_EQ(error.error_code().message(), uv_strerror(code)) << uv_err_name(code);
  }
  for (int code : {UV_EPIPE, UV_ECONNRESET, UV_EMFILE, UV_ETIMEDOUT, UV_EADDRINUSE, UV_ENOTSUP,
                   UV_ECANCELED, UV_ENOBUFS}) {
    const weft::io_error error(code, "op", "subject", uv_strerror(code));
    EXPECT_EQ(&error.error_code().category(), &std::system_category()) << uv_err_name(code);
    EXPECT_EQ(error.error_code().value(), -code) << uv_err_name(code);
  }
  EXPECT_TRUE(weft::io_error(UV_EMFILE, "accept", "", "").error_code() ==
              std::errc::too_many_files_open);
  EXPECT_TRUE(weft::io_error(UV_EPIPE, "write", "", "").error_code() == std::errc::broken_pipe);
  EXPECT_TRUE(weft::io_error(UV_ECANCELED, "read", "", "").error_code() ==
              std::errc::operation_canceled);
}

}  // namespace
