// Peer: Go goroutines. bench/run.py builds this with `go build` and runs it with GOMAXPROCS=1
// (one thread runs goroutines, like weft's one scheduler per thread) pinned to one core.
//
// yield_switch: two goroutines call runtime.Gosched() in a loop, main waits on a WaitGroup; ns
// per switch = timed wall time / number of Gosched calls.
//
// spawn_run_complete: batches of goroutines whose only work is wg.Done() (Go has no handle to
// join, and at GOMAXPROCS=1 the newest goroutine runs first, so the batch needs a WaitGroup);
// main waits per batch; ns = wall time / count.
//
// suspended_memory: N goroutines block receiving from one channel; RSS from /proc/self/statm
// before starting them and once all are blocked; bytes per goroutine = RSS delta / N. Closing
// the channel releases them.
//
// sleep_timers: N goroutines time.Sleep a duration from the shared splitmix64 draw (the same
// durations as every other program); result = wall time from before the first spawn to the
// end of wg.Wait(), minus the longest drawn sleep, in ms.

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
	switches, warmupSwitches, spawnBatches, spawnBatch, suspended, sleepers, maxSleepMs uint64
}

// Keep in step with bench/common/bench_util.hpp.
func sizesFor(smoke bool) sizes {
	if smoke {
		return sizes{100_000, 10_000, 10, 1000, 10_000, 10_000, 50}
	}
	return sizes{10_000_000, 100_000, 1000, 1000, 1_000_000, 1_000_000, 1000}
}

func report(name, unit string, value float64) {
	fmt.Printf("RESULT %s %s %.3f\n", name, unit, value)
}

func residentBytes() uint64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		panic(err)
	}
	var size, resident uint64
	if _, err := fmt.Sscan(string(data), &size, &resident); err != nil {
		panic(err)
	}
	return resident * uint64(os.Getpagesize())
}

type splitmix64 struct{ state uint64 }

func (s *splitmix64) next() uint64 {
	s.state += 0x9e3779b97f4a7c15
	value := s.state
	value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9
	value = (value ^ (value >> 27)) * 0x94d049bb133111eb
	return value ^ (value >> 31)
}

const sleepSeed = 42

func timeYields(switches uint64) time.Duration {
	rounds := switches / 2
	var wg sync.WaitGroup
	wg.Add(2)
	body := func() {
		for round := uint64(0); round < rounds; round++ {
			runtime.Gosched()
		}
		wg.Done()
	}
	start := time.Now()
	go body()
	go body()
	wg.Wait()
	return time.Since(start)
}

func suspendedMemory(count uint64) {
	gate := make(chan struct{})
	var started, finished sync.WaitGroup
	started.Add(int(count))
	finished.Add(int(count))
	before := residentBytes()
	for index := uint64(0); index < count; index++ {
		go func() {
			started.Done()
			<-gate
			finished.Done()
		}()
	}
	// At GOMAXPROCS=1 main runs again only after the last goroutine marked itself started and
	// went on to block on the gate.
	started.Wait()
	runtime.Gosched()
	after := residentBytes()
	close(gate)
	finished.Wait()
	report("suspended_memory", "B", float64(after-before)/float64(count))
}

func spawnRunComplete(s sizes) {
	count := s.spawnBatches * s.spawnBatch
	var wg sync.WaitGroup
	start := time.Now()
	for batch := uint64(0); batch < s.spawnBatches; batch++ {
		wg.Add(int(s.spawnBatch))
		for index := uint64(0); index < s.spawnBatch; index++ {
			go func() { wg.Done() }()
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	report("spawn_run_complete", "ns", float64(elapsed.Nanoseconds())/float64(count))
}

func sleepTimers(s sizes) {
	random := splitmix64{sleepSeed}
	sleeps := make([]uint64, s.sleepers)
	longest := uint64(0)
	for index := range sleeps {
		sleeps[index] = random.next() % (s.maxSleepMs + 1)
		if sleeps[index] > longest {
			longest = sleeps[index]
		}
	}
	var wg sync.WaitGroup
	wg.Add(len(sleeps))
	start := time.Now()
	for _, sleep := range sleeps {
		go func(sleep uint64) {
			time.Sleep(time.Duration(sleep) * time.Millisecond)
			wg.Done()
		}(sleep)
	}
	wg.Wait()
	elapsed := time.Since(start)
	report("sleep_timers", "ms", float64(elapsed.Nanoseconds())/1e6-float64(longest))
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
	s := sizesFor(smoke)

	// Memory first: later benchmarks leave grown heaps and stack caches behind.
	if wants("suspended_memory") {
		suspendedMemory(s.suspended)
	}
	if wants("yield_switch") {
		timeYields(s.warmupSwitches)
		elapsed := timeYields(s.switches)
		report("yield_switch", "ns", float64(elapsed.Nanoseconds())/float64(s.switches))
	}
	if wants("spawn_run_complete") {
		spawnRunComplete(s)
	}
	if wants("sleep_timers") {
		sleepTimers(s)
	}
}
