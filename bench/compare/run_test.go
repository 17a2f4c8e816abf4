//go:build linux

package compare

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/bench/internal/measure"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// The objects of a run.
const (
	secretName     = "bench"
	className      = "bench-v1"
	nextClassName  = "bench-v2" // R's and I's new template
	deploymentName = "bench"
	// userData is a bare machine's: it asks for no bootstrap token, so
	// mcm issues none, while MCM issues one for every machine whatever
	// the user data says. tokenUserData carries MCM's placeholder, as a
	// worker's user data does (MCM_BENCH_BOOTSTRAP_TOKEN): both managers
	// then issue a token per machine, a Secret created and deleted.
	userData      = "#cloud-config\n"
	tokenUserData = "#cloud-config\nbootstrap-token: <<BOOTSTRAP_TOKEN>>\n"
)

// generatorParallelism and the generator's client limits make the load
// generator quick next to the managers: it creates the machines of M at
// once, as the scenario says, rather than at a pace of its own.
const (
	generatorParallelism = 64
	generatorQPS         = 2000
	generatorBurst       = 4000
)

// run is one scenario of one system in a child process: the cluster, the
// load generator's counted clients, the watcher and the system.
type run struct {
	spec     runSpec
	env      *testenv.Env
	ns       string
	deadline time.Time

	core kubernetes.Interface // uncounted, for reads
	// genCore and genMachines are the load generator's clients, whose
	// requests counter counts.
	genCore     kubernetes.Interface
	genMachines versioned.Interface
	counter     *measure.Counter

	proxy *apiProxy
	watch *watcher
	sys   *system
	res   result
}

// runScenario runs spec and returns its figures; a failure of the run is
// the result's Error.
func runScenario(b *testing.B, spec runSpec) result {
	res := result{Scenario: spec.Scenario, Machines: spec.Machines, Boot: spec.bootLabel(), System: spec.System}
	r, err := newRun(b, spec)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer r.sys.shutdown()
	scenario := map[string]func(context.Context) error{
		"M": r.bareMachines, "D": r.deploymentScaleUp, "R": r.rollingUpdate, "I": r.inPlaceRollout,
		"S": r.scaleDownTo(0), "P": r.scaleDownTo(r.spec.Machines / 10), "X": r.steadyState,
	}[spec.Scenario]
	ctx := context.Background()
	if err := scenario(ctx); err != nil {
		r.res.Error = err.Error()
	}
	r.res.Processes, _ = r.sys.usage()
	r.res.PeakRSS, _ = r.sys.peaks()
	r.res.Events = r.events(ctx)
	return r.res
}

func newRun(b *testing.B, spec runSpec) (*run, error) {
	progress("%s: starting a control plane", spec)
	env := testenv.Get(b)
	ctx := context.Background()
	r := &run{
		spec:     spec,
		env:      env,
		ns:       env.Namespace(b),
		deadline: time.Now().Add(spec.Timeout),
		core:     env.Client(),
		counter:  measure.NewCounter(),
		res:      result{Scenario: spec.Scenario, Machines: spec.Machines, Boot: spec.bootLabel(), System: spec.System},
	}
	// Each system gets its own CRDs.
	switch spec.System {
	case systemRef:
		if err := crds.Install(ctx, env.Config()); err != nil {
			return nil, fmt.Errorf("installing mcm's CRDs: %w", err)
		}
	case systemMCM:
		// create, not apply: the last-applied annotation of MCM's large
		// schemas would exceed the annotation limit.
		if out, err := env.Kubectl(ctx, "create", "-f", spec.Bins.MCMCRDs); err != nil {
			return nil, fmt.Errorf("installing MCM's CRDs from %s: %w\n%s", spec.Bins.MCMCRDs, err, out)
		}
		if out, err := env.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"); err != nil {
			return nil, fmt.Errorf("MCM's CRDs: %w\n%s", err, out)
		}
	}
	gen := env.Config()
	gen.QPS, gen.Burst = generatorQPS, generatorBurst
	gen = r.counter.Wrap(gen)
	var err error
	if r.genCore, err = kubernetes.NewForConfig(gen); err != nil {
		return nil, err
	}
	if r.genMachines, err = versioned.NewForConfig(gen); err != nil {
		return nil, err
	}
	mc, err := versioned.NewForConfig(env.Config())
	if err != nil {
		return nil, err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	b.Cleanup(stopWatch)
	if r.watch, err = startWatcher(watchCtx, r.core, mc, r.ns); err != nil {
		return nil, err
	}
	// The processes' logs beside the cluster's, which MCM_TESTENV_KEEP=1
	// keeps for a look after the run.
	dir := filepath.Join(env.Dir(), "bench")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if r.proxy, err = startProxy(env.Config(), filepath.Join(dir, "proxy.kubeconfig")); err != nil {
		return nil, fmt.Errorf("starting the counting proxy: %w", err)
	}
	b.Cleanup(r.proxy.close)
	progress("%s: starting %s", spec, systemLabels[spec.System])
	if r.sys, err = startSystem(ctx, spec, r.proxy.kubeconfig, r.ns, dir); err != nil {
		return nil, err
	}
	return r, nil
}

