// Peer: a WebSocket echo server in Go with gorilla/websocket for suite net's websocket_echo_64c.
// It has no go.mod on purpose: run.py builds it in GOPATH mode (GO111MODULE=off) against the
// sources Debian's golang-github-gorilla-websocket-dev installs in /usr/share/gocode, offline.
// run.py runs it with GOMAXPROCS=1 (set here too, for runs by hand).
//
//	main --port N [--mode ws]
//
// Listens on 127.0.0.1:N, prints "READY N" once listening and serves until killed or until its
// standard input reaches end of file. net/http serves the upgrade on any path (gorilla's
// Upgrader, origin not checked: the client is local); then one goroutine per connection reads
// each message with ReadMessage and writes it back with WriteMessage, the same type (gorilla's
// own echo example). Go sets TCP_NODELAY on every TCP connection. A connection that fails is
// closed.
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"

	"github.com/gorilla/websocket"
)

func usage() {
	fmt.Fprintln(os.Stderr, "usage: main --port N [--mode ws]")
	os.Exit(2)
}

var upgrader = websocket.Upgrader{
	ReadBufferSize:  4096,
	WriteBufferSize: 4096,
	CheckOrigin:     func(*http.Request) bool { return true },
}

func echo(writer http.ResponseWriter, request *http.Request) {
	conn, err := upgrader.Upgrade(writer, request, nil)
	if err != nil {
		return // Upgrade has answered the client with an HTTP error
	}
	defer conn.Close()
	for {
		kind, message, err := conn.ReadMessage()
		if err != nil {
			return
		}
		if err := conn.WriteMessage(kind, message); err != nil {
			return
		}
	}
}

func main() {
	runtime.GOMAXPROCS(1)
	port := -1
	arguments := os.Args[1:]
	for index := 0; index < len(arguments); index++ {
		switch {
		case arguments[index] == "--port" && index+1 < len(arguments):
			index++
			value, err := strconv.Atoi(arguments[index])
			if err != nil {
				usage()
			}
			port = value
		case arguments[index] == "--mode" && index+1 < len(arguments):
			index++
			if arguments[index] != "ws" {
				usage()
			}
		default:
			usage()
		}
	}
	if port < 0 || port > 65535 {
		usage()
	}
	listener, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "go ws server:", err)
		os.Exit(1)
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "READY %d\n", listener.Addr().(*net.TCPAddr).Port)
	out.Flush()
	server := &http.Server{Handler: http.HandlerFunc(echo)}
	if err := server.Serve(listener); err != nil {
		fmt.Fprintln(os.Stderr, "go ws server:", err)
		os.Exit(1)
	}
}
