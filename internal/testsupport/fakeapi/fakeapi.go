// Package fakeapi makes client-go's fake clientsets behave more like an API
// server where controllers depend on it: every write gets a new
// resourceVersion (VersionWrites); with ServeLifecycle, created objects
// also get a UID and a creation time, and finalizers hold deleted objects
// as the API server does. Events records the reasons of the events a controller
// under test records. Without one, a controller that waits for its cache to
// show its own write, or ignores update events whose resourceVersion did
// not change (resyncs), cannot be tested on a fake clientset.
//
// # Usage
//
//	client := fake.NewSimpleClientset(objs...)
//	fakeapi.VersionWrites(&client.Fake, client.Tracker())
//	fakeapi.ServeLifecycle(&other.Fake, other.Tracker()) // finalizers too
package fakeapi

import (
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

// VersionWrites replaces the object reactions of f (a fake clientset's
// embedded Fake, before any reactor is added to it) with ones on tracker
// that stamp every created, updated and patched object with the next
// resourceVersion, as the API server does. Watches are untouched: they
// read the same tracker.
func VersionWrites(f *k8stesting.Fake, tracker k8stesting.ObjectTracker) {
	t := &versioned{ObjectTracker: tracker}
	f.Lock()
	defer f.Unlock()
	f.ReactionChain = []k8stesting.Reactor{&k8stesting.SimpleReactor{Verb: "*", Resource: "*", Reaction: k8stesting.ObjectReaction(t)}}
}

type versioned struct {
	k8stesting.ObjectTracker
	last atomic.Uint64
}

func (t *versioned) stamp(obj runtime.Object) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetResourceVersion(strconv.FormatUint(t.last.Add(1), 10))
	}
}

func (t *versioned) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	t.stamp(obj)
	return t.ObjectTracker.Create(gvr, obj, ns, opts...)
}

func (t *versioned) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	t.stamp(obj)
	return t.ObjectTracker.Update(gvr, obj, ns, opts...)
}

func (t *versioned) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	t.stamp(obj)
	return t.ObjectTracker.Patch(gvr, obj, ns, opts...)
}

// Events is an event recorder for tests (a record.EventRecorder): it
// keeps the reasons of the events recorded through it. The zero value is
// ready; it is safe for concurrent use.
type Events struct {
	mu      sync.Mutex
	reasons []string
}

var _ record.EventRecorder = (*Events)(nil)

// Event records the event's reason.
func (e *Events) Event(_ runtime.Object, _, reason, _ string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reasons = append(e.reasons, reason)
}

// Eventf records the event's reason.
func (e *Events) Eventf(obj runtime.Object, eventtype, reason, _ string, _ ...any) {
	e.Event(obj, eventtype, reason, "")
}

// AnnotatedEventf records the event's reason.
func (e *Events) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, _ string, _ ...any) {
	e.Event(obj, eventtype, reason, "")
}

// Count is how many events with reason were recorded.
func (e *Events) Count(reason string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, r := range e.reasons {
		if r == reason {
			n++
		}
	}
	return n
}
