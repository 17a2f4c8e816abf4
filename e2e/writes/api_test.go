package writes

import (
	"strconv"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
)

// serve makes f's object reactions those of an API server closer to the
// real one than client-go's fake tracker: every write gets a new
// resourceVersion, a created object its UID and creation timestamp, a
// deleted object that still has finalizers only its deletion timestamp,
// and an object being deleted goes once a write leaves it without
// finalizers. The deletion flows of the machine controller (a Machine's
// and a Node's finalizer) cannot run without the last two, and their
// writes are among those counted.
func serve(f *k8stesting.Fake, tracker k8stesting.ObjectTracker) {
	a := &apiServer{ObjectTracker: tracker}
	f.Lock()
	defer f.Unlock()
	f.ReactionChain = []k8stesting.Reactor{&k8stesting.SimpleReactor{Verb: "*", Resource: "*", Reaction: k8stesting.ObjectReaction(a)}}
}

type apiServer struct {
	k8stesting.ObjectTracker
	version atomic.Uint64
}

func (a *apiServer) stamp(obj runtime.Object) metav1.Object {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	m.SetResourceVersion(strconv.FormatUint(a.version.Add(1), 10))
	return m
}

func (a *apiServer) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	if m := a.stamp(obj); m != nil {
		if m.GetUID() == "" {
			m.SetUID(types.UID("uid-" + m.GetNamespace() + "-" + m.GetName()))
		}
		if ts := m.GetCreationTimestamp(); ts.IsZero() {
			m.SetCreationTimestamp(metav1.Now())
		}
	}
	return a.ObjectTracker.Create(gvr, obj, ns, opts...)
}

func (a *apiServer) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	if m := a.stamp(obj); m != nil && m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) == 0 {
		return a.ObjectTracker.Delete(gvr, ns, m.GetName())
	}
	return a.ObjectTracker.Update(gvr, obj, ns, opts...)
}

func (a *apiServer) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	if m := a.stamp(obj); m != nil && m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) == 0 {
		return a.ObjectTracker.Delete(gvr, ns, m.GetName())
	}
	return a.ObjectTracker.Patch(gvr, obj, ns, opts...)
}

func (a *apiServer) Delete(gvr schema.GroupVersionResource, ns, name string, opts ...metav1.DeleteOptions) error {
	obj, err := a.ObjectTracker.Get(gvr, ns, name)
	if err != nil {
		return err
	}
	m, err := meta.Accessor(obj)
	if err != nil || len(m.GetFinalizers()) == 0 {
		return a.ObjectTracker.Delete(gvr, ns, name, opts...)
	}
	if m.GetDeletionTimestamp() != nil {
		return nil
	}
	m.SetDeletionTimestamp(&metav1.Time{Time: time.Now().Truncate(time.Second)})
	a.stamp(obj)
	return a.ObjectTracker.Update(gvr, obj, ns)
}
