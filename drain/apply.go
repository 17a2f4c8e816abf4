package drain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

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

// apply issues the plan's force deletions, evictions and VolumeAttachment
// deletions, updates the decisions and state with their outcomes, and
// returns the errors that are not eviction outcomes. Every goroutine it
// starts has ended when it returns.
func (d *Drainer) apply(ctx context.Context, logger logr.Logger, res *Result) []error {
	requests := res.hasRequests() || len(res.DeleteAttachments) > 0
	errs := d.applyPods(ctx, logger, res)
	errs = append(errs, d.deleteAttachments(ctx, logger, res)...)
	if requests && ctx.Err() != nil {
		// One error for all requests the end of ctx cut short.
		errs = append(errs, fmt.Errorf("pass over node %s interrupted: %w", res.Node, ctx.Err()))
	}
	return errs
}

// hasRequests reports whether the plan calls for pod requests.
func (p *Plan) hasRequests() bool {
	for _, dec := range p.Decisions {
		if dec.Action == ActionForceDelete || dec.Action == ActionEvict {
			return true
		}
	}
	return false
}

// applyPods issues the force deletions and evictions with bounded
// concurrency.
func (d *Drainer) applyPods(ctx context.Context, logger logr.Logger, res *Result) []error {
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
	bumped := map[string]bool{}  // backoffs already lengthened in this pass
	refused := map[string]bool{} // backoff keys whose eviction a budget refused
	for range reqs {
		o := <-outcomes
		if o.interrupted {
			res.Decisions[o.index].Reason = "interrupted"
			continue
		}
		if err := d.record(logger, res, o, bumped, refused); err != nil {
			errs = append(errs, err)
		}
	}
	wg.Wait()
	countRefusals(res, refused)
	return errs
}

// countRefusals counts a refusal for every pod held back in this pass by
// a budget (or, for a pod's own key, the pod) whose eviction was refused:
// the refused eviction stands for all of them, since a budget's pods are
// asked for one at a time. Each pod counts at most once per pass.
func countRefusals(res *Result, refused map[string]bool) {
	if len(refused) == 0 {
		return
	}
	st := &res.State
	for _, dec := range res.Decisions {
		if dec.Action != ActionBlocked || !refused[backoffKey(dec)] ||
			(dec.Cause != CauseDisruptionBudget && dec.Cause != CauseTooManyRequests) {
			continue
		}
		i := slices.IndexFunc(st.refusals, func(r podRefusals) bool { return r.Pod.UID == dec.Pod.UID })
		if i < 0 {
			st.refusals = append(st.refusals, podRefusals{Pod: dec.Pod})
			i = len(st.refusals) - 1
		}
		st.refusals[i].Count++
	}
}

// budgetRefusal reports whether a 429 is a PodDisruptionBudget's refusal,
// not throttling by the API server.
func budgetRefusal(err error) bool {
	var s apierrors.APIStatus
	if !errors.As(err, &s) || s.Status().Details == nil {
		return false
	}
	for _, c := range s.Status().Details.Causes {
		if c.Type == policyv1.DisruptionBudgetCause {
			return true
		}
	}
	return false
}

// deleteAttachments deletes the VolumeAttachments the plan names, one
// after the other (there are few, and no pod is left), each with a UID
// precondition. An attachment that is gone already is no error.
func (d *Drainer) deleteAttachments(ctx context.Context, logger logr.Logger, res *Result) []error {
	var errs []error
	for _, ref := range res.DeleteAttachments {
		if ctx.Err() != nil {
			break
		}
		del := metav1.DeleteOptions{}
		if ref.UID != "" {
			uid := ref.UID
			del.Preconditions = &metav1.Preconditions{UID: &uid}
		}
		err := d.client.StorageV1().VolumeAttachments().Delete(ctx, ref.Name, del)
		if err != nil && ctx.Err() != nil {
			break
		}
		var vols []string
		if ref.Volume != "" {
			vols = []string{ref.Volume}
		}
		e := Event{Type: EventAttachmentDeleted, Node: res.Node, Time: d.opts.Clock.Now(), Volumes: vols}
		switch {
		case err == nil:
			res.AttachmentDeletions++
			e.Message = fmt.Sprintf("deleted VolumeAttachment %s: %s", ref.Name, res.ForceReason)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			continue // gone, or replaced by one this plan did not see
		default:
			e.Type, e.Err = EventEvictionFailed, err
			e.Message = fmt.Sprintf("deleting VolumeAttachment %s failed: %v", ref.Name, err)
			errs = append(errs, fmt.Errorf("deleting VolumeAttachment %s of node %s: %w", ref.Name, res.Node, err))
		}
		res.Events = append(res.Events, e)
		d.emit(logger, e)
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
		if r := once(d.client.CoreV1().RESTClient(), "DELETE"); r != nil {
			return r.Namespace(dec.Pod.Namespace).Resource("pods").Name(dec.Pod.Name).Body(del).Do(ctx).Error()
		}
		return d.client.CoreV1().Pods(dec.Pod.Namespace).Delete(ctx, dec.Pod.Name, *del)
	}
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: dec.Pod.Namespace, Name: dec.Pod.Name}, DeleteOptions: del}
	var err error
	if r := once(d.client.PolicyV1().RESTClient(), "POST"); r != nil {
		// The path of client-go's Evict: the eviction subresource of the
		// core pod, with a policy/v1 body.
		err = r.AbsPath("/api/v1").Namespace(ev.Namespace).Resource("pods").Name(ev.Name).SubResource("eviction").Body(ev).Do(ctx).Error()
	} else {
		err = d.client.PolicyV1().Evictions(dec.Pod.Namespace).Evict(ctx, ev)
	}
	if err == nil || ctx.Err() == nil { // a request cut short got no answer to count
		d.metrics.evictionRequest(statusCode(err))
	}
	return err
}

