// Package kubectldrain drains the same workloads with k8s.io/kubectl/pkg/drain
// and with mcm's drain, so that the two can be compared side by side: the
// drain package's 200-pod benchmark (BenchmarkKubectlDrain200Pods here),
// and a mixed node drained by both in the same run (BenchmarkMixedNode). It
// lives in a module of its own: the library never depends on kubectl.
package kubectldrain

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/drain"

	"github.com/mcmkit/mcm/internal/testsupport/simcluster"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{})
}

// BenchmarkKubectlDrain200Pods drains a node running 200 pods of a
// Deployment, no PodDisruptionBudgets, and reports pods drained per second.
// Compare with BenchmarkDrain200Pods in the drain package.
func BenchmarkKubectlDrain200Pods(b *testing.B) {
	const pods = 200
	env := testenv.Get(b)
	client := env.Client()
	cluster := simcluster.Start(b, client, simcluster.Options{})
	ctx := context.Background()

	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		node := cluster.NodeWithDeployment(b, env.Namespace(b), fmt.Sprintf("load%d", i), pods)
		var out, errOut bytes.Buffer
		helper := &drain.Helper{
			Ctx:                 ctx,
			Client:              client,
			GracePeriodSeconds:  -1, // the pods' own
			IgnoreAllDaemonSets: true,
			DeleteEmptyDirData:  true,
			Timeout:             5 * time.Minute,
			Out:                 &out,
			ErrOut:              &errOut,
		}
		b.StartTimer()
		start := time.Now()
		nodeObj, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if err := drain.RunCordonOrUncordon(helper, nodeObj, true); err != nil {
			b.Fatalf("cordon: %v", err)
		}
		if err := drain.RunNodeDrain(helper, node); err != nil {
			b.Fatalf("kubectl drain: %v\n%s", err, errOut.String())
		}
		total += time.Since(start)
		b.StopTimer()
		if left, err := simcluster.PodsOnNode(ctx, client, node); err != nil || left != 0 {
			b.Fatalf("%d pods left on %s after the drain (%v)", left, node, err)
		}
	}
	b.ReportMetric(float64(pods*b.N)/total.Seconds(), "pods/s")
}
