// Command demo shows the whole machine lifecycle on a local control plane:
// it builds (once, cached) the test-environment binaries, starts etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler in a temp dir,
// installs the machine CRDs, runs the reference manager in this process
// with the simulated cloud (--driver=sim, whose simulated kubelet turns VMs
// into Nodes of the same cluster), applies a MachineClass, its Secret and a
// few Machines, and shows their progress until Ctrl-C. Then it stops
// everything and removes its temp files. `make run` runs it.
//
//	go run ./reference/demo [--machines 3] [--exit-when-running] [--demo-timeout 5m] [manager flags]
//
// With --control-kubeconfig it uses that cluster instead of starting one
// (without --target-kubeconfig the machines then stay Available: no
// simulated Nodes are put into a real cluster unless asked for), and
// deletes its machines again on Ctrl-C.
//
// The manager runs in-process through package reference/manager, the same
// code path as the reference binary's main: one process to stop, nothing
// to build first, and its log goes to a file so that the terminal shows
// only the progress.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testenv"
	"github.com/mcmkit/mcm/reference/manager"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // a second Ctrl-C kills at once
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// demoLabel marks the objects the demo creates.
const demoLabel = "mcm.mcmkit.io/demo"

// options are the demo's own flags; the manager's flags come on top.
type options struct {
	machines        int
	exitWhenRunning bool
	timeout         time.Duration
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := manager.DefaultConfig()
	cfg.Namespace = "mcm-demo"
	cfg.Driver = "sim"
	cfg.Port = 0
	var opts options
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.BindFlags(fs)
	fs.IntVar(&opts.machines, "machines", 3, "number of demo machines")
	fs.BoolVar(&opts.exitWhenRunning, "exit-when-running", false, "stop and clean up once all demo machines are Running (for scripts and tests)")
	fs.DurationVar(&opts.timeout, "demo-timeout", 0, "fail if the demo machines are not all Running within this long (0: no limit)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if opts.machines < 1 {
		fmt.Fprintln(stderr, "demo: --machines must be at least 1")
		return 2
	}
	d := &demo{cfg: cfg, opts: opts, out: stdout, external: set["control-kubeconfig"]}
	if err := d.run(ctx, set); err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 1
	}
	return 0
}

type demo struct {
	cfg      manager.Config
	opts     options
	out      io.Writer
	external bool // against a cluster given by --control-kubeconfig

	tmp      string // the demo's own temp dir (manager log)
	kubectl  string
	restCfg  *rest.Config
	machines versioned.Interface
	core     kubernetes.Interface
}

func (d *demo) printf(format string, args ...any) { fmt.Fprintf(d.out, format, args...) }

