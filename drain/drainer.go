package drain

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Drainer drains nodes. It holds configuration only, no per-drain state,
// so one Drainer serves any number of nodes, concurrently. Create it with
// New.
type Drainer struct {
	client  kubernetes.Interface
	opts    Options
	metrics *metrics
}

// New returns a Drainer that works through client. It validates opts
// (negative durations and counts are errors; zero values take their
// defaults) and registers the metrics on opts.Registerer, if set. It starts
// no goroutines.
func New(client kubernetes.Interface, opts Options) (*Drainer, error) {
	if client == nil {
		return nil, errors.New("drain: client must not be nil")
	}
	o, err := opts.complete()
	if err != nil {
		return nil, fmt.Errorf("drain: invalid options: %w", err)
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("drain: %w", err)
	}
	return &Drainer{client: client, opts: o, metrics: m}, nil
}

// Plan reports what a drain of the node starting now would do with every
// pod on it, and why, without changing anything: the dry run.
func (d *Drainer) Plan(ctx context.Context, nodeName string) (Plan, error) {
	node, err := d.getNode(ctx, nodeName)
	if err != nil {
		return Plan{Node: nodeName}, err
	}
	snap, err := d.observe(ctx, node, State{})
	if err != nil {
		return Plan{Node: nodeName}, err
	}
	return Decide(snap, d.opts), nil
}

// Pass runs one bounded, non-blocking step of draining the node: it cordons
// the node (unless Options.SkipCordon), observes it, plans, and issues the
// evictions and force deletions the plan calls for, spending at most
// Options.PassTimeout on them. It does not wait for pods to terminate.
//
// Hand it the State of the previous Result (the zero State for a new
// drain) and call it again at Result.NextCheck until Result.Done. Passes are
// idempotent: repeating one, or running one with an older state after a
// crash, evicts nothing twice and loses no pod.
//
// The error reports what went wrong besides the eviction outcomes the plan
// handles (429, 404, 409): failing reads, failing evictions, a cancelled
// context. Even with an error, Result.State reflects every request the
// pass made and must be persisted.
func (d *Drainer) Pass(ctx context.Context, nodeName string, state State) (Result, error) {
	logger := logr.FromContextOrDiscard(ctx).WithValues("node", nodeName)
	failed := Result{Plan: Plan{Node: nodeName, State: state}}

	node, err := d.getNode(ctx, nodeName)
	if err != nil {
		return failed, err
	}
	if !d.opts.SkipCordon && !node.Spec.Unschedulable {
		if err := d.setUnschedulable(ctx, nodeName, true); err != nil {
			return failed, err
		}
		logger.Info("Cordoned node")
	}
	snap, err := d.observe(ctx, node, state)
	if err != nil {
		return failed, err
	}
	res := Result{Plan: Decide(snap, d.opts)}
	for _, e := range res.Events {
		d.emit(logger, e)
	}

	errs := d.apply(ctx, logger, &res)
	finish(&res.Plan, d.opts)

	if res.Done {
		d.metrics.forget(nodeName) // also after the pass that completed it
	} else {
		d.metrics.passDone(nodeName, res.RemainingPods())
	}
	if res.Done && res.State.Completed.IsZero() {
		res.State.Completed = res.Now
		d.metrics.drained(res.Now.Sub(res.State.Start).Seconds())
		logger.Info("Drained node", "duration", res.Now.Sub(res.State.Start).String())
	} else if !res.Done {
		logger.V(2).Info("Drain pass", "remaining", res.RemainingPods(), "nextCheck", res.NextCheck, "message", res.Message)
	}
	return res, errors.Join(errs...)
}

