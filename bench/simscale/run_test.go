package simscale

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/bench/internal/measure"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// run is one scale run: a namespace with the deployment's class and
// secret, the manager process, and the watches that count.
type run struct {
	env      *testenv.Env
	ns       string
	machines int
	core     kubernetes.Interface
	mc       versioned.Interface
	bin      string // the manager binary
	logPath  string // the manager's log

	watch *watcher
}

// result is what a run measured.
type result struct {
	toRunning, total, stable time.Duration
	peakRSS                  int64 // bytes
	cpu, cpuStable           time.Duration
	machineBusyStable        float64 // share of all CPUs busy in the stable period
	flapsRun, flapsStable    int
	machinesLeftRunning      int
	flapSamples              string
	requests                 measure.Requests // of the whole run
	requestsStable           measure.Requests // of the stable period
	writersStable            string           // who wrote in the stable period
}

func newRun(b *testing.B, env *testenv.Env, machines int) *run {
	cfg := env.Config()
	r := &run{
		env:      env,
		ns:       env.Namespace(b),
		machines: machines,
		core:     kubernetes.NewForConfigOrDie(cfg),
		mc:       versioned.NewForConfigOrDie(cfg),
		bin:      buildManager(b),
		logPath:  filepath.Join(b.TempDir(), "manager.log"),
	}
	r.watch = startWatcher(b, r.core, r.mc, r.ns)
	return r
}

// buildManager builds the reference binary of this checkout.
func buildManager(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "mcm")
	cmd := exec.Command("go", "build", "-o", bin, "./reference")
	cmd.Dir = filepath.Join("..", "..") // the root module
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building the reference manager: %v\n%s", err, out)
	}
	return bin
}

// scale creates the deployment, runs the manager until every machine is
// Running and then for stable more, and returns the figures.
func (r *run) scale(b *testing.B, stable time.Duration) result {
	ctx := context.Background()
	before, err := measure.ScrapeRequests(ctx, r.core)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.createDeployment(ctx); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	mgr := r.startManager(b)

	var res result
	deadline := time.Now().Add(runTimeout)
	lastLog := time.Now()
	for {
		running, ready, nodes := r.watch.counts()
		if running == r.machines {
			break
		}
		if err := mgr.exited(); err != nil {
			b.Fatalf("the manager exited: %v\n%s", err, measure.Tail(r.logPath, 40))
		}
		if time.Now().After(deadline) {
			b.Fatalf("after %v: %d of %d machines Running, %d nodes (%d Ready), phases %s\nmanager log:\n%s",
				runTimeout, running, r.machines, nodes, ready, r.watch.phases(), measure.Tail(r.logPath, 40))
		}
		if time.Since(lastLog) >= 30*time.Second {
			lastLog = time.Now()
			u := mgr.usage()
			progress("%v: %d of %d machines Running, %d nodes (%d Ready), %d flaps, manager RSS %d MiB; phases %s",
				time.Since(start).Round(time.Second), running, r.machines, nodes, ready, r.watch.flaps(), u.RSS>>20, r.watch.phases())
		}
		time.Sleep(time.Second)
	}
	res.toRunning = time.Since(start)
	res.flapsRun = r.watch.flaps()
	progress("all %d machines Running after %v; watching for %v", r.machines, res.toRunning.Round(time.Second), stable)

	stableStart := time.Now()
	stableRequests, err := measure.ScrapeRequests(ctx, r.core)
	if err != nil {
		b.Fatal(err)
	}
	cpuBefore := mgr.usage().CPU
	busyBefore, totalBefore := machineCPU()
	end := time.Now().Add(stable)
	for time.Now().Before(end) {
		if err := mgr.exited(); err != nil {
			b.Fatalf("the manager exited: %v\n%s", err, measure.Tail(r.logPath, 40))
		}
		time.Sleep(time.Second)
	}
	res.total = time.Since(start)
	res.stable = time.Since(stableStart)
	busyAfter, totalAfter := machineCPU()
	if totalAfter > totalBefore {
		res.machineBusyStable = float64(busyAfter-busyBefore) / float64(totalAfter-totalBefore)
	}
	res.flapsStable = r.watch.flaps() - res.flapsRun
	res.machinesLeftRunning = r.watch.leftRunning()
	res.flapSamples = r.watch.samples()
	u := mgr.usage()
	res.peakRSS, res.cpu = u.PeakRSS, u.CPU
	res.cpuStable = res.cpu - cpuBefore
	after, err := measure.ScrapeRequests(ctx, r.core)
	if err != nil {
		b.Fatal(err)
	}
	res.requests = after.Minus(before)
	res.requestsStable = after.Minus(stableRequests)
	res.writersStable = r.writersSince(ctx, stableStart)
	return res
}

