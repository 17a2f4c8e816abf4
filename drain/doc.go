// Package drain empties a Kubernetes node of its pods safely: in order,
// within PodDisruptionBudgets, by a deadline, and only done once the pods'
// volumes have detached. It needs nothing but a kubernetes.Interface and
// works as a blocking call for tools or as resumable passes for
// controllers.
//
// # Model
//
// Every step is observe → plan → apply. Observe reads the node, its pods
// (a paginated LIST by spec.nodeName, or an informer cache), their
// PodDisruptionBudgets and, when volumes matter, claims and
// VolumeAttachments. Plan is Decide, a pure function that gives every pod
// exactly one Decision: skip, refuse, evict (in which order group), wait
// for an earlier group, blocked by a budget ("needs 3 healthy, has 3"),
// wait for completion or termination, force-delete at time T. Apply sends
// the evictions and deletions the plan calls for. Plan is the dry run;
// Pass is one bounded step; Drain loops over Pass.
//
// # Reads and caches
//
// Without Options.Listers a pass reads from the API server: the node, a
// LIST of the node's pods by field selector, LISTs of the budgets of their
// namespaces, GETs of claims and volumes, and, only when the plan looks at
// attachments (a bound claim, a tracked volume, the final sweep, an
// unreachable node), one LIST of all VolumeAttachments. With every lister
// set (ListersFromFactory sets them all and adds the indexes by node, see
// AddNodeNameIndex and AddVolumeAttachmentNodeIndex) a pass reads nothing
// from the API server: it sends only the cordon patch when the node is
// not cordoned yet, the evictions and the deletions.
//
// # Which pods, in which order
//
//   - Mirror pods and pods that have finished are skipped. DaemonSet pods
//     are skipped unless Options.DrainDaemonSets. Pods without a
//     controller and pods with emptyDir volumes are evicted unless
//     Options.RefuseUnmanaged / RefuseLocalStorage, in which case the drain
//     refuses to touch the node while they are on it.
//   - A pod owner may annotate mcmkit.io/drain (PolicyAnnotation) with
//     skip, wait-completed or drain, and mcmkit.io/drain-order
//     (OrderAnnotation) with an integer. Options.Filters decide for pods
//     the annotation does not.
//   - Pods drain in order groups: by order (lower first, 0 when absent),
//     then by tier: regular pods, then system-cluster-critical and
//     system-node-critical pods, then DaemonSet pods. A group starts only
//     when the earlier ones are gone and their volumes have detached. To
//     drain a storage or logging agent after everything else, give it a
//     positive order; negative orders drain before unannotated pods.
//
// # Evictions and budgets
//
// Evictions go through policy/v1 with a UID precondition, so a replacement
// pod with the same name is never evicted by a stale request. 404 and 409
// mean the pod is gone. Per pass, a budget hands out no more evictions of
// its healthy pods than its status allows, and when it allows none, one
// probe: the API server decides, and a 429 starts an exponential backoff
// (Options.BackoffInitial doubling up to BackoffMax) for the whole budget,
// kept in State, so there is never a hot loop of refused evictions. A
// 429 is this pass's answer at once, whatever Retry-After it carries:
// evictions and force deletions are sent once (client-go would otherwise
// sleep the server's Retry-After and try again inside the call, ten
// times, and the eviction API asks for 10 s while a budget's status is
// not computed yet), and the server's hint only lengthens the budget's
// backoff. The
// backoff is only the fallback: as soon as the budget's status (of its
// current generation) allows a disruption again, its pods are evicted,
// never more than it allows, whatever the timer says. Budgets that allow
// no disruption although all their pods are healthy (minAvailable equal
// to the replicas, maxUnavailable 0) are reported as misconfigured at
// once, and so are pods selected by several budgets, which the eviction
// API refuses; neither is retried.
//
// To move as soon as a budget allows, State.BlockingBudgets names the
// budgets the drain waits on. Drain watches them (one watch per budget,
// through the client; without permission to watch it just waits) and runs
// the next pass when one of them reports an allowed disruption, NextCheck
// being the fallback. A controller indexes its draining nodes by them and
// requeues those on budget updates.
//
// # Bounded retries
//
// State.SetMaxEvictRetries (or, for drains whose state sets none,
// Options.MaxEvictRetries) bounds how often budgets may refuse one pod's
// eviction: the Machine Controller Manager's maxEvictRetries. A refusal
// is a 429 whose cause is a PodDisruptionBudget; throttling and errors do
// not count. The State counts them per pod (by UID), so the count
// survives passes and restarts. A budget is asked through one eviction
// per backoff for all the healthy pods it holds back, so a refusal counts
// for each of them, once per pass: as in the Machine Controller Manager,
// where every pod retries on its own, the pods behind one budget reach the
// bound together, not one after the other. Once a pod has been refused
// that often, its next attempt, when the backoff allows it, deletes it
// without the eviction API, as the deadline would: with its own grace
// period (cut short by the deadline, if any), ActionForceDelete with
// CauseEvictRetries, an EventEvictRetriesExhausted instead of
// EventForceDeleted, and a Plan.ForceReason that names the bound. Its
// order group, refused pods, its termination and volume slots still hold
// it; its budgets, misconfigured or several, no longer do. Zero means no
// bound: budgets are respected until the deadline.
//
// The bound counts refusals, not time, and is not converted. The Machine
// Controller Manager retries every 20 seconds, so its N retries last N×20s
// (its default of 360 is its default drain timeout of 2h), and its caller
// caps N at drainTimeout/20s so that the retries end by the deadline.
// Here a refused eviction is retried after the backoff, BackoffInitial
// doubling up to BackoffMax (1s to 30s by default), and the attempt after
// the Nth refusal comes 2^N-1 seconds after the first refusal for N ≤ 5,
// 31s + (N-5)×30s beyond: 3 refusals take 7s (1 minute there), 10 about
// 3 minutes (3m20s), 120 about an hour (40 minutes), 360 about 3 hours,
// past the default deadline, which forces the drain first, as it does
// there. Time is the deadline's business: the cap needs no counterpart,
// since the deadline forces whatever is left anyway. A controller that
// wants the Machine Controller Manager's timing exactly sets
// BackoffInitial and BackoffMax to 20s, which makes the Nth refusal's
// next attempt come N×20s after the first one; a budget that allows a
// disruption again is still acted on at once.
//
// # Deadline
//
// Without a deadline, budgets are respected forever and the Result says
// who blocks. With one (Options.Timeout from the first pass, or
// State.Deadline), each remaining pod is deleted without the eviction API
// at the deadline minus its termination grace period, never below one
// second, so that it is gone by the deadline; volume waits end at the
// deadline too. Ordering yields to the deadline: each pod goes at its own
// time. Pods refused by the options are never force-deleted.
//
// A node that has been NotReady (or unreachable) for
// UnreachableOptions.ForceAfter (5 minutes by default, the Machine
// Controller Manager's threshold) forces the drain the same way: the
// effective deadline, Plan.Deadline, is the earlier of State.Deadline and
// that moment, and NextCheck wakes for it. Plan.ForceReason says why pods
// (or attachments) are deleted without asking, e.g. "node not Ready for
// more than 5m0s", for a controller to show.
//
// # Unreachable nodes
//
// When the node has not been Ready (or has been tainted unreachable) for
// UnreachableOptions.After, the kubelet cannot finish anything: evictions
// use a one-second grace period, pods terminating for more than
// SkipWaitAfter past their deletion time count as gone, and the volumes of
// gone pods are not waited for. Budgets still apply through the eviction
// API until the drain is forced.
//
// Nor can such a node detach its volumes, and the attach/detach controller
// waits minutes before it detaches them by force. So once no pod is left
// to drain, the node's VolumeAttachments are waited for until the drain is
// forced (the deadline or ForceAfter); then the drain deletes them, one
// EventAttachmentDeleted each, and is not done until they are gone or
// VolumeOptions.DetachTimeout has passed. Done thus means "pods gone and
// volumes handled": the caller needs no volume step of its own. On a Ready
// node nothing is deleted, since a running kubelet may still have the
// volume mounted; VolumeOptions.KeepAttachments turns the deletion off.
//
// # Volumes
//
// After a pod with persistent volumes is gone, its group waits until the
// VolumeAttachments of those volumes on this node are deleted (and, with
// VolumeOptions.IDs, until the node's status.volumesAttached no longer
// lists their IDs; that status alone is never trusted), at most
// DetachTimeout. At most VolumeOptions.Parallelism pods with volumes are in
// flight at once. Once no pod is left to drain, every remaining
// attachment on the node that no remaining pod uses is waited for too, so
// a pod that vanished between two passes cannot make the drain finish
// early.
//
// # State and results
//
// Pass takes a State and returns a Result whose State is to be handed to
// the next pass; it is small and opaque, marshals to JSON (in a format
// that stays readable by later versions) and is all a controller persists
// (e.g. in an annotation or a status field). The caller sets only its
// deadline and its bound on refused evictions. Result.Done says the
// node is drained, Result.NextCheck when to look again, Result.Remaining
// how many pods are left by action, and Result.Message names the blocking
// pods and budgets in one line that only changes when the situation does.
// Options.OnEvent and Result.Events report every pod event: eviction
// started, blocked or failed, force deletion (at the deadline or after
// MaxEvictRetries refusals), pod gone, volumes detached, and the deletion
// of an unreachable node's VolumeAttachments.
//
// # Guarantees
//
//   - Objects from informer caches are never modified.
//   - Every call takes its context first and never stores it; logs go to
//     logr.FromContextOrDiscard(ctx).
//   - Errors are wrapped with %w and returned, never only logged.
//   - When Pass or Drain returns, every goroutine it started has ended;
//     a cancelled context stops them promptly.
//   - New starts nothing and registers metrics only on the Registerer it
//     is given.
//
// # Metrics
//
// With Options.Registerer set:
//
//	mcm_drain_eviction_requests_total{code}  counter; code is the HTTP status (201 accepted, 429, ...) or "error"
//	mcm_drain_force_deletions_total          counter; pods deleted without the eviction API (deadline, NotReady node, MaxEvictRetries)
//	mcm_drain_duration_seconds               histogram, from the first pass to the pass that found the node drained
//	mcm_drain_pods_remaining{node}           gauge; the series is removed when the node is drained or uncordoned
//
// # Usage
//
// A command-line tool blocks until the node is drained:
//
//	d, err := drain.New(client, drain.Options{
//		Timeout: 30 * time.Minute, // force-delete what is left by then
//		OnEvent: func(e drain.Event) { fmt.Println(e) },
//	})
//	if err != nil {
//		return err
//	}
//	plan, err := d.Plan(ctx, "node-1") // the dry run
//	if err != nil {
//		return err
//	}
//	fmt.Println(plan.Message)
//	res, err := d.Drain(ctx, "node-1")
//	if err != nil {
//		return fmt.Errorf("%s: %w", res.Message, err)
//	}
//
// A controller runs one pass per reconcile and keeps the state in its
// object:
//
//	func (c *Controller) drainNode(ctx context.Context, m *v1alpha1.Machine) (time.Duration, error) {
//		state := loadDrainState(m) // e.g. json.Unmarshal of an annotation; zero at first
//		state.SetDeadline(drainDeadline(m))          // per machine, on every pass
//		state.SetMaxEvictRetries(maxEvictRetries(m)) // likewise; zero: no bound
//		res, err := c.drainer.Pass(ctx, nodeName(m), state)
//		if saveErr := c.saveDrainState(ctx, m, res.State, res.Message); saveErr != nil {
//			return 0, errors.Join(err, saveErr)
//		}
//		if err != nil {
//			return 0, err
//		}
//		if !res.Done {
//			return time.Until(res.NextCheck), nil // requeue
//		}
//		return 0, nil // pods gone, volumes handled: go on to delete the VM
//	}
//
// Such a controller serves the reads from its informers:
//
//	factory := informers.NewSharedInformerFactory(client, 0)
//	listers, err := drain.ListersFromFactory(factory) // before factory.Start
//	if err != nil {
//		return err
//	}
//	d, err := drain.New(client, drain.Options{Listers: listers})
//	factory.Start(ctx.Done())
//	// Wait for drain.FactoryInformers(factory) to sync before the first
//	// pass: an empty pod cache looks like a drained node.
package drain
