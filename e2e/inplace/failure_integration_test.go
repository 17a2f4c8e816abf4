package inplace_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/deployment"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/simcluster"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// TestIntegrationInPlaceUpdateFails (issue acceptance 3): a deployment of
// 4 machines rolled in place two at a time, whose node agent fails the
// update of the first machine by name (the first two by name are selected
// first: all are available) with "kubelet is not healthy after in-place
// update". That machine goes InPlaceUpdateFailed with the agent's reason,
// its node's condition says UpdateFailed, the deployment's Progressing
// condition is False with reason InPlaceUpdateFailed naming the machine
// and the reason, with a Warning event. The other machine selected with
// it is updated and moved, which frees a slot of maxUnavailable, yet for
// a while no further machine is selected: the rollout fails closed. A
// person who checked the node labels it update-result=successful (the
// fault lets the update happen and reports a failure nevertheless, so the
// node does run the new version): the machine moves on and the rollout
// completes on the same VMs. The agent retries only after an hour here,
// so that the person's label is what resumes the rollout.
func TestIntegrationInPlaceUpdateFails(t *testing.T) {
	t.Parallel()
	s := agentStack(t)
	hourly := retryDelay(time.Hour)
	oldClass := createClass(t, s, "ip-old", "v1.37.1", hourly)
	newClass := createClass(t, s, "ip-new", "v1.37.2", hourly)
	runWithEvents(t, s)

	create(t, s, inPlaceDeployment(s.NS, "fails", 4, oldClass))
	machines := waitRunning(t, s, 4)
	before := providerIDs(t, machines)
	oldSet := metav1.GetControllerOf(&machines[0]).Name
	nodes := nodeNames(machines)
	victim, companion := nodes[0], nodes[1]
	const reason = "kubelet is not healthy after in-place update"
	if _, err := s.Cluster.Cloud.InjectFault(sim.Fault{Operation: sim.OperationInPlaceUpdate, MachineName: victim,
		Code: driver.Internal, Message: reason, AfterEffect: true}); err != nil {
		t.Fatal(err)
	}
	notRunning := watchNotRunning(t, s)

	setClass(t, s, "fails", newClass)
	waitUpdateFailed(t, s, "fails", victim, reason)
	waitMovedOut(t, s, oldSet, companion)
	stalled(t, s, oldSet, nodes[2:])
	if calls := s.Cluster.Cloud.Calls(sim.OperationInPlaceUpdate); calls != 2 {
		t.Errorf("the agent tried %d updates, want 2: the one that failed and the one selected with it", calls)
	}

	labelNode(t, s, victim, v1alpha1.UpdateResultLabel, v1alpha1.UpdateResultSuccessful)
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) { return rolledOut(ctx, s, "v1.37.2") })
	after := providerIDs(t, waitRunning(t, s, 4))
	if !slices.Equal(before, after) {
		t.Errorf("the VMs changed: before %v, after %v", before, after)
	}
	if most := notRunning(); most > 2 {
		t.Errorf("a watch saw %d machines not Running at once, want at most maxUnavailable 2", most)
	}
	progressingAgain(t, s, "fails")
}

// TestIntegrationInPlaceUpdateFailsTemplateFixed: a deployment of 4
// machines rolled in place two at a time to a class of another instance
// type, which the node agent cannot apply to a VM: the updates of the two
// machines selected fail with the agent's reason, the deployment says so
// for the first by name, and the rollout stays where it is although the
// agent retries every two seconds. Fixing the template (a class of the
// same instance type) resumes it: the agent's next retries update the
// failed machines to the fixed class, and the rollout completes on the
// same VMs, every node on the fixed version.
func TestIntegrationInPlaceUpdateFailsTemplateFixed(t *testing.T) {
	t.Parallel()
	s := agentStack(t)
	quick := retryDelay(2 * time.Second)
	oldClass := createClass(t, s, "ip-old", "v1.37.1", quick)
	badClass := createClass(t, s, "ip-bad", "v1.37.2", quick, func(p *sim.ProviderSpec) { p.InstanceType = "xlarge" })
	newClass := createClass(t, s, "ip-new", "v1.37.2", quick)
	runWithEvents(t, s)

	create(t, s, inPlaceDeployment(s.NS, "fixed", 4, oldClass))
	machines := waitRunning(t, s, 4)
	before := providerIDs(t, machines)
	oldSet := metav1.GetControllerOf(&machines[0]).Name
	nodes := nodeNames(machines)
	notRunning := watchNotRunning(t, s)

	setClass(t, s, "fixed", badClass)
	waitUpdateFailed(t, s, "fixed", nodes[0], "the instance type (large to xlarge)")
	tries := s.Cluster.Cloud.Calls(sim.OperationInPlaceUpdate)
	stalled(t, s, oldSet, nodes[2:])
	if again := s.Cluster.Cloud.Calls(sim.OperationInPlaceUpdate); again <= tries {
		t.Errorf("the agent did not retry the failed updates while the rollout stood still (%d tries, then %d)", tries, again)
	}

	setClass(t, s, "fixed", newClass)
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) { return rolledOutOver(ctx, s, "v1.37.2", 3) })
	after := providerIDs(t, waitRunning(t, s, 4))
	if !slices.Equal(before, after) {
		t.Errorf("the VMs changed: before %v, after %v", before, after)
	}
	if most := notRunning(); most > 2 {
		t.Errorf("a watch saw %d machines not Running at once, want at most maxUnavailable 2", most)
	}
	progressingAgain(t, s, "fixed")
}

