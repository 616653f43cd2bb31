// ws_client: a scripted WebSocket echo session with Go's gorilla/websocket (Debian
// golang-github-gorilla-websocket-dev), a client no one in weft wrote, pointed at a server
// that echoes every message back as it came (text as text, binary as binary).
//
// Usage: ws_client [--deflate] ws://host:port/path
//
// Checks, in order: text, binary, an empty message, a fragmented text message (gorilla cuts a
// message into frames of its write buffer: with the default 4096 bytes the 10,000 bytes below
// go out as three frames, and a 3-byte character straddles each frame boundary), a 1 MiB
// binary message (256 frames), a ping whose pong must carry the same payload, and a close with
// code 4000 and a reason that the server must echo. Prints "ok <check>" per check and exits 0;
// on the first failure prints "FAIL <check>: <why>" and exits 1. With --deflate the dialer
// offers permessage-deflate (gorilla's offer: no context takeover either way), every message is
// written compressed, and the first check after the handshake, "deflate", is that the server's
// answer agreed.
//
// Built offline by CMake: GO111MODULE=off GOPATH=/usr/share/gocode go build.
package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

var conn *websocket.Conn

func fail(check string, format string, args ...interface{}) {
	fmt.Printf("FAIL %s: %s\n", check, fmt.Sprintf(format, args...))
	os.Exit(1)
}

func ok(check string) { fmt.Printf("ok %s\n", check) }

// echo sends payload as one message of the given type and checks the reply is the same.
func echo(check string, kind int, payload []byte) {
	if err := conn.WriteMessage(kind, payload); err != nil {
		fail(check, "write: %v", err)
	}
	expectEcho(check, kind, payload)
}

func expectEcho(check string, kind int, payload []byte) {
	gotKind, got, err := conn.ReadMessage()
	if err != nil {
		fail(check, "read: %v", err)
	}
	if gotKind != kind {
		fail(check, "message type %d, want %d", gotKind, kind)
	}
	if !bytes.Equal(got, payload) {
		fail(check, "echo of %d bytes differs from the %d sent", len(got), len(payload))
	}
	ok(check)
}

func main() {
	deflate := len(os.Args) == 3 && os.Args[1] == "--deflate"
	if len(os.Args) != 2 && !deflate {
		fmt.Println("usage: ws_client [--deflate] ws://host:port/path")
		os.Exit(2)
	}
	dialer := websocket.Dialer{HandshakeTimeout: 5 * time.Second, EnableCompression: deflate}
	var err error
	var response *http.Response
	conn, response, err = dialer.Dial(os.Args[len(os.Args)-1], nil)
	if err != nil {
		fail("handshake", "%v", err)
	}
	ok("handshake")
	if deflate {
		agreed := response.Header.Get("Sec-WebSocket-Extensions")
		if !strings.HasPrefix(agreed, "permessage-deflate") {
			fail("deflate", "the server's answer named %q, not permessage-deflate", agreed)
		}
		conn.EnableWriteCompression(true)
		ok("deflate")
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))

	echo("text", websocket.TextMessage, []byte("hello from gorilla"))

	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	echo("binary", websocket.BinaryMessage, binary)
	echo("empty", websocket.TextMessage, []byte{})

	// Written in three pieces through one writer; gorilla flushes a non-final frame each time
	// its 4096-byte buffer fills.
	fragmented := strings.Repeat("☃", 3333) + "!" // 10,000 bytes
	writer, err := conn.NextWriter(websocket.TextMessage)
	if err != nil {
		fail("fragmented", "writer: %v", err)
	}
	for _, piece := range []string{fragmented[:3000], fragmented[3000:7001], fragmented[7001:]} {
		if _, err := writer.Write([]byte(piece)); err != nil {
			fail("fragmented", "write: %v", err)
		}
	}
	if err := writer.Close(); err != nil {
		fail("fragmented", "close writer: %v", err)
	}
	expectEcho("fragmented", websocket.TextMessage, []byte(fragmented))

	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i*131 + i>>9)
	}
	echo("1MiB", websocket.BinaryMessage, big)

	// gorilla runs the pong handler inside a read, so a message sent after the ping carries
	// the read past the pong.
	pongs := make(chan string, 1)
	conn.SetPongHandler(func(payload string) error {
		pongs <- payload
		return nil
	})
	if err := conn.WriteControl(websocket.PingMessage, []byte("ping-payload"),
		time.Now().Add(5*time.Second)); err != nil {
		fail("ping", "write: %v", err)
	}
	echo("after-ping", websocket.TextMessage, []byte("after the ping"))
	select {
	case payload := <-pongs:
		if payload != "ping-payload" {
			fail("ping", "pong payload %q, want %q", payload, "ping-payload")
		}
		ok("ping")
	default:
		fail("ping", "no pong arrived before the next message's echo")
	}

	// The server's close frame ends the next read with a CloseError carrying its code and
	// reason; our own close already went out, so the handler sends nothing back.
	conn.SetCloseHandler(func(code int, text string) error { return nil })
	if err := conn.WriteMessage(websocket.CloseMessage,
		websocket.FormatCloseMessage(4000, "bye from gorilla")); err != nil {
		fail("close", "write: %v", err)
	}
	_, _, err = conn.ReadMessage()
	closeErr, isClose := err.(*websocket.CloseError)
	if !isClose {
		fail("close", "read ended with %v, want a close frame", err)
	}
	if closeErr.Code != 4000 || closeErr.Text != "bye from gorilla" {
		fail("close", "echo carried %d %q, want 4000 %q", closeErr.Code, closeErr.Text,
			"bye from gorilla")
	}
	ok("close")
	conn.Close()
}
