// The yield workload in Go: G goroutines each call runtime.Gosched 1e6/G times.
// Usage: yield [goroutines] [rounds] [total yields]
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
)

func main() {
	g, rounds := 1000, 5
	if len(os.Args) > 1 {
		g, _ = strconv.Atoi(os.Args[1])
	}
	if len(os.Args) > 2 {
		rounds, _ = strconv.Atoi(os.Args[2])
	}
	total := 1000000
	if len(os.Args) > 3 {
		total, _ = strconv.Atoi(os.Args[3])
	}
	per := total / g
	for r := 0; r < rounds; r++ {
		var wg sync.WaitGroup
		wg.Add(g)
		start := time.Now()
		for i := 0; i < g; i++ {
			go func() {
				for j := 0; j < per; j++ {
					runtime.Gosched()
				}
				wg.Done()
			}()
		}
		wg.Wait()
		el := time.Since(start)
		fmt.Printf("yield procs=%d goroutines=%d: %.1f ns/yield\n", runtime.GOMAXPROCS(0), g, float64(el.Nanoseconds())/float64(g*per))
	}
}