// once returns a request of verb through rc that is sent once. client-go
// retries an answer with Retry-After (429, or a 5xx) inside the call, up to
// ten times, sleeping what the server asks: the eviction API answers 429
// with Retry-After 10 s while a PodDisruptionBudget's status is not
// computed yet, and a pass (with its worker and a slot of the pass's
// requests) would wait 100 s on one pod. A refused eviction is this pass's
// answer instead: the pod is blocked at once, and the next pass comes on
// the drain's own backoff or the budget's update. once returns nil when rc
// is no REST client (client-go's fake clientsets, which have none and do
// not retry); the caller then uses the typed client.
func once(rc rest.Interface, verb string) *rest.Request {
	if c, ok := rc.(*rest.RESTClient); rc == nil || (ok && c == nil) {
		return nil
	}
	return rc.Verb(verb).MaxRetries(0)
}

// record applies one outcome to the result. It runs on the goroutine of
// Pass, so events are emitted in order and the state needs no lock.
func (d *Drainer) record(logger logr.Logger, res *Result, o outcome, bumped, refused map[string]bool) error {
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

	case err == nil:
		typ, msg := d.accepted(res, dec)
		ev(typ, msg, nil)
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
	}
	if !force {
		if msg, ok := d.refusal(res, dec, err, now, bumped, refused); ok {
			ev(EventEvictionBlocked, msg, nil)
			return nil
		}
	}
	what := "evicting"
	if force {
		what = "force-deleting"
	}
	dec.Error = err.Error()
	ev(EventEvictionFailed, what+" failed: "+err.Error(), err)
	return fmt.Errorf("%s pod %s: %w", what, dec.Pod, err)
}

// accepted records an eviction or a deletion the API server accepted: the
// pod terminates and is tracked until it is gone. It returns the event to
// report.
func (d *Drainer) accepted(res *Result, dec *Decision) (EventType, string) {
	if dec.Action == ActionForceDelete {
		d.metrics.forceDeleted()
		res.ForceDeletions++
		typ := EventForceDeleted
		dec.Reason = fmt.Sprintf("force-deleted with %v grace", dec.GracePeriod)
		if dec.Cause == CauseEvictRetries {
			typ = EventEvictRetriesExhausted
			dec.Reason = fmt.Sprintf("deleted with %v grace: %s", dec.GracePeriod, refusalsReason(res.State.maxEvictRetries))
		}
		dec.Action = ActionWaitTermination
		track(&res.State, dec)
		return typ, dec.Reason
	}
	res.Evictions++
	dec.Action = ActionWaitTermination
	dec.Reason = "evicted, terminating"
	track(&res.State, dec)
	// A success after the backoff resets it; one let through during the
	// backoff because the budget allowed it leaves the timer as it is, so
	// that refused retries stay spaced out.
	if b, ok := findBackoff(res.State, backoffKey(*dec)); ok && !res.Now.Before(b.Until) {
		clearBackoff(&res.State, b.Key)
	}
	return EventEvictionStarted, "eviction accepted"
}

// refusal records an eviction refused for a reason that waiting may lift
// (a 429, a terminating namespace, several budgets) as ActionBlocked
// behind a backoff, and returns the event's message; ok is false for any
// other error.
func (d *Drainer) refusal(res *Result, dec *Decision, err error, now time.Time, bumped, refused map[string]bool) (msg string, ok bool) {
	switch {
	case apierrors.IsTooManyRequests(err):
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
		if budgetRefusal(err) {
			refused[key] = true
		}
		return causeMessage(err), true

	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		d.block(res, dec, "pod/"+string(dec.Pod.UID), CauseNamespaceTerminating, "namespace is terminating", 0, now, bumped)
		return "namespace is terminating", true

	case apierrors.IsInternalError(err) && strings.Contains(err.Error(), "more than one PodDisruptionBudget"):
		d.block(res, dec, "pod/"+string(dec.Pod.UID), CauseMultiplePDBs,
			"selected by several PodDisruptionBudgets; the eviction API refuses such pods", 0, now, bumped)
		return causeMessage(err), true
	}
	return "", false
}

// block turns a refused eviction into ActionBlocked and lengthens the
// backoff of key (once per pass).
func (d *Drainer) block(res *Result, dec *Decision, key string, cause Cause, reason string,
	hint time.Duration, now time.Time, bumped map[string]bool) {
	st := &res.State
	i := -1
	for j := range st.backoffs {
		if st.backoffs[j].Key == key {
			i = j
			break
		}
	}
	if i < 0 {
		st.backoffs = append(st.backoffs, backoffEntry{Key: key})
		i = len(st.backoffs) - 1
	}
	b := &st.backoffs[i]
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

// track adds a pod whose eviction or deletion was accepted to the state,
// unless it is there already.
func track(st *State, dec *Decision) {
	for _, t := range st.tracked {
		if t.Pod.UID == dec.Pod.UID {
			return
		}
	}
	st.tracked = append(st.tracked, trackedPod{Pod: dec.Pod, Group: dec.Group, Volumes: dec.Volumes})
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
