package erofs

import (
	"sync"
	"sync/atomic"
)

// parallelFor calls f(0..n-1) from up to workers goroutines.
func parallelFor(n, workers int, f func(i int)) {
	workers = min(workers, n)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}
