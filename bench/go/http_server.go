// The Go server of the bench tool's http workload (bench/src/workloads/
// http.rs): net/http on 127.0.0.1 answering every request with 200,
// Content-Type text/plain, body "Hello, World!\n" (keep-alive, one
// goroutine per connection, as net/http does). Prints "PORT\t<port>" and
// serves until its stdin closes. The load is wrk, in another process.
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
)

var body = []byte("Hello, World!\n")

func main() {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur < rl.Max {
		rl.Cur = rl.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	fmt.Printf("PORT\t%d\n", ln.Addr().(*net.TCPAddr).Port)
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	})
	panic(http.Serve(ln, hello))
}
