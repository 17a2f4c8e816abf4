package machineset_test

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/internal/testsupport/crashtest"
	"github.com/mcmkit/mcm/machineset"
)

var (
	machineGVR = v1alpha1.SchemeGroupVersion.WithResource("machines")
	setGVR     = v1alpha1.SchemeGroupVersion.WithResource("machinesets")
)

// laggingWatch hands on the events of a watch, each one lag later than
// it arrived, in order: an informer cache that runs behind the API server.
type laggingWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func newLaggingWatch(inner watch.Interface, lag time.Duration) *laggingWatch {
	w := &laggingWatch{inner: inner, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(w.out)
		for ev := range inner.ResultChan() {
			select {
			case <-time.After(lag):
			case <-w.stop:
				return
			}
			select {
			case w.out <- ev:
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func (w *laggingWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *laggingWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.inner.Stop()
	})
}

// crashWorld is the API server of a crash test: one set, its machines,
// and the checks made at every creation.
type crashWorld struct {
	client *fake.Clientset
	burst  int

	mu         sync.Mutex
	created    int      // machines created over the whole test
	violations []string // creations beyond replicas + burst
	names      int
}

const crashNS = "crash"

func newCrashWorld(replicas int32, burst int) *crashWorld {
	labels := map[string]string{"pool": "a"}
	set := &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: crashNS, UID: "set-uid", Generation: 1},
		Spec: v1alpha1.MachineSetSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "c"}},
			},
		},
	}
	w := &crashWorld{client: fake.NewSimpleClientset(set), burst: burst}
	// Creations are made here, under one lock, so that the count checked
	// is the count the creation lands on.
	w.client.PrependReactor("create", "machines", w.create)
	return w
}

func (w *crashWorld) create(a k8stesting.Action) (bool, runtime.Object, error) {
	m := a.(k8stesting.CreateAction).GetObject().(*v1alpha1.Machine).DeepCopy()
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.set()
	if live := len(w.live()); live+1 > int(set.Spec.Replicas)+w.burst {
		w.violations = append(w.violations, fmt.Sprintf("machine %d created for a set of %d replicas (burst %d)", live+1, set.Spec.Replicas, w.burst))
	}
	w.names++
	m.Name = fmt.Sprintf("%s%d", m.GenerateName, w.names)
	m.UID = types.UID("uid-" + m.Name)
	m.CreationTimestamp = metav1.NewTime(time.Unix(int64(w.names), 0))
	if err := w.client.Tracker().Create(machineGVR, m, crashNS); err != nil {
		return true, nil, err
	}
	w.created++
	return true, m, nil
}

func (w *crashWorld) set() *v1alpha1.MachineSet {
	obj, err := w.client.Tracker().Get(setGVR, crashNS, "pool")
	if err != nil {
		panic(err) // the test never deletes the set
	}
	return obj.(*v1alpha1.MachineSet)
}

// live are the set's machines that are not being deleted.
func (w *crashWorld) live() []v1alpha1.Machine {
	list, _ := w.client.Tracker().List(machineGVR, v1alpha1.SchemeGroupVersion.WithKind("Machine"), crashNS)
	var out []v1alpha1.Machine
	for _, m := range list.(*v1alpha1.MachineList).Items {
		if m.DeletionTimestamp == nil {
			out = append(out, m)
		}
	}
	return out
}

// scale sets the replicas as a user would: a new generation.
func (w *crashWorld) scale(replicas int32) {
	set := w.set().DeepCopy()
	set.Spec.Replicas = replicas
	set.Generation++
	if err := w.client.Tracker().Update(setGVR, set, crashNS); err != nil {
		panic(err)
	}
}

// fail makes a live machine Failed, as the machine controller would.
func (w *crashWorld) fail(i int) bool {
	live := w.live()
	if len(live) == 0 {
		return false
	}
	m := live[i%len(live)].DeepCopy()
	m.Status.CurrentStatus.Phase = v1alpha1.MachineFailed
	return w.client.Tracker().Update(machineGVR, m, crashNS) == nil
}

// converged: the set has its replicas, and its status says so for the
// current generation.
func (w *crashWorld) converged() bool {
	set := w.set()
	live := w.live()
	for _, m := range live {
		if m.Status.CurrentStatus.Phase == v1alpha1.MachineFailed {
			return false
		}
	}
	return len(live) == int(set.Spec.Replicas) && set.Status.Replicas == set.Spec.Replicas &&
		set.Status.ObservedGeneration == set.Generation
}

