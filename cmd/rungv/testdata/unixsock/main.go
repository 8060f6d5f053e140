// Command unixsock binds a unix socket at the path it is given, connects to
// it, and prints what the listener sent and the path's file mode: a guest
// program for TestVolumeUnixSocket (busybox has no unix-socket client).
package main

import (
	"fmt"
	"net"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: unixsock PATH")
		os.Exit(2)
	}
	p := os.Args[1]
	l, err := net.Listen("unix", p)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Write([]byte("pong"))
			c.Close()
		}
	}()
	c, err := net.Dial("unix", p)
	if err != nil {
		fmt.Println("dial:", err)
		os.Exit(1)
	}
	b := make([]byte, 4)
	n, _ := c.Read(b)
	fi, err := os.Lstat(p)
	if err != nil {
		fmt.Println("lstat:", err)
		os.Exit(1)
	}
	fmt.Println(string(b[:n]), fi.Mode().Type() == os.ModeSocket)
}
