package machineset_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machineset"
)

// replicaWorld is the MachineSet controller alone on the real control
// plane, in a namespace of its own, with a client limited to qps requests
// a second as the reference manager's is, and events recorded to the API
// server. No machine controller runs: machines keep no phase, and those
// the set deletes keep their finalizer (the test's cleanup removes it).
type replicaWorld struct {
	t        *testing.T
	ns       string
	machines versioned.Interface // the test's own, unlimited
	cfg      *rest.Config        // the controller's
	opts     machineset.Options
	stop     func() // stops the running controller
}

func startReplicaWorld(t *testing.T, qps float32, burst int, opts machineset.Options) *replicaWorld {
	t.Helper()
	env := testenv.Get(t)
	w := &replicaWorld{t: t, ns: env.Namespace(t), machines: versioned.NewForConfigOrDie(env.Config()), opts: opts}
	w.cfg = rest.CopyConfig(env.Config())
	w.cfg.QPS, w.cfg.Burst = qps, burst
	w.startController()
	t.Cleanup(func() {
		w.stop()
		w.releaseFinalizers()
	})
	return w
}

// startController starts a controller with informers of its own, as a
// new process would.
func (w *replicaWorld) startController() {
	t := w.t
	t.Helper()
	client := versioned.NewForConfigOrDie(w.cfg)
	opts := w.opts
	var stopRecording func()
	opts.Recorder, stopRecording = apiRecorder(t)
	f := externalversions.NewSharedInformerFactoryWithOptions(client, 0, externalversions.WithNamespace(w.ns))
	ctrl, err := machineset.NewController(client, machineset.Informers{
		MachineSets: f.Machine().V1alpha1().MachineSets(),
		Machines:    f.Machine().V1alpha1().Machines(),
	}, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := ctrl.Run(ctx, 2); err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	w.stop = func() {
		cancel()
		wg.Wait()
		f.Shutdown()
		stopRecording()
	}
}

// apiRecorder records events to the API server; stop ends it.
func apiRecorder(t *testing.T) (record.EventRecorder, func()) {
	t.Helper()
	evScheme := runtime.NewScheme()
	if err := scheme.AddToScheme(evScheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(evScheme); err != nil {
		t.Fatal(err)
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: testenv.Get(t).Client().CoreV1().Events("")})
	return broadcaster.NewRecorder(evScheme, corev1.EventSource{Component: "machineset-test"}), broadcaster.Shutdown
}

// releaseFinalizers lets the machines the set deleted go, as the machine
// controller would have.
func (w *replicaWorld) releaseFinalizers() {
	ctx := context.Background()
	list, err := w.machines.MachineV1alpha1().Machines(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Errorf("listing machines: %v", err)
		return
	}
	for _, m := range list.Items {
		if len(m.Finalizers) == 0 {
			continue
		}
		if _, err := w.machines.MachineV1alpha1().Machines(w.ns).Patch(ctx, m.Name, types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			w.t.Errorf("releasing machine %s: %v", m.Name, err)
		}
	}
}

func (w *replicaWorld) createSet(name string, replicas int32) {
	w.t.Helper()
	labels := map[string]string{"pool": name}
	set := &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec: v1alpha1.MachineSetSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "none"}},
			},
		},
	}
	if _, err := w.machines.MachineV1alpha1().MachineSets(w.ns).Create(context.Background(), set, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *replicaWorld) patchSet(name, patch string) *v1alpha1.MachineSet {
	w.t.Helper()
	set, err := w.machines.MachineV1alpha1().MachineSets(w.ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return set
}

// waitObserved waits until the controller has synced set's generation:
// its cache then shows set as written, or a later version of it.
func (w *replicaWorld) waitObserved(set *v1alpha1.MachineSet) {
	w.t.Helper()
	testenv.Eventually(w.t, time.Minute, func(ctx context.Context) (bool, string) {
		got, err := w.machines.MachineV1alpha1().MachineSets(w.ns).Get(ctx, set.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.ObservedGeneration >= set.Generation, fmt.Sprintf("observed generation %d of %d", got.Status.ObservedGeneration, set.Generation)
	})
}

// live counts the machines not being deleted.
func (w *replicaWorld) live(ctx context.Context) (int, error) {
	list, err := w.machines.MachineV1alpha1().Machines(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range list.Items {
		if m.DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}

// waitLive waits until exactly want machines are not being deleted.
func (w *replicaWorld) waitLive(want int) {
	w.t.Helper()
	w.waitLiveFor(want, func(n int) bool { return n == want })
}

// waitLiveFor waits until ok holds for the number of machines not being
// deleted.
func (w *replicaWorld) waitLiveFor(want int, ok func(int) bool) {
	w.t.Helper()
	testenv.Eventually(w.t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		n, err := w.live(ctx)
		return err == nil && ok(n), fmt.Sprintf("%d live machines, want %d (%v)", n, want, err)
	})
}

// TestIntegrationReplicaCeiling is the repro of replicas: 2147483647,
// which created machines at the client's rate with no event: the set
// keeps the ceiling's machines, never more, and says so in its condition
// and a Warning event; lowered within the ceiling, it loses the condition.
func TestIntegrationReplicaCeiling(t *testing.T) {
	t.Parallel()
	const ceiling = 25
	w := startReplicaWorld(t, 20, 30, machineset.Options{MaxReplicas: ceiling})
	w.createSet("huge", math.MaxInt32)
	w.waitLive(ceiling)
	var set *v1alpha1.MachineSet
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		var err error
		set, err = w.machines.MachineV1alpha1().MachineSets(w.ns).Get(ctx, "huge", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range set.Status.Conditions {
			if string(c.Type) == v1alpha1.ReplicasCappedCondition && c.Status == v1alpha1.ConditionTrue && c.Reason == v1alpha1.TooManyReplicasReason {
				return set.Status.Replicas == ceiling, fmt.Sprintf("status replicas %d", set.Status.Replicas)
			}
		}
		return false, fmt.Sprintf("conditions %+v", set.Status.Conditions)
	})
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		events, err := testenv.Get(t).Client().CoreV1().Events(w.ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + v1alpha1.TooManyReplicasReason})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "huge" && e.Type == corev1.EventTypeWarning {
				return true, ""
			}
		}
		return false, fmt.Sprintf("no %s Warning event among %d", v1alpha1.TooManyReplicasReason, len(events.Items))
	})
	// A sync after the ceiling was reached creates nothing: the spec
	// change's generation is observed with the ceiling's machines.
	w.waitObserved(w.patchSet("huge", `{"spec":{"minReadySeconds":1}}`))
	if n, err := w.live(context.Background()); err != nil || n != ceiling {
		t.Fatalf("%d live machines after another sync, want the ceiling's %d (%v)", n, ceiling, err)
	}

	w.patchSet("huge", `{"spec":{"replicas":10}}`)
	w.waitLive(10)
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		got, err := w.machines.MachineV1alpha1().MachineSets(w.ns).Get(ctx, "huge", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range got.Status.Conditions {
			if string(c.Type) == v1alpha1.ReplicasCappedCondition {
				return false, fmt.Sprintf("condition left: %+v", c)
			}
		}
		return true, ""
	})
}

