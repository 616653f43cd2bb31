"""The test's client for the line server (scripts/test-guide): three clients at once, each says
two lines and quits; prints what it checked."""
import socket
import sys
import threading

host, port = sys.argv[1], int(sys.argv[2])
failures = []


def converse(number):
    with socket.create_connection((host, port), timeout=10) as conn:
        reader = conn.makefile("r", encoding="utf-8", newline="\n")
        expected = ["welcome: say something, or quit"]
        for index in range(2):
            conn.sendall(f"hello {number}.{index}\r\n".encode())
            expected.append(f"you said: hello {number}.{index}")
        conn.sendall(b"quit\n")
        expected.append("bye")
        got = [line.rstrip("\n") for line in reader]
        if got != expected:
            failures.append(f"client {number}: expected {expected}, got {got}")


threads = [threading.Thread(target=converse, args=(n,)) for n in range(3)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
if failures:
    print("\n".join(failures))
    sys.exit(1)
print("client: 3 clients said 2 lines each and got every reply")
