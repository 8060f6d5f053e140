// Command readybench is bench/ready.sh's driver: it measures, for C
// episodes asked for at once, how long until each one's Docker daemon
// answers GET /info (what docker info asks) through its socket, over
// several rounds, and prints one JSON line per run.
//
// Modes:
//
//	cold   gvx.Pool without Warm: claim = clone + boot + docker info
//	warm   gvx.Pool with Warm C: each round waits until C are warm, then
//	       claims C at once; claim = handover + docker info; the
//	       replacements boot behind the claims (RefillDelay, RefillNice:
//	       the defaults)
//	warm-eager
//	       warm, the replacements booting at once at the pool's own
//	       priority (RefillDelay and RefillNice -1: before issue 16 (b))
//	host   the yardstick: a host dockerd (root) per episode, --data-root on
//	       a loop-mounted reflink clone of the same golden; exec → docker
//	       info (the clone and mount are not timed)
//	restore one checkpoint of a daemon booted on a clone of the golden,
//	       saved once its API answered (not timed); then C restores at
//	       once, each onto its own clone of the checkpoint's volume;
//	       claim = clone + restore + docker info; also the CPU the
//	       episode's processes had used when docker info answered
//	       (cpu_p50_ms: rungv, the Sentry, systrap's stubs; cputime.go)
//	warm-restore
//	       warm, the pool refilled by restores of such a checkpoint
//	       (PoolConfig.Checkpoint) instead of cold boots
//	memory W warm episodes at once: their PSS summed at one moment, and what
//	       the host's MemAvailable lost
//	memory-restore
//	       as memory, the W episodes restored at once from one checkpoint
//	       of a booted daemon (what sharing the restored pages would save)
//	density
//	       up to C idle episodes restored from one checkpoint, -step at a
//	       time, kept: after each step the host's MemAvailable, PSS per
//	       episode, the CPU the idle daemons use, and GET /info latency
//	       (density.go)
//
// It is a benchmark tool, not a library: the workflows it times are
// gvx.Pool's (Claim, WaitWarm, DockerReady, WaitDocker).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/reflink"
)

// -mode warm's PoolConfig.RefillDelay and RefillNice (0: the defaults).
var (
	refillDelay time.Duration
	refillNice  int
)

type result struct {
	Mode    string  `json:"mode"`
	C       int     `json:"c"`
	N       int     `json:"n"`
	Failed  int     `json:"failed"`
	P50     float64 `json:"p50_ms"`
	P95     float64 `json:"p95_ms"`
	Max     float64 `json:"max_ms"`
	BootP50 float64 `json:"boot_p50_ms,omitempty"`
	// restore mode: the CPU of the episode's processes at docker info
	CPUP50 float64 `json:"cpu_p50_ms,omitempty"`
	CPUP95 float64 `json:"cpu_p95_ms,omitempty"`
	// memory mode
	PSSPerEpisode     int64  `json:"pss_per_episode_bytes,omitempty"`
	AvailPerEpisode   int64  `json:"mem_available_drop_per_episode_bytes,omitempty"`
	IdlePSSAtReadyP50 int64  `json:"idle_pss_at_ready_p50_bytes,omitempty"`
	Error             string `json:"error,omitempty"`
}

func main() {
	mode := flag.String("mode", "", "cold, warm, warm-eager, warm-restore, restore, host, memory, memory-restore or density")
	golden := flag.String("golden", "", "golden /var/lib/docker volume")
	scratch := flag.String("scratch", "", "directory for the clones (the golden's filesystem)")
	image := flag.String("image", "", "daemon image (oci:DIR) for the gvx modes")
	c := flag.Int("c", 1, "episodes asked for at once")
	rounds := flag.Int("rounds", 4, "rounds of C")
	dockerd := flag.String("dockerd", "/usr/sbin/dockerd", "host dockerd for -mode host")
	flag.DurationVar(&refillDelay, "refill-delay", 0, "PoolConfig.RefillDelay for -mode warm (0: the pool's default)")
	flag.IntVar(&refillNice, "refill-nice", 0, "PoolConfig.RefillNice for -mode warm (0: the pool's default)")
	step := flag.Int("step", 16, "-mode density: episodes added per step (-c: the most)")
	reserve := flag.Int64("reserve-mib", densityReserve>>20, "-mode density: no step starts with less MemAvailable (MiB)")
	flag.Parse()
	densityReserve = *reserve << 20
	if *golden == "" || *scratch == "" || *c < 1 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "usage: readybench -mode MODE -golden FILE -scratch DIR [-image oci:DIR] [-c C] [-rounds R]")
		os.Exit(2)
	}
	ctx := context.Background()
	var r result
	var err error
	switch *mode {
	case "cold", "warm", "warm-eager":
		r, err = gvxRounds(ctx, *mode, *golden, *scratch, *image, *c, *rounds)
	case "host":
		r, err = hostRounds(ctx, *dockerd, *golden, *scratch, *c, *rounds)
	case "memory":
		r, err = memory(ctx, *golden, *scratch, *image, *c)
	case "memory-restore":
		r, err = memoryRestore(ctx, *golden, *scratch, *image, *c)
	case "restore":
		r, err = restoreRounds(ctx, *golden, *scratch, *image, *c, *rounds)
	case "warm-restore":
		r, err = gvxRounds(ctx, *mode, *golden, *scratch, *image, *c, *rounds)
	case "density":
		r, err = density(ctx, *golden, *scratch, *image, *c, *step)
	default:
		err = fmt.Errorf("unknown -mode %q", *mode)
	}
	r.Mode, r.C = *mode, *c
	if err != nil {
		r.Error = err.Error()
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
	if err != nil {
		fmt.Fprintln(os.Stderr, "readybench:", err)
		os.Exit(1)
	}
}

