package sim_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
)

// TestListMachinesIsScopedToTheClass fills one cloud with VMs of classes
// that differ from each other in one tag each, created both through the
// driver and behind its back, and checks that each class lists its own
// VMs and no other: orphan collection would delete any other.
func TestListMachinesIsScopedToTheClass(t *testing.T) {
	spec := sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}
	inCluster := func(cluster string) sim.ProviderSpec { s := spec; s.Cluster = cluster; return s }
	classes := map[string]*v1alpha1.MachineClass{
		"own":                    simClass(spec),                              // shoot/small, cluster "shoot"
		"other name":             renamed(simClass(spec), "shoot", "large"),   // same namespace and cluster
		"other namespace":        renamed(simClass(spec), "staging", "small"), // cluster "staging" by default
		"other cluster":          simClass(inCluster("other")),                // same namespace and name
		"other ns, same cluster": renamed(simClass(inCluster("shoot")), "staging", "small"),
		"explicit default":       simClass(inCluster("shoot")), // the tags of "own"
	}
	w := newWorld(t, sim.Options{})
	want := map[string]map[string]string{}
	// Each class gets a VM through CreateMachine and an orphan through
	// AddVM, under names no other class uses.
	for _, label := range []string{"own", "other name", "other namespace", "other cluster", "other ns, same cluster"} {
		class := classes[label]
		created := "created-" + slug(label)
		resp, err := w.d.CreateMachine(context.Background(), &driver.CreateMachineRequest{Machine: machine(created), MachineClass: class, Secret: w.secret})
		if err != nil {
			t.Fatalf("CreateMachine(%s) with class %q: %v", created, label, err)
		}
		orphanSpec, err := sim.VMSpecFor(class, "orphan-"+slug(label))
		if err != nil {
			t.Fatal(err)
		}
		orphan, err := w.cloud.AddVM(orphanSpec)
		if err != nil {
			t.Fatal(err)
		}
		want[label] = map[string]string{resp.ProviderID: created, orphan.ProviderID: orphanSpec.MachineName}
	}
	want["explicit default"] = want["own"]
	// A VM without tags, as one started by hand, belongs to no class.
	if _, err := w.cloud.AddVM(sim.VMSpec{MachineName: "untagged", Zone: "zone-a", InstanceType: "small"}); err != nil {
		t.Fatal(err)
	}

	got := map[string]map[string]string{}
	for label, class := range classes {
		resp, err := w.d.ListMachines(context.Background(), &driver.ListMachinesRequest{MachineClass: class, Secret: w.secret})
		if err != nil {
			t.Fatalf("ListMachines of class %q: %v", label, err)
		}
		got[label] = resp.Machines
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListMachines by class (-want +got):\n%s", diff)
	}
}

func slug(label string) string {
	out := []byte(label)
	for i, b := range out {
		if b < 'a' || b > 'z' {
			out[i] = '-'
		}
	}
	return string(out)
}

func TestClassTagsAndVMSpecFor(t *testing.T) {
	class := simClass(sim.ProviderSpec{Zone: "zone-b", InstanceType: "large", Labels: map[string]string{"pool": "blue"}})
	tags, err := sim.ClassTagsOf(class)
	if err != nil {
		t.Fatal(err)
	}
	wantTags := sim.ClassTags{Cluster: "shoot", Namespace: "shoot", Name: "small"}
	if diff := cmp.Diff(wantTags, tags); diff != "" {
		t.Errorf("ClassTagsOf (-want +got):\n%s", diff)
	}
	spec, err := sim.VMSpecFor(class, "orphan")
	if err != nil {
		t.Fatal(err)
	}
	wantSpec := sim.VMSpec{MachineName: "orphan", Zone: "zone-b", InstanceType: "large", Labels: map[string]string{"pool": "blue"}, Class: wantTags}
	if diff := cmp.Diff(wantSpec, spec); diff != "" {
		t.Errorf("VMSpecFor (-want +got):\n%s", diff)
	}

	// The VM created through the driver carries the same tags.
	w := newWorld(t, sim.Options{})
	w.class = class
	vm, _ := w.cloud.VM(w.mustCreate("m1"))
	if diff := cmp.Diff(wantTags, vm.Class); diff != "" {
		t.Errorf("tags of the created VM (-want +got):\n%s", diff)
	}

	bad := classWithRaw(runtime.RawExtension{Raw: []byte(`{"zone":"a"}`)})
	if _, err := sim.ClassTagsOf(bad); err == nil {
		t.Error("ClassTagsOf of a class without instanceType succeeded")
	}
	if _, err := sim.VMSpecFor(bad, "m"); err == nil {
		t.Error("VMSpecFor of a class without instanceType succeeded")
	}
}

// A class whose tags are all empty would list the VMs added without tags.
func TestListMachinesOfAnAnonymousClassIsInvalid(t *testing.T) {
	w := newWorld(t, sim.Options{})
	if _, err := w.cloud.AddVM(sim.VMSpec{MachineName: "untagged", Zone: "zone-a", InstanceType: "small"}); err != nil {
		t.Fatal(err)
	}
	anonymous := renamed(w.class, "", "")
	_, err := w.d.ListMachines(context.Background(), &driver.ListMachinesRequest{MachineClass: anonymous, Secret: w.secret})
	if code := driver.CodeOf(err); code != driver.InvalidArgument {
		t.Errorf("ListMachines of a class without namespace, name or cluster: code %s (%v), want InvalidArgument", code, err)
	}
}