// phase is the start of a measured phase.
type phase struct {
	start            time.Time
	apiserver        measure.Requests
	generator        measure.Requests
	manager, kubelet measure.Requests // through the proxy
	agent            measure.Requests
	cpu              time.Duration
}

func (r *run) begin(ctx context.Context) (*phase, error) {
	p := &phase{generator: r.counter.Requests(), manager: r.proxy.requests(byManager), kubelet: r.proxy.requests(byKubelet), agent: r.proxy.requests(byAgent)}
	var err error
	if p.apiserver, err = measure.ScrapeRequests(ctx, r.core); err != nil {
		return nil, err
	}
	_, p.cpu = r.sys.usage()
	p.start = time.Now()
	return p, nil
}

// end closes the measured phase that begin started and that ended at
// done: it records the wall time, then waits out the settle period, so
// that writes the scenario caused a little late are counted too, and
// records the writes, reads and CPU time.
func (r *run) end(ctx context.Context, p *phase, done time.Time) error {
	r.res.Wall = done.Sub(p.start)
	if err := r.sleep(r.spec.Settle); err != nil {
		return err
	}
	after, err := measure.ScrapeRequests(ctx, r.core)
	if err != nil {
		return err
	}
	_, cpu := r.sys.usage()
	r.res.CPU = cpu - p.cpu
	generated := r.counter.Requests().Minus(p.generator)
	all := after.Minus(p.apiserver).Minus(generated)
	r.res.Writes, r.res.Reads = all.Writes(), measure.Requests{}
	for k, v := range all {
		if !measure.IsWrite(k) {
			r.res.Reads[k] = v
		}
	}
	r.res.GeneratorWrites = generated.Writes().Total()
	r.res.ManagerWrites = r.proxy.requests(byManager).Minus(p.manager).Writes()
	r.res.KubeletWrites = r.proxy.requests(byKubelet).Minus(p.kubelet).Writes()
	r.res.AgentWrites = r.proxy.requests(byAgent).Minus(p.agent).Writes()
	return nil
}

// sleep waits for d, failing when a process of the system ends.
func (r *run) sleep(d time.Duration) error {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := r.sys.exited(); err != nil {
			return err
		}
		time.Sleep(min(200*time.Millisecond, time.Until(end)))
	}
	return r.sys.exited()
}

