package ownership

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
)

var setKind = v1alpha1.SchemeGroupVersion.WithKind("MachineSet")

func TestCanAdopt(t *testing.T) {
	set := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "set-uid"}}
	deleting := set.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	deleting.Finalizers = []string{"keep"}
	recreated := set.DeepCopy()
	recreated.UID = "another-uid"
	tests := []struct {
		name    string
		stored  *v1alpha1.MachineSet // nil: not found
		want    bool
		wantErr bool
	}{
		{name: "same set", stored: set, want: true},
		{name: "deleted and re-created under the name", stored: recreated},
		{name: "being deleted", stored: deleting},
		{name: "gone", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			if tt.stored != nil {
				objs = append(objs, tt.stored)
			}
			client := fake.NewSimpleClientset(objs...)
			got, err := CanAdopt(context.Background(), client.MachineV1alpha1().MachineSets("ns").Get, set)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("CanAdopt = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
			for _, a := range client.Actions() {
				if a.GetVerb() != "get" {
					t.Errorf("CanAdopt made a %s call", a.GetVerb())
				}
			}
		})
	}
}

// patches returns the bodies of the patches client received.
func patches(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			out = append(out, string(p.GetPatch()))
		}
	}
	return out
}

func TestAdoptAndRelease(t *testing.T) {
	set := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "set-uid"}}
	ref := ControllerRef(set, setKind)
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "cm-uid"}
	orphan := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", UID: "m-uid",
		ResourceVersion: "7", OwnerReferences: []metav1.OwnerReference{other}}}
	owned := orphan.DeepCopy()
	owned.OwnerReferences = []metav1.OwnerReference{other, ref}
	ctx := context.Background()

	client := fake.NewSimpleClientset(orphan)
	machines := client.MachineV1alpha1().Machines("ns")
	adopted, err := Adopt(ctx, machines.Patch, orphan, ref, "test")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(owned.OwnerReferences, adopted.OwnerReferences); diff != "" {
		t.Errorf("owners after Adopt (-want +got):\n%s", diff)
	}
	want := []string{`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"cm","uid":"cm-uid"},` +
		`{"apiVersion":"machine.sapcloud.io/v1alpha1","blockOwnerDeletion":true,"controller":true,"kind":"MachineSet","name":"pool","uid":"set-uid"}],"resourceVersion":"7"}}`}
	if diff := cmp.Diff(want, patches(client)); diff != "" {
		t.Errorf("Adopt's patch, guarded by the resourceVersion read (-want +got):\n%s", diff)
	}

	client.ClearActions()
	if got, err := Adopt(ctx, machines.Patch, owned, ref, "test"); err != nil || got != owned || len(client.Actions()) > 0 {
		t.Errorf("Adopt of a machine the set controls already: %v, %v, %d calls; want it back untouched", got, err, len(client.Actions()))
	}

	released, err := Release(ctx, machines.Patch, owned, set, "test")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]metav1.OwnerReference{other}, released.OwnerReferences); diff != "" {
		t.Errorf("owners after Release (-want +got):\n%s", diff)
	}
	want = []string{`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"cm","uid":"cm-uid"}],"resourceVersion":"7"}}`}
	if diff := cmp.Diff(want, patches(client)); diff != "" {
		t.Errorf("Release's patch (-want +got):\n%s", diff)
	}
}

func TestReleaseOfAGoneObject(t *testing.T) {
	set := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "set-uid"}}
	gone := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", ResourceVersion: "3",
		OwnerReferences: []metav1.OwnerReference{ControllerRef(set, setKind)}}}
	client := fake.NewSimpleClientset()
	got, err := Release(context.Background(), client.MachineV1alpha1().Machines("ns").Patch, gone, set, "test")
	if err != nil || got != gone {
		t.Errorf("Release of a machine that is gone: %v, %v; want it back and no error", got, err)
	}
	// Adopting a gone object fails: the owner must not count it.
	orphan := gone.DeepCopy()
	orphan.OwnerReferences = nil
	_, err = Adopt(context.Background(), client.MachineV1alpha1().Machines("ns").Patch, orphan, ControllerRef(set, setKind), "test")
	if !apierrors.IsNotFound(err) {
		t.Errorf("Adopt of a machine that is gone: %v, want NotFound", err)
	}
	client.PrependReactor("patch", "machines", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("refused")
	})
	if _, err := Release(context.Background(), client.MachineV1alpha1().Machines("ns").Patch, gone, set, "test"); err == nil {
		t.Error("a refused release did not fail")
	}
}
