package machine_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/machine"
)

// world is a running controller with its clients, cloud and (optionally)
// simulated kubelet, in one namespace.
type world struct {
	t       *testing.T
	ns      string
	prefix  string
	mc      versioned.Interface
	core    kubernetes.Interface
	cloud   *sim.Cloud
	kubelet *sim.Kubelet
	ctrl    *machine.Controller
	stop    func()
}

type worldOptions struct {
	noTarget bool
	cloud    sim.Options
	kubelet  sim.KubeletOptions
	ctrl     machine.Options
	drv      func(driver.Driver) driver.Driver
	// wrap wraps the transport of the controller's own clients of the
	// control and target cluster (the tests' clients and the kubelet's
	// are not wrapped).
	wrap func(http.RoundTripper) http.RoundTripper
}

// startController builds a controller on fresh informers and runs it until
// the returned stop function is called (or the test ends).
func startController(t *testing.T, mc versioned.Interface, core kubernetes.Interface, ns string, d driver.Driver, noTarget bool, opts machine.Options) (*machine.Controller, func()) {
	t.Helper()
	mf := externalversions.NewSharedInformerFactoryWithOptions(mc, 0, externalversions.WithNamespace(ns))
	kf := informers.NewSharedInformerFactoryWithOptions(core, 0, informers.WithNamespace(ns))
	inf := machine.Informers{
		Machines: mf.Machine().V1alpha1().Machines(),
		Classes:  mf.Machine().V1alpha1().MachineClasses(),
		Secrets:  kf.Core().V1().Secrets(),
	}
	var target kubernetes.Interface
	var tf informers.SharedInformerFactory
	if !noTarget {
		target = core
		tf = informers.NewSharedInformerFactory(core, 0)
		inf.Nodes = tf.Core().V1().Nodes()
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = testr.NewWithOptions(t, testr.Options{Verbosity: 1})
	}
	ctrl, err := machine.NewController(mc, core, target, inf, d, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mf.Start(ctx.Done())
	kf.Start(ctx.Done())
	if tf != nil {
		tf.Start(ctx.Done())
	}
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx, 8) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller Run: %v", err)
		}
		mf.Shutdown()
		kf.Shutdown()
		if tf != nil {
			tf.Shutdown()
		}
	}
	t.Cleanup(stop)
	return ctrl, stop
}

// createClass creates a sim class "sim" and its secret "sim-secret".
func createClass(t *testing.T, mc versioned.Interface, core kubernetes.Interface, ns string, userData bool) *v1alpha1.MachineClass {
	t.Helper()
	ctx := context.Background()
	data := map[string][]byte{sim.CredentialsKey: []byte("token")}
	if userData {
		data[v1alpha1.UserDataKey] = []byte("#!/bin/sh\necho <<MACHINE_NAME>>\n")
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sim-secret", Namespace: ns}, Data: data}
	if _, err := core.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "sim", Namespace: ns},
		Provider:     sim.ProviderName,
		ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "m1", Labels: map[string]string{"pool": "sim"}}.RawExtension(),
		SecretRef:    &corev1.SecretReference{Name: "sim-secret", Namespace: ns},
	}
	created, err := mc.MachineV1alpha1().MachineClasses(ns).Create(ctx, class, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func newMachine(ns, name, class string, labels map[string]string) *v1alpha1.Machine {
	return &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: class}},
	}
}

func createMachine(t *testing.T, mc versioned.Interface, m *v1alpha1.Machine) {
	t.Helper()
	if _, err := mc.MachineV1alpha1().Machines(m.Namespace).Create(context.Background(), m, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func getMachine(ctx context.Context, mc versioned.Interface, ns, name string) (*v1alpha1.Machine, error) {
	return mc.MachineV1alpha1().Machines(ns).Get(ctx, name, metav1.GetOptions{})
}

// phaseIs returns a condition for eventually: the machine has phase.
func phaseIs(mc versioned.Interface, ns, name string, phase v1alpha1.MachinePhase) func(context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		m, err := getMachine(ctx, mc, ns, name)
		if err != nil {
			return false, err.Error()
		}
		return m.Status.CurrentStatus.Phase == phase, fmt.Sprintf("machine %s phase %q, lastOperation %+v", name, m.Status.CurrentStatus.Phase, m.Status.LastOperation)
	}
}

func machineGone(mc versioned.Interface, ns, name string) func(context.Context) (bool, string) {
	last := "not read yet"
	return func(ctx context.Context) (bool, string) {
		m, err := getMachine(ctx, mc, ns, name)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			// The last poll may fail at the deadline: keep what was seen.
			return false, fmt.Sprintf("%v; last seen: %s", err, last)
		}
		last = fmt.Sprintf("machine %s still there: step %q, lastOperation %+v", name, m.Annotations[machine.DeletionStepAnnotation], m.Status.LastOperation)
		return false, last
	}
}

// recordedEvent is an event an eventLog received.
type recordedEvent struct {
	Object, Type, Reason, Message string // Object: the name of the object it is about
}

// eventLog records events without ever blocking the controller (a
// record.FakeRecorder drops or blocks when its channel is full, and does
// not say which object an event is about).
type eventLog struct {
	mu     sync.Mutex
	events []recordedEvent
}

var _ record.EventRecorder = (*eventLog)(nil)

func (l *eventLog) Event(obj runtime.Object, eventtype, reason, message string) {
	e := recordedEvent{Type: eventtype, Reason: reason, Message: message}
	if o, ok := obj.(metav1.Object); ok {
		e.Object = o.GetName()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	l.Event(obj, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (l *eventLog) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	l.Eventf(obj, eventtype, reason, messageFmt, args...)
}

func (l *eventLog) all() []recordedEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// of returns the events about the named object with one of the reasons.
func (l *eventLog) of(name string, reasons ...string) []recordedEvent {
	var out []recordedEvent
	for _, e := range l.all() {
		if e.Object == name && slices.Contains(reasons, e.Reason) {
			out = append(out, e)
		}
	}
	return out
}