// TestIntegrationScaleDownCancelsCreations is the repro of creations that
// went on for seconds after a scale to 0: with a client of one request a
// second after a burst of 10, a set of 1000 is scaled to 0 once its first
// 10 machines exist, while the rest of its first sync's creations wait
// for the rate limiter. Only what was already sent may still be created;
// the set then holds no machine, and scaled to 3 it makes exactly 3: its
// expectations did not wait for the creations it canceled.
func TestIntegrationScaleDownCancelsCreations(t *testing.T) {
	t.Parallel()
	w := startReplicaWorld(t, 1, 10, machineset.Options{SlowStartInitialBatch: 16})
	ctx := context.Background()
	machines := w.machines.MachineV1alpha1().Machines(w.ns)
	start, err := machines.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watcher, err := machines.Watch(ctx, metav1.ListOptions{ResourceVersion: start.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()

	w.createSet("big", 1000)
	w.waitLiveFor(10, func(n int) bool { return n >= 10 })
	scaled := w.patchSet("big", `{"spec":{"replicas":0}}`)
	w.waitLive(0)
	// Watch the creations until the set tells it canceled the rest; the
	// creations' resourceVersions tell which came after the scale-down.
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		events, err := testenv.Get(t).Client().CoreV1().Events(w.ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + machineset.ReasonCreateCanceled})
		return err == nil && len(events.Items) > 0, fmt.Sprintf("no %s event (%v)", machineset.ReasonCreateCanceled, err)
	})
	after, total := 0, 0
	scaledAt := resourceVersion(t, scaled.ResourceVersion)
	for drained := false; !drained; {
		select {
		case ev := <-watcher.ResultChan():
			if ev.Type != watch.Added {
				continue
			}
			total++
			if m, ok := ev.Object.(*v1alpha1.Machine); ok && resourceVersion(t, m.ResourceVersion) > scaledAt {
				after++
			}
		case <-time.After(2 * time.Second):
			drained = true
		}
	}
	t.Logf("%d machines created, %d of them after the scale-down", total, after)
	// The one request the rate limiter let go while the scale-down was on
	// its way to the controller, and one in flight.
	if after > 2 {
		t.Errorf("%d machines were created after the scale to 0, want at most the 2 that may have been sent already", after)
	}
	w.patchSet("big", `{"spec":{"replicas":3}}`)
	w.waitLive(3)
}

// resourceVersion reads an etcd-backed resourceVersion, which the test
// compares: opaque to clients, a revision number in practice.
func resourceVersion(t *testing.T, rv string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", rv, err)
	}
	return n
}
