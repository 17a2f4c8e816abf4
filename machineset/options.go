package machineset

import (
	"errors"
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
	// DefaultBurstReplicas caps the machines created or deleted per sync,
	// as MCM's BurstReplicas.
	DefaultBurstReplicas = 100
	// DefaultSlowStartInitialBatch is the first creation batch, as MCM's
	// SlowStartInitialBatchSize: batches then grow 1, 2, 4, ...
	DefaultSlowStartInitialBatch = 1
	// DefaultMaxReplicas is the most machines a set keeps when
	// Options.MaxReplicas is not set: twice the 5 000 machines the module
	// is benchmarked with, and low enough that a replicas typo costs a
	// bounded number of creations. MCM has no ceiling.
	DefaultMaxReplicas = 10000
	// DefaultResync is how often a settled set is synced again, as MCM.
	DefaultResync = 10 * time.Minute
	// DefaultFieldManager names the controller in managed fields.
	DefaultFieldManager = "mcm-machineset-controller"
)

// Finalizer is the finalizer the controller keeps on its sets until their
// machines are gone; MCM's name.
const Finalizer = "machine.sapcloud.io/machine-controller-manager"

// Event reasons, stable for alerting.
const (
	ReasonCreated      = "SuccessfulCreate"
	ReasonCreateFailed = "FailedCreate"
	// ReasonCreateCanceled: creations not sent yet were canceled because
	// the set wanted fewer machines meanwhile.
	ReasonCreateCanceled = "CanceledCreate"
	ReasonDeleted        = "SuccessfulDelete"
	ReasonDeleteFailed   = "FailedDelete"
	ReasonInvalid        = "InvalidMachineSet"
	ReasonClassNotFound  = "MachineClassNotFound"
	ReasonClassDeleting  = "MachineClassDeleting"
	ReasonFrozen         = "Frozen"
	ReasonAdoptFailed    = "FailedAdopt"
	ReasonReleaseFailed  = "FailedRelease"
	// ReasonForeignMachine: a machine the set controls was not created by
	// it (provenance).
	ReasonForeignMachine = "ForeignMachine"
)

// Options configures a Controller. The zero value works: MCM's defaults,
// no events, no metrics, the real clock.
type Options struct {
	// BurstReplicas caps the machines created, and those deleted, in one
	// sync. Zero means DefaultBurstReplicas.
	BurstReplicas int
	// SlowStartInitialBatch is the size of the first batch of creations;
	// each later batch doubles, and the first batch with a failure ends
	// the sync's creations. Zero means DefaultSlowStartInitialBatch.
	SlowStartInitialBatch int
	// MaxReplicas is the most machines a set keeps: a set whose
	// spec.replicas asks for more keeps this many, never more, and says so
	// in ConditionReplicasCapped and a Warning event. Zero means
	// DefaultMaxReplicas.
	MaxReplicas int
	// DeletionPolicy orders machines within a rung of the deletion ladder
	// for sets without DeletionPolicyAnnotation. Empty means
	// DeletionPolicyOldest, MCM's order.
	DeletionPolicy DeletionPolicy
	// Resync is how often a settled set is synced again. Zero means
	// DefaultResync.
	Resync time.Duration
	// SafetyGate is asked before creations: while it says frozen, no
	// machine is created; scale-down and deletion continue. It is the
	// question the machine controller asks, so one gate serves both. Nil
	// means never frozen (a set labelled freeze=True is frozen all the
	// same).
	SafetyGate safety.Gate
	// KeepPreservedOnScaleDown makes a scale-down stop short of machines
	// whose preservation holds (machinestate.Preserved): the set says by
	// a ReasonScaleDownHeld event which machine holds it and until when,
	// and syncs again at that expiry, which ends the hold. False (MCM's
	// behaviour) deletes preserved machines last, when the scale-down
	// needs them, with a ReasonPreservedDeleted event. A set being deleted
	// deletes all its machines either way.
	KeepPreservedOnScaleDown bool

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
	var errs []error
	if o.BurstReplicas < 0 || o.SlowStartInitialBatch < 0 || o.MaxReplicas < 0 {
		errs = append(errs, errors.New("BurstReplicas, SlowStartInitialBatch and MaxReplicas must not be negative"))
	}
	if o.Resync < 0 {
		errs = append(errs, fmt.Errorf("Resync must not be negative, got %v", o.Resync))
	}
	switch o.DeletionPolicy {
	case "", DeletionPolicyOldest, DeletionPolicyNewest, DeletionPolicyRandom:
	default:
		errs = append(errs, fmt.Errorf("DeletionPolicy %q: want Oldest, Newest or Random", o.DeletionPolicy))
	}
	if err := errors.Join(errs...); err != nil {
		return o, err
	}
	if o.BurstReplicas == 0 {
		o.BurstReplicas = DefaultBurstReplicas
	}
	if o.MaxReplicas == 0 {
		o.MaxReplicas = DefaultMaxReplicas
	}
	if o.SlowStartInitialBatch == 0 {
		o.SlowStartInitialBatch = DefaultSlowStartInitialBatch
	}
	if o.DeletionPolicy == "" {
		o.DeletionPolicy = DeletionPolicyOldest
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