// waitUntil polls the watcher's state every 50 ms until cond holds and
// returns when it first saw it hold. It fails at the run's deadline or
// when a process of the system ends, and prints progress every 10 s.
func (r *run) waitUntil(what string, cond func(state) bool) (time.Time, error) {
	start, lastProgress := time.Now(), time.Now()
	for {
		s := r.watch.state()
		if cond(s) {
			return time.Now(), nil
		}
		if err := r.sys.exited(); err != nil {
			return time.Time{}, err
		}
		if time.Now().After(r.deadline) {
			return time.Time{}, fmt.Errorf("timed out after %v waiting for %s: %s\n%s", r.spec.Timeout, what, s, r.sys.logTails(20))
		}
		if time.Since(lastProgress) >= 10*time.Second {
			lastProgress = time.Now()
			life, _ := r.sys.peaks()
			progress("%s: %v waiting for %s: %s; RSS peak %.0f MiB", r.spec, time.Since(start).Round(time.Second), what, s, mib(life))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bareMachines is scenario M: N Machines without a set, created at once,
// until all are Running.
func (r *run) bareMachines(ctx context.Context) error {
	n := r.spec.Machines
	if err := r.createClasses(ctx, r.spec.Boot, className); err != nil {
		return err
	}
	p, err := r.begin(ctx)
	if err != nil {
		return err
	}
	if err := parallel(n, func(int) error {
		// Named as a MachineSet names its machines: MCM derives a
		// machine's bootstrap token ID from the start of its name's last
		// five characters, which a counter would make the same for
		// hundreds of machines.
		m := &v1alpha1.Machine{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-", Namespace: r.ns},
			Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: className}},
		}
		_, err := r.genMachines.MachineV1alpha1().Machines(r.ns).Create(ctx, m, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("creating the machines: %w", err)
	}
	progress("%s: %d machines created in %v", r.spec, n, time.Since(p.start).Round(10*time.Millisecond))
	done, err := r.waitUntil(fmt.Sprintf("%d machines Running", n), func(s state) bool { return s.running == n })
	if err != nil {
		return err
	}
	r.res.ReadyToRunningP50, r.res.ReadyToRunningP99 = r.watch.reactionLatency()
	return r.end(ctx, p, done)
}

// deploymentScaleUp is scenario D: a MachineDeployment created with N
// replicas, until its N machines are Running and its status says so.
func (r *run) deploymentScaleUp(ctx context.Context) error {
	n := r.spec.Machines
	if err := r.createClasses(ctx, r.spec.Boot, className); err != nil {
		return err
	}
	p, err := r.begin(ctx)
	if err != nil {
		return err
	}
	done, err := r.scaleUp(ctx, n, rollingStrategy())
	if err != nil {
		return err
	}
	r.res.ReadyToRunningP50, r.res.ReadyToRunningP99 = r.watch.reactionLatency()
	return r.end(ctx, p, done)
}

// scaleUp creates the deployment with n replicas and strategy and waits
// until it is complete.
func (r *run) scaleUp(ctx context.Context, n int, strategy v1alpha1.MachineDeploymentStrategy) (time.Time, error) {
	if err := r.createDeployment(ctx, n, strategy); err != nil {
		return time.Time{}, err
	}
	return r.waitUntil(fmt.Sprintf("the deployment's %d machines Running", n), func(s state) bool {
		return s.running == n && s.deploymentDone(n)
	})
}

// rollingUpdate is scenario R: a deployment of N Running machines gets a
// new class; maxSurge 10 %, maxUnavailable 0; until all N machines are of
// the new class and Running and the old ones are gone.
func (r *run) rollingUpdate(ctx context.Context) error {
	n := r.spec.Machines
	if err := r.createClasses(ctx, r.spec.RolloutBoot, className, nextClassName); err != nil {
		return err
	}
	progress("%s: setting up: the deployment's %d machines", r.spec, n)
	if _, err := r.scaleUp(ctx, n, rollingStrategy()); err != nil {
		return fmt.Errorf("setting up: %w", err)
	}
	if err := r.sleep(r.spec.Settle); err != nil {
		return err
	}
	progress("%s: set up; rolling the deployment to class %s", r.spec, nextClassName)
	p, err := r.begin(ctx)
	if err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"class":{"name":%q}}}}}`, nextClassName)
	if _, err := r.genMachines.MachineV1alpha1().MachineDeployments(r.ns).Patch(ctx, deploymentName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("changing the deployment's class: %w", err)
	}
	done, err := r.waitUntil(fmt.Sprintf("the rollout of %d machines", n), func(s state) bool {
		return s.machines == n && s.runningOfClass[nextClassName] == n && s.deploymentDone(n)
	})
	if err != nil {
		return err
	}
	// A wave ends when no creation follows within half the boot delay:
	// the next machines can only become available a boot delay later.
	boots := r.watch.rollout(nextClassName)
	var created, ready []time.Time
	for _, b := range boots {
		created = append(created, b.created)
		if !b.ready.IsZero() {
			ready = append(ready, b.ready)
		}
	}
	r.res.Waves, r.res.LongestGap = waves(created, ready, max(r.spec.RolloutBoot.Delay/2, 500*time.Millisecond))
	r.res.Generations, r.res.PeakBooting = generations(boots)
	return r.end(ctx, p, done)
}

// steadyState is scenario X: a deployment scaled to N, as D, then watched
// for the steady period once all machines run.
func (r *run) steadyState(ctx context.Context) error {
	if err := r.deploymentScaleUp(ctx); err != nil {
		return err
	}
	progress("%s: all Running after %v; watching the steady state for %v", r.spec, r.res.Wall.Round(time.Second), r.spec.Steady)
	before, err := measure.ScrapeRequests(ctx, r.core)
	if err != nil {
		return err
	}
	_, cpuBefore := r.sys.usage()
	managerBefore := r.proxy.requests(byManager)
	r.sys.resetWindow()
	start := time.Now()
	if err := r.sleep(r.spec.Steady); err != nil {
		return err
	}
	elapsed := time.Since(start)
	r.res.SteadyManagerWrites = r.proxy.requests(byManager).Minus(managerBefore).Writes()
	if r.spec.ProfileDir != "" && r.sys.pprof != "" {
		path := filepath.Join(r.spec.ProfileDir, fmt.Sprintf("%s-%d-%s-heap.pprof", r.spec.Scenario, r.spec.Machines, r.spec.System))
		if err := saveProfile(ctx, r.sys.pprof+"/heap?gc=1", path); err != nil {
			return fmt.Errorf("saving the heap profile: %w", err)
		}
		progress("%s: heap profile in %s", r.spec, path)
	}
	after, err := measure.ScrapeRequests(ctx, r.core)
	if err != nil {
		return err
	}
	_, cpu := r.sys.usage()
	r.res.Steady = elapsed
	_, r.res.SteadyRSS = r.sys.peaks()
	r.res.SteadyCores = (cpu - cpuBefore).Seconds() / elapsed.Seconds()
	r.res.SteadyAllWrites = after.Minus(before).Writes()
	return nil
}

// events counts the run's events by source and reason, the busiest first.
func (r *run) events(ctx context.Context) []string {
	list, err := r.core.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{"listing the events: " + err.Error()}
	}
	by := map[string]int{}
	for _, e := range list.Items {
		by[fmt.Sprintf("%s %s (%s)", cmp.Or(e.Source.Component, e.ReportingController, "unknown"), e.Reason, e.InvolvedObject.Kind)] += int(max(e.Count, 1))
	}
	keys := slices.SortedFunc(maps.Keys(by), func(a, b string) int { return cmp.Or(cmp.Compare(by[b], by[a]), strings.Compare(a, b)) })
	var out []string
	for _, k := range keys[:min(12, len(keys))] {
		out = append(out, fmt.Sprintf("%6d %s", by[k], k))
	}
	return out
}

// parallel calls f for 0..n-1 from generatorParallelism goroutines and
// returns the errors joined.
func parallel(n int, f func(i int) error) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		next = make(chan int)
	)
	for range min(n, generatorParallelism) {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// saveProfile writes the profile url answers to path.
func saveProfile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