func poolConfig(golden, scratch, image string, warm int) gvx.PoolConfig {
	return gvx.PoolConfig{
		Golden: golden, ScratchDir: scratch, Warm: warm, Timeout: 5 * time.Minute,
		Base: gvx.Config{OCIImage: image, NetworkMode: gvx.NetModeNone,
			Cmd: []string{"--tls=false"}, Envv: []string{"DOCKER_TLS_CERTDIR="}},
		Sockets: map[string]int{"docker": 2375},
		Ready:   gvx.DockerReady("docker"),
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// summarize fills r's quantiles from the claim latencies (gvx.Summarize's).
func summarize(r *result, ms_ []gvx.Metrics) {
	s := gvx.Summarize(ms_, r.C, 0)
	r.N, r.Failed = s.Episodes, s.Failed
	r.P50, r.P95, r.Max = ms(s.Claim.P50), ms(s.Claim.P95), ms(s.Claim.Max)
	r.BootP50 = ms(s.Ready.P50)
	if s.IdleMemory > 0 {
		r.IdlePSSAtReadyP50 = s.IdleMemory
	}
}

// gvxRounds claims c episodes at once, rounds times; a claim ends when
// docker info answers through the episode's socket.
func gvxRounds(ctx context.Context, mode, golden, scratch, image string, c, rounds int) (result, error) {
	warm := 0
	if mode != "cold" {
		warm = c
	}
	cfg := poolConfig(golden, scratch, image, warm)
	switch mode {
	case "warm":
		cfg.RefillDelay, cfg.RefillNice = refillDelay, refillNice
	case "warm-eager":
		cfg.RefillDelay, cfg.RefillNice = -1, -1
	}
	if mode == "warm-restore" {
		ck, cleanup, err := bootCheckpoint(ctx, golden, scratch, image)
		defer cleanup()
		if err != nil {
			return result{}, err
		}
		cfg.Checkpoint, cfg.Golden, cfg.Base = ck, "", gvx.Config{}
	}
	p, err := gvx.NewPool(cfg)
	if err != nil {
		return result{}, err
	}
	defer p.Close()
	var all []gvx.Metrics
	for range rounds {
		if warm > 0 {
			if err := p.WaitWarm(ctx); err != nil {
				return result{}, err
			}
		}
		ms_ := make([]gvx.Metrics, c)
		eps := make([]*gvx.Episode, c)
		var wg sync.WaitGroup
		for i := range c {
			wg.Go(func() {
				t0 := time.Now()
				ep, err := p.Claim(ctx)
				if err == nil {
					err = gvx.WaitDocker(ctx, ep.Sockets["docker"], ep.Done())
				}
				d := time.Since(t0)
				if err != nil {
					ms_[i] = gvx.Metrics{Err: err}
					return
				}
				eps[i] = ep
				ms_[i] = ep.Metrics()
				ms_[i].Claim = d
			})
		}
		wg.Wait()
		for _, ep := range eps {
			if ep != nil {
				ep.Close()
			}
		}
		all = append(all, ms_...)
	}
	r := result{C: c}
	summarize(&r, all)
	if r.Failed > 0 {
		for _, m := range all {
			if m.Err != nil {
				return r, m.Err
			}
		}
	}
	return r, nil
}

// memory boots w episodes at once (cold: no replacements boot meanwhile)
// and, once they idle, measures them all at one moment.
func memory(ctx context.Context, golden, scratch, image string, w int) (result, error) {
	before := memAvailable()
	p, err := gvx.NewPool(poolConfig(golden, scratch, image, 0))
	if err != nil {
		return result{}, err
	}
	defer p.Close()
	eps := make([]*gvx.Episode, w)
	errs := make([]error, w)
	var wg sync.WaitGroup
	for i := range w {
		wg.Go(func() { eps[i], errs[i] = p.Claim(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return result{}, err
		}
	}
	sbs := make([]*gvx.Sandbox, w)
	var at []gvx.Metrics
	for i, ep := range eps {
		sbs[i] = ep.Sandbox
		at = append(at, ep.Metrics())
	}
	r := measureIdle(before, sbs)
	summarize(&r, at)
	return r, nil
}

// memoryRestore restores w episodes at once from one checkpoint of a
// booted daemon and, once each answers docker info and they idle,
// measures them all at one moment.
func memoryRestore(ctx context.Context, golden, scratch, image string, w int) (result, error) {
	ck, cleanup, err := bootCheckpoint(ctx, golden, scratch, image)
	defer cleanup()
	if err != nil {
		return result{}, err
	}
	before := memAvailable()
	sbs := make([]*gvx.Sandbox, w)
	errs := make([]error, w)
	var wg sync.WaitGroup
	for i := range w {
		vol := filepath.Join(scratch, fmt.Sprintf("memory-%d.ext4", i))
		sock := filepath.Join(scratch, fmt.Sprintf("memory-%d.sock", i))
		defer os.Remove(vol)
		defer os.Remove(sock)
		wg.Go(func() {
			sb, err := ck.Restore(ctx, []string{vol}, gvx.Config{Ports: []gvx.Port{{HostSocket: sock}}})
			if err != nil {
				errs[i] = err
				return
			}
			sbs[i] = sb
			exited := make(chan struct{})
			go func() { _, _ = sb.Run(ctx); close(exited) }()
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			errs[i] = gvx.WaitDocker(wctx, sock, exited)
		})
	}
	wg.Wait()
	defer func() {
		for _, sb := range sbs {
			if sb != nil {
				sb.Close()
			}
		}
	}()
	for _, err := range errs {
		if err != nil {
			return result{}, err
		}
	}
	return measureIdle(before, sbs), nil
}

// measureIdle lets the w daemons idle, then sums their PSS at one moment
// and says what the host's MemAvailable lost since before.
func measureIdle(before int64, sbs []*gvx.Sandbox) result {
	time.Sleep(3 * time.Second) // idle: let the daemons settle
	var sum int64
	for _, sb := range sbs {
		m, _ := sb.Memory()
		sum += m
	}
	after := memAvailable()
	w := int64(len(sbs))
	r := result{C: len(sbs), N: len(sbs), PSSPerEpisode: sum / w}
	if before > 0 && after > 0 {
		r.AvailPerEpisode = (before - after) / w
	}
	return r
}

func memAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return -1
}

// hostRounds runs c host dockerds at once, rounds times.
func hostRounds(ctx context.Context, dockerd, golden, scratch string, c, rounds int) (result, error) {
	return timedRounds(c, rounds, func(seq int) (time.Duration, error) {
		return hostDaemon(ctx, dockerd, golden, filepath.Join(scratch, fmt.Sprintf("host-%d", seq)))
	})
}

// timedRounds runs one(seq) c at a time, rounds times (seq counts from
// 1), and summarizes the durations it returns.
func timedRounds(c, rounds int, one func(seq int) (time.Duration, error)) (result, error) {
	var all []gvx.Metrics
	seq := 0
	for range rounds {
		ms_ := make([]gvx.Metrics, c)
		var wg sync.WaitGroup
		for i := range c {
			seq++
			n := seq
			wg.Go(func() {
				d, err := one(n)
				ms_[i] = gvx.Metrics{Claim: d, Err: err}
			})
		}
		wg.Wait()
		all = append(all, ms_...)
	}
	r := result{C: c}
	summarize(&r, all)
	for _, m := range all {
		if m.Err != nil {
			return r, m.Err
		}
	}
	return r, nil
}

// hostDaemon clones golden into dir, loop-mounts it, and times one host
// dockerd on it from exec to GET /info answering; then tears it all down.
func hostDaemon(ctx context.Context, dockerd, golden, dir string) (time.Duration, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	vol, root := filepath.Join(dir, "vol.ext4"), filepath.Join(dir, "root")
	if _, err := reflink.CloneFile(golden, vol, reflink.Options{NoSync: true}); err != nil {
		return 0, err
	}
	if err := os.Mkdir(root, 0o700); err != nil {
		return 0, err
	}
	if out, err := exec.Command("mount", "-o", "loop", vol, root).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("mount %s: %v: %s", vol, err, out)
	}
	defer func() {
		if out, err := exec.Command("umount", root).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "readybench: umount %s: %v: %s\n", root, err, out)
		}
	}()
	sock := filepath.Join(dir, "docker.sock")
	cmd := exec.Command(dockerd, "--data-root", root, "--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "docker.pid"), "-H", "unix://"+sock,
		"--iptables=false", "--ip6tables=false", "--bridge=none")
	log, err := os.Create(filepath.Join(dir, "dockerd.log"))
	if err != nil {
		return 0, err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	exited := make(chan struct{})
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // dockerd stops its containerd
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := gvx.WaitDocker(wctx, sock, exited); err != nil {
		b, _ := os.ReadFile(filepath.Join(dir, "dockerd.log"))
		return 0, fmt.Errorf("host dockerd: %w; log: %s", err, tail(b))
	}
	return time.Since(t0), nil
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// restoreRounds checkpoints one daemon booted on a clone of golden once
// its API answers, then restores c episodes at once from it, rounds
// times (gvx.Checkpoint.Restore: each on its own clone of the companion
// volume, with its own socket).
func restoreRounds(ctx context.Context, golden, scratch, image string, c, rounds int) (result, error) {
	ck, cleanup, err := bootCheckpoint(ctx, golden, scratch, image)
	defer cleanup()
	if err != nil {
		return result{}, err
	}
	var mu sync.Mutex
	var cpu []gvx.Metrics // the CPU as Claim: summarized as the claims are
	r, err := timedRounds(c, rounds, func(seq int) (time.Duration, error) {
		vol := filepath.Join(scratch, fmt.Sprintf("restore-%d.ext4", seq))
		defer os.Remove(vol)
		d, used, err := restoreOne(ctx, ck, vol, filepath.Join(scratch, fmt.Sprintf("restore-%d.sock", seq)), time.Now())
		mu.Lock()
		cpu = append(cpu, gvx.Metrics{Claim: used})
		mu.Unlock()
		return d, err
	})
	q := gvx.Summarize(cpu, c, 0).Claim
	r.CPUP50, r.CPUP95 = ms(q.P50), ms(q.P95)
	return r, err
}

// restoreOne restores one episode from ck onto vol with its socket at
// sock and returns the time from t0 until docker info answered, and the
// CPU the episode's processes had used by then; the episode is closed
// (and its socket removed) before it returns.
func restoreOne(ctx context.Context, ck *gvx.Checkpoint, vol, sock string, t0 time.Time) (time.Duration, time.Duration, error) {
	sb, err := ck.Restore(ctx, []string{vol}, gvx.Config{Ports: []gvx.Port{{HostSocket: sock}}})
	if err != nil {
		return 0, 0, err
	}
	exited := make(chan struct{})
	go func() { _, _ = sb.Run(ctx); close(exited) }()
	// Close kills rungv, which then cannot remove its socket.
	defer func() { sb.Close(); <-exited; os.Remove(sock) }()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := gvx.WaitDocker(wctx, sock, exited); err != nil {
		return 0, 0, fmt.Errorf("restored daemon: %w", err)
	}
	d := time.Since(t0)
	return d, treeCPU(sb.Pid()), nil
}

// bootCheckpoint boots a daemon on a clone of golden and checkpoints it
// once its API answers (gvx.Sandbox.Checkpoint), in scratch; cleanup
// removes it.
func bootCheckpoint(ctx context.Context, golden, scratch, image string) (*gvx.Checkpoint, func(), error) {
	ckDir := filepath.Join(scratch, "checkpoint")
	boot := filepath.Join(scratch, "checkpoint-boot.ext4")
	cleanup := func() { os.RemoveAll(ckDir); os.Remove(boot) }
	if _, err := reflink.CloneFile(golden, boot, reflink.Options{NoSync: true}); err != nil {
		return nil, cleanup, err
	}
	bootSock := filepath.Join(scratch, "checkpoint-boot.sock")
	cfg := poolConfig(golden, scratch, image, 0).Base
	cfg.Mounts = []gvx.Mount{{Kind: gvx.MountVolume, ImagePath: boot, GuestPath: "/var/lib/docker"}}
	cfg.Ports = []gvx.Port{{HostSocket: bootSock, GuestPort: 2375}}
	sb, err := gvx.New(ctx, cfg)
	if err != nil {
		return nil, cleanup, err
	}
	if err := sb.EnableCheckpoint(ckDir); err != nil {
		return nil, cleanup, err
	}
	exited := make(chan struct{})
	go func() { _, _ = sb.Run(ctx); close(exited) }()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err = gvx.WaitDocker(wctx, bootSock, exited)
	cancel()
	var ck *gvx.Checkpoint
	if err == nil {
		ck, err = sb.Checkpoint(ctx)
	}
	sb.Close()
	<-exited
	if err != nil {
		return nil, cleanup, fmt.Errorf("checkpoint of the booted daemon: %w", err)
	}
	return ck, cleanup, nil
}