// writersSince says who wrote to the cluster, from what is left behind:
// the run's events by source and reason, and by field manager the nodes'
// writes since start. The API server counts requests by resource
// only.
func (r *run) writersSince(ctx context.Context, start time.Time) string {
	var b strings.Builder
	events, err := r.core.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	by := map[string]int{}
	for _, e := range events.Items {
		// All of the run's: the cluster is the run's own.
		by[fmt.Sprintf("events of the run: %s %s (%s)", cmp.Or(e.Source.Component, e.ReportingController), e.Reason, e.InvolvedObject.Kind)] += int(max(e.Count, 1))
	}
	nodes, err := r.core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	for _, n := range nodes.Items {
		for _, f := range n.ManagedFields {
			if f.Time != nil && !f.Time.Time.Before(start) {
				by[fmt.Sprintf("nodes last written by %s (%s %s)", f.Manager, f.Operation, f.Subresource)]++
			}
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(by), func(a, b string) int { return cmp.Compare(by[b], by[a]) })[:min(10, len(by))] {
		fmt.Fprintf(&b, "  %6d %s\n", by[k], k)
	}
	return b.String()
}

// machineCPU returns the busy and total jiffies of all CPUs since boot,
// from /proc/stat.
func machineCPU() (busy, total int64) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

// progress prints a line as the run goes: a benchmark's own log is cut
// to ten lines.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "simscale: "+format+"\n", args...)
}

func (r *run) createDeployment(ctx context.Context) error {
	const secretName, className = "sim", "sim"
	labels := map[string]string{"bench": "simscale"}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: r.ns},
		Data: map[string][]byte{
			v1alpha1.UserDataKey: []byte("#cloud-config\n"),
			sim.CredentialsKey:   []byte("token"),
		},
	}
	if _, err := r.core.CoreV1().Secrets(r.ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the secret: %w", err)
	}
	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: className, Namespace: r.ns},
		Provider:     sim.ProviderName,
		ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}.RawExtension(),
		SecretRef:    &corev1.SecretReference{Name: secretName, Namespace: r.ns},
	}
	if _, err := r.mc.MachineV1alpha1().MachineClasses(r.ns).Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the class: %w", err)
	}
	md := &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "scale", Namespace: r.ns},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: int32(r.machines),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: className}},
			},
		},
	}
	if _, err := r.mc.MachineV1alpha1().MachineDeployments(r.ns).Create(ctx, md, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the deployment: %w", err)
	}
	return nil
}

// manager is the running manager process.
type manager struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set when done is closed
}

func (r *run) startManager(b *testing.B) *manager {
	log, err := os.Create(r.logPath)
	if err != nil {
		b.Fatal(err)
	}
	args := append([]string{
		"--control-kubeconfig", r.env.Kubeconfig(), "--target-kubeconfig", r.env.Kubeconfig(),
		"--namespace", r.ns, "--driver", "sim",
	}, managerFlags()...)
	cmd := exec.Command(r.bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting the manager: %v", err)
	}
	m := &manager{cmd: cmd, done: make(chan struct{})}
	go func() {
		m.err = cmd.Wait()
		_ = log.Close()
		close(m.done)
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-m.done
		}
		if b.Failed() {
			b.Logf("manager log, last lines:\n%s", measure.Tail(r.logPath, 60))
		}
	})
	return m
}

