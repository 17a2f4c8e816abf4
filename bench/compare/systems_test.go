//go:build linux

package compare

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcmkit/mcm/bench/internal/measure"
)

// process is one process of a system under test.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // why it ended; set when done is closed
	// ready answers nil once the process serves its purpose.
	ready func(context.Context) error
	// cloud: the simulated cloud, not a manager; its RSS and CPU are
	// listed but not counted as the system's.
	cloud bool
}

// system is the processes of one system under test, and a sampler of
// the summed resident set size of its managers (the simulated cloud's
// process left out).
type system struct {
	procs []*process

	mu      sync.Mutex
	peakRSS int64 // the largest summed RSS sampled
	// window is the largest summed RSS since the last resetWindow.
	window int64
	stop   chan struct{}
	wg     sync.WaitGroup
	// pprof is the address of mcm's /debug/pprof; empty for MCM and
	// without a ProfileDir.
	pprof string
}

// simFlags are the flags of the simcloud process, whose simulated kubelet
// both systems' drivers share: Nodes register Ready
// and are never heartbeated during a run (see simLeasePeriod). Each real
// node has a kubelet, and a client, of its own; the one simulated kubelet
// of all nodes gets a client limit and a parallelism that do not make
// registering hundreds of Nodes at once (four requests each) the slowest
// part of a run.
func simFlags() []string {
	return []string{
		"--sim-kubelet-qps=" + strconv.Itoa(simKubeletQPS),
		"--sim-kubelet-burst=" + strconv.Itoa(simKubeletQPS),
		"--sim-kubelet-parallelism=" + strconv.Itoa(simKubeletParallelism),
		"--sim-node-lease-duration=" + (2 * simLeasePeriod).String(),
		"--sim-node-lease-renew-period=" + simLeasePeriod.String(),
		"--sim-node-status-report-period=" + simLeasePeriod.String(),
	}
}

// clientFlags are the flags both managers share: the clusters (control
// and target are the one cluster of the run), the namespace, the client
// limits and no leader election.
func clientFlags(kubeconfig, ns string) []string {
	return []string{
		"--control-kubeconfig=" + kubeconfig,
		"--target-kubeconfig=" + kubeconfig,
		"--namespace=" + ns,
		"--kube-api-qps=" + strconv.Itoa(managerQPS),
		"--kube-api-burst=" + strconv.Itoa(managerBurst),
		"--leader-elect=false",
	}
}

// startSystem starts the processes of spec's system against the cluster
// of kubeconfig, their logs in logDir, and waits until each is ready.
func startSystem(ctx context.Context, spec runSpec, kubeconfig, ns, logDir string) (*system, error) {
	s := &system{stop: make(chan struct{})}
	start := func(name, bin string, ready func(context.Context) error, env []string, args ...string) (*process, error) {
		p, err := startProcess(name, bin, filepath.Join(logDir, name+".log"), env, args...)
		if err != nil {
			return nil, err
		}
		p.ready = ready
		s.procs = append(s.procs, p)
		return p, nil
	}
	// Both systems' drivers call the simulated cloud in a process of its
	// own: the managers' RSS and CPU are theirs alone. Its node agent
	// serves the run's namespace, and acts only on the VMs of classes that
	// enable it (scenario I's).
	socket := filepath.Join(logDir, "simcloud.sock")
	socketReady := func(context.Context) error {
		c, err := net.Dial("unix", socket)
		if err != nil {
			return err
		}
		return c.Close()
	}
	cloudFlags := append([]string{"--socket=" + socket, "--target-kubeconfig=" + kubeconfig, "--namespace=" + ns}, simFlags()...)
	if spec.BootModel == bootReady {
		cloudFlags = append(cloudFlags, "--create-returns-with-node")
	}
	cloud, err := start("simcloud", spec.Bins.SimCloud, socketReady, nil, cloudFlags...)
	if err != nil {
		return nil, err
	}
	cloud.cloud = true
	switch spec.System {
	case systemRef:
		port, err := freePort()
		if err != nil {
			s.shutdown()
			return nil, err
		}
		args := append(clientFlags(kubeconfig, ns), "--driver=simcloud", "--address=127.0.0.1", "--port="+strconv.Itoa(port))
		if spec.ProfileDir != "" {
			args = append(args, "--profiling")
			s.pprof = "http://127.0.0.1:" + strconv.Itoa(port) + "/debug/pprof"
		}
		// /readyz: the startup checks passed and the informer caches of
		// both controller groups synced.
		if _, err := start("mcm", spec.Bins.Reference, httpReady(port, "/readyz"), append([]string{simCloudSocketEnv + "=" + socket}, spec.ManagerEnv...), args...); err != nil {
			s.shutdown()
			return nil, err
		}
	case systemMCM:
		ports, err := freePorts(2)
		if err != nil {
			s.shutdown()
			return nil, err
		}
		// MCM serves /healthz from the start; it is the readiness it has.
		if _, err := start("machine-controller-manager", spec.Bins.MCM, httpReady(ports[0], "/healthz"), spec.ManagerEnv,
			append(clientFlags(kubeconfig, ns), "--address=127.0.0.1", "--port="+strconv.Itoa(ports[0]))...); err != nil {
			s.shutdown()
			return nil, err
		}
		if _, err := start("machine-controller", spec.Bins.MC, httpReady(ports[1], "/healthz"), spec.ManagerEnv,
			append(clientFlags(kubeconfig, ns), "--address=127.0.0.1", "--port="+strconv.Itoa(ports[1]), "--sim-cloud-socket="+socket)...); err != nil {
			s.shutdown()
			return nil, err
		}
	default:
		s.shutdown()
		return nil, fmt.Errorf("unknown system %q", spec.System)
	}
	s.wg.Add(1)
	go s.sample()
	for _, p := range s.procs {
		if err := waitFor(ctx, time.Minute, func(ctx context.Context) error {
			if err := p.exited(); err != nil {
				return fmt.Errorf("%s exited: %w", p.name, err) // no point in waiting
			}
			return p.ready(ctx)
		}); err != nil {
			s.shutdown()
			return nil, fmt.Errorf("%s never got ready: %w\n%s", p.name, err, measure.Tail(p.logPath, 30))
		}
	}
	return s, nil
}

