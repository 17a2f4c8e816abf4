package controller_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	"github.com/onsi/ginkgo/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A failed spec gets the state its assertions looked at as a report entry:
// the framework's own failures say only which wait timed out ("Expected
// <bool>: false to be true"), and by the end of the suite its cleanup has
// deleted everything.
var _ = ginkgo.JustAfterEach(func() {
	if !ginkgo.CurrentSpecReport().Failed() || commons.ControlCluster == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ginkgo.AddReportEntry("machine objects when the spec failed", machineState(ctx))
})

// machineState describes the control namespace's machine deployments,
// machine sets and machines, and the target cluster's nodes.
func machineState(ctx context.Context) string {
	// The framework sets it, defaulted, before the first spec.
	ns := os.Getenv("CONTROL_CLUSTER_NAMESPACE")
	mcm := commons.ControlCluster.McmClient.MachineV1alpha1()
	var b strings.Builder
	if list, err := mcm.MachineDeployments(ns).List(ctx, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(&b, "machine deployments: %v\n", err)
	} else {
		for _, d := range list.Items {
			s := d.Status
			fmt.Fprintf(&b, "MachineDeployment %s: replicas %d, minReadySeconds %d, class %s; status replicas %d, updated %d, ready %d, available %d, unavailable %d\n",
				d.Name, d.Spec.Replicas, d.Spec.MinReadySeconds, d.Spec.Template.Spec.Class.Name,
				s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, s.UnavailableReplicas)
			for _, c := range s.Conditions {
				fmt.Fprintf(&b, "  condition %s=%s reason %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}
	if list, err := mcm.MachineSets(ns).List(ctx, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(&b, "machine sets: %v\n", err)
	} else {
		for _, s := range list.Items {
			fmt.Fprintf(&b, "MachineSet %s: replicas %d, class %s; status replicas %d, ready %d, available %d\n",
				s.Name, s.Spec.Replicas, s.Spec.Template.Spec.Class.Name, s.Status.Replicas, s.Status.ReadyReplicas, s.Status.AvailableReplicas)
		}
	}
	if list, err := mcm.Machines(ns).List(ctx, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(&b, "machines: %v\n", err)
	} else {
		for _, m := range list.Items {
			fmt.Fprintf(&b, "Machine %s: phase %s, class %s, node %s; last operation %s %s: %s\n",
				m.Name, m.Status.CurrentStatus.Phase, m.Spec.Class.Name, m.Labels[v1alpha1.NodeLabelKey],
				m.Status.LastOperation.Type, m.Status.LastOperation.State, m.Status.LastOperation.Description)
		}
	}
	if nodes, err := commons.TargetCluster.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		fmt.Fprintf(&b, "nodes: %v\n", err)
	} else {
		ready := 0
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		fmt.Fprintf(&b, "Nodes: %d, %d Ready\n", len(nodes.Items), ready)
	}
	return b.String()
}