// agentStack prepares a stack with the simulated node agent; the test
// creates its classes, then runs the controllers (runWithEvents).
func agentStack(t *testing.T) *simstack.Stack {
	t.Helper()
	env := testenv.Get(t)
	return simstack.Prepare(t, simcluster.Options{Agent: simcluster.AgentOptions{Machines: versioned.NewForConfigOrDie(env.Config())}})
}

// runWithEvents runs the controllers with a recorder that writes their
// events to the API server.
func runWithEvents(t *testing.T, s *simstack.Stack) {
	t.Helper()
	evScheme := runtime.NewScheme()
	if err := scheme.AddToScheme(evScheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(evScheme); err != nil {
		t.Fatal(err)
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.Core.CoreV1().Events("")})
	t.Cleanup(broadcaster.Shutdown)
	rec := broadcaster.NewRecorder(evScheme, corev1.EventSource{Component: "inplace-test"})
	s.Run(t, simstack.Options{Deployments: true, Deployment: deployment.Options{Recorder: rec}, Machine: machine.Options{Recorder: rec}})
}

func retryDelay(d time.Duration) func(*sim.ProviderSpec) {
	return func(p *sim.ProviderSpec) { p.InPlaceUpdate.RetryDelay = &metav1.Duration{Duration: d} }
}

// waitUpdateFailed waits until the update of machine victim (whose node is
// named alike) has failed with a reason containing reason, as the machine,
// its node, the deployment's Progressing condition and a Warning event
// tell.
func waitUpdateFailed(t *testing.T, s *simstack.Stack, name, victim, reason string) {
	t.Helper()
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		var problems []string
		m, err := s.Machines.MachineV1alpha1().Machines(s.NS).Get(ctx, victim, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		op := m.Status.LastOperation
		if m.Status.CurrentStatus.Phase != v1alpha1.MachineInPlaceUpdateFailed || op.Type != v1alpha1.MachineOperationInPlaceUpdate ||
			op.State != v1alpha1.MachineStateFailed || !strings.Contains(op.Description, reason) {
			problems = append(problems, fmt.Sprintf("machine %s is %s, lastOperation %s %s %q", victim, m.Status.CurrentStatus.Phase, op.Type, op.State, op.Description))
		}
		node, err := s.Core.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if got := node.Annotations[v1alpha1.UpdateFailedReasonAnnotation]; !strings.Contains(got, reason) || inPlaceReason(node) != v1alpha1.UpdateFailed {
			problems = append(problems, fmt.Sprintf("node %s: condition reason %q, failure reason %q", victim, inPlaceReason(node), got))
		}
		d, err := s.Machines.MachineV1alpha1().MachineDeployments(s.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if c := progressing(d); c == nil || c.Status != v1alpha1.ConditionFalse || c.Reason != deployment.ReasonInPlaceUpdateFailed ||
			!strings.Contains(c.Message, victim) || !strings.Contains(c.Message, reason) {
			problems = append(problems, fmt.Sprintf("deployment's Progressing: %+v", c))
		}
		if !warned(ctx, s, name, victim) {
			problems = append(problems, "no Warning event "+deployment.ReasonInPlaceUpdateFailed+" on the deployment")
		}
		return len(problems) == 0, strings.Join(problems, "; ")
	})
}

// stalled checks, for quiet, that the machines of nodes stay untouched
// in oldSet: no further machine is selected, leaves Running or is
// cordoned.
func stalled(t *testing.T, s *simstack.Stack, oldSet string, nodes []string) {
	t.Helper()
	var why string
	_, moved := testenv.Poll(quiet, func(ctx context.Context) (bool, string) {
		var ok bool
		ok, why = untouched(ctx, s, oldSet, nodes, "v1.37.1")
		return !ok, why
	})
	if moved {
		t.Fatalf("the rollout went on after an update failed: %s", why)
	}
}

// waitMovedOut waits until machine name is Running in a set other than
// oldSet: updated and moved.
func waitMovedOut(t *testing.T, s *simstack.Stack, oldSet, name string) {
	t.Helper()
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		m, err := s.Machines.MachineV1alpha1().Machines(s.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ref := metav1.GetControllerOf(m)
		moved := ref != nil && ref.Name != oldSet && m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning
		return moved, fmt.Sprintf("machine %s is %s in %v", name, m.Status.CurrentStatus.Phase, ref)
	})
}

// progressingAgain checks that the deployment's Progressing condition no
// longer tells of the failure once the rollout completed.
func progressingAgain(t *testing.T, s *simstack.Stack, name string) {
	t.Helper()
	testenv.Eventually(t, settle, func(ctx context.Context) (bool, string) {
		d, err := s.Machines.MachineV1alpha1().MachineDeployments(s.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := progressing(d)
		return c != nil && c.Status == v1alpha1.ConditionTrue, fmt.Sprintf("Progressing: %+v", c)
	})
}

func progressing(d *v1alpha1.MachineDeployment) *v1alpha1.MachineDeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == v1alpha1.MachineDeploymentProgressing {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// warned tells whether the deployment name has a Warning event of reason
// InPlaceUpdateFailed naming victim.
func warned(ctx context.Context, s *simstack.Stack, name, victim string) bool {
	events, err := s.Core.CoreV1().Events(s.NS).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + deployment.ReasonInPlaceUpdateFailed})
	if err != nil {
		return false
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "MachineDeployment" && e.InvolvedObject.Name == name && e.Type == corev1.EventTypeWarning &&
			strings.Contains(e.Message, victim) {
			return true
		}
	}
	return false
}