// startProcess starts bin with its output in logPath and env added to
// this process's environment.
func startProcess(name, bin, logPath string, env []string, args ...string) (*process, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	// The kernel kills the process when the run's process dies, so that
	// an interrupted run leaves no manager behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = log.Close()
		close(p.done)
	}()
	return p, nil
}

// exited returns why the process ended, or nil while it runs.
func (p *process) exited() error {
	select {
	case <-p.done:
		if p.err == nil {
			return errors.New("exit status 0")
		}
		return p.err
	default:
		return nil
	}
}

// exited returns the first process that ended, and why, or nil.
func (s *system) exited() error {
	for _, p := range s.procs {
		if err := p.exited(); err != nil {
			return fmt.Errorf("%s exited: %w\n%s", p.name, err, measure.Tail(p.logPath, 40))
		}
	}
	return nil
}

// logTails returns the last n lines of each process's log.
func (s *system) logTails(n int) string {
	var b strings.Builder
	for _, p := range s.procs {
		fmt.Fprintf(&b, "%s, last lines of its log:\n%s\n", p.name, measure.Tail(p.logPath, n))
	}
	return b.String()
}

// usage returns the processes' usage now, in the order they started,
// and the summed CPU time of the managers' (the simulated cloud's left
// out).
func (s *system) usage() ([]processUsage, time.Duration) {
	var out []processUsage
	var cpu time.Duration
	for _, p := range s.procs {
		u, _ := measure.ProcessUsage(p.cmd.Process.Pid) // a process gone reads as zero; exited says so
		out = append(out, processUsage{Name: p.name, PeakRSS: u.PeakRSS, CPU: u.CPU})
		if !p.cloud {
			cpu += u.CPU
		}
	}
	return out, cpu
}

// sample records the summed RSS of the managers' processes every 200 ms.
func (s *system) sample() {
	defer s.wg.Done()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		var sum int64
		for _, p := range s.procs {
			if u, err := measure.ProcessUsage(p.cmd.Process.Pid); err == nil && !p.cloud {
				sum += u.RSS
			}
		}
		s.mu.Lock()
		s.peakRSS = max(s.peakRSS, sum)
		s.window = max(s.window, sum)
		s.mu.Unlock()
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
	}
}

// peaks returns the largest summed RSS sampled over the processes' life
// and since the last resetWindow.
func (s *system) peaks() (life, window int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peakRSS, s.window
}

func (s *system) resetWindow() {
	s.mu.Lock()
	s.window = 0
	s.mu.Unlock()
}

// shutdown stops the processes, SIGTERM first, and the sampler.
func (s *system) shutdown() {
	select {
	case <-s.stop:
		return // already
	default:
		close(s.stop)
	}
	s.wg.Wait()
	for _, p := range s.procs {
		if p.exited() == nil {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, p := range s.procs {
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// httpReady checks that http://127.0.0.1:port/path answers 200.
func httpReady(port int, path string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+path, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %s", path, resp.Status)
		}
		return nil
	}
}

// waitFor polls check every 100 ms until it returns nil, ctx ends or
// timeout passes, and then returns check's last error.
func waitFor(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func freePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
