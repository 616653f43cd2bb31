// Peer: Go (net package, goroutines) for the io suite. bench/run.py builds it with `go build`
// and runs it with GOMAXPROCS=1 (set here too, for runs by hand): one thread runs goroutines,
// like weft's one scheduler per thread. Two ways to start it:
//
//   main --port N [--mode echo|sink]
//     A server on 127.0.0.1:N; prints "READY N" once listening and serves until killed or until
//     its standard input reaches end of file. One goroutine per connection (Go's idiom) with a
//     64 KiB buffer. echo: conn.Read, then conn.Write of what was read (not io.Copy, which on
//     Linux would splice through a pipe: more system calls, not what the other peers do).
//     sink: conn.Read and discard, counting bytes (total on stderr at exit). At end of stream
//     the connection is closed. Go sets TCP_NODELAY on every TCP connection by default.
//
//   main [--smoke] [--only timers]
//     timers: N timers (10M; 100k with --smoke) in libuv's million_timers shape: timer i fires
//     after 1 + i*10/N ms. Go's closest equivalent of uv_timer_start is time.AfterFunc: a timer
//     in the runtime's timer heap whose expiry runs a function (Go runs it in a new goroutine,
//     which is part of Go's cost and is counted). The function counts; the last one to fire
//     wakes main. Result: ms from before the first AfterFunc to the last firing. (One goroutine
//     per timer calling time.Sleep would be the other reading; it costs a goroutine stack per
//     pending timer, 10M of them, and measures goroutines more than timers.)
//
// threadpool_roundtrip is not implemented: Go has no thread pool for user jobs. Handing a job to
// another goroutine at GOMAXPROCS=1 never leaves the thread (a channel round trip, not a pool
// round trip), and a goroutine locked to its own OS thread still needs the single P to run, so
// the "job" would take the scheduler away from the caller instead of running beside it. Neither
// measures what uv_queue_work or weft's pool do, so the cell stays empty.

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

func report(name, unit string, value float64) {
	fmt.Printf("RESULT %s %s %.3f\n", name, unit, value)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: main --port N [--mode echo|sink] | main [--smoke] [--only timers]")
	os.Exit(2)
}

func main() {
	runtime.GOMAXPROCS(1)
	port, mode, smoke, only := -1, "echo", false, ""
	arguments := os.Args[1:]
	for index := 0; index < len(arguments); index++ {
		switch {
		case arguments[index] == "--smoke":
			smoke = true
		case arguments[index] == "--port" && index+1 < len(arguments):
			index++
			value, err := strconv.Atoi(arguments[index])
			if err != nil {
				usage()
			}
			port = value
		case arguments[index] == "--mode" && index+1 < len(arguments):
			index++
			mode = arguments[index]
			if mode != "echo" && mode != "sink" {
				usage()
			}
		case arguments[index] == "--only" && index+1 < len(arguments):
			index++
			only = arguments[index]
		default:
			usage()
		}
	}
	if port >= 0 {
		serve(port, mode)
		return
	}
	wants := func(name string) bool {
		if only == "" {
			return true
		}
		for _, wanted := range strings.Split(only, ",") {
			if wanted == name {
				return true
			}
		}
		return false
	}
	if wants("timers") {
		timers(smoke)
	}
}

// ---- servers ---------------------------------------------------------------------------------

var sunk atomic.Uint64

func serve(port int, mode string) {
	listener, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "go server:", err)
		os.Exit(1)
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		if mode == "sink" {
			fmt.Fprintf(os.Stderr, "go server: sink read %d bytes\n", sunk.Load())
		}
		os.Exit(0)
	}()
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "READY %d\n", listener.Addr().(*net.TCPAddr).Port)
	out.Flush()
	for {
		conn, err := listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if mode == "sink" {
			go sink(conn)
		} else {
			go echo(conn)
		}
	}
}

func echo(conn net.Conn) {
	defer conn.Close()
	buffer := make([]byte, 64*1024)
	for {
		n, err := conn.Read(buffer)
		if n > 0 {
			if _, werr := conn.Write(buffer[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func sink(conn net.Conn) {
	defer conn.Close()
	buffer := make([]byte, 64*1024)
	for {
		n, err := conn.Read(buffer)
		sunk.Add(uint64(n))
		if err != nil {
			return
		}
	}
}

// ---- timers ----------------------------------------------------------------------------------

func timers(smoke bool) {
	count := int64(10_000_000)
	if smoke {
		count = 100_000
	}
	const spreadMs = 10
	var fired atomic.Int64
	done := make(chan struct{})
	fire := func() {
		if fired.Add(1) == count {
			close(done)
		}
	}
	start := time.Now()
	for index := int64(0); index < count; index++ {
		time.AfterFunc(time.Duration(1+index*spreadMs/count)*time.Millisecond, fire)
	}
	<-done
	report("timers", "ms", float64(time.Since(start).Nanoseconds())/1e6)
}