func (d *demo) run(ctx context.Context, set map[string]bool) (err error) {
	if d.tmp, err = os.MkdirTemp("", "mcm-demo-"); err != nil {
		return err
	}
	defer func() {
		if rmErr := os.RemoveAll(d.tmp); rmErr != nil && err == nil {
			err = rmErr
		}
	}()

	if d.external {
		if !set["target-kubeconfig"] {
			d.cfg.TargetKubeconfig = manager.NoTarget
			d.printf("No --target-kubeconfig: running without a target cluster, so machines become Available, not Running.\n")
			d.printf("Pass --target-kubeconfig (the same path is fine) to let simulated Nodes join that cluster.\n")
		}
		d.kubectl = "kubectl"
		if bin, err := testenv.BinDir(); err == nil {
			d.kubectl = filepath.Join(bin, "kubectl")
		}
	} else {
		env, err := d.startControlPlane(ctx)
		if err != nil {
			return err
		}
		defer func() {
			d.printf("Stopping the control plane...\n")
			if stopErr := env.Stop(); stopErr != nil && err == nil {
				err = stopErr
			}
		}()
		d.cfg.ControlKubeconfig = env.Kubeconfig()
		if !set["target-kubeconfig"] {
			d.cfg.TargetKubeconfig = env.Kubeconfig()
		}
	}
	if !set["port"] {
		if d.cfg.Port, err = freePort(); err != nil {
			return err
		}
		d.cfg.Address = "127.0.0.1"
	}
	logPath := filepath.Join(d.tmp, "manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	// New validates the configuration: before anything touches the cluster.
	m, err := manager.New(d.cfg, manager.Options{Logger: manager.NewLogger(logFile, d.cfg.Verbosity)})
	if err != nil {
		return err
	}
	if err := d.connect(); err != nil {
		return err
	}
	if d.external {
		d.printf("Installing the machine CRDs into %s...\n", d.restCfg.Host)
		if err := crds.Install(ctx, d.restCfg); err != nil {
			return fmt.Errorf("installing CRDs: %w", err)
		}
	}
	if err := d.apply(ctx); err != nil {
		return err
	}
	if d.external {
		defer d.deleteDemoObjects()
	}

	mctx, stopManager := context.WithCancel(context.WithoutCancel(ctx))
	managerDone := make(chan error, 1)
	go func() { managerDone <- m.Run(mctx) }()
	d.printf("Manager running in this process (--driver=%s, --namespace=%s)\n", d.cfg.Driver, d.cfg.Namespace)
	d.printf("  log:     %s\n", logPath)
	d.printf("  metrics: http://%s:%d/metrics   health: /healthz /readyz\n\n", d.cfg.Address, d.cfg.Port)

	watchErr := d.watch(ctx, managerDone)

	if d.external && watchErr == nil {
		// Deleting machines needs the manager (finalizers): do it first.
		d.deleteDemoObjects()
	}
	d.printf("Stopping the manager...\n")
	start := time.Now()
	stopManager()
	select {
	case err := <-managerDone:
		if err != nil && watchErr == nil {
			watchErr = fmt.Errorf("manager: %w", err)
		}
		d.printf("Manager stopped in %v.\n", time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		if watchErr == nil {
			watchErr = errors.New("manager did not stop within 10s")
		}
	}
	return watchErr
}

// startControlPlane builds the binaries (cached) and starts a cluster with
// the CRDs installed.
func (d *demo) startControlPlane(ctx context.Context) (*testenv.Env, error) {
	if _, err := os.Stat("hack/testenv.sh"); err == nil {
		d.printf("Building the test environment binaries (once; cached afterwards)...\n")
		cmd := exec.CommandContext(ctx, "./hack/testenv.sh")
		cmd.Stdout, cmd.Stderr = d.out, d.out
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("hack/testenv.sh: %w", err)
		}
	}
	bin, err := testenv.BinDir()
	if err != nil {
		return nil, err
	}
	d.kubectl = filepath.Join(bin, "kubectl")
	d.printf("Starting a local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)...\n")
	start := time.Now()
	env, err := testenv.Start(ctx, "demo", crds.Install)
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	d.printf("Control plane up in %v, machine CRDs installed; files in %s\n", time.Since(start).Round(100*time.Millisecond), env.Dir())
	return env, nil
}

func (d *demo) connect() error {
	var (
		cfg *rest.Config
		err error
	)
	switch d.cfg.ControlKubeconfig {
	case manager.InCluster, "inClusterConfig": // MCM's spelling, accepted by the manager
		cfg, err = rest.InClusterConfig()
	default:
		cfg, err = clientcmd.BuildConfigFromFlags("", d.cfg.ControlKubeconfig)
	}
	if err != nil {
		return fmt.Errorf("loading %s: %w", d.cfg.ControlKubeconfig, err)
	}
	d.restCfg = cfg
	if d.machines, err = versioned.NewForConfig(cfg); err != nil {
		return err
	}
	d.core, err = kubernetes.NewForConfig(cfg)
	return err
}

// apply creates the namespace, the Secret, the MachineClass and the
// Machines; objects that exist already are left as they are.
func (d *demo) apply(ctx context.Context) error {
	ns := d.cfg.Namespace
	labels := map[string]string{demoLabel: "true"}
	ignoreExists := func(err error) error {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if _, err := d.core.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-cloud", Namespace: ns, Labels: labels},
		Data: map[string][]byte{
			v1alpha1.UserDataKey: []byte("#cloud-config\n# bootstrap for <<MACHINE_NAME>>\n"),
			sim.CredentialsKey:   []byte("demo-token"),
		},
	}
	if _, err := d.core.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("creating secret: %w", err)
	}
	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "demo", Namespace: ns, Labels: labels},
		Provider:     sim.ProviderName,
		ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "small", Labels: map[string]string{"pool": "demo"}}.RawExtension(),
		SecretRef:    &corev1.SecretReference{Name: secret.Name, Namespace: ns},
	}
	if _, err := d.machines.MachineV1alpha1().MachineClasses(ns).Create(ctx, class, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("creating machine class: %w", err)
	}
	for i := 1; i <= d.opts.machines; i++ {
		m := &v1alpha1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("demo-%d", i), Namespace: ns, Labels: labels},
			Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: class.Name}},
		}
		if _, err := d.machines.MachineV1alpha1().Machines(ns).Create(ctx, m, metav1.CreateOptions{}); ignoreExists(err) != nil {
			return fmt.Errorf("creating machine %s: %w", m.Name, err)
		}
	}
	d.printf("Applied Secret demo-cloud, MachineClass demo and %d Machines in namespace %s.\n", d.opts.machines, ns)
	return nil
}

