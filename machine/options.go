package machine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/safety"
)

// Defaults of the Options fields that MCM has no flag for, or whose MCM
// default is hard-coded.
const (
	// DefaultShortRetry is the first wait after a transient driver failure
	// (Unavailable, DeadlineExceeded, Aborted, Unknown), as MCM's ShortRetry.
	DefaultShortRetry = 5 * time.Second
	// DefaultMediumRetry is the first wait after other driver failures and
	// bad input, as MCM's MediumRetry.
	DefaultMediumRetry = 3 * time.Minute
	// DefaultLongRetry is the periodic resync of a settled machine and the
	// first wait after ResourceExhausted unless ResourceExhaustedRetry is
	// set, as MCM's LongRetry.
	DefaultLongRetry = 10 * time.Minute
	// DefaultMaxRetryDelay caps the exponential growth of retry waits.
	DefaultMaxRetryDelay = 30 * time.Minute
	// DefaultHealthCheckPeriod is how often a Pending or Unknown machine is
	// looked at again while a timeout runs.
	DefaultHealthCheckPeriod = 30 * time.Second
	// DefaultPendingDelay is how long a machine whose VM was created waits
	// for its node before its status says Pending.
	DefaultPendingDelay = 10 * time.Second
	// DefaultWorkers is the number of workers of the class, secret and node
	// queues when Options leave them unset.
	DefaultWorkers = 5
	// DefaultFieldManager names the controller in managed fields.
	DefaultFieldManager = "mcm-machine-controller"
)

// Annotations under mcmkit.io/ that hold the controller's own bookkeeping on
// Machines. Anyone who may patch a machine can write them, so none is taken
// on trust: the times are kept between the machine's creation and now (a
// time in the future is set to now and reported, event FutureTimestamp),
// and the deletion flow goes by its record in the status
// (DeletionCondition), which the deletion annotations only mirror.
// status.lastOperation.description is only ever written, never read.
const (
	// CreationStartedAnnotation records (RFC 3339) when the controller first
	// tried to create the machine's VM: written before the driver is
	// called, or, for a machine created with the finalizer, with the VM's
	// provider ID. The creation timeout counts from here (falling back to
	// metadata.creationTimestamp, and never earlier), never from a
	// lastUpdateTime that other writes move.
	CreationStartedAnnotation = "mcmkit.io/creation-started"
	// UnhealthySinceAnnotation records (RFC 3339) when the machine was last
	// found unhealthy after being Running. The health timeout counts from
	// here; it is removed when the machine is healthy again.
	UnhealthySinceAnnotation = "mcmkit.io/unhealthy-since"
	// DeletionStepAnnotation shows the current DeletionStep of a machine
	// being deleted, for people and tools: a mirror of the
	// DeletionCondition's reason, written with it and never read.
	DeletionStepAnnotation = "mcmkit.io/deletion-step"
	// DeletionStepSinceAnnotation shows (RFC 3339) when the current
	// deletion step began: a mirror of the DeletionCondition's
	// lastTransitionTime, never read.
	DeletionStepSinceAnnotation = "mcmkit.io/deletion-step-since"
	// DrainStateAnnotation holds the JSON drain.State between drain passes.
	DrainStateAnnotation = "mcmkit.io/drain-state"
	// PreDrainHookPrefix: while a machine being deleted has an annotation
	// whose key starts with this prefix, its node is not drained.
	PreDrainHookPrefix = "pre-drain.delete.hook.machine.mcmkit.io"
	// PreTerminateHookPrefix: while a machine being deleted has an
	// annotation whose key starts with this prefix, its VM is not deleted.
	PreTerminateHookPrefix = "pre-terminate.delete.hook.machine.mcmkit.io"
)

// Event reasons, stable for alerting.
const (
	ReasonInvalidMachine     = "InvalidMachine"
	ReasonInvalidClass       = "InvalidMachineClass"
	ReasonClassNotFound      = "MachineClassNotFound"
	ReasonClassDeleting      = "MachineClassDeleting"
	ReasonSecretNotFound     = "SecretNotFound"
	ReasonSecretInvalid      = "SecretInvalid"
	ReasonCreateFailed       = "CreateFailed"
	ReasonStaleNode          = "StaleNode"
	ReasonJoinTimeout        = "JoinTimeout"
	ReasonUnhealthy          = "Unhealthy"
	ReasonRecovered          = "Recovered"
	ReasonHealthTimerReset   = "HealthTimeoutReset"
	ReasonHealthTimeout      = "HealthTimeout"
	ReasonReplacementLimited = "ReplacementLimited"
	ReasonDrainFailed        = "DrainFailed"
	// ReasonEvictRetriesExhausted: the drain deleted pods whose eviction
	// PodDisruptionBudgets refused maxEvictRetries times.
	ReasonEvictRetriesExhausted = "EvictRetriesExhausted"
	ReasonDrained               = "Drained"
	// ReasonDrainStateReset: the stored drain state could not be trusted;
	// the drain starts over.
	ReasonDrainStateReset = "DrainStateReset"
	ReasonDeleteFailed    = "DeleteFailed"
	// ReasonFutureTimestamp: a timestamp the controller reads back from
	// its annotations (creation start, unhealthy since, in-place drain
	// start) lay in the future; it was set to now (see clampTime).
	ReasonFutureTimestamp = "FutureTimestamp"
	ReasonDeleted         = "Deleted"
)

