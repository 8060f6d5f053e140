// Command servebench measures episodes per minute and create→first-exec
// latency (p50/p95) through a running `rungv serve` (its HTTP API over the
// unix socket: create with a golden clone, exec `echo ready`, close) and
// through the Go SDK in-process (gvx.Pool: clone, start rungv with `echo
// ready` as the command, wait for its line, tear down), in one run, with
// the same image, golden volume and parallelism. bench/serve.sh drives it.
//
//	servebench -socket S -rungv R -image I -golden G -scratch D [-n 32] [-j 4]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"z.gfire.dev/gvx/pkg/gvx"
	"z.gfire.dev/gvx/reflink"
	"z.gfire.dev/gvx/spec"
)

type result struct {
	Mode      string  `json:"mode"`
	Episodes  int     `json:"episodes"`
	Failed    int     `json:"failed"`
	Parallel  int     `json:"parallel"`
	WallS     float64 `json:"wall_s"`
	PerMinute float64 `json:"episodes_per_minute"`
	P50MS     float64 `json:"first_exec_p50_ms"`
	P95MS     float64 `json:"first_exec_p95_ms"`
}

func main() {
	sock := flag.String("socket", "", "rungv serve's unix socket")
	rungv := flag.String("rungv", "", "rungv binary (SDK mode)")
	img := flag.String("image", "", "image")
	golden := flag.String("golden", "", "golden volume")
	scratch := flag.String("scratch", "", "scratch dir for the SDK's clones (the golden's filesystem)")
	n := flag.Int("n", 32, "episodes per mode")
	j := flag.Int("j", 4, "episodes at once")
	flag.Parse()
	if *sock == "" || *rungv == "" || *img == "" || *golden == "" || *scratch == "" {
		flag.Usage()
		os.Exit(2)
	}
	var out []result
	for _, run := range []func() (result, error){
		func() (result, error) { return viaServer(*sock, *img, *golden, *n, *j) },
		func() (result, error) { return viaSDK(*rungv, *img, *golden, *scratch, *n, *j) },
	} {
		r, err := run()
		if err != nil {
			fmt.Fprintln(os.Stderr, "servebench:", err)
			os.Exit(1)
		}
		out = append(out, r)
	}
	fmt.Printf("%-7s %8s %6s %4s %8s %10s %10s %10s\n", "mode", "episodes", "failed", "-j", "wall_s", "eps/min", "p50_ms", "p95_ms")
	for _, r := range out {
		fmt.Printf("%-7s %8d %6d %4d %8.1f %10.1f %10.1f %10.1f\n", r.Mode, r.Episodes, r.Failed, r.Parallel, r.WallS, r.PerMinute, r.P50MS, r.P95MS)
	}
	b, _ := json.Marshal(out)
	fmt.Fprintln(os.Stderr, string(b))
}

func summarize(mode string, lat []time.Duration, failed, parallel int, wall time.Duration) result {
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	ok := len(lat)
	return result{Mode: mode, Episodes: ok + failed, Failed: failed, Parallel: parallel, WallS: wall.Seconds(),
		PerMinute: float64(ok) / wall.Minutes(), P50MS: q(0.5), P95MS: q(0.95)}
}

// viaServer: create (golden clone), exec `echo ready`, close; N of them,
// J at a time. The latency is from the create request to the exec's exit.
func viaServer(sock, img, golden string, n, j int) (result, error) {
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	do := func(method, path string, body []byte) ([]byte, int, error) {
		req, _ := http.NewRequest(method, "http://gvx"+path, bytes.NewReader(body))
		resp, err := c.Do(req)
		if err != nil {
			return nil, 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return b, resp.StatusCode, err
	}
	create, _ := json.Marshal(map[string]any{"spec": map[string]any{"version": 1, "image": img}, "golden": golden})
	var mu sync.Mutex
	var lat []time.Duration
	failed := 0
	work := make(chan int)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range j {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				t := time.Now()
				err := func() error {
					b, code, err := do("POST", "/v1/episodes", create)
					if err != nil || code != 201 {
						return fmt.Errorf("create: %d %s %v", code, b, err)
					}
					var in struct{ ID string }
					json.Unmarshal(b, &in)
					defer do("DELETE", "/v1/episodes/"+in.ID, nil)
					b, code, err = do("POST", "/v1/episodes/"+in.ID+"/exec", []byte(`{"argv":["echo","ready"]}`))
					if err != nil || code != 200 {
						return fmt.Errorf("exec: %d %s %v", code, b, err)
					}
					sc := bufio.NewScanner(bytes.NewReader(b))
					for sc.Scan() {
						var e struct {
							Type     string
							ExitCode *int `json:"exit_code"`
						}
						json.Unmarshal(sc.Bytes(), &e)
						if e.Type == "exit" && e.ExitCode != nil && *e.ExitCode == 0 {
							d := time.Since(t)
							mu.Lock()
							lat = append(lat, d)
							mu.Unlock()
							return nil
						}
					}
					return fmt.Errorf("exec: no exit 0 in %s", b)
				}()
				if err != nil {
					fmt.Fprintln(os.Stderr, "server episode:", err)
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return summarize("server", lat, failed, j, time.Since(t0)), nil
}

// viaSDK: gvx.Pool, each episode's command `echo ready`; the latency is
// the clone plus the start to that line (Metrics.Reset + Metrics.Ready).
func viaSDK(rungv, img, golden, scratch string, n, j int) (result, error) {
	s := spec.New(img)
	s.Entrypoint = []string{"sh", "-c", "echo ready; exec sleep 600"}
	p, err := gvx.NewPool(gvx.PoolConfig{Golden: golden, ScratchDir: scratch, Parallel: j, Spec: s,
		Base: gvx.Config{Rungv: rungv}, CloneMode: reflink.Auto,
		Ready: func(ctx context.Context, ep *gvx.Episode) error { return ep.WaitOutput(ctx, "ready") }})
	if err != nil {
		return result{}, err
	}
	defer p.Close()
	t0 := time.Now()
	ms, _ := p.Run(context.Background(), n, func(context.Context, *gvx.Episode) error { return nil })
	wall := time.Since(t0)
	var lat []time.Duration
	failed := 0
	for _, m := range ms {
		if m.Err != nil {
			fmt.Fprintln(os.Stderr, "sdk episode:", m.Err)
			failed++
			continue
		}
		lat = append(lat, m.Reset+m.Ready)
	}
	return summarize("sdk", lat, failed, j, wall), nil
}
