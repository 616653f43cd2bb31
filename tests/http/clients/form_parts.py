#!/usr/bin/env python3
"""Reads a multipart/form-data body on stdin, its Content-Type value as the first argument, and
parses it with Python's own MIME parser (the email package), so that a form weft built is judged
by a parser no one here wrote. Prints one line per part: its name, its filename (or -), its media
type and its bytes as hex; "defects: ..." first when the parser found the framing broken."""
import email.parser
import email.policy
import sys

body = sys.stdin.buffer.read()
message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
    b"Content-Type: " + sys.argv[1].encode() + b"\r\n\r\n" + body)
if message.defects:
    print("defects:", message.defects)
if not message.is_multipart():
    print("not multipart")
    sys.exit(0)
for part in message.iter_parts():
    if part.defects:
        print("defects:", part.defects)
    name = part.get_param("name", header="content-disposition")
    filename = part.get_param("filename", header="content-disposition")
    print(name, filename if filename is not None else "-", part.get_content_type(),
          part.get_payload(decode=True).hex())
