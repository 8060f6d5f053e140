package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"z.gfire.dev/gvx/pkg/gvx"
)

// -mode density: how many idle Docker episodes this machine holds before
// anything degrades (issue 16, part 4). Episodes are restored from one
// checkpoint of a booted daemon (the fastest way to many), step at a time,
// two restores at once, and kept; after each step, with every daemon idle,
// it measures what a user would feel: the host's MemAvailable and the PSS
// of all episodes, the CPU the idle episodes' own processes use (and the
// host's busy share, which other work on the machine is in too), the
// latency of one GET /info into a few of the idle episodes (one at a
// time), and the step's own restores (restore → docker info). It stops at
// -c episodes, once MemAvailable is below -reserve, or at the first
// failure, and prints one JSON line per step, then the usual result line.
type densityStep struct {
	Mode      string  `json:"mode"`
	Episodes  int     `json:"episodes"`
	MemAvail  int64   `json:"mem_available_bytes"`
	PSSEach   int64   `json:"pss_per_episode_bytes"`
	CPUBusy   float64 `json:"idle_cpu_busy"`  // 0..1 of all CPUs, over the idle window
	EpCPU     float64 `json:"episodes_cpu"`   // the CPUs the episodes' own processes used then (1 = one CPU)
	InfoP50   float64 `json:"info_p50_ms"`    // one GET /info at a time into sampled idle episodes
	InfoMax   float64 `json:"info_max_ms"`    //
	Restore50 float64 `json:"restore_p50_ms"` // this step's restores, clone → docker info
	Error     string  `json:"error,omitempty"`
}

// liveEpisode is one restored episode a density run keeps.
type liveEpisode struct {
	sb     *gvx.Sandbox
	sock   string
	exited chan struct{}
}

// densityReserve is the MemAvailable below which no further step starts.
var densityReserve int64 = 4 << 30 // -reserve

func density(ctx context.Context, golden, scratch, image string, maxN, step int) (result, error) {
	ck, cleanup, err := bootCheckpoint(ctx, golden, scratch, image)
	defer cleanup()
	if err != nil {
		return result{}, err
	}
	var eps []liveEpisode
	defer func() {
		for i, e := range eps {
			e.sb.Close()
			<-e.exited
			os.Remove(e.sock)
			os.Remove(filepath.Join(scratch, fmt.Sprintf("density-%d.ext4", i)))
		}
	}()
	var mu sync.Mutex
	restoreOne := func(i int) (time.Duration, error) {
		vol := filepath.Join(scratch, fmt.Sprintf("density-%d.ext4", i))
		sock := filepath.Join(scratch, fmt.Sprintf("density-%d.sock", i))
		t0 := time.Now()
		sb, err := ck.Restore(ctx, []string{vol}, gvx.Config{Ports: []gvx.Port{{HostSocket: sock}}})
		if err != nil {
			os.Remove(vol)
			return 0, err
		}
		e := liveEpisode{sb: sb, sock: sock, exited: make(chan struct{})}
		go func() { _, _ = sb.Run(ctx); close(e.exited) }()
		mu.Lock()
		eps = append(eps, e)
		mu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		if err := gvx.WaitDocker(wctx, sock, e.exited); err != nil {
			return 0, fmt.Errorf("restored daemon %d: %w", i, err)
		}
		return time.Since(t0), nil
	}
	out := json.NewEncoder(os.Stdout)
	// Step 0: the machine before any episode (other work on it shows here).
	_ = out.Encode(densityStep{Mode: "density-step", MemAvail: memAvailable(), CPUBusy: cpuBusy(5 * time.Second)})
	var last densityStep
	for n := 0; n < maxN; {
		if a := memAvailable(); a > 0 && a < densityReserve {
			break
		}
		k := min(step, maxN-n)
		times := make([]time.Duration, k)
		errs := make([]error, k)
		next := make(chan int, k)
		for i := range k {
			next <- n + i
		}
		close(next)
		var wg sync.WaitGroup
		for range 2 { // two restores at a time: the machine's CPUs
			wg.Go(func() {
				for i := range next {
					times[i-n], errs[i-n] = restoreOne(i)
				}
			})
		}
		wg.Wait()
		n += k
		st := densityStep{Mode: "density-step", Episodes: n}
		for _, err := range errs {
			if err != nil {
				st.Error = err.Error()
				break
			}
		}
		if st.Error == "" {
			st.Restore50 = ms(quantiles(times).P50)
			time.Sleep(3 * time.Second) // let the restored daemons settle
			roots := make([]int, len(eps))
			for i, e := range eps {
				roots[i] = e.sb.Pid()
			}
			t0, c0 := time.Now(), episodesCPU(roots)
			st.CPUBusy = cpuBusy(5 * time.Second)
			st.EpCPU = (episodesCPU(roots) - c0).Seconds() / time.Since(t0).Seconds()
			st.InfoP50, st.InfoMax, err = sampleInfo(ctx, eps)
			if err != nil {
				st.Error = err.Error()
			}
			var sum int64
			for _, e := range eps {
				m, _ := e.sb.Memory()
				sum += m
			}
			st.PSSEach = sum / int64(len(eps))
			st.MemAvail = memAvailable()
		}
		_ = out.Encode(st)
		last = st
		if st.Error != "" {
			return result{N: n}, fmt.Errorf("at %d episodes: %s", n, st.Error)
		}
	}
	return result{N: last.Episodes, P50: last.InfoP50, Max: last.InfoMax, PSSPerEpisode: last.PSSEach}, nil
}

// sampleInfo times one GET /info at a time into up to 8 episodes spread
// over eps.
func sampleInfo(ctx context.Context, eps []liveEpisode) (p50ms, maxms float64, err error) {
	var ds []time.Duration
	k := min(8, len(eps))
	for j := range k {
		e := eps[j*len(eps)/k]
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		t0 := time.Now()
		err := gvx.WaitDocker(wctx, e.sock, e.exited)
		cancel()
		if err != nil {
			return 0, 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	q := quantiles(ds)
	return ms(q.P50), ms(q.Max), nil
}

// quantiles are ds's, as gvx.Summarize computes the other rows' (one
// claim per duration).
func quantiles(ds []time.Duration) gvx.Quantiles {
	m := make([]gvx.Metrics, len(ds))
	for i, d := range ds {
		m[i] = gvx.Metrics{Claim: d}
	}
	return gvx.Summarize(m, 1, 0).Claim
}

// episodesCPU is the CPU time the processes at roots and below have
// used so far (treeCPU of each).
func episodesCPU(roots []int) time.Duration {
	var sum time.Duration
	for _, r := range roots {
		sum += treeCPU(r)
	}
	return sum
}

// cpuBusy is the share of all CPUs' time not idle over d (/proc/stat).
func cpuBusy(d time.Duration) float64 {
	b0, t0 := cpuTimes()
	time.Sleep(d)
	b1, t1 := cpuTimes()
	if t1 <= t0 {
		return -1
	}
	return float64(b1-b0) / float64(t1-t0)
}

func cpuTimes() (busy, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		if i >= 8 { // guest, guest_nice: already in user
			break
		}
		total += n
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return busy, total
}
