package workqueue_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcmkit/mcm/workqueue"
)

// ExampleQueue reconciles two machines with one worker. The first attempt for
// "default/flaky" fails and is retried after its backoff; once it succeeds,
// the reconciler ends the run.
func ExampleQueue() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	attempts := map[string]int{} // only touched by the single worker
	reconcile := func(ctx context.Context, key string) (workqueue.Result, error) {
		attempts[key]++
		fmt.Printf("reconcile %s, attempt %d\n", key, attempts[key])
		if key == "default/flaky" {
			if attempts[key] == 1 {
				return workqueue.Result{}, errors.New("cloud provider unavailable")
			}
			cancel() // everything is reconciled: stop Run
		}
		return workqueue.Result{}, nil
	}

	reg := prometheus.NewRegistry()
	q, err := workqueue.New("machine", workqueue.ReconcilerFunc[string](reconcile), workqueue.Options{
		BaseDelay:  time.Millisecond, // retry fast for the example
		Registerer: reg,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	q.Add("default/machine-a")
	q.Add("default/flaky")

	if err := q.Run(ctx, 1); err != nil {
		fmt.Println("run:", err)
	}

	// Run has returned, so the metrics are final.
	families, err := reg.Gather()
	if err != nil {
		fmt.Println("gather:", err)
	}
	for _, f := range families {
		if f.GetName() != "mcm_workqueue_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					fmt.Printf("%s %s=%s: %v\n", f.GetName(), l.GetName(), l.GetValue(), m.GetCounter().GetValue())
				}
			}
		}
	}
	// Output:
	// reconcile default/machine-a, attempt 1
	// reconcile default/flaky, attempt 1
	// reconcile default/flaky, attempt 2
	// mcm_workqueue_reconcile_total result=conflict: 0
	// mcm_workqueue_reconcile_total result=error: 1
	// mcm_workqueue_reconcile_total result=panic: 0
	// mcm_workqueue_reconcile_total result=requeue: 0
	// mcm_workqueue_reconcile_total result=success: 2
}

// ExampleQueue_AddFirst: keys added before Run are handed out in order,
// except the one added with AddFirst, which passes them.
func ExampleQueue_AddFirst() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reconcile := func(_ context.Context, key string) (workqueue.Result, error) {
		fmt.Println("reconcile", key)
		if key == "default/created-3" {
			cancel()
		}
		return workqueue.Result{}, nil
	}
	q, err := workqueue.New("machine", workqueue.ReconcilerFunc[string](reconcile), workqueue.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, key := range []string{"default/created-1", "default/created-2", "default/created-3"} {
		q.Add(key)
	}
	q.AddFirst("default/node-ready") // its node just turned Ready
	if err := q.Run(ctx, 1); err != nil {
		fmt.Println("run:", err)
	}
	// Output:
	// reconcile default/node-ready
	// reconcile default/created-1
	// reconcile default/created-2
	// reconcile default/created-3
}
