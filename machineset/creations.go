package machineset

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptrace"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/machinestate"
	"github.com/mcmkit/mcm/internal/parallel"
	"github.com/mcmkit/mcm/workqueue"
)

// errScaledDown cancels the creations a scale-down made unwanted.
var errScaledDown = errors.New("the set wants fewer machines now")

// creationRun is the creations one sync of one set issues. A scale-down
// (or the set's deletion, or a freeze) that reaches the informer while they
// are under way lowers the run's limit: creations past it that have not
// been sent are not sent, and those already waiting, for the client's rate
// limiter most of all, are canceled. Without this, one sync's creations
// (up to BurstReplicas, at the client's rate) went on for seconds after a
// scale to zero.
//
// A request counts as sent from the moment the HTTP transport asks for a
// connection for it (httptrace's GetConn, which both HTTP/1 and HTTP/2
// call before writing anything). Canceling its context before then stops
// it for sure: there is no machine, and its expectation is lowered. A
// request that may have been sent is never canceled: the API server may
// have created the machine, and only its event can tell. Requests that do
// not go through net/http (fake clientsets) are never seen as sent, and
// may be canceled only while they have not started.
type creationRun struct {
	uid types.UID
	// active is how many of the set's machines were not being deleted
	// when the sync planned; the set wants replicas-active more.
	active int

	mu sync.Mutex
	// limit is how many creations may be handed out; it only goes down.
	limit int
	// next is how many have been handed out.
	next  int
	calls map[int]*creationCall // handed out, not finished
}

type creationCall struct {
	sent, canceled bool
	cancel         context.CancelCauseFunc
}

// creationOutcome is what became of one creation.
type creationOutcome int

const (
	outcomeCreated creationOutcome = iota
	// outcomeNotSent: canceled or refused before its request left; there
	// is no machine.
	outcomeNotSent
	// outcomeFailed: the request failed; counted as no machine, as a
	// failed creation always was.
	outcomeFailed
	// outcomeUnknown: canceled after the request may have left; the
	// machine may exist.
	outcomeUnknown
)

func newCreationRun(set *v1alpha1.MachineSet, active, planned int) *creationRun {
	return &creationRun{uid: set.UID, active: active, limit: planned, calls: map[int]*creationCall{}}
}

// remaining is how many creations may still be handed out.
func (r *creationRun) remaining() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(r.limit-r.next, 0)
}

// lower lets at most wanted of the run's creations go (handed out ones
// included), and cancels the waiting ones past that which were not sent.
func (r *creationRun) lower(wanted int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if wanted >= r.limit {
		return
	}
	r.limit = max(wanted, 0)
	for i, call := range r.calls {
		if i >= r.limit && !call.sent && !call.canceled {
			call.canceled = true
			call.cancel(errScaledDown)
		}
	}
}

// do runs create as the run's next creation, unless the limit forbids it.
func (r *creationRun) do(ctx context.Context, create func(context.Context) error) (creationOutcome, error) {
	r.mu.Lock()
	i := r.next
	r.next++
	if i >= r.limit {
		r.mu.Unlock()
		return outcomeNotSent, nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	call := &creationCall{cancel: cancel}
	r.calls[i] = call
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.calls, i)
		r.mu.Unlock()
		cancel(nil)
	}()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GetConn: func(string) {
		r.mu.Lock()
		call.sent = true
		r.mu.Unlock()
	}})
	err := create(ctx)
	r.mu.Lock()
	sent, canceled := call.sent, call.canceled
	r.mu.Unlock()
	switch {
	case err == nil:
		return outcomeCreated, nil
	case canceled && !sent:
		return outcomeNotSent, nil
	case canceled:
		return outcomeUnknown, err
	default:
		return outcomeFailed, err
	}
}

// creationTally is what slowStart did.
type creationTally struct {
	Created int
	// Canceled creations were not sent because the set wanted fewer
	// machines; Unknown ones were canceled after they may have been sent.
	Canceled, Unknown int
	// Err holds the failures.
	Err error
}

// slowStart hands out the run's creations in batches of
// Options.SlowStartInitialBatch, then twice as many each round, the calls
// of a batch in parallel, and stops after the first batch with a failure,
// so that a broken template or an exhausted quota costs a few requests,
// not all of them; it also stops once the run's limit is reached.
func (c *Controller) slowStart(ctx context.Context, run *creationRun, create func(context.Context) error) creationTally {
	var t creationTally
	for batch := min(c.opts.SlowStartInitialBatch, run.remaining()); batch > 0; batch = min(2*batch, run.remaining()) {
		outcomes := make([]creationOutcome, batch)
		work := make([]func(context.Context) error, batch)
		for i := range work {
			work[i] = func(ctx context.Context) error {
				var err error
				outcomes[i], err = run.do(ctx, create)
				return err
			}
		}
		errs := parallel.Run(ctx, batch, work)
		failed := 0
		for _, o := range outcomes {
			switch o {
			case outcomeCreated:
				t.Created++
			case outcomeNotSent:
				t.Canceled++
			case outcomeUnknown:
				t.Unknown++
			case outcomeFailed:
				failed++
			}
		}
		if failed > 0 {
			t.Err = errors.Join(errs...)
			return t
		}
	}
	return t
}

// createMachine creates one machine from the set's template. The set
// names it, and records the name before the request leaves, so that the
// machine counts as the set's own even if the answer is lost
// (provenance).
func (c *Controller) createMachine(ctx context.Context, set *v1alpha1.MachineSet) (*v1alpha1.Machine, error) {
	key := workqueue.KeyOf(set)
	m := newMachine(set)
	c.prov.sending(key, m.Name, c.opts.Clock.Now())
	created, err := c.client.MachineV1alpha1().Machines(set.Namespace).Create(ctx, m, metav1.CreateOptions{FieldManager: c.opts.FieldManager})
	if err != nil {
		return nil, fmt.Errorf("creating machine: %w", err)
	}
	c.prov.answered(key, m.Name, created, c.opts.Clock.Now())
	c.event(set, corev1.EventTypeNormal, ReasonCreated, "Created machine "+created.Name)
	return created, nil
}

// newMachine is a new machine of the set (see machinestate.NewMachine):
// it carries from its birth the defaults the machine controller would
// otherwise store before creating its VM.
func newMachine(set *v1alpha1.MachineSet) *v1alpha1.Machine {
	return machinestate.NewMachine(set)
}

// creationRuns are the sets' runs under way, by set key.
type creationRuns struct {
	mu   sync.Mutex
	runs map[string]*creationRun
}

func (r *creationRuns) start(key string, run *creationRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs == nil {
		r.runs = map[string]*creationRun{}
	}
	r.runs[key] = run
}

func (r *creationRuns) end(key string, run *creationRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs[key] == run {
		delete(r.runs, key)
	}
}

func (r *creationRuns) get(key string) *creationRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[key]
}
