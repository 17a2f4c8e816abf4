// Package simstack runs the machine, MachineSet, MachineDeployment and
// safety controllers against the test environment's control plane, with a
// simulated cloud and kubelet (package simcluster) behind a MachineClass,
// in a namespace of the test's own. Integration tests of the controllers
// that build on each other share it, so that they run the same stack.
//
// # Usage
//
//	s := simstack.Start(t, simstack.Options{Deployments: true})
//	// create MachineSets or MachineDeployments in s.NS naming class s.Class
//
// A test that restarts the controllers prepares the stack and runs them
// itself:
//
//	s := simstack.Prepare(t, simcluster.Options{})
//	stop := s.Run(t, simstack.Options{Deployments: true})
//	// ...
//	stop()
//	s.Run(t, simstack.Options{Deployments: true})
package simstack

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/deployment"
	"github.com/mcmkit/mcm/internal/testsupport/simcluster"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
	"github.com/mcmkit/mcm/machineset"
	"github.com/mcmkit/mcm/safety/budget"
	"github.com/mcmkit/mcm/safety/orphanvms"
	"github.com/mcmkit/mcm/safety/outage"
	"github.com/mcmkit/mcm/safety/overshoot"
	"github.com/mcmkit/mcm/safety/unmanaged"
)

// Options choose the stack's controllers and configure them.
type Options struct {
	// Cluster configures the simulated cloud and kubelet.
	Cluster simcluster.Options
	// Machine configures the machine controller; a zero HealthCheckPeriod
	// becomes one second.
	Machine machine.Options
	// MachineSet configures the MachineSet controller.
	MachineSet machineset.Options
	// Deployments runs the MachineDeployment controller too, configured by
	// Deployment.
	Deployments bool
	Deployment  deployment.Options
	// Safety runs the safety pieces too, composed as the reference manager
	// composes them: one outage gate and one replacement budget (over the
	// machines of the stack's sets, per deployment) given to every
	// controller that has none, the orphan VM collection (paused by the
	// gate), the marking of nodes without a machine and the overshoot
	// check, each configured by its field below.
	Safety    bool
	Outage    outage.Options
	Budget    budget.Options
	OrphanVMs orphanvms.Options
	Unmanaged unmanaged.Options
	Overshoot overshoot.Options
}

// Stack is a running stack.
type Stack struct {
	// NS is the test's namespace; Class names a MachineClass of the
	// simulated cloud in it.
	NS, Class string
	Machines  versioned.Interface
	Core      kubernetes.Interface
	Cluster   *simcluster.Cluster
}

// Start runs the stack until t ends: Prepare, then Run.
func Start(t *testing.T, opts Options) *Stack {
	t.Helper()
	s := Prepare(t, opts.Cluster)
	s.Run(t, opts)
	return s
}

// Prepare is the stack without its controllers: the test's namespace, the
// simulated cloud and kubelet (configured by cluster) and the class. Run
// starts the controllers; a test that stops them and starts them again (a
// restart, a switch from another controller manager) calls Run twice.
func Prepare(t *testing.T, cluster simcluster.Options) *Stack {
	t.Helper()
	env := testenv.Get(t)
	s := &Stack{NS: env.Namespace(t), Machines: versioned.NewForConfigOrDie(env.Config()), Core: env.Client()}
	s.Cluster = simcluster.Start(t, s.Core, cluster)
	s.Class = createClass(context.Background(), t, s)
	return s
}

// Run runs the controllers opts chooses on s (opts.Cluster is Prepare's)
// until the returned stop is called or t ends; stop returns once they have
// stopped.
func (s *Stack) Run(t *testing.T, opts Options) (stop func()) {
	t.Helper()
	mf := externalversions.NewSharedInformerFactoryWithOptions(s.Machines, 0, externalversions.WithNamespace(s.NS))
	cf := informers.NewSharedInformerFactoryWithOptions(s.Core, 0, informers.WithNamespace(s.NS))
	tf := informers.NewSharedInformerFactory(s.Core, 0)
	if opts.Machine.HealthCheckPeriod == 0 {
		opts.Machine.HealthCheckPeriod = time.Second
	}
	var runs []func(context.Context) error
	// The safety pieces first: the controllers take the gate and the
	// budget, as in the reference manager.
	if opts.Safety {
		runs = startSafety(t, s, &opts, mf, cf, tf)
	}
	runs = append(runs, s.controllers(t, opts, mf, cf, tf)...)
	runCtx, cancel := context.WithCancel(context.Background())
	mf.Start(runCtx.Done())
	cf.Start(runCtx.Done())
	tf.Start(runCtx.Done())
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Go(func() {
			if err := run(runCtx); err != nil {
				t.Errorf("controller: %v", err)
			}
		})
	}
	stop = sync.OnceFunc(func() {
		cancel()
		wg.Wait()
		mf.Shutdown()
		cf.Shutdown()
		tf.Shutdown()
	})
	t.Cleanup(stop)
	return stop
}