// fataler is what runIncarnation needs of a test, a rapid test or a
// benchmark.
type fataler interface {
	Fatalf(format string, args ...any)
}

// runIncarnation runs one controller until it crashes after crashAt
// writes (0: never) or until done holds, with watch events lag late.
func (w *crashWorld) runIncarnation(t fataler, crashAt int32, lag time.Duration, done func() bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := crashtest.New(crashAt, cancel)
	s.Attach(&w.client.Fake)
	defer s.Detach()

	// The fake API server does not replay what happened between an
	// informer's list and its watch; start the controller only once both
	// watches are open, so that none of its own writes falls in that gap.
	var watches atomic.Int32
	w.client.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		inner, err := w.client.Tracker().Watch(a.GetResource(), a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		watches.Add(1)
		return true, newLaggingWatch(inner, lag), nil
	})
	defer func() {
		w.client.Lock()
		w.client.WatchReactionChain = w.client.WatchReactionChain[1:]
		w.client.Unlock()
	}()

	f := externalversions.NewSharedInformerFactoryWithOptions(w.client, 0, externalversions.WithNamespace(crashNS))
	ctrl, err := machineset.NewController(w.client, machineset.Informers{
		MachineSets: f.Machine().V1alpha1().MachineSets(),
		Machines:    f.Machine().V1alpha1().Machines(),
	}, machineset.Options{BurstReplicas: w.burst})
	if err != nil {
		t.Fatalf("%v", err)
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return watches.Load() == 2, nil
	}); err != nil {
		t.Fatalf("informers did not start watching: %v", err)
	}
	finished := make(chan error, 1)
	go func() { finished <- ctrl.Run(logr.NewContext(ctx, logr.Discard()), 3) }()
	_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return done(), nil
	})
	cancel()
	if err := <-finished; err != nil {
		t.Fatalf("%v", err)
	}
}

// TestCrashAndLag restarts the controller at random points between its API
// writes while its cache lags behind, over scale changes and Failed
// machines: never more than replicas + burst machines exist, no expectation
// is met twice (the machines created are never more than the scale-ups
// and replacements asked for), and the set converges.
func TestCrashAndLag(t *testing.T) {
	// Each check runs several incarnations; unless asked for more with
	// -rapid.checks, run fewer than rapid's default 100.
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		_ = flag.Set("rapid.checks", "25")
		defer func() { _ = flag.Set("rapid.checks", f.DefValue) }()
	}
	rapid.Check(t, func(t *rapid.T) {
		burst := rapid.IntRange(1, 6).Draw(t, "burst")
		steps := rapid.IntRange(1, 4).Draw(t, "steps")
		w := newCrashWorld(0, burst)
		asked, replicas := 0, 0 // creations the scale-ups and failures ask for
		for i := range steps {
			target := rapid.IntRange(0, 12).Draw(t, fmt.Sprintf("replicas%d", i))
			if target > replicas {
				asked += target - replicas
			}
			replicas = target
			w.scale(int32(target))
			if rapid.Bool().Draw(t, fmt.Sprintf("fail%d", i)) && w.fail(i) {
				asked++
			}
			crashAt := rapid.Int32Range(1, 20).Draw(t, fmt.Sprintf("crashAfterWrites%d", i))
			lag := time.Duration(rapid.IntRange(0, 15).Draw(t, fmt.Sprintf("lagMillis%d", i))) * time.Millisecond
			w.runIncarnation(t, crashAt, lag, w.converged)
		}
		lag := time.Duration(rapid.IntRange(0, 15).Draw(t, "lagMillisLast")) * time.Millisecond
		w.runIncarnation(t, 0, lag, w.converged)

		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.violations) > 0 {
			t.Fatalf("too many machines: %v", w.violations)
		}
		if w.created > asked {
			t.Fatalf("%d machines created; scale-ups and failures asked for %d", w.created, asked)
		}
		if !w.converged() {
			set := w.set()
			t.Fatalf("did not converge: %d live machines for %d replicas; status %+v (generation %d)",
				len(w.live()), set.Spec.Replicas, set.Status, set.Generation)
		}
	})
}
