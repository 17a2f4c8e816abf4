package deployment

import (
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/mcmkit/mcm/safety"
)

// Defaults of the Options fields.
const (
	// DefaultMaxReplicas is the most machines a deployment runs when
	// Options.MaxReplicas is not set: twice the 5 000 machines the module
	// is benchmarked with, the MachineSet controller's default too. MCM
	// has no ceiling.
	DefaultMaxReplicas = 10000
	// DefaultResync is how often a settled deployment is synced again.
	DefaultResync = 10 * time.Minute
	// DefaultFieldManager names the controller in managed fields.
	DefaultFieldManager = "mcm-machinedeployment-controller"
)

// Finalizer is the finalizer the controller keeps on its deployments until
// their sets are gone; MCM's name.
const Finalizer = "machine.sapcloud.io/machine-controller-manager"

// RollbackAnnotation on a MachineDeployment asks for a rollback to the
// revision it names ("0" or empty: the previous one), like spec.rollbackTo,
// which newer clients cannot set through a typed API that dropped it. The
// controller removes it when it acted on it.
const RollbackAnnotation = "mcmkit.io/rollback-to-revision"

// Event reasons, stable for alerting; the rollback ones are MCM's.
const (
	ReasonRollbackDone              = "DeploymentRollback"
	ReasonRollbackRevisionNotFound  = "DeploymentRollbackRevisionNotFound"
	ReasonRollbackTemplateUnchanged = "DeploymentRollbackTemplateUnchanged"
	ReasonScaled                    = "ScalingMachineSet"
	ReasonCreatedSet                = "SuccessfulCreate"
	ReasonCreateSetFailed           = "FailedCreate"
	ReasonDeletedSet                = "SuccessfulDelete"
	ReasonInvalid                   = "InvalidMachineDeployment"
	ReasonUnsupported               = "UnsupportedStrategy"
	// ReasonInPlaceUpdateFailed (Progressing False, and a Warning event):
	// an in-place update of the current rollout failed; no further machine
	// is selected.
	ReasonInPlaceUpdateFailed = "InPlaceUpdateFailed"
	// ReasonMovedMachine (Normal event): a machine updated in place moved
	// from an old set to the new one.
	ReasonMovedMachine  = "MovedMachine"
	ReasonFrozen        = "Frozen"
	ReasonAdoptFailed   = "FailedAdopt"
	ReasonReleaseFailed = "FailedRelease"
)

// Options configures a Controller. The zero value works: MCM's defaults,
// no events, no metrics, the real clock.
type Options struct {
	// Resync is how often a settled deployment is synced again. Zero means
	// DefaultResync.
	Resync time.Duration
	// MaxReplicas is the most machines a deployment runs: one whose
	// spec.replicas asks for more is rolled out and scaled as if it asked
	// for this many, and says so in ConditionReplicasCapped and a Warning
	// event; a rollout's maxSurge comes on top, across its sets, as for
	// any replicas. Zero means DefaultMaxReplicas.
	MaxReplicas int
	// SkipAutoscalerAnnotationDuringRollout, when true, does not annotate
	// the nodes of a deployment during a rollout. By default (false) they
	// get cluster-autoscaler.kubernetes.io/scale-down-disabled, so that the
	// autoscaler does not remove nodes mid-rollout, as MCM does unless
	// --autoscaler-scaledown-annotation-during-rollout=false.
	SkipAutoscalerAnnotationDuringRollout bool
	// CriticalComponentsNotReadyTaint, when true, gives the node of a
	// machine whose in-place update is done the taint
	// node.gardener.cloud/critical-components-not-ready:NoSchedule when it
	// moves to the new set, as MCM always does: in a Gardener shoot,
	// gardener-resource-manager removes it once the node's critical
	// components run again. Off by default: without that component
	// nobody removes the taint, and the node would take no pods.
	// Installations under Gardener should turn it on (the reference
	// manager does, unless --inplace-critical-components-taint=false).
	CriticalComponentsNotReadyTaint bool
	// SafetyGate is asked before scale-ups: while it says frozen, the
	// deployment starts no scale-up and no rollout step that adds
	// machines; scale-down continues. The machine and MachineSet
	// controllers ask the same question, so one gate serves all three.
	// Nil means never frozen (a deployment labelled freeze=True is frozen
	// all the same).
	SafetyGate safety.Gate

	// Logger is used where no context carries one (informer handlers).
	Logger logr.Logger
	// Recorder receives events. Nil means none. A client-go recorder needs
	// a scheme with the machine API registered (v1alpha1.AddToScheme).
	Recorder record.EventRecorder
	// Registerer receives the controller's and its queue's metrics. Nil
	// means none.
	Registerer prometheus.Registerer
	// Clock is the time source. Nil means the real clock.
	Clock clock.WithTicker
	// FieldManager names the controller in managed fields. Empty means
	// DefaultFieldManager.
	FieldManager string
}

// complete validates o and fills in its defaults.
func (o Options) complete() (Options, error) {
	if o.Resync < 0 {
		return o, fmt.Errorf("Resync must not be negative, got %v", o.Resync)
	}
	if o.MaxReplicas < 0 {
		return o, fmt.Errorf("MaxReplicas must not be negative, got %d", o.MaxReplicas)
	}
	if o.MaxReplicas == 0 {
		o.MaxReplicas = DefaultMaxReplicas
	}
	if o.Resync == 0 {
		o.Resync = DefaultResync
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.FieldManager == "" {
		o.FieldManager = DefaultFieldManager
	}
	return o, nil
}