// controllers builds the machine, MachineSet and (with opts.Deployments)
// MachineDeployment controllers and returns their runs.
func (s *Stack) controllers(t *testing.T, opts Options, mf externalversions.SharedInformerFactory, cf, tf informers.SharedInformerFactory) []func(context.Context) error {
	t.Helper()
	mctrl, err := machine.NewController(s.Machines, s.Core, s.Core, machine.Informers{
		Machines: mf.Machine().V1alpha1().Machines(),
		Classes:  mf.Machine().V1alpha1().MachineClasses(),
		Secrets:  cf.Core().V1().Secrets(),
		Nodes:    tf.Core().V1().Nodes(),
		Target:   tf,
	}, s.Cluster.Cloud.Driver(), opts.Machine)
	if err != nil {
		t.Fatal(err)
	}
	runs := []func(context.Context) error{func(ctx context.Context) error { return mctrl.Run(ctx, 4) }}
	sctrl, err := machineset.NewController(s.Machines, machineset.Informers{
		MachineSets: mf.Machine().V1alpha1().MachineSets(),
		Machines:    mf.Machine().V1alpha1().Machines(),
		Classes:     mf.Machine().V1alpha1().MachineClasses(),
	}, opts.MachineSet)
	if err != nil {
		t.Fatal(err)
	}
	runs = append(runs, func(ctx context.Context) error { return sctrl.Run(ctx, 2) })
	if opts.Deployments {
		dctrl, err := deployment.NewController(s.Machines, s.Core, deployment.Informers{
			Deployments: mf.Machine().V1alpha1().MachineDeployments(),
			MachineSets: mf.Machine().V1alpha1().MachineSets(),
			Machines:    mf.Machine().V1alpha1().Machines(),
			Nodes:       tf.Core().V1().Nodes(),
		}, opts.Deployment)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, func(ctx context.Context) error { return dctrl.Run(ctx, 2) })
	}
	return runs
}

// createClass creates the simulated cloud's MachineClass and its secret in
// s.NS, and returns the class's name.
func createClass(ctx context.Context, t *testing.T, s *Stack) string {
	t.Helper()
	_, class, secret := s.Cluster.MachineObjects("")
	secret.Name, secret.Namespace = "sim", s.NS
	if _, err := s.Core.CoreV1().Secrets(s.NS).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class.Namespace = s.NS
	class.SecretRef = &corev1.SecretReference{Name: "sim", Namespace: s.NS}
	if _, err := s.Machines.MachineV1alpha1().MachineClasses(s.NS).Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return class.Name
}

// startSafety builds the safety pieces of opts.Safety, hands the gate and
// the budget to the controllers of opts that have none, and returns the
// pieces' runs.
func startSafety(t *testing.T, s *Stack, opts *Options, mf externalversions.SharedInformerFactory,
	cf, tf informers.SharedInformerFactory) []func(context.Context) error {
	t.Helper()
	gate, err := outage.New(s.Machines, s.Core, opts.Outage)
	if err != nil {
		t.Fatal(err)
	}
	bopts := opts.Budget
	bopts.MachineSets = mf.Machine().V1alpha1().MachineSets()
	b, err := budget.New(mf.Machine().V1alpha1().Machines(), bopts)
	if err != nil {
		t.Fatal(err)
	}
	oopts := opts.OrphanVMs
	oopts.Outages = gate
	orphans, err := orphanvms.New(s.Machines, s.Cluster.Cloud.Driver(), orphanvms.Informers{
		Machines: mf.Machine().V1alpha1().Machines(),
		Classes:  mf.Machine().V1alpha1().MachineClasses(),
		Secrets:  cf.Core().V1().Secrets(),
	}, oopts)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := unmanaged.New(s.Core, unmanaged.Informers{Machines: mf.Machine().V1alpha1().Machines(), Nodes: tf.Core().V1().Nodes()}, opts.Unmanaged)
	if err != nil {
		t.Fatal(err)
	}
	over, err := overshoot.New(s.Machines, overshoot.Informers{
		MachineSets: mf.Machine().V1alpha1().MachineSets(),
		Deployments: mf.Machine().V1alpha1().MachineDeployments(),
		Machines:    mf.Machine().V1alpha1().Machines(),
	}, opts.Overshoot)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Machine.SafetyGate == nil {
		opts.Machine.SafetyGate = gate
	}
	if opts.Machine.ReplacementGate == nil {
		opts.Machine.ReplacementGate = b
	}
	if opts.MachineSet.SafetyGate == nil {
		opts.MachineSet.SafetyGate = gate
	}
	if opts.Deployment.SafetyGate == nil {
		opts.Deployment.SafetyGate = gate
	}
	return []func(context.Context) error{gate.Run, orphans.Run,
		func(ctx context.Context) error { return nodes.Run(ctx, 1) },
		func(ctx context.Context) error { return over.Run(ctx, 1) }}
}
