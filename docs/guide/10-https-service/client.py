"""The test's client for the HTTPS service (scripts/test-guide): Python's ssl module trusting the
page's certificate, two requests on one connection over TLS 1.3, then a plain HTTP request to the
same port, which the server answers 400 in the clear."""
import http.client
import socket
import ssl
import sys
from pathlib import Path

host, port = sys.argv[1], int(sys.argv[2])
context = ssl.create_default_context(cafile=str(Path(__file__).parent / "localhost.pem"))
context.set_alpn_protocols(["http/1.1"])
conn = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
failures = []
for _ in range(2):
    conn.request("GET", "/hello")
    response = conn.getresponse()
    body = response.read().decode()
    if response.status != 200 or body != "hello over TLSv1.3\n":
        failures.append(f"GET /hello: {response.status} {body!r}")
if conn.sock.version() != "TLSv1.3" or conn.sock.selected_alpn_protocol() != "http/1.1":
    failures.append(f"{conn.sock.version()} {conn.sock.selected_alpn_protocol()}")
conn.close()

plain = socket.create_connection((host, port), timeout=10)
plain.sendall(b"GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n")
answer = b""
while chunk := plain.recv(4096):
    answer += chunk
if not answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"):
    failures.append(f"plain HTTP: {answer[:60]!r}")

for failure in failures:
    print("FAIL", failure)
print("checked: 2 requests over TLS 1.3 on one connection, plain HTTP answered 400")
sys.exit(1 if failures else 0)
