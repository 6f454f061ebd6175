// Skynet in Go (atemerev/skynet): 10-ary tree, 1,000,000 leaves, channels.
package main

import (
	"fmt"
	"runtime"
	"time"
)

func skynet(c chan int, num int, size int, div int) {
	if size == 1 {
		c <- num
		return
	}
	rc := make(chan int)
	var sum int
	for i := 0; i < div; i++ {
		subNum := num + i*(size/div)
		go skynet(rc, subNum, size/div, div)
	}
	for i := 0; i < div; i++ {
		sum += <-rc
	}
	c <- sum
}

func main() {
	for r := 0; r < 3; r++ {
		c := make(chan int)
		start := time.Now()
		go skynet(c, 0, 1000000, 10)
		result := <-c
		took := time.Since(start)
		if result != 499999500000 {
			panic("wrong")
		}
		fmt.Printf("skynet procs=%d: %d ms\n", runtime.GOMAXPROCS(0), took.Milliseconds())
	}
}
