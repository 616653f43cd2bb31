"""The test's client for the echo server (scripts/test-guide): three clients at once, each sends
lines and reads them back; prints what it checked."""
import socket
import sys
import threading

host, port = sys.argv[1], int(sys.argv[2])
failures = []


def client(number):
    with socket.create_connection((host, port), timeout=10) as conn:
        for line in range(5):
            message = f"client {number} line {line}\n".encode()
            conn.sendall(message)
            received = b""
            while len(received) < len(message):
                chunk = conn.recv(4096)
                if not chunk:
                    break
                received += chunk
            if received != message:
                failures.append(f"client {number}: sent {message!r}, got {received!r}")
                return


threads = [threading.Thread(target=client, args=(n,)) for n in range(3)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
if failures:
    print("\n".join(failures))
    sys.exit(1)
print("client: 3 clients got their 15 lines back")