// Drainer runs one non-blocking drain pass over a node; *drain.Drainer
// implements it. Pass must cordon the node, start evictions, and return
// without waiting for pods to terminate.
type Drainer interface {
	Pass(ctx context.Context, node string, state drain.State) (drain.Result, error)
}

// OutageReporter is what a safety.Gate may tell besides whether it is
// frozen: when the last outage it froze for (an API server out of reach)
// ended. Machines that were Unknown before then get their health timeout
// restarted, as MCM does: the nodes could not be seen during the outage,
// so the time they spent Unknown across it says nothing about them, and
// counting it would replace a fleet after every outage. The API-server
// outage gate (package safety/outage) implements it.
type OutageReporter interface {
	// LastOutageEnd is when the last outage ended; zero if there was none.
	LastOutageEnd() time.Time
}

// ReplacementGate bounds how many machines are replaced at once: the
// controller asks it before the health timeout marks an unhealthy machine
// Failed (after which its MachineSet replaces it), and tells it whether it
// did. *budget.Budget (package safety/budget) implements it.
type ReplacementGate interface {
	// MayReplace reports whether m may be marked Failed now, and if not,
	// why (for the machine's lastOperation). A yes holds a slot for m
	// until Replaced is called.
	MayReplace(ctx context.Context, m *v1alpha1.Machine) (bool, string)
	// Replaced tells the gate whether m, which MayReplace allowed, was
	// marked Failed; false (the write failed) frees its slot.
	Replaced(ctx context.Context, m *v1alpha1.Machine, marked bool)
}

