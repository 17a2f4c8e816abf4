package fakeapi

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
)

// ServeLifecycle is VersionWrites closer still to the API server: a
// created object also gets a UID and a creation timestamp when it has
// none, deleting an object that has finalizers only sets its deletion
// timestamp, and an object being deleted goes once a write leaves it
// without finalizers. Deletion flows that remove finalizers (a Machine's,
// a Node's) cannot run on client-go's tracker without the last two.
func ServeLifecycle(f *k8stesting.Fake, tracker k8stesting.ObjectTracker) {
	t := &lifecycle{versioned{ObjectTracker: tracker}}
	f.Lock()
	defer f.Unlock()
	f.ReactionChain = []k8stesting.Reactor{&k8stesting.SimpleReactor{Verb: "*", Resource: "*", Reaction: k8stesting.ObjectReaction(t)}}
}

type lifecycle struct{ versioned }

func (t *lifecycle) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	if m, err := meta.Accessor(obj); err == nil {
		if m.GetUID() == "" {
			m.SetUID(types.UID("uid-" + m.GetNamespace() + "-" + m.GetName()))
		}
		if ts := m.GetCreationTimestamp(); ts.IsZero() {
			m.SetCreationTimestamp(metav1.Now())
		}
	}
	return t.versioned.Create(gvr, obj, ns, opts...)
}

// finished reports whether obj is being deleted and no finalizer holds it.
func finished(obj runtime.Object) (string, bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", false
	}
	return m.GetName(), m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) == 0
}

func (t *lifecycle) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	if name, done := finished(obj); done {
		return t.ObjectTracker.Delete(gvr, ns, name)
	}
	return t.versioned.Update(gvr, obj, ns, opts...)
}

func (t *lifecycle) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	if name, done := finished(obj); done {
		return t.ObjectTracker.Delete(gvr, ns, name)
	}
	return t.versioned.Patch(gvr, obj, ns, opts...)
}

func (t *lifecycle) Delete(gvr schema.GroupVersionResource, ns, name string, opts ...metav1.DeleteOptions) error {
	obj, err := t.ObjectTracker.Get(gvr, ns, name)
	if err != nil {
		return err
	}
	m, err := meta.Accessor(obj)
	if err != nil || len(m.GetFinalizers()) == 0 {
		return t.ObjectTracker.Delete(gvr, ns, name, opts...)
	}
	if m.GetDeletionTimestamp() != nil {
		return nil
	}
	m.SetDeletionTimestamp(&metav1.Time{Time: time.Now().Truncate(time.Second)})
	return t.versioned.Update(gvr, obj, ns)
}
