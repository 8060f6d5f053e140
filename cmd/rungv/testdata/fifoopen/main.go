// Command fifoopen is a guest program for TestFIFOOpenRestarted: a thread
// blocks in open(2) of a FIFO for writing, gets SIGUSR1s whose handler has
// SA_RESTART (Go installs every handler so), and then a reader opens the
// other end. On Linux the open is restarted and succeeds; it prints "ok",
// else the open's error. It calls open(2) itself (syscall.Open): package
// os would retry an EINTR and hide it.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

func main() {
	path := "/tmp/fifoopen.fifo"
	os.Remove(path)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		fmt.Println("mkfifo:", err)
		os.Exit(1)
	}
	signal.Notify(make(chan os.Signal, 64), syscall.SIGUSR1)
	tids := make(chan int)
	res := make(chan error)
	go func() {
		runtime.LockOSThread()
		tids <- syscall.Gettid()
		fd, err := syscall.Open(path, syscall.O_WRONLY, 0)
		if err == nil {
			syscall.Close(fd)
		}
		res <- err
	}()
	tid := <-tids
	time.Sleep(200 * time.Millisecond) // the open blocks meanwhile
	for i := 0; i < 10; i++ {
		if err := syscall.Tgkill(os.Getpid(), tid, syscall.SIGUSR1); err != nil {
			fmt.Println("tgkill:", err)
			os.Exit(1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case err := <-res:
		fmt.Println("open returned before any reader:", err)
		os.Exit(1)
	default:
	}
	r, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		fmt.Println("open for reading:", err)
		os.Exit(1)
	}
	defer syscall.Close(r)
	select {
	case err := <-res:
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(1)
		}
	case <-time.After(10 * time.Second):
		fmt.Println("open still blocked 10 s after a reader came")
		os.Exit(1)
	}
	fmt.Println("ok")
}
