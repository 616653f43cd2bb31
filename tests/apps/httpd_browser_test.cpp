// weft-test: driver-independent
// weft-httpd's page in a real browser (Debian's chromium, headless): it renders, its script
// fills the live numbers from /stats, and a screenshot is kept for people to look at
// (build/<preset>/tests/httpd-page.png); and the browser's own WebSocket talks to /ws/echo with
// the permessage-deflate it offers; and a FormData upload with a file goes through /upload's
// multipart reader. Once, not per driver: what is tested is the page.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/wait.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "apps/httpd_support.hpp"

namespace {

// Runs a shell command line with a time bound; its stdout.
std::string shell(const std::string& command, int& status) {
  std::string out;
  FILE* pipe = ::popen(("timeout 90 " + command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) {
    status = -1;
    return out;
  }
  char buffer[4096];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) {
    out.append(buffer, got);
  }
  const int raw = ::pclose(pipe);
  status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return out;
}

std::string chromium(const std::string& flags, const std::string& url, int& status) {
  // --no-sandbox: the tests may run as root, where Chromium's sandbox refuses to start.
  return shell(
      "chromium --headless --no-sandbox --disable-gpu --hide-scrollbars "
      "--user-data-dir=$(mktemp -d) " +
          flags + " '" + url + "'",
      status);
}

TEST(HttpdBrowser, ThePageRendersAndItsScriptFillsTheLiveNumbers) {
  ASSERT_EQ(::access("/usr/bin/chromium", X_OK), 0)
      << "chromium is missing: install it (scripts/install-deps)";
  httpd_test::httpd server;
  int status = 0;
  // The DOM after the page's script has run for a few (virtual) seconds: refresh() has
  // replaced the server-rendered numbers with /stats' (which count the page's own requests).
  const std::string dom =
      chromium("--virtual-time-budget=3000 --dump-dom", server.url("/"), status);
  ASSERT_EQ(status, 0);
  EXPECT_NE(dom.find("<title>weft-httpd</title>"), std::string::npos) << dom.substr(0, 400);
  EXPECT_NE(dom.find("coroutines alive"), std::string::npos);
  EXPECT_NE(dom.find("Ten thousand sleepers cost nothing"), std::string::npos);
  EXPECT_NE(dom.find("<tbody id=\"workers\"><tr><td>0</td>"), std::string::npos);
  EXPECT_EQ(dom.find("id=\"requests\">0<"), std::string::npos)
      << "the live count should include the page's own requests";

  const std::string shot = std::string(WEFT_TEST_BINARY_DIR) + "/httpd-page.png";
  ::unlink(shot.c_str());
  chromium("--window-size=1100,1400 --virtual-time-budget=2000 --screenshot=" + shot,
           server.url("/"), status);
  ASSERT_EQ(status, 0);
  std::ifstream png(shot, std::ios::binary);
  std::string header(8, '\0');
  png.read(header.data(), 8);
  EXPECT_EQ(header, "\x89PNG\r\n\x1a\n");
  struct stat info {};
  ASSERT_EQ(::stat(shot.c_str(), &info), 0);
  // A blank 1100x1400 page compresses to a few KiB; this one has text, cards and a table.
  EXPECT_GT(info.st_size, 40000) << shot;
  EXPECT_EQ(server.stop(), 0);
}

TEST(HttpdBrowser, TheBrowsersWebSocketAgreesPermessageDeflateAndGetsItsEcho) {
  ASSERT_EQ(::access("/usr/bin/chromium", X_OK), 0)
      << "chromium is missing: install it (scripts/install-deps)";
  // A page of this test's own, served from a root of its own: it sends 108,000 bytes of
  // repeated text and writes what came back, and what the handshake agreed, into the DOM.
  // Headless Chromium's virtual time does not wait for a WebSocket, only for fetches: the page
  // keeps a short /sleep fetch pending until the echo is in (without it a slow server, as under
  // ASan, lost the race against --virtual-time-budget and the DOM still said "waiting").
  char root[] = "/tmp/weft-browser-ws-XXXXXX";
  ASSERT_NE(::mkdtemp(root), nullptr);
  const std::string page = std::string(root) + "/ws.html";
  {
    std::ofstream out(page);
    out << "<!doctype html><html><head><meta charset=\"utf-8\"><title>ws</title></head><body>"
           "<pre id=\"out\">waiting</pre><script>\n"
           "let done = false;\n"
           "(async () => {\n"
           "  for (let i = 0; i < 100 && !done; ++i) await fetch('/sleep?ms=100');\n"
           "})();\n"
           "const big = 'weft compresses this line. '.repeat(4000);\n"
           "const s = new WebSocket(`ws://${location.host}/ws/echo`);\n"
           "s.onopen = () => s.send(big);\n"
           "s.onmessage = (m) => { done = true;\n"
           "  document.getElementById('out').textContent = 'extensions=[' +\n"
           "  s.extensions + '] same=' + (m.data === big) + ' length=' + m.data.length; };\n"
           "s.onerror = () => { done = true;\n"
           "  document.getElementById('out').textContent = 'failed'; };\n"
           "</script></body></html>\n";
  }
  httpd_test::httpd server({"--root", root});
  int status = 0;
  const std::string dom =
      chromium("--virtual-time-budget=3000 --dump-dom", server.url("/static/ws.html"), status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(dom.find("extensions=[permessage-deflate; server_no_context_takeover; "
                     "client_no_context_takeover] same=true length=108000"),
            std::string::npos)
      << dom.substr(0, 600);
  EXPECT_EQ(server.stop(), 0);
  ::unlink(page.c_str());
  ::rmdir(root);
}

TEST(HttpdBrowser, TheBrowsersFormDataUploadIsReadPartByPart) {
  ASSERT_EQ(::access("/usr/bin/chromium", X_OK), 0)
      << "chromium is missing: install it (scripts/install-deps)";
  // The browser builds the multipart body itself (its boundary, its part heads) from a
  // FormData with a field and a 1.2 MB file, and writes /upload's answer into the DOM.
  char root[] = "/tmp/weft-browser-upload-XXXXXX";
  ASSERT_NE(::mkdtemp(root), nullptr);
  const std::string page = std::string(root) + "/upload.html";
  {
    std::ofstream out(page);
    out << "<!doctype html><html><head><meta charset=\"utf-8\"><title>up</title></head><body>"
           "<pre id=\"out\">waiting</pre><script>\n"
           "const lines = 'weft streams this upload line\\n'.repeat(40000);\n"
           "const form = new FormData();\n"
           "form.append('title', 'from the browser');\n"
           "form.append('file', new Blob([lines], {type: 'text/plain'}), 'lines.txt');\n"
           "fetch('/upload', {method: 'POST', body: form}).then((r) => r.text())\n"
           "  .then((t) => { document.getElementById('out').textContent = 'answer:' + t; })\n"
           "  .catch((e) => { document.getElementById('out').textContent = 'failed ' + e; });\n"
           "</script></body></html>\n";
  }
  std::string lines;
  for (int i = 0; i < 40000; ++i) lines += "weft streams this upload line\n";
  const auto crc_of = [](std::string_view data) {
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08lx",
                  crc32_z(0, reinterpret_cast<const Bytef*>(data.data()), data.size()));
    return std::string(hex);
  };
  httpd_test::httpd server({"--root", root});
  int status = 0;
  const std::string dom =
      chromium("--virtual-time-budget=5000 --dump-dom", server.url("/static/upload.html"), status);
  EXPECT_EQ(status, 0);
  const std::string expected = "answer:title - text/plain 16 bytes crc32 " +
                               crc_of("from the browser") + "\nfile \"lines.txt\" text/plain " +
                               std::to_string(lines.size()) + " bytes crc32 " + crc_of(lines);
  EXPECT_NE(dom.find(expected), std::string::npos) << expected << "\n" << dom.substr(0, 800);
  EXPECT_EQ(server.stop(), 0);
  ::unlink(page.c_str());
  ::rmdir(root);
}

}  // namespace
