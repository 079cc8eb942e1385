// Package impure is a fixture for the purity test: it breaks every rule once.
package impure

import (
	"log"
	"log/slog"
	"maps"
	"math/rand"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

var pool sync.Pool

var logger *slog.Logger

var counter atomic.Int64

func Sins(m map[string]int) int {
	_ = os.Getpid()
	_ = unix.Getpid()
	_ = time.Now()
	time.Sleep(time.Millisecond)
	ch := make(chan int)
	go func() { ch <- rand.Int() }()
	select {
	case <-ch:
	case <-time.After(time.Second):
	}
	total := 0
	for _, v := range m {
		total += v
	}
	for k := range maps.Keys(m) {
		total += len(k)
	}
	for v := range maps.Values(m) {
		total += v
	}
	for k, v := range maps.All(m) {
		total += len(k) + v
	}
	for _, k := range slices.Collect(maps.Keys(m)) { // a slice in map order
		total += len(k)
	}
	for _, k := range slices.Sorted(maps.Keys(m)) { // sorted: fine
		total += len(k)
	}
	counter.Add(int64(total))
	pool.Put(total)
	log.Print(total)
	slog.Info("total", slog.Int("total", total))
	return total
}
