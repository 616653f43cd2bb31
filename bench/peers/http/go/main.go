// Peer: Go's net/http server for suite http, run with GOMAXPROCS=1 (set here too, for runs by
// hand): one thread runs the goroutines, like weft's one scheduler per thread. bench/run.py
// builds it with `go build`.
//
//	main --port N --mode hello|static --root DIR [--tls-cert FILE --tls-key FILE]
//	     [--upstream HOST:PORT]
//
// With --upstream (run.py's proxy_keepalive row: bench/http/README.md, "A reverse proxy"):
// every request goes to http://HOST:PORT through net/http/httputil's ReverseProxy, its
// Transport keeping up to 64 idle connections to it (the default keeps 2 per host, and 64
// client connections would then open and close upstream connections all the time).
//
// Contract (READY line, stdin EOF): bench/http/README.md. An http.Server on 127.0.0.1:N, one
// goroutine per connection (net/http's own), keep-alive on. hello: a handler that sets
// Content-Type text/plain and writes "hello\n" (net/http adds Date and Content-Length).
// static: http.FileServer over DIR (net/http's idiom: it opens the file per request, sends
// Last-Modified and serves the body with sendfile). Go sets TCP_NODELAY on every TCP
// connection by default. net/http answers pipelined requests one at a time, each response
// flushed before the next request is read.
//
// With --tls-cert and --tls-key (PEM files; suite http's https_keepalive row) it serves HTTPS
// instead, with Server.ServeTLS and crypto/tls's defaults: TLS 1.2 and 1.3, its own choice of
// cipher suite (in TLS 1.3 AES-128-GCM first where both sides have AES hardware and the client
// puts AES-GCM first), and ALPN offering h2 and http/1.1 (net/http's HTTP/2 is on for TLS; the
// row's load client, wrk, offers no ALPN and so speaks HTTP/1.1).
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"strconv"
)

func usage() {
	fmt.Fprintln(os.Stderr,
		"usage: main --port N --mode hello|static --root DIR [--tls-cert FILE --tls-key FILE] [--upstream HOST:PORT]")
	os.Exit(2)
}

func main() {
	runtime.GOMAXPROCS(1)
	port, mode, root := -1, "", ""
	tlsCert, tlsKey, upstream := "", "", ""
	arguments := os.Args[1:]
	for index := 0; index+1 < len(arguments); index += 2 {
		value := arguments[index+1]
		switch arguments[index] {
		case "--port":
			number, err := strconv.Atoi(value)
			if err != nil {
				usage()
			}
			port = number
		case "--mode":
			mode = value
		case "--root":
			root = value
		case "--tls-cert":
			tlsCert = value
		case "--tls-key":
			tlsKey = value
		case "--upstream":
			upstream = value
		default:
			usage()
		}
	}
	if len(arguments)%2 != 0 || port < 0 || port > 65535 || (mode != "hello" && mode != "static") ||
		(mode == "static" && root == "") || (tlsCert == "") != (tlsKey == "") {
		usage()
	}

	hello := []byte("hello\n")
	var handler http.Handler
	if upstream != "" {
		proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: upstream})
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.MaxIdleConnsPerHost = 64
		proxy.Transport = transport
		handler = proxy
	} else if mode == "hello" {
		handler = http.HandlerFunc(func(writer http.ResponseWriter, _ *http.Request) {
			writer.Header().Set("Content-Type", "text/plain")
			writer.Write(hello)
		})
	} else {
		handler = http.FileServer(http.Dir(root))
	}
	listener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		fmt.Fprintf(os.Stderr, "go http peer: listen: %v\n", err)
		os.Exit(1)
	}
	// Standard input's end stops the server.
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	fmt.Printf("READY %d\n", listener.Addr().(*net.TCPAddr).Port)
	server := &http.Server{Handler: handler}
	if tlsCert != "" {
		err = server.ServeTLS(listener, tlsCert, tlsKey)
	} else {
		err = server.Serve(listener)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "go http peer: serve: %v\n", err)
		os.Exit(1)
	}
}