// Drain drains the node and returns when it is done, when a pod is refused
// (ErrRefused), on the first error of a pass, or when ctx ends — exactly
// then: every request and every wait is bound to ctx. It is Pass in a loop,
// waiting for NextCheck in between, with the state kept in memory. On
// failure it returns the last complete Result, whose Message names what
// blocks the drain, and an error that wraps ctx.Err() if ctx ended.
//
// ctx's deadline bounds the call, not the drain: pods are force-deleted
// only under Options.Timeout.
func (d *Drainer) Drain(ctx context.Context, nodeName string) (Result, error) {
	var (
		state State
		last  Result
	)
	last.Node = nodeName
	for {
		res, err := d.Pass(ctx, nodeName, state)
		state = res.State
		if res.Decisions != nil {
			last = res
		} else {
			last.State = state
		}
		if err != nil {
			if ctx.Err() != nil {
				return last, d.notDrained(nodeName, last, ctx.Err())
			}
			return last, err
		}
		if res.Done {
			return res, nil
		}
		if res.Remaining[ActionRefuse] > 0 {
			return res, fmt.Errorf("node %s: %w: %s", nodeName, ErrRefused, res.Message)
		}
		if wait := res.NextCheck.Sub(d.opts.Clock.Now()); wait > 0 {
			timer := d.opts.Clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return last, d.notDrained(nodeName, last, ctx.Err())
			case <-timer.C():
			}
		} else if ctx.Err() != nil {
			return last, d.notDrained(nodeName, last, ctx.Err())
		}
	}
}

func (d *Drainer) notDrained(nodeName string, last Result, err error) error {
	if last.Message == "" {
		return fmt.Errorf("node %s not drained: %w", nodeName, err)
	}
	return fmt.Errorf("node %s not drained (%s): %w", nodeName, last.Message, err)
}

// Cordon marks the node unschedulable with a merge patch.
func (d *Drainer) Cordon(ctx context.Context, nodeName string) error {
	return d.setUnschedulable(ctx, nodeName, true)
}

// Uncordon marks the node schedulable again, e.g. when a drain is
// abandoned, and drops the node's drain metrics.
func (d *Drainer) Uncordon(ctx context.Context, nodeName string) error {
	if err := d.setUnschedulable(ctx, nodeName, false); err != nil {
		return err
	}
	d.metrics.forget(nodeName)
	return nil
}

func (d *Drainer) setUnschedulable(ctx context.Context, nodeName string, unschedulable bool) error {
	patch := []byte(`{"spec":{"unschedulable":true}}`)
	verb := "cordoning"
	if !unschedulable {
		patch = []byte(`{"spec":{"unschedulable":null}}`)
		verb = "uncordoning"
	}
	_, err := d.client.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: d.opts.FieldManager})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s node %q: %w", verb, nodeName, ErrNodeNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s node %q: %w", verb, nodeName, err)
	}
	return nil
}

// emit logs an event, hands it to Options.OnEvent and records it.
func (d *Drainer) emit(logger logr.Logger, e Event) {
	kv := []any{"pod", e.Pod.String(), "event", e.Type}
	if len(e.Volumes) > 0 {
		kv = append(kv, "volumes", e.Volumes)
	}
	// Failures are returned by Pass, and logged by whoever handles them;
	// here they are progress like the rest.
	switch e.Type {
	case EventEvictionBlocked:
		logger.V(2).Info(e.Message, kv...)
	default:
		logger.V(1).Info(e.Message, kv...)
	}
	if d.opts.OnEvent != nil {
		d.opts.OnEvent(e)
	}
}

// request is one eviction or force deletion of a pass.
type request struct {
	index    int // into Result.Decisions
	decision Decision
}

// outcome is the answer to a request.
type outcome struct {
	index    int
	err      error
	deferred bool // not sent: the pass ran out of time or ctx ended
	// interrupted: sent, but ctx ended before the answer came.
	interrupted bool
}

