package serve

import "sync"

// cpuPins hands each episode the host CPU with the fewest live episodes
// (Config.PinCPUs); ties go to the lowest CPU.
type cpuPins struct {
	mu   sync.Mutex
	cpus []int
	load []int // live episodes per cpus[i]
}

func newCPUPins(cpus []int) *cpuPins {
	return &cpuPins{cpus: cpus, load: make([]int, len(cpus))}
}

// take returns the least-loaded CPU and counts an episode on it.
func (p *cpuPins) take() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	best := 0
	for i, l := range p.load {
		if l < p.load[best] {
			best = i
		}
	}
	p.load[best]++
	return p.cpus[best]
}

// put gives back a CPU take returned.
func (p *cpuPins) put(cpu int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range p.cpus {
		if c == cpu && p.load[i] > 0 {
			p.load[i]--
			return
		}
	}
}

// pin gives e a host CPU for its sandbox (nil without Config.PinCPUs);
// teardown gives it back.
func (s *Server) pin(e *episode) []int {
	if s.pins == nil {
		return nil
	}
	c := s.pins.take()
	e.mu.Lock()
	e.hostCPU = c
	e.mu.Unlock()
	return []int{c}
}

// unpin gives back e's host CPU, once.
func (s *Server) unpin(e *episode) {
	e.mu.Lock()
	c := e.hostCPU
	e.hostCPU = -1
	e.mu.Unlock()
	if s.pins != nil && c >= 0 {
		s.pins.put(c)
	}
}
