// Package workqueue runs the worker loop that every controller of this
// module shares, on top of client-go's rate-limiting work queue
// (k8s.io/client-go/util/workqueue).
//
// A Queue holds keys of any comparable type, typically the
// "namespace/name" strings of cache.MetaNamespaceKeyFunc. Informer event
// handlers add keys; Run starts workers that take one key at a time and hand
// it to a Reconciler. What happens next depends on what Reconcile returns:
//
//   - nil error and a zero Result: the key is done and its backoff reset;
//   - Result.RequeueAfter > 0: the key comes back after that delay, with its
//     backoff reset (polling, not failing);
//   - Result.Requeue: the key comes back after its backoff;
//   - an error: the worker logs it and retries the key with exponential
//     backoff for as long as it fails; with a positive Options.MaxRetries,
//     only until that many retries have failed: then it logs the give-up
//     and drops the key until it is added again;
//   - an error with Result.RequeueAfter > 0: the worker logs and counts the
//     error, and the key comes back after RequeueAfter, the reconciler's own
//     retry policy, instead of the backoff; it is never given up;
//   - an error saying the API server is out of reach (connection refused,
//     reset or timed out; 503, 504, 429): the key comes back within
//     Options.UnreachableMaxDelay (2s by default) and is never given up, so
//     an outage neither drops keys nor leaves them waiting on a backoff
//     grown while the server was down;
//   - an error made of 409 Conflicts only (a write guarded by a
//     resourceVersion that another writer changed in between): retried like
//     any error, but logged at V(1), not at error level, and counted as
//     result "conflict": the next sync reads the object again and resolves
//     it. Given up after a positive MaxRetries, it is logged as an error;
//   - a panic: recovered and handled like an error, with the panic value in
//     the error and the stack trace in the log. The worker survives.
//
// A key is never reconciled by two workers at once, and a key added while it
// is being reconciled is reconciled once more afterwards.
//
// Keys are handed out first in, first out, except that AddFirst puts a key
// ahead of all keys added otherwise. The machine controller uses it for a
// node that became Ready: with a thousand creations queued, the machine's
// Running status would otherwise wait for all of them.
//
// # Logging
//
// The workers log through the logr.Logger in Run's context, or through
// Options.Logger if the context has none. For each key they derive a logger
// with the values "queue" (the queue name) and "key", and put it into the
// context given to Reconcile, so logr.FromContextOrDiscard(ctx) inside
// Reconcile already identifies the key. Errors are logged once, by the
// worker, at error level (conflicts at V(1)); reconcilers return them
// wrapped with context instead of logging them.
//
// A controller's Run starts the same way in every controller of this
// module: ControllerContext names its logger (the context's, else the
// controller's Options.Logger), and WaitForCaches waits for its informers,
// saying every 15 seconds that it still waits rather than idling silently.
//
// # Metrics
//
// With Options.Registerer set, a queue exports, each with a "name" label
// holding the queue name:
//
//	mcm_workqueue_depth                              gauge
//	mcm_workqueue_adds_total                         counter
//	mcm_workqueue_queue_duration_seconds             histogram
//	mcm_workqueue_work_duration_seconds              histogram
//	mcm_workqueue_unfinished_work_seconds            gauge
//	mcm_workqueue_longest_running_processor_seconds  gauge
//	mcm_workqueue_retries_total                      counter
//	mcm_workqueue_reconcile_total{result=...}        counter; result is success, requeue, error, conflict or panic
//	mcm_workqueue_give_ups_total                     counter
//
// The first seven are client-go's workqueue metrics, wired through the
// queue's own MetricsProvider rather than the global workqueue.SetProvider.
// All queues on one Registerer share one vector per metric; building a queue
// under a name that is already registered continues its series, so names
// should be unique per Registerer.
//
// # Usage
//
// A controller in the style of sample-controller:
//
//	type Controller struct {
//		machines listers.MachineLister
//		synced   cache.InformerSynced
//		queue    *workqueue.Queue[string]
//	}
//
//	func NewController(informer informers.MachineInformer, reg prometheus.Registerer) (*Controller, error) {
//		c := &Controller{machines: informer.Lister(), synced: informer.Informer().HasSynced}
//		q, err := workqueue.New("machine", workqueue.ReconcilerFunc[string](c.reconcile),
//			workqueue.Options{Registerer: reg}) // starts nothing
//		if err != nil {
//			return nil, err
//		}
//		c.queue = q
//		_, err = informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
//			AddFunc:    c.enqueue,
//			UpdateFunc: func(_, obj any) { c.enqueue(obj) },
//			DeleteFunc: c.enqueue,
//		})
//		return c, err
//	}
//
//	func (c *Controller) enqueue(obj any) {
//		// Handles the tombstones of deletions, too.
//		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
//			c.queue.Add(key)
//		}
//	}
//
//	func (c *Controller) reconcile(ctx context.Context, key string) (workqueue.Result, error) {
//		logger := logr.FromContextOrDiscard(ctx) // has "queue" and "key"
//		namespace, name, err := cache.SplitMetaNamespaceKey(key)
//		if err != nil {
//			return workqueue.Result{}, nil // malformed key: retrying cannot help
//		}
//		m, err := c.machines.Machines(namespace).Get(name)
//		if apierrors.IsNotFound(err) {
//			return workqueue.Result{}, nil
//		}
//		if err != nil {
//			return workqueue.Result{}, fmt.Errorf("getting machine: %w", err)
//		}
//		if !vmReady(m) {
//			logger.V(2).Info("Waiting for VM")
//			return workqueue.Result{RequeueAfter: 30 * time.Second}, nil
//		}
//		return workqueue.Result{}, nil
//	}
//
//	// Run blocks until ctx ends and in-flight keys are finished.
//	func (c *Controller) Run(ctx context.Context, workers int) error {
//		if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
//			return errors.New("caches did not sync")
//		}
//		return c.queue.Run(ctx, workers)
//	}
package workqueue
