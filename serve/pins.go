package serve

import (
	"fmt"
	"sync"

	"z.gfire.dev/gvx/internal/hostcpu"
)

// PinMode says when an episode's host processes run on one host CPU
// (Config.PinCPUs).
type PinMode string

const (
	// PinPacked pins every live episode once they are at least as many
	// as the CPUs the server may use: on a node that full, one CPU is
	// each episode's share anyway, and pinned it costs less. The episode
	// that fills the node pins those that ran on all CPUs (their
	// processes are moved); later ones are pinned from their start. The
	// default ("").
	PinPacked PinMode = "packed"
	// PinAlways pins every episode: one episode never uses more than one
	// host CPU.
	PinAlways PinMode = "always"
	// PinNever pins none.
	PinNever PinMode = "never"
)

// ParsePinMode parses --pin-cpus: packed (or empty), always or never.
func ParsePinMode(s string) (PinMode, error) {
	switch m := PinMode(s); m {
	case "", PinPacked:
		return PinPacked, nil
	case PinAlways, PinNever:
		return m, nil
	}
	return "", fmt.Errorf("pin mode %q: want packed (pin once live episodes are as many as the CPUs), always or never", s)
}

// cpuPins counts the server's live episodes and the CPU each is pinned
// to, handing out the host CPU with the fewest pinned live episodes; ties
// go to the lowest CPU.
type cpuPins struct {
	mu     sync.Mutex
	always bool
	cpus   []int
	load   []int      // pinned live episodes per cpus[i]
	live   []*episode // in the order they came
	cpu    map[*episode]int
}

func newCPUPins(cpus []int, always bool) *cpuPins {
	return &cpuPins{cpus: cpus, always: always, load: make([]int, len(cpus)), cpu: map[*episode]int{}}
}

// take counts e as live and returns the CPU to pin it to, or -1 where it
// runs on all of them. The episode that makes the node full (PinPacked)
// pins every live one that still runs on all CPUs as well, oldest first,
// before itself: moved are those, to be moved (Server.move).
func (p *cpuPins) take(e *episode) (cpu int, moved []*episode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live = append(p.live, e)
	p.cpu[e] = -1
	if !p.always && len(p.live) < len(p.cpus) {
		return -1, nil
	}
	for _, o := range p.live {
		if p.cpu[o] < 0 {
			p.cpu[o] = p.leastLocked()
			if o != e {
				moved = append(moved, o)
			}
		}
	}
	return p.cpu[e], moved
}

// leastLocked counts one more episode on the least-loaded CPU and
// returns it.
func (p *cpuPins) leastLocked() int {
	best := 0
	for i, l := range p.load {
		if l < p.load[best] {
			best = i
		}
	}
	p.load[best]++
	return p.cpus[best]
}

// cpuOf is the CPU e is pinned to now (-1: all of them, or not live).
func (p *cpuPins) cpuOf(e *episode) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.cpu[e]; ok {
		return c
	}
	return -1
}

// put counts e as ended, giving back its CPU; an episode that is not
// live is ignored. One that stays live keeps its CPU.
func (p *cpuPins) put(e *episode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.cpu[e]
	if !ok {
		return
	}
	delete(p.cpu, e)
	for i, o := range p.live {
		if o == e {
			p.live = append(p.live[:i], p.live[i+1:]...)
			break
		}
	}
	for i, x := range p.cpus {
		if x == c && p.load[i] > 0 {
			p.load[i]--
			return
		}
	}
}

// pin counts e as live and gives it a host CPU for its sandbox, if
// Config.PinCPUs says so (nil: all of them); teardown's unpin undoes it.
// Episodes that were running on all CPUs and are pinned now that e makes
// the node full are moved there.
func (s *Server) pin(e *episode) []int {
	if s.pins == nil {
		return nil
	}
	c, moved := s.pins.take(e)
	e.mu.Lock()
	e.hostCPU = c
	e.mu.Unlock()
	for _, o := range moved {
		s.move(o)
	}
	if c < 0 {
		return nil
	}
	return []int{c}
}

// move puts e's running sandbox on the CPU it is pinned to now, if it
// started on another. Both pin (for episodes it pinned later) and launch
// (once the sandbox's process exists) call it; whichever comes second
// finds the sandbox and moves it.
func (s *Server) move(e *episode) {
	if s.pins == nil {
		return
	}
	c := s.pins.cpuOf(e)
	e.mu.Lock()
	defer e.mu.Unlock()
	if c < 0 || c == e.hostCPU || e.sb == nil || e.sb.Pid() == 0 {
		return
	}
	if err := e.sb.SetHostCPUs([]int{c}); err != nil {
		s.cfg.Logf("episode %s: moving its processes to CPU %d: %v", e.id, c, err)
		return
	}
	e.hostCPU = c
}

// unpin counts e as ended and gives back its host CPU.
func (s *Server) unpin(e *episode) {
	if s.pins != nil {
		s.pins.put(e)
	}
}

// newPins makes the server's CPU pins for mode: nil where it pins none
// (never; packed where there is one CPU or none can be listed).
func newPins(mode PinMode) (*cpuPins, error) {
	mode, err := ParsePinMode(string(mode))
	if err != nil {
		return nil, fmt.Errorf("serve: --pin-cpus: %w", err)
	}
	if mode == PinNever {
		return nil, nil
	}
	cpus, err := hostcpu.Allowed()
	switch {
	case err != nil && mode == PinAlways:
		return nil, fmt.Errorf("serve: --pin-cpus always: %w", err)
	case err != nil, len(cpus) < 2 && mode == PinPacked:
		return nil, nil
	}
	return newCPUPins(cpus, mode == PinAlways), nil
}
