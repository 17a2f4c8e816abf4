package preservation_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// TestIntegrationAutoPreserveFailedMachineMax (acceptance 2): a deployment
// with spec.autoPreserveFailedMachineMax 2 keeps two of its Failed
// machines, the newest, marked preserve=auto-preserved with an expiry,
// neither deleted nor replaced, and counted by the set
// (autoPreserveFailedMachineCount, preservedFailedReplicas) and the
// deployment; a third Failed machine finds the maximum reached and is
// replaced. Lowering the maximum to 1 takes the mark off the older of the
// two, which is then replaced; the newer stays preserved with the same
// expiry.
//
// The machines are created a second apart, so that creation times
// (second-granular) order them. The two newest nodes break first and the
// third later: the set chooses among the Failed machines it sees, and
// machines marked Failed together still reach it one write at a time, so
// only this order makes which machines are preserved certain.
func TestIntegrationAutoPreserveFailedMachineMax(t *testing.T) {
	t.Parallel()
	s := simstack.Start(t, simstack.Options{
		Deployments: true,
		Machine: machine.Options{Machine: v1alpha1.MachineConfiguration{
			MachineHealthTimeout: &metav1.Duration{Duration: healthTimeout},
		}},
	})
	d := poolDeployment(s, "auto", 1, nil)
	d.Spec.AutoPreserveFailedMachineMax = ptr.To[int32](2)
	createDeployment(t, s, d)
	runningPool(t, s, "auto", 1)
	for replicas := 2; replicas <= 4; replicas++ {
		time.Sleep(1100 * time.Millisecond)
		patchDeployment(t, s, "auto", fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
		runningPool(t, s, "auto", replicas)
	}
	ms := runningPool(t, s, "auto", 4) // oldest first
	third, older, newest := ms[1], ms[2], ms[3]

	breakNode(s, nodeOf(&newest))
	breakNode(s, nodeOf(&older))
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		got, err := poolMachines(ctx, s, "auto")
		if err != nil {
			return false, err.Error()
		}
		preserved := 0
		for _, m := range got {
			if (m.Name == older.Name || m.Name == newest.Name) && autoPreservedFailed(&m) {
				preserved++
			}
		}
		return preserved == 2, fmt.Sprintf("want %s and %s Failed, auto-preserved, with an expiry:%s", older.Name, newest.Name, describe(got))
	})
	expiry := map[string]metav1.Time{}
	for _, name := range []string{older.Name, newest.Name} {
		m, err := getMachine(context.Background(), s, name)
		if err != nil {
			t.Fatal(err)
		}
		expiry[name] = *m.Status.CurrentStatus.PreserveExpiryTime
		if until := time.Until(expiry[name].Time); until < v1alpha1.DefaultMachinePreserveTimeout-10*time.Minute {
			t.Errorf("machine %s preserved until %v, %v from now; want MCM's default %v from its failure", name, expiry[name], until, v1alpha1.DefaultMachinePreserveTimeout)
		}
	}
	waitAutoCounts(t, s, "auto", 2, 2)

	// The maximum is reached: the third Failed machine is replaced.
	breakNode(s, nodeOf(&third))
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		got, err := poolMachines(ctx, s, "auto")
		if err != nil {
			return false, err.Error()
		}
		running, preserved := 0, 0
		for _, m := range got {
			switch {
			case m.Name == third.Name:
				return false, fmt.Sprintf("machine %s, Failed beyond the maximum, not replaced yet:%s", third.Name, describe(got))
			case autoPreservedFailed(&m) && m.DeletionTimestamp == nil:
				preserved++
			case m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning && m.DeletionTimestamp == nil:
				running++
			}
		}
		return len(got) == 4 && preserved == 2 && running == 2,
			"want the two auto-preserved machines and two Running ones, the third Failed machine replaced:" + describe(got)
	})
	waitAutoCounts(t, s, "auto", 2, 2)

	// Lowering the maximum releases the older of the two.
	patchDeployment(t, s, "auto", `{"spec":{"autoPreserveFailedMachineMax":1}}`)
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		got, err := poolMachines(ctx, s, "auto")
		if err != nil {
			return false, err.Error()
		}
		running, kept := 0, false
		for _, m := range got {
			switch {
			case m.Name == older.Name:
				return false, fmt.Sprintf("machine %s, the older auto-preserved one, not released and replaced yet:%s", older.Name, describe(got))
			case m.Name == newest.Name:
				kept = autoPreservedFailed(&m) && m.DeletionTimestamp == nil &&
					m.Status.CurrentStatus.PreserveExpiryTime.Equal(ptr.To(expiry[newest.Name]))
			case m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning && m.DeletionTimestamp == nil:
				running++
			}
		}
		return kept && len(got) == 4 && running == 3,
			fmt.Sprintf("want %s still auto-preserved until %v and three Running machines:%s", newest.Name, expiry[newest.Name], describe(got))
	})
	waitAutoCounts(t, s, "auto", 1, 1)
}

// autoPreservedFailed tells whether m is Failed, carries the set's
// auto-preserved mark and has an expiry in the future.
func autoPreservedFailed(m *v1alpha1.Machine) bool {
	cs := m.Status.CurrentStatus
	return cs.Phase == v1alpha1.MachineFailed &&
		m.Annotations[v1alpha1.PreserveAnnotation] == string(v1alpha1.PreserveAutoPreserved) &&
		cs.PreserveExpiryTime != nil && cs.PreserveExpiryTime.After(time.Now())
}

// waitAutoCounts waits until the pool's set counts auto machines with the
// auto-preserved mark and preserved Failed ones, and its deployment the
// latter too.
func waitAutoCounts(t *testing.T, s *simstack.Stack, pool string, auto, preserved int32) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		set, err := poolSet(ctx, s, pool)
		if err != nil {
			return false, err.Error()
		}
		_, deployment, err := preservedCounts(ctx, s, pool)
		if err != nil {
			return false, err.Error()
		}
		st := set.Status
		return ptr.Deref(st.AutoPreserveFailedMachineCount, -1) == auto && st.PreservedFailedReplicas == preserved && deployment == preserved,
			fmt.Sprintf("set %s: autoPreserveFailedMachineCount %v, preservedFailedReplicas %d; deployment preservedFailedReplicas %d; want %d, %d, %d",
				set.Name, ptr.Deref(st.AutoPreserveFailedMachineCount, -1), st.PreservedFailedReplicas, deployment, auto, preserved, preserved)
	})
}