// Options configures a Controller. The zero value works: MCM's defaults,
// no events, no metrics, the real clock.
type Options struct {
	// Machine holds controller-wide defaults of the per-machine
	// configuration (creation timeout 20m, health timeout 10m, drain
	// timeout 2h, node conditions KernelDeadlock, ReadonlyFilesystem,
	// DiskPressure, NetworkUnavailable, max evict retries 360). Unset
	// fields take v1alpha1.DefaultMachineConfiguration; a machine's own
	// spec overrides them.
	Machine v1alpha1.MachineConfiguration

	// ShortRetry, MediumRetry, ResourceExhaustedRetry are the first waits
	// after a failure, by driver error code (see RetryDelay); each repeated
	// failure of the same machine doubles the wait, up to MaxRetryDelay.
	// LongRetry is the resync period of settled machines. Zero means the
	// Default* constants (ResourceExhaustedRetry: LongRetry).
	ShortRetry, MediumRetry, LongRetry, ResourceExhaustedRetry, MaxRetryDelay time.Duration

	// HealthCheckPeriod is how often Pending and Unknown machines are
	// re-examined. Zero means DefaultHealthCheckPeriod.
	HealthCheckPeriod time.Duration

	// PendingDelay is how long after its creation started a machine whose
	// VM was created keeps the status it had (none, on a first creation)
	// while waiting for its node, before the status says Pending. A node
	// that joins sooner takes the machine straight to Running, one status
	// write instead of two; with a real cloud, whose nodes take a minute
	// to join, it only makes Pending a few seconds late. The provider ID
	// and node label are written at once either way. A creation that
	// follows a failed one (CrashLoopBackOff) writes Pending at once, so
	// the failure does not stay on the machine. Zero means
	// DefaultPendingDelay; negative means no delay.
	PendingDelay time.Duration

	// Drainer drains nodes: of machines being deleted, of nodes selected
	// for an in-place update (cordoned, as MCM's drain does; the
	// deployment controller uncordons them), and of preserved Failed
	// machines (whose cordon it makes is recorded on the machine and
	// undone once it runs again). Nil means *drain.Drainer engines
	// built on the target client with DrainOptions, the one for
	// preserved nodes without a cordon (the preserved taint keeps new
	// pods off).
	Drainer Drainer
	// DrainOptions configures the drain engine built when Drainer is nil;
	// its defaults are the drain package's (drain.Options). The drain also
	// decides when a NotReady node is drained by force
	// (Unreachable.ForceAfter, MCM's 5 minutes) and waits for, or on an
	// unreachable node deletes, the node's VolumeAttachments
	// (Volumes.DetachTimeout is MCM's --machine-pv-detach-timeout). Unset,
	// its Clock and Registerer are the controller's, Volumes.IDs the
	// driver's GetVolumeIDs, and Listers come from Informers.
	DrainOptions drain.Options

	// DriverTimeouts are the deadlines of the driver's calls, by operation
	// (driver.WithDeadlines); the zero value means the driver package's
	// Default*Timeout constants. A call past its deadline fails its
	// machine's operation with DeadlineExceeded, on lastOperation and in
	// an event, and the machine is tried again like after any such
	// failure. A driver that ignores its context is abandoned at the
	// deadline, so that it holds no worker; its machine gets no other
	// driver call until the abandoned one returns. A driver that is
	// already a *driver.Deadlines is used as it is, so that several
	// controllers can share one and its record of stuck calls (the
	// reference manager's /readyz reads it); DriverTimeouts must then be
	// zero.
	DriverTimeouts driver.Timeouts

	// MaxConcurrentCreations bounds how many machine workers run a
	// creation (the driver calls that create a VM) at once, so that
	// creations that hang until their deadline leave workers for
	// deletions and health checks. Zero means four fifths of Run's
	// workers, at least one; with two workers or more it must be below
	// their number. A machine that finds every slot taken writes nothing
	// and is synced again when a slot frees (after HealthCheckPeriod at
	// the latest).
	MaxConcurrentCreations int

	// SafetyGate is asked before creations and health transitions. While
	// it says frozen, no VM is created and no health transition happens;
	// deletions continue. Nil means never frozen.
	SafetyGate safety.Gate
	// ReplacementGate is asked before the health timeout marks a machine
	// Failed. Nil means MCM's limit: one machine at a time among those one
	// MachineSet controls (by the controller reference, not a label), the
	// budget of package safety/budget with its zero Options.
	ReplacementGate ReplacementGate

	// ClassWorkers, SecretWorkers and NodeWorkers are the worker counts of
	// the class, secret and node queues (Run's workers argument sizes the
	// machine queue). Zero means DefaultWorkers.
	ClassWorkers, SecretWorkers, NodeWorkers int

	// Logger is used where no context carries one (informer handlers).
	Logger logr.Logger
	// Recorder receives events. Nil means none. A client-go recorder needs
	// a scheme with the machine API registered (v1alpha1.AddToScheme on the
	// scheme given to the broadcaster), or events about machines are
	// dropped: objects from informers carry no type information.
	Recorder record.EventRecorder
	// Registerer receives the controller's, the queues', the driver's
	// and the drain engine's metrics. Nil means none.
	Registerer prometheus.Registerer
	// Clock is the time source. Nil means the real clock.
	Clock clock.WithTicker
	// FieldManager names the controller in managed fields. Empty means
	// DefaultFieldManager.
	FieldManager string

	// BootstrapTokenAuthExtraGroups are the groups, besides
	// system:bootstrappers, that the bootstrap tokens issued for machines
	// authenticate as (the tokens' auth-extra-groups, joined with commas),
	// as MCM's --bootstrap-token-auth-extra-groups. Each must start with
	// "system:bootstrappers:" and otherwise hold only lowercase letters,
	// digits, ':' and '-', ending in a letter or digit: kube-apiserver
	// rejects a token with any other group, so NewController does too.
	BootstrapTokenAuthExtraGroups []string
}

// complete validates o and fills in its defaults.
func (o Options) complete() (Options, error) {
	var errs []error
	for name, d := range map[string]time.Duration{
		"ShortRetry": o.ShortRetry, "MediumRetry": o.MediumRetry, "LongRetry": o.LongRetry,
		"ResourceExhaustedRetry": o.ResourceExhaustedRetry, "MaxRetryDelay": o.MaxRetryDelay,
		"HealthCheckPeriod": o.HealthCheckPeriod,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %v", name, d))
		}
	}
	if o.ClassWorkers < 0 || o.SecretWorkers < 0 || o.NodeWorkers < 0 {
		errs = append(errs, errors.New("worker counts must not be negative"))
	}
	if o.MaxConcurrentCreations < 0 {
		errs = append(errs, fmt.Errorf("MaxConcurrentCreations must not be negative, got %d", o.MaxConcurrentCreations))
	}
	if err := o.DriverTimeouts.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("DriverTimeouts: %w", err))
	}
	for _, g := range o.BootstrapTokenAuthExtraGroups {
		if err := ValidateBootstrapGroup(g); err != nil {
			errs = append(errs, fmt.Errorf("BootstrapTokenAuthExtraGroups: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return o, err
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.ShortRetry, DefaultShortRetry)
	def(&o.MediumRetry, DefaultMediumRetry)
	def(&o.LongRetry, DefaultLongRetry)
	def(&o.ResourceExhaustedRetry, o.LongRetry)
	def(&o.MaxRetryDelay, DefaultMaxRetryDelay)
	def(&o.HealthCheckPeriod, DefaultHealthCheckPeriod)
	def(&o.PendingDelay, DefaultPendingDelay)
	for _, w := range []*int{&o.ClassWorkers, &o.SecretWorkers, &o.NodeWorkers} {
		if *w == 0 {
			*w = DefaultWorkers
		}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.FieldManager == "" {
		o.FieldManager = DefaultFieldManager
	}
	return o, nil
}
