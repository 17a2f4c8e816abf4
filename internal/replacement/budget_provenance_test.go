package replacement

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// forgedIn is machine i of deployment's set as anyone who may create
// machines can make it (the set's controller reference and labels), with
// a UID, which its set lists as foreign when listed is true.
func forgedIn(deployment string, i int, st machineState) *v1alpha1.Machine {
	m := machineIn(deployment, i, st)
	m.Name, m.UID = fmt.Sprintf("forged-%d", i), types.UID(fmt.Sprintf("forged-%d-uid", i))
	return m
}

// listing is set with its v1alpha1.ForeignMachinesAnnotation naming the
// machines' UIDs, as its MachineSet controller writes it.
func listing(set *v1alpha1.MachineSet, machines ...*v1alpha1.Machine) *v1alpha1.MachineSet {
	v := ""
	for i, m := range machines {
		if i > 0 {
			v += ","
		}
		v += string(m.UID)
	}
	set.Annotations = map[string]string{v1alpha1.ForeignMachinesAnnotation: v}
	return set
}

// TestGroupOfForeignListed: a machine its set lists as foreign is in no
// group, and no deployment's machines count it; the set's other machines
// are in the deployment's group as before.
func TestGroupOfForeignListed(t *testing.T) {
	forged := forgedIn("pool", 1, deleting)
	own := machineIn("pool", 0, unknown)
	own.UID = "own-uid"
	pool := listing(setOf("pool"), forged)
	setOfPool := func(string, string) *v1alpha1.MachineSet { return pool }
	type result struct {
		Group replacementGroup
		OK    bool
	}
	got := map[string]result{}
	for _, m := range []*v1alpha1.Machine{forged, own} {
		g, ok := groupOf(m, setOfPool)
		got[m.Name] = result{g, ok}
	}
	want := map[string]result{
		"forged-1": {},
		"pool-0":   {replacementGroup{Kind: "MachineDeployment", Namespace: "ns", Name: "pool", UID: "pool-uid"}, true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("groupOf (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[types.UID][]*v1alpha1.Machine{"pool-uid": {own}},
		GroupByDeployment([]*v1alpha1.MachineSet{pool}, []*v1alpha1.Machine{own, forged})); diff != "" {
		t.Errorf("GroupByDeployment (-want +got):\n%s", diff)
	}
}

// TestMayReplaceIgnoresMachinesTheSetDidNotCreate: a machine forged with
// the set's controller reference, in any phase (Terminating because the
// set deleted it and a finalizer of its creator holds it, Pending, ...),
// takes no slot of the deployment, counts in neither its size nor its
// unhealthy machines, once the set lists it as foreign; unlisted (before
// the set's first sync, or with a set controller that does not keep the
// list) it counts as the set's.
func TestMayReplaceIgnoresMachinesTheSetDidNotCreate(t *testing.T) {
	ctx := context.Background()
	one := intstr.FromInt32(1)
	tests := []struct {
		name   string
		forged []machineState
		listed bool
		opts   Options
		want   string // MayReplace's answer for the deployment's Unknown machine
	}{
		{name: "a Terminating forged machine, listed", forged: []machineState{deleting}, listed: true, want: "true "},
		{name: "Pending, CrashLoopBackOff and new forged machines, listed", forged: []machineState{pending, crashLoop, creating}, listed: true, want: "true "},
		{name: "unhealthy forged machines are no outage, listed", forged: []machineState{unknown, failed}, listed: true,
			opts: Options{MaxUnhealthy: &one}, want: "true "},
		{name: "a Terminating forged machine, not listed", forged: []machineState{deleting},
			want: `false 1 of at most 1 machines of deployment "pool" are being replaced`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ms := fleet(t, unknown, running)
			var forged []*v1alpha1.Machine
			for i, st := range tt.forged {
				forged = append(forged, forgedIn("pool", 10+i, st))
				c.add(t, forged[i])
			}
			if tt.listed {
				// fleet cached the set without the list: the set as its
				// controller writes it replaces it.
				if err := c.sets.Informer().GetIndexer().Update(listing(setOf("pool"), forged...)); err != nil {
					t.Fatal(err)
				}
			}
			opts := tt.opts
			opts.MachineSets, opts.Clock = c.sets, clocktesting.NewFakePassiveClock(t0)
			b, err := New(c.machines, opts)
			if err != nil {
				t.Fatal(err)
			}
			ok, why := b.MayReplace(ctx, ms[0])
			if diff := cmp.Diff(tt.want, fmt.Sprintf("%v %s", ok, why)); diff != "" {
				t.Errorf("MayReplace (-want +got):\n%s", diff)
			}
		})
	}
}
