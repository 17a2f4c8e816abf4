package cachetransform

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestDropManagedFields(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	got, err := DropManagedFields(pod)
	if err != nil {
		t.Fatal(err)
	}
	if mf := got.(*corev1.Pod).ManagedFields; mf != nil {
		t.Errorf("managed fields kept: %v", mf)
	}
	// Not an object (a tombstone, say): passed through.
	if got, err := DropManagedFields("x"); err != nil || got != "x" {
		t.Errorf("DropManagedFields(non-object) = %v, %v", got, err)
	}
}

// TestSetOn: an informer that has not started gets the transform, so its
// cache holds objects without managed fields.
func TestSetOn(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}}
	f := informers.NewSharedInformerFactory(fake.NewSimpleClientset(node), 0)
	inf := f.Core().V1().Nodes().Informer()
	SetOn(inf)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("cache did not sync")
	}
	got, _ := f.Core().V1().Nodes().Lister().Get("n")
	if got == nil || got.ManagedFields != nil {
		t.Fatalf("cached node %v still has managed fields", got)
	}
	// Started informers are left alone: no panic, nothing changes.
	SetOn(inf)
}

// TestTrimNodeStatus: a node keeps the status fields mcm reads and loses
// the others, as a copy; a node with nothing to drop is not copied.
func TestTrimNodeStatus(t *testing.T) {
	const virtual = corev1.ResourceName("example.com/licenses")
	record := map[string]string{v1alpha1.LastAppliedVirtualCapacityAnnotation: `{"example.com/licenses":"4"}`}
	kept := corev1.NodeStatus{
		Capacity:        corev1.ResourceList{virtual: resource.MustParse("4")},
		Phase:           corev1.NodeRunning,
		Conditions:      []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Message: "kubelet is ready"}},
		VolumesAttached: []corev1.AttachedVolume{{Name: "kubernetes.io/csi/disk-1", DevicePath: "/dev/xvdb"}},
	}
	full := *kept.DeepCopy()
	full.Capacity[corev1.ResourceCPU] = resource.MustParse("2")
	full.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1900m")}
	full.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
	full.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.37.1", OSImage: "Garden Linux"}
	full.Images = []corev1.ContainerImage{{Names: []string{"registry.example/app@sha256:abc", "registry.example/app:1"}, SizeBytes: 1 << 30}}
	full.DaemonEndpoints = corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}}
	full.VolumesInUse = []corev1.UniqueVolumeName{"kubernetes.io/csi/disk-1"}
	withoutRecord := kept
	withoutRecord.Capacity = nil

	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        corev1.NodeStatus
	}{
		{name: "virtual capacity recorded: only its entries kept", annotations: record, want: kept},
		{name: "no record: no capacity kept", want: withoutRecord},
		{name: "unreadable record: no capacity kept", annotations: map[string]string{v1alpha1.LastAppliedVirtualCapacityAnnotation: "{"}, want: withoutRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}, Annotations: tc.annotations}, Spec: corev1.NodeSpec{ProviderID: "sim:///n"}, Status: full}
			orig := node.DeepCopy()
			got, err := Transform(node)
			if err != nil {
				t.Fatal(err)
			}
			want := &corev1.Node{ObjectMeta: orig.ObjectMeta, Spec: orig.Spec, Status: tc.want}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("trimmed node (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(orig, node); diff != "" {
				t.Errorf("the input node changed (-before +after):\n%s", diff)
			}
		})
	}
	for _, lean := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "lean", Annotations: record}, Status: kept},
		{ObjectMeta: metav1.ObjectMeta{Name: "lean"}, Status: withoutRecord},
	} {
		if got := TrimNodeStatus(lean); got != lean {
			t.Errorf("node %+v with nothing to drop was copied", lean.Status)
		}
	}
}