// exited returns why the manager ended, or nil while it runs.
func (m *manager) exited() error {
	select {
	case <-m.done:
		if m.err == nil {
			return errors.New("exit status 0")
		}
		return m.err
	default:
		return nil
	}
}

// usage reads the manager's memory and CPU time from /proc; a manager
// that is gone reads as zero, and the caller finds out from exited.
func (m *manager) usage() measure.Usage {
	u, _ := measure.ProcessUsage(m.cmd.Process.Pid)
	return u
}

// watcher follows the machines and nodes and counts flaps: a node whose
// Ready condition goes from True to anything else, and a machine that
// leaves Running.
type watcher struct {
	mu        sync.Mutex
	phase     map[string]v1alpha1.MachinePhase // by machine
	ready     map[string]bool                  // by node
	flapCount int
	leftCount int
	flapLog   []string
}

func startWatcher(b *testing.B, core kubernetes.Interface, mc versioned.Interface, ns string) *watcher {
	w := &watcher{phase: map[string]v1alpha1.MachinePhase{}, ready: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	nf := informers.NewSharedInformerFactory(core, 0)
	mf := externalversions.NewSharedInformerFactoryWithOptions(mc, 0, externalversions.WithNamespace(ns))
	_, err := nf.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.node(nil, obj.(*corev1.Node)) },
		UpdateFunc: func(old, obj any) { w.node(old.(*corev1.Node), obj.(*corev1.Node)) },
		DeleteFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				w.mu.Lock()
				delete(w.ready, n.Name)
				w.mu.Unlock()
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	_, err = mf.Machine().V1alpha1().Machines().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.machine(nil, obj.(*v1alpha1.Machine)) },
		UpdateFunc: func(old, obj any) { w.machine(old.(*v1alpha1.Machine), obj.(*v1alpha1.Machine)) },
		DeleteFunc: func(obj any) {
			if m, ok := obj.(*v1alpha1.Machine); ok {
				w.mu.Lock()
				delete(w.phase, m.Name)
				w.mu.Unlock()
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	nf.Start(ctx.Done())
	mf.Start(ctx.Done())
	nf.WaitForCacheSync(ctx.Done())
	mf.WaitForCacheSync(ctx.Done())
	b.Cleanup(func() {
		cancel()
		nf.Shutdown()
		mf.Shutdown()
	})
	return w
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (w *watcher) node(old, n *corev1.Node) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ready := nodeReady(n)
	if old != nil && nodeReady(old) && !ready {
		w.flapCount++
		if len(w.flapLog) < 20 {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					w.flapLog = append(w.flapLog, fmt.Sprintf("%s node %s Ready=%s (%s: %s)",
						time.Now().Format(time.TimeOnly), n.Name, c.Status, c.Reason, c.Message))
				}
			}
		}
	}
	w.ready[n.Name] = ready
}

func (w *watcher) machine(old, m *v1alpha1.Machine) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := m.Status.CurrentStatus.Phase
	if old != nil && old.Status.CurrentStatus.Phase == v1alpha1.MachineRunning && p != v1alpha1.MachineRunning {
		w.leftCount++
		if len(w.flapLog) < 20 {
			w.flapLog = append(w.flapLog, fmt.Sprintf("%s machine %s Running -> %s", time.Now().Format(time.TimeOnly), m.Name, p))
		}
	}
	w.phase[m.Name] = p
}

// counts returns the machines Running, the nodes Ready and all nodes.
func (w *watcher) counts() (running, ready, nodes int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.phase {
		if p == v1alpha1.MachineRunning {
			running++
		}
	}
	for _, r := range w.ready {
		if r {
			ready++
		}
	}
	return running, ready, len(w.ready)
}

func (w *watcher) phases() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	by := map[v1alpha1.MachinePhase]int{}
	for _, p := range w.phase {
		by[p]++
	}
	return fmt.Sprint(by)
}

func (w *watcher) flaps() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flapCount
}

func (w *watcher) leftRunning() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.leftCount
}

func (w *watcher) samples() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.flapLog, "\n")
}
