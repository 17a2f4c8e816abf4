package replacement

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"pgregory.net/rapid"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// standalone is a machine no set controls, labelled as deployment's
// machines are: what anyone allowed to create a Machine can make.
func standalone(name, deployment string, st machineState) *v1alpha1.Machine {
	m := machineIn(deployment, 0, st)
	m.Name, m.OwnerReferences = name, nil
	return m
}

// ownedBy returns m controlled by set instead of its own set.
func ownedBy(m *v1alpha1.Machine, set *v1alpha1.MachineSet) *v1alpha1.Machine {
	m.OwnerReferences = []metav1.OwnerReference{controlledBy(set, machineSetGVK)}
	return m
}

// orphanSet is a MachineSet no deployment controls.
func orphanSet(name string) *v1alpha1.MachineSet {
	return &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid")}}
}

func TestGroupOf(t *testing.T) {
	pool := setOf("pool")
	lonely := orphanSet("lonely")
	foreignOwned := orphanSet("foreign-owned")
	foreignOwned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "MachineDeployment", Name: "pool", UID: "pool-uid", Controller: ptr(true)}}
	cached := map[string]*v1alpha1.MachineSet{}
	for _, s := range []*v1alpha1.MachineSet{pool, lonely, foreignOwned} {
		cached[s.Namespace+"/"+s.Name] = s
	}
	inCache := func(namespace, name string) *v1alpha1.MachineSet { return cached[namespace+"/"+name] }
	noCache := func(string, string) *v1alpha1.MachineSet { return nil }

	poolGroup := replacementGroup{Kind: "MachineDeployment", Namespace: "ns", Name: "pool", UID: "pool-uid"}
	notController := machineIn("pool", 0, running)
	notController.OwnerReferences[0].Controller = nil
	otherAPI := machineIn("pool", 0, running)
	otherAPI.OwnerReferences[0].APIVersion = "apps/v1"
	staleUID := machineIn("pool", 0, running)
	staleUID.OwnerReferences[0].UID = "recreated-set-uid"
	otherNamespace := machineIn("pool", 0, running)
	otherNamespace.Namespace = "elsewhere"

	tests := []struct {
		name   string
		m      *v1alpha1.Machine
		setOf  setLookup
		want   replacementGroup
		wantOK bool
	}{
		{"a deployment's machine", machineIn("pool", 0, unknown), inCache, poolGroup, true},
		{"labelled name=pool, no owner", standalone("intruder", "pool", crashLoop), inCache, replacementGroup{}, false},
		{"an owner reference that is not the controller", notController, inCache, replacementGroup{}, false},
		{"a controller of another API group", otherAPI, inCache, replacementGroup{}, false},
		{"labelled name=pool, in a set no deployment controls", ownedBy(machineIn("pool", 0, crashLoop), lonely), inCache, replacementGroup{}, false},
		{"a set controlled by another API's MachineDeployment", ownedBy(machineIn("pool", 0, crashLoop), foreignOwned), inCache, replacementGroup{}, false},
		{"the set's name with another UID: its own set's group", staleUID, inCache,
			replacementGroup{Kind: "MachineSet", Namespace: "ns", Name: "pool-set", UID: "recreated-set-uid"}, true},
		{"a set of another namespace is not its set", otherNamespace, inCache,
			replacementGroup{Kind: "MachineSet", Namespace: "elsewhere", Name: "pool-set", UID: "pool-set-uid"}, true},
		{"no set cache: the set's group", machineIn("pool", 0, unknown), noCache,
			replacementGroup{Kind: "MachineSet", Namespace: "ns", Name: "pool-set", UID: "pool-set-uid"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := groupOf(tt.m, tt.setOf)
			if ok != tt.wantOK {
				t.Errorf("groupOf ok = %v, want %v", ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("groupOf (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGroupByDeployment: the remediation condition's grouping is by the
// deployment's UID: machines labelled with its name, machines of a set no
// deployment controls and machines of a former deployment of the same
// name count for none.
func TestGroupByDeployment(t *testing.T) {
	pool, lonely := setOf("pool"), orphanSet("lonely")
	former := setOf("pool")
	former.Name, former.UID = "pool-former", "pool-former-set-uid"
	former.OwnerReferences[0].UID = "former-pool-uid"
	own := []*v1alpha1.Machine{machineIn("pool", 0, unknown), machineIn("pool", 1, running)}
	formers := ownedBy(machineIn("pool", 2, unknown), former)
	machines := append(append([]*v1alpha1.Machine{}, own...),
		standalone("intruder-1", "pool", crashLoop), standalone("intruder-2", "pool", unknown),
		ownedBy(machineIn("pool", 3, failed), lonely), formers)

	got := GroupByDeployment([]*v1alpha1.MachineSet{pool, lonely, former}, machines)
	want := map[types.UID][]*v1alpha1.Machine{"pool-uid": own, "former-pool-uid": {formers}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GroupByDeployment (-want +got):\n%s", diff)
	}
}

// TestMayReplaceIgnoresForeignMachines is finding 6's attack on the
// budget: machines labelled name=pool that no set of pool controls, stuck
// in CrashLoopBackOff or Unknown, neither use up pool's slot nor make its
// machines look like an outage; the deployment's own replacements, in any
// of its sets, still do.
func TestMayReplaceIgnoresForeignMachines(t *testing.T) {
	ctx := context.Background()
	zero := intstr.FromInt32(0)
	lonely := orphanSet("lonely")
	intruders := []any{
		standalone("intruder-1", "pool", crashLoop), standalone("intruder-2", "pool", crashLoop),
		standalone("intruder-3", "pool", unknown),
		lonely, ownedBy(machineIn("pool", 7, crashLoop), lonely),
	}
	t.Run("intruders hold no slot", func(t *testing.T) {
		c, ms := fleet(t, unknown, running, running)
		c.add(t, intruders...)
		b := budget(t, c, nil, clocktesting.NewFakePassiveClock(t0))
		if ok, why := b.MayReplace(ctx, ms[0]); !ok {
			t.Fatalf("pool's unknown machine held back by foreign machines: %s", why)
		}
	})
	t.Run("intruders are not an outage", func(t *testing.T) {
		c, ms := fleet(t, unknown, running, running)
		c.add(t, intruders...)
		max := intstr.FromInt32(1)
		b, err := New(c.machines, Options{MaxUnhealthy: &max, MachineSets: c.sets, Clock: clocktesting.NewFakePassiveClock(t0)})
		if err != nil {
			t.Fatal(err)
		}
		if ok, why := b.MayReplace(ctx, ms[0]); !ok {
			t.Fatalf("pool's unknown machine short-circuited by foreign machines: %s", why)
		}
	})
	t.Run("an intruder itself is never held back", func(t *testing.T) {
		c, _ := fleet(t, failed)
		b, err := New(c.machines, Options{MaxUnhealthy: &zero, MachineSets: c.sets})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []*v1alpha1.Machine{standalone("intruder-3", "pool", unknown), ownedBy(machineIn("pool", 7, unknown), lonely)} {
			if ok, why := b.MayReplace(ctx, m); !ok {
				t.Errorf("%s, of no deployment, held back: %s", m.Name, why)
			}
		}
	})
	t.Run("a replacement in the deployment's other set holds the slot", func(t *testing.T) {
		c, ms := fleet(t, unknown, running)
		next := setOf("pool")
		next.Name, next.UID = "pool-next", "pool-next-uid"
		c.add(t, next, ownedBy(machineIn("pool", 9, pending), next))
		b := budget(t, c, nil, clocktesting.NewFakePassiveClock(t0))
		ok, why := b.MayReplace(ctx, ms[0])
		if want := `1 of at most 1 machines of deployment "pool" are being replaced`; ok || why != want {
			t.Errorf("MayReplace = %v, %q; want no, %q", ok, why, want)
		}
	})
	t.Run("without a set cache each set counts on its own", func(t *testing.T) {
		c, ms := fleet(t, unknown, failed)
		c.add(t, intruders...)
		b, err := New(c.machines, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ok, why := b.MayReplace(ctx, ms[0])
		if want := `1 of at most 1 machines of machine set "pool-set" are being replaced`; ok || why != want {
			t.Errorf("MayReplace = %v, %q; want no, %q", ok, why, want)
		}
		if ok, why := b.MayReplace(ctx, standalone("intruder-3", "pool", unknown)); !ok {
			t.Errorf("a machine of no set held back: %s", why)
		}
	})
}

// TestMayReplaceForeignMachinesChangeNothing: whatever machines outside a
// deployment's sets exist, in whatever phase and with whatever labels,
// the budget answers its machines as it would without them.
func TestMayReplaceForeignMachinesChangeNothing(t *testing.T) {
	phases := []machineState{unknown, running, failed, deleting, pending, crashLoop, creating}
	rapid.Check(t, func(rt *rapid.T) {
		own := rapid.SliceOfN(rapid.SampledFrom(phases), 1, 8).Draw(rt, "own")
		foreign := rapid.SliceOfN(rapid.SampledFrom(phases), 0, 8).Draw(rt, "foreign")
		max := intstr.FromInt32(int32(rapid.IntRange(0, 3).Draw(rt, "max")))
		maxUnhealthy := intstr.FromInt32(int32(rapid.IntRange(0, 4).Draw(rt, "maxUnhealthy")))
		asks := rapid.SliceOfN(rapid.IntRange(0, len(own)-1), 1, 4).Draw(rt, "asks")

		answers := func(withForeign bool) []string {
			c := newCaches()
			c.add(rt, setOf("pool"))
			var ms []*v1alpha1.Machine
			for i, st := range own {
				ms = append(ms, machineIn("pool", i, st))
				c.add(rt, ms[i])
			}
			if withForeign {
				lonely := orphanSet("lonely")
				c.add(rt, lonely)
				for i, st := range foreign {
					m := standalone(fmt.Sprintf("intruder-%d", i), "pool", st)
					if i%2 == 1 {
						m = ownedBy(machineIn("pool", 100+i, st), lonely)
					}
					c.add(rt, m)
				}
			}
			b, err := New(c.machines, Options{Max: &max, MaxUnhealthy: &maxUnhealthy, MachineSets: c.sets,
				Clock: clocktesting.NewFakePassiveClock(t0)})
			if err != nil {
				rt.Fatal(err)
			}
			var out []string
			for _, i := range asks {
				ok, why := b.MayReplace(context.Background(), ms[i])
				out = append(out, fmt.Sprintf("%v %s", ok, why))
			}
			return out
		}
		if diff := cmp.Diff(answers(false), answers(true)); diff != "" {
			rt.Fatalf("foreign machines changed the answers (-without +with):\n%s", diff)
		}
	})
}
