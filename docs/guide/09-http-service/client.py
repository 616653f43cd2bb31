"""The test's client for the HTTP service (scripts/test-guide): one kept-alive connection, each
route once, and the errors the router answers by itself; prints what it checked."""
import http.client
import sys

host, port = sys.argv[1], int(sys.argv[2])
conn = http.client.HTTPConnection(host, port, timeout=10)
failures = []


def check(method, path, status, body, send=None, headers=None):
    conn.request(method, path, body=send, headers=headers or {})
    response = conn.getresponse()
    got = response.read().decode()
    if response.status != status or (body is not None and got != body):
        failures.append(f"{method} {path}: expected {status} {body!r}, got {response.status} {got!r}")
    return response


check("GET", "/hello", 200, "hello\n")
check("GET", "/users/42", 200, '{"user":"42"}\n')
check("POST", "/sum", 200, "6\n", send="1 2 3", headers={"Content-Type": "text/plain"})
counted = check("GET", "/count/3", 200, "1\n2\n3\n")
if counted.getheader("Transfer-Encoding") != "chunked":
    failures.append("/count/3 was not chunked")
check("GET", "/nowhere", 404, None)
not_allowed = check("DELETE", "/hello", 405, None)
if "GET" not in (not_allowed.getheader("Allow") or ""):
    failures.append("405 without GET in Allow")
check("HEAD", "/hello", 200, "")
# A form as a browser sends it: a field and a file, each a part behind the boundary.
form = (b"--guide\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhi\r\n"
        b"--guide\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n"
        b"Content-Type: text/plain\r\n\r\n" + b"x" * 1000 + b"\r\n--guide--\r\n")
check("POST", "/upload", 200, "note: 2 bytes\nfile: 1000 bytes from a.txt\n", send=form,
      headers={"Content-Type": "multipart/form-data; boundary=guide"})
first = check("GET", "/visit", 200, "visit 1\n")
cookie = first.getheader("Set-Cookie") or ""
if cookie != "visits=1; Path=/; HttpOnly; SameSite=Lax":
    failures.append(f"/visit set {cookie!r}")
check("GET", "/visit", 200, "visit 2\n", headers={"Cookie": cookie.split(";")[0]})
if conn.sock is None:
    failures.append("the connection was not kept alive")
conn.close()
if failures:
    print("\n".join(failures))
    sys.exit(1)
print("client: 10 requests on one kept-alive connection, every answer as expected")
