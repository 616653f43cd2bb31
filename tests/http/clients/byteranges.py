#!/usr/bin/env python3
"""Reads an HTTP response (status line, fields, body) on stdin, as curl -i prints it, and
parses its multipart/byteranges body with Python's own MIME parser (the email package), so that
the framing is judged by a parser no one here wrote. Prints the status code, then one line per
part: its media type (without parameters), its Content-Range and its bytes as hex."""
import email.parser
import email.policy
import sys

raw = sys.stdin.buffer.read()
head, _, body = raw.partition(b"\r\n\r\n")
lines = head.split(b"\r\n")
print(lines[0].split()[1].decode())
content_type = b""
for line in lines[1:]:
    name, _, value = line.partition(b":")
    if name.strip().lower() == b"content-type":
        content_type = value.strip()
message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
    b"Content-Type: " + content_type + b"\r\n\r\n" + body)
if not message.is_multipart():
    print("not multipart:", content_type.decode())
    sys.exit(0)
if message.defects:
    print("defects:", message.defects)
for part in message.iter_parts():
    payload = part.get_payload(decode=True)
    print(part.get_content_type(), part["Content-Range"], payload.hex())
