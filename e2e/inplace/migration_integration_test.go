package inplace_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// The set MCM v0.62.1 creates for deployment "mig" rolled to class
// "ip-new": MCM names it <deployment>-<first 5 characters of
// SafeEncodeString(hash)> and labels it (and its selector and template)
// machine-template-hash=<hash in decimal>, the hash being FNV-32a over a
// spew dump of the template (controller_utils.go ComputeHash;
// deployment_sync.go:293-320). The values were computed by MCM v0.62.1's
// own ComputeHash for the template of migrationDeployment with class
// ip-new. Our own hash of that template differs (deployment/doc.go,
// Template hash): the controller must find MCM's set by its template.
const (
	mcmNewSet  = "mig-75ff9"
	mcmNewHash = "3199581481"
)

// agentDelay is the old class's node agent's update time: long enough
// that the update of the machine MCM left mid-update is answered after the
// switch, short enough to keep the rollout quick.
const agentDelay = 5 * time.Second

// TestIntegrationSwitchFromMCMMidInPlaceRollout (issue acceptance 4): an
// InPlaceUpdate deployment (Auto, 6 machines, maxUnavailable 2) is
// switched from MCM v0.62.1 to these controllers part-way through an
// in-place rollout to a new class. Our controllers build it on the old
// class and stop; then the cluster is rewritten exactly as MCM leaves it
// (mcm-inplace-facts §3.2-3.4, §6): MCM's new set, the old set marked,
// every old node a candidate, one machine updated and transferred (its
// node's cleanup not done yet), one mid-update (InPlaceUpdating, node
// ReadyForUpdate), the others only candidates. The controllers start
// again: the rollout goes on in MCM's new set and completes, the agent
// answering the update MCM started, with the same VMs and the same
// machine objects (none deleted or created), never two sets owning a
// machine, no second new set, and at most maxUnavailable machines not
// Running at a time.
func TestIntegrationSwitchFromMCMMidInPlaceRollout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := agentStack(t)
	oldClass := createClass(t, s, "ip-old", "v1.37.1", agentDelayOf(agentDelay))
	newClass := createClass(t, s, "ip-new", "v1.37.2")
	opts := simstack.Options{Deployments: true}
	stop := s.Run(t, opts)
	create(t, s, inPlaceDeployment(s.NS, "mig", 6, oldClass))
	machines := waitRunning(t, s, 6)
	stop()

	before := providerIDs(t, machines)
	uids := map[string]types.UID{}
	for _, m := range machines {
		uids[m.Name] = m.UID
	}
	slices.SortFunc(machines, func(a, b v1alpha1.Machine) int { return strings.Compare(a.Name, b.Name) })
	mig := &mcmMigration{t: t, s: s, deployment: "mig", newClass: newClass}
	mig.startRollout(ctx, machines)
	transferred, updating := machines[0].Name, machines[1].Name
	mig.updateAndTransfer(ctx, transferred)
	mig.selectAndDrain(ctx, updating)
	mig.rolloutStatus(ctx, 1, 4)
	if n := mig.node(ctx, updating); n.Labels[v1alpha1.UpdateResultLabel] != "" {
		t.Logf("the agent answered the update of %s before the switch (%s)", updating, n.Labels[v1alpha1.UpdateResultLabel])
	}

	notRunning := watchNotRunning(t, s)
	ownership := watchOwnership(t, s, uids)
	stop = s.Run(t, opts)
	defer stop()
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) { return rolledOut(ctx, s, "v1.37.2") })

	after := waitRunning(t, s, 6)
	if ids := providerIDs(t, after); !slices.Equal(before, ids) {
		t.Errorf("the VMs changed: before %v, after %v", before, ids)
	}
	for _, m := range after {
		if uids[m.Name] != m.UID {
			t.Errorf("machine %s has UID %s, want %s: it was recreated", m.Name, m.UID, uids[m.Name])
		}
		if ref := metav1.GetControllerOf(&m); ref == nil || ref.Name != mcmNewSet {
			t.Errorf("machine %s is owned by %v, want MCM's new set %s", m.Name, ref, mcmNewSet)
		}
	}
	for _, problem := range ownership() {
		t.Error(problem)
	}
	if most := notRunning(); most > 2 {
		t.Errorf("a watch saw %d machines not Running at once after the switch, want at most maxUnavailable 2", most)
	} else {
		t.Logf("at most %d machines not Running at once after the switch", most)
	}
	checkMCMSetKept(t, s)
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		d, err := s.Machines.MachineV1alpha1().MachineDeployments(s.NS).Get(ctx, "mig", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := d.Status
		return st.UpdatedReplicas == 6 && st.AvailableReplicas == 6 && st.Replicas == 6,
			fmt.Sprintf("deployment status %+v, want 6 updated, available and in all", st)
	})
}

// checkMCMSetKept checks that the rollout ended in the set MCM created,
// under MCM's name and hash, and that no other new set appeared (rolledOut
// allows two sets only).
func checkMCMSetKept(t *testing.T, s *simstack.Stack) {
	t.Helper()
	set, err := s.Machines.MachineV1alpha1().MachineSets(s.NS).Get(context.Background(), mcmNewSet, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("MCM's new set: %v", err)
	}
	if set.Spec.Replicas != 6 || set.Labels[v1alpha1.MachineTemplateHashLabelKey] != mcmNewHash ||
		set.Spec.Selector.MatchLabels[v1alpha1.MachineTemplateHashLabelKey] != mcmNewHash {
		t.Errorf("MCM's new set %s: replicas %d, labels %v, selector %v; want 6 and MCM's hash %s kept",
			set.Name, set.Spec.Replicas, set.Labels, set.Spec.Selector.MatchLabels, mcmNewHash)
	}
}

// agentDelayOf sets a class's node agent's update delay.
func agentDelayOf(delay time.Duration) func(*sim.ProviderSpec) {
	return func(spec *sim.ProviderSpec) { spec.InPlaceUpdate.UpdateDelay = &metav1.Duration{Duration: delay} }
}

// itoa renders a replica count as MCM's annotations hold it.
func itoa(n int32) string { return strconv.FormatInt(int64(n), 10) }
