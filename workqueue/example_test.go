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
