package deployment

import (
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// epoch is the creation time of test objects unless they say otherwise.
var epoch = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// intOrPercent is "25%" as a percentage and "3" as the integer 3.
func intOrPercent(s string) *intstr.IntOrString {
	if strings.HasSuffix(s, "%") {
		return new(intstr.FromString(s))
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return new(intstr.FromString(s))
	}
	return new(intstr.FromInt32(int32(n)))
}

type mdOpt func(*v1alpha1.MachineDeployment)

// newDeployment is a RollingUpdate deployment "md" with maxSurge 1 and
// maxUnavailable 0, at generation 1.
func newDeployment(replicas int32, opts ...mdOpt) *v1alpha1.MachineDeployment {
	d := &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "md", Namespace: "default", Generation: 1, UID: "uid-md"},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "workers"}},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"pool": "workers"}},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "class-a"}},
			},
		},
	}
	withRolling("1", "0")(d)
	for _, o := range opts {
		o(d)
	}
	return d
}

func withRolling(surge, unavailable string) mdOpt {
	return func(d *v1alpha1.MachineDeployment) {
		d.Spec.Strategy = v1alpha1.MachineDeploymentStrategy{
			Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
			RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
				MaxSurge: intOrPercent(surge), MaxUnavailable: intOrPercent(unavailable),
			}},
		}
	}
}

func withRecreate() mdOpt {
	return func(d *v1alpha1.MachineDeployment) {
		d.Spec.Strategy = v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.RecreateMachineDeploymentStrategyType}
	}
}

func withDeploymentAnnotation(key, value string) mdOpt {
	return func(d *v1alpha1.MachineDeployment) {
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[key] = value
	}
}

type msOpt func(*v1alpha1.MachineSet)

// newSet is a set of the default template named name, sized replicas,
// created minutes after epoch.
func newSet(name string, replicas int32, minutes int, opts ...msOpt) *v1alpha1.MachineSet {
	s := &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         "default",
			UID:               types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(minutes) * time.Minute)),
		},
		Spec: v1alpha1.MachineSetSpec{Replicas: replicas},
	}
	s.Spec.Template = *newDeployment(0).Spec.Template.DeepCopy()
	for _, o := range opts {
		o(s)
	}
	return s
}

func withSetAnnotation(key, value string) msOpt {
	return func(s *v1alpha1.MachineSet) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[key] = value
	}
}

func withRevision(rev string) msOpt { return withSetAnnotation(v1alpha1.RevisionAnnotation, rev) }

func withDesired(n int) msOpt {
	return withSetAnnotation(v1alpha1.DesiredReplicasAnnotation, strconv.Itoa(n))
}

func withMax(n int) msOpt { return withSetAnnotation(v1alpha1.MaxReplicasAnnotation, strconv.Itoa(n)) }

// withClass gives the set another template: one with a different class name.
func withClass(name string) msOpt {
	return func(s *v1alpha1.MachineSet) { s.Spec.Template.Spec.Class.Name = name }
}

type mOpt func(*v1alpha1.Machine)

// newMachine is a machine Running since epoch.
func newMachine(name string, opts ...mOpt) *v1alpha1.Machine {
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	m.Status.CurrentStatus = v1alpha1.CurrentStatus{Phase: v1alpha1.MachineRunning, LastUpdateTime: metav1.NewTime(epoch)}
	for _, o := range opts {
		o(m)
	}
	return m
}

func inPhase(p v1alpha1.MachinePhase) mOpt {
	return func(m *v1alpha1.Machine) { m.Status.CurrentStatus.Phase = p }
}

// phaseSince sets the time of the last phase change, seconds after epoch.
func phaseSince(seconds int) mOpt {
	return func(m *v1alpha1.Machine) {
		m.Status.CurrentStatus.LastUpdateTime = metav1.NewTime(epoch.Add(time.Duration(seconds) * time.Second))
	}
}

func deleting() mOpt {
	return func(m *v1alpha1.Machine) { m.DeletionTimestamp = new(metav1.NewTime(epoch)) }
}

func failedOp(t v1alpha1.MachineOperationType, code string) mOpt {
	return func(m *v1alpha1.Machine) {
		m.Status.LastOperation = v1alpha1.LastOperation{Type: t, State: v1alpha1.MachineStateFailed, ErrorCode: code,
			Description: "failed", LastUpdateTime: metav1.NewTime(epoch)}
	}
}

// machines returns n machines named prefix-0, prefix-1, ...
func machines(prefix string, n int, opts ...mOpt) []*v1alpha1.Machine {
	var ms []*v1alpha1.Machine
	for i := range n {
		ms = append(ms, newMachine(prefix+"-"+strconv.Itoa(i), opts...))
	}
	return ms
}

// counted is what a set with the given machines, all of them ready, counts.
func counted(machines, available int32) machineCounts {
	return machineCounts{Machines: machines, Ready: machines, Available: available}
}
