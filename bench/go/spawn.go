// The spawn workload in Go: 1,000,000 goroutines each count a WaitGroup down.
// Usage: spawn [rounds] [goroutines]
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
	rounds := 5
	if len(os.Args) > 1 {
		rounds, _ = strconv.Atoi(os.Args[1])
	}
	N := 1000000
	if len(os.Args) > 2 {
		N, _ = strconv.Atoi(os.Args[2])
	}
	for r := 0; r < rounds; r++ {
		var wg sync.WaitGroup
		wg.Add(N)
		start := time.Now()
		for i := 0; i < N; i++ {
			go func() { wg.Done() }()
		}
		wg.Wait()
		el := time.Since(start)
		fmt.Printf("spawn procs=%d: %.1f ns/goroutine\n", runtime.GOMAXPROCS(0), float64(el.Nanoseconds())/float64(N))
	}
}
