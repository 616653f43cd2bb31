// Peer: Go channels and sync.Mutex. bench/run.py builds this with `go build` and runs it with
// GOMAXPROCS=1 (one thread runs goroutines, like weft's one scheduler per thread) pinned to one
// core. Every benchmark runs once untimed at a tenth of its size (warm-up), then timed; the
// timed span runs from before the first goroutine is started to after the last one has ended.
//
// channel_pingpong: main and one goroutine, two unbuffered channels (make(chan int64)). Main
//   sends i on ping and receives on pong; the goroutine receives on ping and sends the value + 1
//   back on pong; N round trips. A hand-off is one value passing from a sender to a receiver
//   (a round trip is two). ns per hand-off = wall time / (2 N). Main checks every reply.
//
// channel_buffered_throughput: one goroutine sends 0..N-1 into a channel of capacity 1024
//   (make(chan int64, 1024)); main receives N values and checks their sum. ns per value = wall
//   time / N.
//
// mutex_handoff_2, mutex_handoff_100: K goroutines (2 or 100) share one sync.Mutex and run M
//   rounds each of: Lock; check nobody else is inside and mark inside; counter++;
//   runtime.Gosched() (yield while holding the lock, so every other goroutine gets to try it and
//   blocks); unmark; Unlock; runtime.Gosched() (yield after unlocking, so the woken waiter takes
//   the lock before the releaser can lock again). Every acquisition is contended and (nearly)
//   every one passes the lock to a waiter. ns per acquisition = wall time / (K M). main checks counter == K M and
//   prints to stderr how many acquisitions changed the owner (a cross-check of the hand-off).
//   (sync.Mutex hands the lock over directly only in its starvation mode, after a waiter has
//   waited 1 ms; the yield after Unlock gives the same outcome in normal mode: at GOMAXPROCS=1
//   the goroutine woken by Unlock runs next and takes the free lock.)
//
// Sizes: keep in step with bench/sync/weft_sync.cpp and bench/peers/sync/boost_fiber.cpp.

package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
)

type sizes struct {
	roundTrips     int64 // channel_pingpong
	bufferedValues int64 // channel_buffered_throughput
	acquisitions   int64 // mutex_handoff_*: total lock acquisitions, K M
	bufferCapacity int
}

func sizesFor(smoke bool) sizes {
	if smoke {
		return sizes{10_000, 100_000, 10_000, 1024}
	}
	return sizes{1_000_000, 10_000_000, 1_000_000, 1024}
}

func report(name, unit string, value float64) {
	fmt.Printf("RESULT %s %s %.3f\n", name, unit, value)
}

func fail(format string, values ...any) {
	fmt.Fprintf(os.Stderr, "bench_sync_go: "+format+"\n", values...)
	os.Exit(1)
}

func channelPingpong(roundTrips int64) time.Duration {
	ping := make(chan int64)
	pong := make(chan int64)
	done := make(chan struct{})
	start := time.Now()
	go func() {
		for round := int64(0); round < roundTrips; round++ {
			value := <-ping
			pong <- value + 1
		}
		close(done)
	}()
	for round := int64(0); round < roundTrips; round++ {
		ping <- round
		if reply := <-pong; reply != round+1 {
			fail("channel_pingpong: sent %d, got %d back", round, reply)
		}
	}
	<-done
	return time.Since(start)
}

func channelBufferedThroughput(values int64, capacity int) time.Duration {
	channel := make(chan int64, capacity)
	done := make(chan struct{})
	start := time.Now()
	go func() {
		for value := int64(0); value < values; value++ {
			channel <- value
		}
		close(done)
	}()
	sum := int64(0)
	for index := int64(0); index < values; index++ {
		sum += <-channel
	}
	<-done
	elapsed := time.Since(start)
	if expected := values * (values - 1) / 2; sum != expected {
		fail("channel_buffered_throughput: sum %d, expected %d", sum, expected)
	}
	return elapsed
}

func mutexHandoff(contenders, rounds int64) time.Duration {
	var mutex sync.Mutex
	var finished sync.WaitGroup
	inside := false
	counter := int64(0)
	lastOwner := int64(-1)
	ownerChanges := int64(0)
	finished.Add(int(contenders))
	start := time.Now()
	for index := int64(0); index < contenders; index++ {
		go func(owner int64) {
			for round := int64(0); round < rounds; round++ {
				mutex.Lock()
				if inside {
					fail("mutex_handoff: two goroutines inside the critical section")
				}
				inside = true
				counter++
				if owner != lastOwner {
					ownerChanges++
					lastOwner = owner
				}
				runtime.Gosched()
				inside = false
				mutex.Unlock()
				runtime.Gosched()
			}
			finished.Done()
		}(index)
	}
	finished.Wait()
	elapsed := time.Since(start)
	fmt.Fprintf(os.Stderr, "# mutex_handoff_%d: %d of %d acquisitions changed owner\n", contenders,
		ownerChanges, counter)
	if counter != contenders*rounds {
		fail("mutex_handoff: counter %d, expected %d", counter, contenders*rounds)
	}
	return elapsed
}

func perUnit(elapsed time.Duration, units int64) float64 {
	return float64(elapsed.Nanoseconds()) / float64(units)
}

func main() {
	smoke := false
	var only []string
	arguments := os.Args[1:]
	for index := 0; index < len(arguments); index++ {
		switch {
		case arguments[index] == "--smoke":
			smoke = true
		case arguments[index] == "--only" && index+1 < len(arguments):
			index++
			only = strings.Split(arguments[index], ",")
		default:
			fmt.Fprintf(os.Stderr, "usage: %s [--smoke] [--only benchmark[,benchmark...]]\n", os.Args[0])
			os.Exit(2)
		}
	}
	wants := func(name string) bool {
		if len(only) == 0 {
			return true
		}
		for _, wanted := range only {
			if wanted == name {
				return true
			}
		}
		return false
	}
	if runtime.GOMAXPROCS(0) != 1 {
		fmt.Fprintf(os.Stderr, "# bench_sync_go: GOMAXPROCS=%d (run.py sets 1)\n", runtime.GOMAXPROCS(0))
	}
	s := sizesFor(smoke)

	if wants("channel_pingpong") {
		channelPingpong(s.roundTrips / 10)
		elapsed := channelPingpong(s.roundTrips)
		report("channel_pingpong", "ns", perUnit(elapsed, 2*s.roundTrips))
	}
	if wants("channel_buffered_throughput") {
		channelBufferedThroughput(s.bufferedValues/10, s.bufferCapacity)
		elapsed := channelBufferedThroughput(s.bufferedValues, s.bufferCapacity)
		report("channel_buffered_throughput", "ns", perUnit(elapsed, s.bufferedValues))
	}
	for _, contenders := range []int64{2, 100} {
		name := fmt.Sprintf("mutex_handoff_%d", contenders)
		if wants(name) {
			rounds := s.acquisitions / contenders
			mutexHandoff(contenders, rounds/10)
			elapsed := mutexHandoff(contenders, rounds)
			report(name, "ns", perUnit(elapsed, contenders*rounds))
		}
	}
}
