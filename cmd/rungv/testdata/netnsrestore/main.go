// Command netnsrestore is the guest of TestRestoreManyNetns: what many
// containers' network namespaces hold when an episode is saved. It makes
// -n network namespaces, each held by one locked thread that unshared it,
// with -l TCP listeners, -b bound sockets and one connected pair on its
// loopback. It prints "ready" (the checkpoint is taken then), sleeps
// -wait, and then, in every namespace, connects to each listener, sends
// a line over the connected pair and reads it on the other end. It
// prints "ok N" when every namespace answered, else what failed and
// exits 1. Before the sleep ends on the saved side, the episode is gone;
// the restored one wakes up and checks.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"syscall"
	"time"
)

// netns is one namespace's sockets; its thread runs do, one at a time.
type netns struct {
	do        chan func()
	listeners []net.Listener
	bound     []int
	a, b      net.Conn
}

func main() {
	n := flag.Int("n", 16, "network namespaces")
	l := flag.Int("l", 8, "TCP listeners per namespace")
	bnd := flag.Int("b", 4, "bound, not listening, TCP sockets per namespace")
	pair := flag.Bool("pair", true, "a connected pair per namespace")
	wait := flag.Duration("wait", 3*time.Second, "sleep after ready")
	flag.Parse()
	var all []*netns
	for i := range *n {
		ns, err := newNetns(*l, *bnd, *pair)
		if err != nil {
			fmt.Printf("namespace %d: %v\n", i, err)
			os.Exit(1)
		}
		all = append(all, ns)
	}
	fmt.Println("ready")
	time.Sleep(*wait)
	for i, ns := range all {
		if err := ns.check(); err != nil {
			fmt.Printf("namespace %d after the sleep: %v\n", i, err)
			os.Exit(1)
		}
	}
	fmt.Println("ok", len(all))
}

// newNetns starts a thread in a namespace of its own and makes its
// sockets there.
func newNetns(listeners, bound int, pair bool) (*netns, error) {
	ns := &netns{do: make(chan func())}
	errc := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with its namespace
		errc <- syscall.Unshare(syscall.CLONE_NEWNET)
		for f := range ns.do {
			f()
		}
	}()
	if err := <-errc; err != nil {
		return nil, fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
	}
	var err error
	ns.run(func() { err = ns.open(listeners, bound, pair) })
	return ns, err
}

// run runs f on ns's thread.
func (ns *netns) run(f func()) {
	done := make(chan struct{})
	ns.do <- func() { f(); close(done) }
	<-done
}

func (ns *netns) open(listeners, bound int, pair bool) error {
	for range listeners {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		ns.listeners = append(ns.listeners, ln)
	}
	for range bound {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
		if err != nil {
			return err
		}
		if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return fmt.Errorf("bind: %w", err)
		}
		ns.bound = append(ns.bound, fd)
	}
	if !pair {
		return nil
	}
	var err error
	if ns.a, err = net.Dial("tcp4", ns.listeners[0].Addr().String()); err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	ns.b, err = ns.listeners[0].Accept()
	return err
}

// check connects to every listener and sends a line over the pair.
func (ns *netns) check() error {
	var err error
	ns.run(func() {
		for _, ln := range ns.listeners {
			c, e := net.DialTimeout("tcp4", ln.Addr().String(), 5*time.Second)
			if e != nil {
				err = fmt.Errorf("dial %s: %w", ln.Addr(), e)
				return
			}
			c.Close()
		}
		if ns.a == nil {
			return
		}
		if _, e := fmt.Fprintln(ns.a, "across"); e != nil {
			err = fmt.Errorf("write on the connected pair: %w", e)
			return
		}
		ns.b.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, e := bufio.NewReader(ns.b).ReadString('\n')
		if e != nil || line != "across\n" {
			err = fmt.Errorf("read on the connected pair: %q, %v", line, e)
		}
	})
	return err
}
