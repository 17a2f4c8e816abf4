package preservation_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// TestIntegrationScaleDownKeepsPreserved (acceptance 3): in a deployment
// of 5, a healthy machine preserved with preserve=now on its Node (expiry
// MCM's default 96h, the node kept from the cluster-autoscaler's
// scale-down, no taint: it is not Failed) goes last on a scale-down: from 5
// to 1, the four others are deleted and the preserved one is never marked
// for deletion.
func TestIntegrationScaleDownKeepsPreserved(t *testing.T) {
	t.Parallel()
	s := simstack.Start(t, simstack.Options{
		Deployments: true,
		Machine: machine.Options{Machine: v1alpha1.MachineConfiguration{
			MachineHealthTimeout: &metav1.Duration{Duration: healthTimeout},
		}},
	})
	createDeployment(t, s, poolDeployment(s, "shrink", 5, nil))
	ms := runningPool(t, s, "shrink", 5)
	// The newest but one: neither end of the order by age, which a ranking
	// without the preservation rung might fall back to.
	kept := ms[3]
	node := nodeOf(&kept)
	annotatedAt := time.Now()
	annotateNode(t, s, node, v1alpha1.PreserveAnnotation, preserveValue(v1alpha1.PreserveNow))
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		m, err := getMachine(ctx, s, kept.Name)
		if err != nil {
			return false, err.Error()
		}
		cs := m.Status.CurrentStatus
		return cs.PreserveExpiryTime != nil && cs.Phase == v1alpha1.MachineRunning &&
				m.Annotations[v1alpha1.LastAppliedNodePreserveValueAnnotation] == string(v1alpha1.PreserveNow),
			"want Running, preserved, the Node's now recorded:" + describe([]v1alpha1.Machine{*m})
	})
	m, err := getMachine(context.Background(), s, kept.Name)
	if err != nil {
		t.Fatal(err)
	}
	expiry := m.Status.CurrentStatus.PreserveExpiryTime.Time
	if !within(expiry, annotatedAt.Add(v1alpha1.DefaultMachinePreserveTimeout), time.Minute) {
		t.Errorf("machine %s preserved until %v; want MCM's default %v after the annotation (%v)", kept.Name, expiry, v1alpha1.DefaultMachinePreserveTimeout, annotatedAt)
	}
	soon(t, time.Minute, func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, s, node)
		if err != nil {
			return false, err.Error()
		}
		ok := n.Annotations[v1alpha1.ScaleDownDisabledAnnotation] == "true" && n.Annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation] == "true" &&
			!preservedTaint(n) && !n.Spec.Unschedulable
		return ok, fmt.Sprintf("node %s: annotations %v, taints %v, unschedulable %v; want both autoscaler annotations, no preserved taint, no cordon",
			node, n.Annotations, n.Spec.Taints, n.Spec.Unschedulable)
	})

	patchDeployment(t, s, "shrink", `{"spec":{"replicas":1}}`)
	touched := ""
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		got, err := poolMachines(ctx, s, "shrink")
		if err != nil {
			return false, err.Error()
		}
		for _, m := range got {
			if m.Name == kept.Name && m.DeletionTimestamp != nil {
				touched = describe([]v1alpha1.Machine{m})
				return true, ""
			}
		}
		return len(got) == 1 && got[0].Name == kept.Name, fmt.Sprintf("want only %s left:%s", kept.Name, describe(got))
	})
	if touched != "" {
		t.Fatalf("the preserved machine was marked for deletion:%s", touched)
	}
	m, err = getMachine(context.Background(), s, kept.Name)
	if err != nil {
		t.Fatal(err)
	}
	if m.DeletionTimestamp != nil || m.Status.CurrentStatus.Phase != v1alpha1.MachineRunning || !vmLive(s, m.Spec.ProviderID) {
		t.Errorf("after the scale-down the preserved machine is not Running with its VM:%s", describe([]v1alpha1.Machine{*m}))
	}
}
