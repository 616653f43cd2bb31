// The page at "/": what weft is, the server's live numbers, and what to try. One HTML document
// with its style and script inline (no external assets: it renders offline and in a test's
// headless browser). The numbers are written into the HTML, so the page is right without
// JavaScript; the script refreshes them from /stats every second.
#include <cstdio>
#include <string>

#include "site.hpp"

namespace weft_httpd {

namespace {

std::string html_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string grouped(std::uint64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  for (std::size_t index = 0; index < digits.size(); ++index) {
    if (index != 0 && (digits.size() - index) % 3 == 0) {
      out += ',';
    }
    out += digits[index];
  }
  return out;
}

std::string mebibytes(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

std::string number_cell(const char* id, const char* label, const std::string& value) {
  return std::string("<div class=\"n\"><span class=\"v\" id=\"") + id + "\">" + value +
         "</span><span class=\"l\">" + label + "</span></div>\n";
}

constexpr const char* style = R"(
:root { --ink:#1d2330; --muted:#5b6478; --line:#e3e6ee; --accent:#b4361f; --bg:#fbfaf7; }
* { box-sizing: border-box; }
body { margin:0; font:16px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
       color:var(--ink); background:var(--bg); }
main { max-width:960px; margin:0 auto; padding:40px 24px 64px; }
h1 { font-size:44px; margin:0; letter-spacing:-1px; }
h1 span { color:var(--accent); }
.tag { font-size:20px; color:var(--muted); margin:6px 0 28px; }
h2 { font-size:20px; margin:36px 0 12px; border-bottom:1px solid var(--line); padding-bottom:6px; }
.grid { display:grid; grid-template-columns:repeat(4,1fr); gap:12px; }
.n { background:#fff; border:1px solid var(--line); border-radius:10px; padding:14px 16px; }
.v { display:block; font-size:26px; font-weight:650; font-variant-numeric:tabular-nums; }
.l { color:var(--muted); font-size:13px; }
code, pre { font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace; font-size:14px; }
pre { background:#fff; border:1px solid var(--line); border-radius:8px; padding:12px 14px;
      overflow-x:auto; margin:8px 0; }
table { border-collapse:collapse; width:100%; background:#fff; }
td, th { border:1px solid var(--line); padding:6px 10px; text-align:left; font-size:14px; }
th { background:#f3f1ec; }
a { color:var(--accent); }
.ws { display:flex; gap:8px; }
.ws input { flex:1; padding:8px; border:1px solid var(--line); border-radius:6px; font:inherit; }
.ws button { padding:8px 16px; border:0; border-radius:6px; background:var(--ink); color:#fff;
             font:inherit; cursor:pointer; }
#wsout { color:var(--muted); min-height:1.5em; }
footer { margin-top:40px; color:var(--muted); font-size:13px; }
)";

constexpr const char* script = R"(
const fmt = (n) => n.toLocaleString('en-US');
async function refresh() {
  try {
    const s = await (await fetch('/stats', {cache: 'no-store'})).json();
    const set = (id, text) => { const e = document.getElementById(id); if (e) e.textContent = text; };
    set('requests', fmt(s.requests)); set('connections', fmt(s.connections));
    set('coroutines', fmt(s.coroutines_alive)); set('switches', fmt(s.switches));
    set('sleepers', fmt(s.sleepers)); set('sleepers_max', fmt(s.sleepers_max));
    set('rss', (s.rss_bytes / 1048576).toFixed(1) + ' MiB');
    set('uptime', Math.floor(s.uptime_s) + ' s');
    const rows = s.per_worker.map(w => `<tr><td>${w.worker}</td><td>${fmt(w.requests)}</td>` +
      `<td>${fmt(w.connections)}</td><td>${fmt(w.coroutines_alive)}</td><td>${fmt(w.switches)}</td></tr>`);
    document.getElementById('workers').innerHTML = rows.join('');
  } catch (e) { /* the server stopped: keep the last numbers */ }
}
setInterval(refresh, 1000);
let socket = null;
function echo() {
  const text = document.getElementById('wsin').value;
  const out = document.getElementById('wsout');
  const send = () => socket.send(text);
  if (socket && socket.readyState === 1) { send(); return; }
  socket = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws/echo`);
  socket.onmessage = (m) => { out.textContent = 'echoed: ' + m.data; };
  socket.onerror = () => { out.textContent = 'the WebSocket failed'; };
  socket.onopen = send;
}
)";

}  // namespace

std::string render_page(const site::snapshot& n, std::string_view authority, bool secure) {
  // The examples use the address the browser used (its Host field), which is right behind a
  // port chosen by the kernel (--listen :0) or a name for the machine.
  const std::string base = (secure ? "https://" : "http://") + html_escape(authority);
  std::string page;
  page.reserve(12000);
  page += "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  page += "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n";
  page += "<title>weft-httpd</title>\n<style>";
  page += style;
  page += "</style></head><body><main>\n";
  page += "<h1>weft<span>.</span></h1>\n";
  page +=
      "<p class=\"tag\">A C++20 async runtime: code that reads as straight-line, blocking "
      "code and runs as an event-driven server. This page is served by it.</p>\n";

  page += "<h2>This server, live</h2>\n<div class=\"grid\">\n";
  page += number_cell("requests", "requests served", grouped(n.requests));
  page += number_cell("connections", "connections open", grouped(n.connections));
  page += number_cell("coroutines", "coroutines alive", grouped(n.live_coroutines));
  page += number_cell("switches", "context switches", grouped(n.switches));
  page += number_cell("sleepers", "requests sleeping now", grouped(n.sleepers));
  page += number_cell("sleepers_max", "most sleeping at once", grouped(n.max_sleepers));
  page += number_cell("rss", "resident memory", mebibytes(n.rss_bytes));
  char uptime[32];
  std::snprintf(uptime, sizeof uptime, "%.0f s", n.uptime_s);
  page += number_cell("uptime", "uptime", uptime);
  page += "</div>\n";
  page += "<p>Driver <b>" + html_escape(n.driver) + "</b>, " + std::to_string(n.workers) +
          (n.workers == 1 ? " worker" : " workers") +
          " (a thread each, with its own scheduler and its own listening socket).</p>\n";
  page +=
      "<table><thead><tr><th>worker</th><th>requests</th><th>connections</th>"
      "<th>coroutines</th><th>switches</th></tr></thead><tbody id=\"workers\">";
  for (std::size_t index = 0; index < n.per_worker.size(); ++index) {
    const auto& w = n.per_worker[index];
    page += "<tr><td>" + std::to_string(index) + "</td><td>" + grouped(w.requests) + "</td><td>" +
            grouped(w.connections) + "</td><td>" + grouped(w.live_coroutines) + "</td><td>" +
            grouped(w.switches) + "</td></tr>";
  }
  page += "</tbody></table>\n";

  page += "<h2>Ten thousand sleepers cost nothing</h2>\n";
  page +=
      "<p>Every request runs in a coroutine of its own, on a stack committed only as it is "
      "used. <code>/sleep?ms=N</code> parks its coroutine for N ms; start ten thousand at "
      "once and watch <i>requests sleeping now</i> and <i>resident memory</i> above (a "
      "sleeper whose client leaves is woken and dropped within a second):</p>\n";
  page += "<pre>wrk -t1 -c10000 -d10s '" + base + "/sleep?ms=5000'</pre>\n";

  page += "<h2>Try it</h2>\n<pre>curl " + base + "/hello\ncurl -v " + base + "/hello " + base +
          "/hello      # one connection, kept alive\ncurl " + base + "/stats\ncurl -r 0-99 " +
          base + "/static/4k.txt   # a range\ncurl -F file=@/etc/os-release " + base +
          "/upload   # a form upload\nwrk -t1 -c64 -d5s " + base + "/hello</pre>\n";
  page +=
      "<p>Routes: <a href=\"/hello\">/hello</a>, <a href=\"/stats\">/stats</a> (JSON), "
      "<a href=\"/static/index.html\">/static/</a> (files from <code>--root</code>), "
      "<a href=\"/sleep?ms=1000\">/sleep?ms=1000</a>, <code>/upload</code> (POST a form), "
      "<code>/ws/echo</code> (WebSocket)";
  page += n.pg ? ", <a href=\"/pg/now\">/pg/now</a>, <a href=\"/pg/query?n=5\">/pg/query?n=5</a>"
                 " (PostgreSQL through a pool per worker).</p>\n"
               : ". Start with <code>--pg CONNINFO</code> for <code>/pg/now</code> and "
                 "<code>/pg/query?n=</code>.</p>\n";

  page +=
      "<h2>WebSocket echo</h2>\n<div class=\"ws\"><input id=\"wsin\" value=\"hello, weft\">"
      "<button onclick=\"echo()\">send</button></div>\n<p id=\"wsout\"></p>\n";

  page +=
      "<h2>Upload</h2>\n<p>A form with files goes to <code>/upload</code>, which reads it part "
      "by part as it arrives (<code>http::multipart_reader</code>): a file of any size passes "
      "through a buffer of a few dozen KiB and is never stored. The answer is each part's size "
      "and CRC-32.</p>\n<form method=\"post\" action=\"/upload\" "
      "enctype=\"multipart/form-data\"><input type=\"text\" name=\"note\" value=\"a note\"> "
      "<input type=\"file\" name=\"file\" multiple> <button>upload</button></form>\n";

  page += "<footer>weft-httpd &middot; Ctrl-C in its terminal stops it gracefully.</footer>\n";
  page += "</main><script>";
  page += script;
  page += "</script></body></html>\n";
  return page;
}

}  // namespace weft_httpd
