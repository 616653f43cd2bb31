#!/usr/bin/env python3
# tls_client.py: Python's ssl module (OpenSSL underneath, but a client no one here wrote) as the
# client of a weft line-echo server over TLS.
#
# Usage: tls_client.py PORT CA_FILE VERSION    (VERSION: 1.2 or 1.3)
#
# Connects to localhost:PORT trusting CA_FILE, with VERSION as both the lowest and highest
# version, verifying the certificate's name; sends 200 lines in pieces that cut across records,
# then one line of 100,000 bytes; checks every echo; sends "bye" and then expects the server's
# close_notify (recv returns b"" only on a close_notify: a FIN without one raises SSLEOFError,
# as ragged EOFs are not suppressed). Prints "ok VERSION CIPHER" and exits 0, or "FAIL why".
import socket
import ssl
import sys


def main():
    port, ca_file, version = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    context = ssl.create_default_context(cafile=ca_file)
    wanted = ssl.TLSVersion.TLSv1_2 if version == "1.2" else ssl.TLSVersion.TLSv1_3
    context.minimum_version = wanted
    context.maximum_version = wanted
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    tls = context.wrap_socket(raw, server_hostname="localhost", suppress_ragged_eofs=False)
    if tls.version() != ("TLSv1.2" if version == "1.2" else "TLSv1.3"):
        print(f"FAIL version {tls.version()}")
        return 1

    lines = [f"line {i} " + "x" * (i * 37 % 500) for i in range(200)]
    lines.append("y" * 100000)
    payload = "".join(line + "\n" for line in lines).encode()
    # Writes of odd sizes, so that lines and records cut across each other.
    at = 0
    step = 1
    while at < len(payload):
        tls.sendall(payload[at : at + step])
        at += step
        step = step * 3 % 7919 + 1
    expected = payload
    got = b""
    while len(got) < len(expected):
        piece = tls.recv(65536)
        if not piece:
            print(f"FAIL the server closed after {len(got)} of {len(expected)} bytes")
            return 1
        got += piece
    if got != expected:
        print("FAIL the echo differs")
        return 1

    tls.sendall(b"bye\n")
    rest = b""
    try:
        while True:
            piece = tls.recv(65536)
            if not piece:
                break
            rest += piece
    except ssl.SSLEOFError:
        print("FAIL the server closed without close_notify")
        return 1
    if rest != b"bye\n":
        print(f"FAIL after bye: {rest!r}")
        return 1
    print(f"ok {tls.version()} {tls.cipher()[0]}")
    tls.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
