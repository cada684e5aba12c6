// gowork: a CPU-bound Go program for tests/e2e/unwind_test.sh. Two
// goroutines hash and sort; built stripped (-ldflags='-s -w').
// usage: gowork [SECONDS]
package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"
)

//go:noinline
func hashLoop(seed byte, deadline time.Time) int {
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = seed + byte(i)
	}
	n := 0
	for time.Now().Before(deadline) {
		sum := sha256.Sum256(buf)
		buf[n%len(buf)] ^= sum[0]
		n++
	}
	return n
}

//go:noinline
func sortLoop(deadline time.Time) int {
	v := make([]int, 2000)
	n := 0
	for time.Now().Before(deadline) {
		for i := range v {
			v[i] = (i*7919 + n) % 1000
		}
		sort.Ints(v)
		n++
	}
	return n
}

func main() {
	seconds := 10.0
	if len(os.Args) > 1 {
		if s, err := strconv.ParseFloat(os.Args[1], 64); err == nil {
			seconds = s
		}
	}
	deadline := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	var wg sync.WaitGroup
	results := make([]int, 2)
	wg.Add(2)
	go func() { defer wg.Done(); results[0] = hashLoop(1, deadline) }()
	go func() { defer wg.Done(); results[1] = sortLoop(deadline) }()
	wg.Wait()
	fmt.Println(results[0], results[1])
}
