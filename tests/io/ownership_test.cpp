// How the I/O objects own their handles (weft/io/detail/handle_owner.hpp): an empty object
// (default-made or moved from) names the call and the type it was made on; moving hands the
// handle over open; assigning over an object or destroying it closes its handle; a self-move
// changes nothing.
#include <array>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>

#include "test_support.hpp"

namespace {

using weft_test::run_clean;
using weft_test::temporary_directory;

// The message of the std::logic_error that call throws ("" if it throws none).
template <class Call>
std::string logic_error_of(Call&& call) {
  try {
    call();
  } catch (const std::logic_error& error) {
    return error.what();
  }
  return "";
}

TEST(IoOwnership, EmptyObjectsNameTheCallAndTheType) {
  run_clean([] {
    weft::tcp::listener tcp_listener;
    weft::pipe::listener pipe_listener;
    weft::udp::socket socket;
    weft::tcp::stream stream;
    EXPECT_FALSE(tcp_listener.is_open());
    EXPECT_FALSE(pipe_listener.is_open());
    EXPECT_FALSE(socket.is_open());
    EXPECT_FALSE(stream.is_open());
    // close() on an empty object is a no-op, not an error.
    tcp_listener.close();
    pipe_listener.close();
    socket.close();
    stream.close();
    EXPECT_EQ(logic_error_of([&] { tcp_listener.accept(); }),
              "weft: accept on an empty tcp::listener (default-made or moved from)");
    EXPECT_EQ(logic_error_of([&] { (void)tcp_listener.local_address(); }),
              "weft: local_address on an empty tcp::listener (default-made or moved from)");
    EXPECT_EQ(logic_error_of([&] { pipe_listener.accept(); }),
              "weft: accept on an empty pipe::listener (default-made or moved from)");
    EXPECT_EQ(logic_error_of([&] { (void)socket.local_address(); }),
              "weft: local_address on an empty udp::socket (default-made or moved from)");
    EXPECT_EQ(logic_error_of([&] { socket.send("x"); }),
              "weft: send on an empty udp::socket (default-made or moved from)");
    std::array<char, 4> buffer;
    EXPECT_EQ(logic_error_of([&] { stream.read_some(buffer); }),
              "weft: read_some on an empty weft::stream (default-made or moved from)");
  });
}

TEST(IoOwnership, AMovedListenerKeepsListeningAndTheSourceIsEmpty) {
  run_clean([] {
    auto first = weft::tcp::listener::listen("127.0.0.1", 0);
    const std::uint16_t port = first.port();
    weft::tcp::listener second = std::move(first);
    EXPECT_FALSE(first.is_open());  // NOLINT(bugprone-use-after-move): moved from is empty
    EXPECT_TRUE(second.is_open());
    EXPECT_EQ(second.port(), port);
    auto client = weft::tcp::connect("127.0.0.1", port);
    auto accepted = second.accept(weft::timeout(std::chrono::seconds(10)));
    client.write_all("hi");
    std::array<char, 2> buffer;
    accepted.read_exactly(buffer);
    EXPECT_EQ(std::string(buffer.data(), buffer.size()), "hi");
    EXPECT_FALSE(logic_error_of([&] { first.accept(); }).empty());
  });
}

TEST(IoOwnership, AssigningOverAListenerClosesItsSocket) {
  run_clean([] {
    auto listener = weft::tcp::listener::listen("127.0.0.1", 0);
    const std::uint16_t port = listener.port();
    try {
      weft::tcp::listener::listen("127.0.0.1", port);
      ADD_FAILURE() << "a second listener took a port that one listens on";
    } catch (const weft::io_error& error) {
      EXPECT_TRUE(error.error_code() == std::errc::address_in_use) << error.what();
    }
    auto replacement = weft::tcp::listener::listen("127.0.0.1", 0);
    const std::uint16_t kept = replacement.port();
    listener = std::move(replacement);
    EXPECT_EQ(listener.port(), kept);
    // Its port is free again: binding it fails with "address already in use" while the old
    // socket listens. (Not a connect expecting a refusal: that can succeed against itself, a
    // TCP self-connect, when the kernel picks the same port as the client's source port.)
    try {
      auto again = weft::tcp::listener::listen("127.0.0.1", port);
      EXPECT_EQ(again.port(), port);
    } catch (const weft::io_error& error) {
      ADD_FAILURE() << "the listener assigned over still holds its port: " << error.what();
    }
  });
}

TEST(IoOwnership, ASelfMoveKeepsTheObjectOpen) {
  run_clean([] {
    auto listener = weft::tcp::listener::listen("127.0.0.1", 0);
    auto socket = weft::udp::socket::bind("127.0.0.1", 0);
    auto& same_listener = listener;
    auto& same_socket = socket;
    listener = std::move(same_listener);
    socket = std::move(same_socket);
    EXPECT_TRUE(listener.is_open());
    EXPECT_TRUE(socket.is_open());
    auto client = weft::tcp::connect("127.0.0.1", listener.port());
    EXPECT_TRUE(listener.accept(weft::timeout(std::chrono::seconds(10))).is_open());
  });
}

TEST(IoOwnership, DestroyingAPipeListenerRemovesItsSocketFile) {
  temporary_directory directory;
  const std::string path = directory / "owned.sock";
  run_clean([&] {
    {
      auto listener = weft::pipe::listener::listen(path);
      weft::pipe::listener moved = std::move(listener);
      EXPECT_EQ(moved.path(), path);
      EXPECT_TRUE(std::filesystem::exists(path));
    }
    EXPECT_FALSE(std::filesystem::exists(path)) << "closed, and the socket file removed";
    EXPECT_THROW(weft::pipe::connect(path), weft::io_error);
  });
}

}  // namespace