// apply issues the plan's force deletions and evictions with bounded
// concurrency, updates the decisions and state with their outcomes, and
// returns the errors that are not eviction outcomes. Every goroutine it
// starts has ended when it returns.
func (d *Drainer) apply(ctx context.Context, logger logr.Logger, res *Result) []error {
	var reqs []request
	for _, want := range []Action{ActionForceDelete, ActionEvict} {
		for i, dec := range res.Decisions {
			if dec.Action == want {
				reqs = append(reqs, request{index: i, decision: dec})
			}
		}
	}
	if len(reqs) == 0 {
		return nil
	}
	started := d.opts.Clock.Now()
	work := make(chan request, len(reqs))
	for _, r := range reqs {
		work <- r
	}
	close(work)
	outcomes := make(chan outcome, len(reqs))
	var wg sync.WaitGroup
	for range min(d.opts.EvictionConcurrency, len(reqs)) {
		wg.Go(func() {
			for r := range work {
				if ctx.Err() != nil || d.opts.Clock.Since(started) >= d.opts.PassTimeout {
					outcomes <- outcome{index: r.index, deferred: true}
					continue
				}
				err := d.send(ctx, r.decision)
				outcomes <- outcome{index: r.index, err: err, interrupted: err != nil && ctx.Err() != nil}
			}
		})
	}

	var errs []error
	bumped := map[string]bool{} // backoffs already lengthened in this pass
	for range reqs {
		o := <-outcomes
		if o.interrupted {
			res.Decisions[o.index].Reason = "interrupted"
			continue
		}
		if err := d.record(logger, res, o, bumped); err != nil {
			errs = append(errs, err)
		}
	}
	wg.Wait()
	if ctx.Err() != nil {
		// One error for all requests the end of ctx cut short (an
		// interrupted outcome implies it).
		errs = append(errs, fmt.Errorf("pass over node %s interrupted: %w", res.Node, ctx.Err()))
	}
	return errs
}

// send makes the API request for one decision.
func (d *Drainer) send(ctx context.Context, dec Decision) error {
	uid := dec.Pod.UID
	del := &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	if dec.GracePeriod > 0 {
		secs := int64(dec.GracePeriod / time.Second)
		del.GracePeriodSeconds = &secs
	}
	if dec.Action == ActionForceDelete {
		return d.client.CoreV1().Pods(dec.Pod.Namespace).Delete(ctx, dec.Pod.Name, *del)
	}
	err := d.client.PolicyV1().Evictions(dec.Pod.Namespace).Evict(ctx, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: dec.Pod.Namespace, Name: dec.Pod.Name},
		DeleteOptions: del,
	})
	if err == nil || ctx.Err() == nil { // a request cut short got no answer to count
		d.metrics.evictionRequest(statusCode(err))
	}
	return err
}

// record applies one outcome to the result. It runs on the goroutine of
// Pass, so events are emitted in order and the state needs no lock.
func (d *Drainer) record(logger logr.Logger, res *Result, o outcome, bumped map[string]bool) error {
	dec := &res.Decisions[o.index]
	now := d.opts.Clock.Now()
	ev := func(typ EventType, msg string, err error) {
		e := Event{Type: typ, Node: res.Node, Pod: dec.Pod, Time: now, Message: msg, Err: err}
		res.Events = append(res.Events, e)
		d.emit(logger, e)
	}
	force := dec.Action == ActionForceDelete
	err := o.err
	switch {
	case o.deferred:
		dec.Reason = "left to the next pass"
		return nil

	case err == nil && force:
		d.metrics.forceDeleted()
		res.ForceDeletions++
		dec.Action = ActionWaitTermination
		dec.Reason = fmt.Sprintf("force-deleted with %v grace", dec.GracePeriod)
		track(&res.State, dec)
		ev(EventForceDeleted, dec.Reason, nil)
		return nil

	case err == nil:
		res.Evictions++
		dec.Action = ActionWaitTermination
		dec.Reason = "evicted, terminating"
		track(&res.State, dec)
		clearBackoff(&res.State, backoffKey(*dec))
		ev(EventEvictionStarted, "eviction accepted", nil)
		return nil

	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		// 409 is the UID precondition: the pod we planned for is gone and
		// a replacement of the same name must not be touched.
		dec.Action, dec.Cause = ActionGone, ""
		dec.Reason = "pod no longer exists"
		if apierrors.IsConflict(err) {
			dec.Reason = "pod was replaced by another with the same name"
		}
		ev(EventPodGone, dec.Reason, nil)
		return nil

	case !force && apierrors.IsTooManyRequests(err):
		key := backoffKey(*dec)
		cause := CauseTooManyRequests
		reason := "eviction refused (429): " + causeMessage(err)
		if strings.HasPrefix(key, "pdb/") {
			cause = CauseDisruptionBudget
			reason = "blocked by PodDisruptionBudget " + dec.PDBs[0].String()
		}
		hint := time.Duration(0)
		if secs, ok := apierrors.SuggestsClientDelay(err); ok {
			hint = time.Duration(secs) * time.Second
		}
		d.block(res, dec, key, cause, reason, hint, now, bumped)
		ev(EventEvictionBlocked, causeMessage(err), nil)
		return nil

	case !force && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		d.block(res, dec, "pod/"+string(dec.Pod.UID), CauseNamespaceTerminating, "namespace is terminating", 0, now, bumped)
		ev(EventEvictionBlocked, "namespace is terminating", nil)
		return nil

	case !force && apierrors.IsInternalError(err) && strings.Contains(err.Error(), "more than one PodDisruptionBudget"):
		d.block(res, dec, "pod/"+string(dec.Pod.UID), CauseMultiplePDBs,
			"selected by several PodDisruptionBudgets; the eviction API refuses such pods", 0, now, bumped)
		ev(EventEvictionBlocked, causeMessage(err), nil)
		return nil

	default:
		what := "evicting"
		if force {
			what = "force-deleting"
		}
		dec.Error = err.Error()
		ev(EventEvictionFailed, what+" failed: "+err.Error(), err)
		return fmt.Errorf("%s pod %s: %w", what, dec.Pod, err)
	}
}