// deleteDemoObjects removes the demo's machines (waiting up to a minute
// for the manager to delete their VMs), class and secret from an external
// cluster. It runs once.
func (d *demo) deleteDemoObjects() {
	if d.machines == nil {
		return
	}
	mc, core := d.machines, d.core
	d.machines = nil
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, sel := d.cfg.Namespace, metav1.ListOptions{LabelSelector: demoLabel + "=true"}
	d.printf("Deleting the demo machines...\n")
	_ = mc.MachineV1alpha1().Machines(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
	for ctx.Err() == nil {
		list, err := mc.MachineV1alpha1().Machines(ns).List(ctx, sel)
		if err == nil && len(list.Items) == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	_ = mc.MachineV1alpha1().MachineClasses(ns).Delete(ctx, "demo", metav1.DeleteOptions{})
	_ = core.CoreV1().Secrets(ns).Delete(ctx, "demo-cloud", metav1.DeleteOptions{})
}

// row is one machine as the table shows it.
type row struct {
	name, phase, node string
	created           time.Time
}

// watch shows the machines' progress until ctx ends, the manager stops,
// or, with --exit-when-running, all are done.
func (d *demo) watch(ctx context.Context, managerDone <-chan error) error {
	done := v1alpha1.MachineRunning
	if d.cfg.TargetKubeconfig == manager.NoTarget {
		done = v1alpha1.MachineAvailable
	}
	tty := isTerminal(d.out)
	var deadline <-chan time.Time
	if d.opts.timeout > 0 {
		deadline = time.After(d.opts.timeout)
	}
	// The table reads a watch-fed cache: redrawn on every change, and once
	// a second for the AGE column; no List call per refresh.
	factory := externalversions.NewSharedInformerFactoryWithOptions(d.machines, 0,
		externalversions.WithNamespace(d.cfg.Namespace),
		externalversions.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = demoLabel + "=true" }))
	informer := factory.Machine().V1alpha1().Machines()
	lister := informer.Lister().Machines(d.cfg.Namespace)
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}); err != nil {
		return err
	}
	stopInformers := make(chan struct{})
	factory.Start(stopInformers)
	defer func() {
		close(stopInformers)
		factory.Shutdown()
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var (
		drawn     int                // lines of the table on screen (TTY)
		last      = map[string]row{} // last reported row per machine (no TTY, or after "all Running")
		announced bool
	)
	for {
		rows, err := listRows(lister)
		switch {
		case err != nil:
			d.printf("listing machines: %v\n", err)
		default:
			if tty && !announced {
				drawn = d.redraw(rows, drawn)
			} else {
				d.printChanges(rows, last)
			}
			if !announced && allPhase(rows, done, d.opts.machines) {
				announced = true
				d.printf("\nall demo machines %s\n", done)
				d.printf("Look around with:\n  %s --kubeconfig %s get mc -n %s\n", d.kubectl, d.cfg.ControlKubeconfig, d.cfg.Namespace)
				if d.cfg.TargetKubeconfig != manager.NoTarget {
					d.printf("  %s --kubeconfig %s get nodes\n", d.kubectl, d.cfg.TargetKubeconfig)
				}
				if d.opts.exitWhenRunning {
					return nil
				}
				d.printf("Press Ctrl-C to stop everything and remove the temp files.\n\n")
				for _, r := range rows {
					last[r.name] = r
				}
			}
		}
		select {
		case <-ctx.Done():
			d.printf("\nInterrupted.\n")
			return nil
		case err := <-managerDone:
			return fmt.Errorf("the manager stopped: %v", err)
		case <-deadline:
			return fmt.Errorf("the demo machines were not all %s within --demo-timeout=%v", done, d.opts.timeout)
		case <-tick.C:
		case <-changed:
		}
	}
}

// listRows reads the demo machines from the informer cache, sorted by name.
func listRows(lister machinelisters.MachineNamespaceLister) ([]row, error) {
	list, err := lister.List(labels.Everything()) // the informer selects the demo's machines
	if err != nil {
		return nil, err
	}
	rows := make([]row, 0, len(list))
	for _, m := range list {
		phase := string(m.Status.CurrentStatus.Phase)
		if m.DeletionTimestamp != nil && phase == "" {
			phase = "Terminating"
		}
		rows = append(rows, row{name: m.Name, phase: phase, node: m.Labels[v1alpha1.NodeLabelKey], created: m.CreationTimestamp.Time})
	}
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.name, b.name) })
	return rows, nil
}

func allPhase(rows []row, phase v1alpha1.MachinePhase, want int) bool {
	if len(rows) < want {
		return false
	}
	for _, r := range rows {
		if r.phase != string(phase) {
			return false
		}
	}
	return true
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// redraw replaces the previous table (drawn lines) with the current one
// and returns its height.
func (d *demo) redraw(rows []row, drawn int) int {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPHASE\tNODE\tAGE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.name, dash(r.phase), dash(r.node), age(r.created))
	}
	_ = tw.Flush()
	if drawn > 0 {
		fmt.Fprintf(d.out, "\x1b[%dA\x1b[J", drawn) // cursor up, clear to the end
	}
	_, _ = d.out.Write(buf.Bytes())
	return bytes.Count(buf.Bytes(), []byte("\n"))
}

// printChanges prints one line per machine whose phase or node changed.
func (d *demo) printChanges(rows []row, last map[string]row) {
	for _, r := range rows {
		prev, seen := last[r.name]
		if seen && prev.phase == r.phase && prev.node == r.node {
			continue
		}
		last[r.name] = r
		d.printf("%s  %-10s phase=%-12s node=%-10s age=%s\n", time.Now().Format("15:04:05"), r.name, dash(r.phase), dash(r.node), age(r.created))
	}
}

func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