// block turns a refused eviction into ActionBlocked and lengthens the
// backoff of key (once per pass).
func (d *Drainer) block(res *Result, dec *Decision, key string, cause Cause, reason string,
	hint time.Duration, now time.Time, bumped map[string]bool) {
	st := &res.State
	i := -1
	for j := range st.Backoffs {
		if st.Backoffs[j].Key == key {
			i = j
			break
		}
	}
	if i < 0 {
		st.Backoffs = append(st.Backoffs, Backoff{Key: key})
		i = len(st.Backoffs) - 1
	}
	b := &st.Backoffs[i]
	if !bumped[key] {
		bumped[key] = true
		b.Attempts++
		wait := d.opts.BackoffInitial
		for n := 1; n < b.Attempts && wait < d.opts.BackoffMax; n++ {
			wait *= 2
		}
		wait = max(min(wait, d.opts.BackoffMax), hint)
		b.Until = now.Add(wait)
		b.Cause = cause
	}
	dec.Action, dec.Cause, dec.Reason, dec.RetryAt = ActionBlocked, cause, reason, b.Until
}

// backoffKey is the key of the backoff that holds a pod's evictions back:
// its budget's when a single budget decides for a healthy pod, else its
// own.
func backoffKey(d Decision) string {
	if len(d.PDBs) == 1 && d.Healthy {
		return "pdb/" + d.PDBs[0].Name
	}
	return "pod/" + string(d.Pod.UID)
}

func clearBackoff(st *State, key string) {
	for i, b := range st.Backoffs {
		if b.Key == key {
			st.Backoffs = append(st.Backoffs[:i:i], st.Backoffs[i+1:]...)
			return
		}
	}
}

// track adds a pod whose eviction or deletion was accepted to the state,
// unless it is there already.
func track(st *State, dec *Decision) {
	for _, t := range st.Tracked {
		if t.Pod.UID == dec.Pod.UID {
			return
		}
	}
	st.Tracked = append(st.Tracked, Tracked{Pod: dec.Pod, Group: dec.Group, Volumes: dec.Volumes})
}

// statusCode is the HTTP status code of an API answer for the metrics:
// 201 for an accepted eviction, "error" when there was no answer.
func statusCode(err error) string {
	if err == nil {
		return "201"
	}
	var s apierrors.APIStatus
	if errors.As(err, &s) && s.Status().Code != 0 {
		return strconv.Itoa(int(s.Status().Code))
	}
	return "error"
}

// causeMessage returns the most telling part of an API error: the
// disruption-budget cause of a 429 ("The disruption budget web needs 3
// healthy pods and has 3 currently"), else the error text.
func causeMessage(err error) string {
	var s apierrors.APIStatus
	if errors.As(err, &s) && s.Status().Details != nil {
		for _, c := range s.Status().Details.Causes {
			if c.Type == policyv1.DisruptionBudgetCause && c.Message != "" {
				return c.Message
			}
		}
	}
	return err.Error()
}
